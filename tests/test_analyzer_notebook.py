"""notebooks/quickstart.ipynb runs top to bottom with nbclient."""

import os

import nbformat
from conftest import PKG_ROOT, ROOT
from nbclient import NotebookClient


def test_quickstart_notebook_executes(tmp_path):
    nb = nbformat.read(os.path.join(ROOT, "notebooks", "quickstart.ipynb"), as_version=4)
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = PKG_ROOT + (os.pathsep + env_path if env_path else "")
    try:
        NotebookClient(
            nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": os.path.join(ROOT, "notebooks")}}
        ).execute()
    finally:
        if env_path:
            os.environ["PYTHONPATH"] = env_path
        else:
            os.environ.pop("PYTHONPATH", None)
    outs = {i: c.get("outputs", []) for i, c in enumerate(nb.cells) if c.cell_type == "code"}

    def text(i):
        return "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in outs[i])

    assert "(49, " in text(3)  # 48 CM1 files + the legacy trace
    assert "Scheduler Allocation Details" in text(4)
    images = [o for o in outs[8] if "image/png" in o.get("data", {})]
    assert len(images) == 2
    # views, insights and the report
    assert "count" in text(10) and "busy_s" in text(10)
    assert "I/O imbalance (max/mean over processes):" in text(12)
    assert "POSIX" in text(13)
    assert "I/O insights" in text(15) and "'small_requests'" in text(15)  # CM1: 4 KiB STDIO/POSIX requests
    assert "'small_requests'" not in text(16) and "'random_access'" in text(16)
    assert "sections: summary, insights, layers, functions, files, processes" in text(18)
