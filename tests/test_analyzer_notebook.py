"""notebooks/quickstart.ipynb runs top to bottom with nbclient; it analyses one run (CM1) and its
headline numbers equal a plain gzip + json recount."""

import glob
import gzip
import json
import os
import re

import nbformat
from conftest import DATA, PKG_ROOT, ROOT
from nbclient import NotebookClient


def cm1_truth():
    """(processes, total time in s) of the CM1 traces: distinct (hostname hash, pid) of the
    events, and max(ts + dur) - min(ts) over the complete events (µs), by gzip + json."""
    lo, hi, procs = None, 0, set()
    for path in glob.glob(os.path.join(DATA, "dftracer-v1.0.5-cm1", "*.pfw.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            recs = [json.loads(line) for line in f if line.strip() not in ("[", "]", "")]
        for r in recs:
            if r.get("ph") != "X" or r.get("cat") == "dftracer":
                continue
            ts, te = int(r["ts"]), int(r["ts"]) + int(r.get("dur", 0))
            lo = ts if lo is None else min(lo, ts)
            hi = max(hi, te)
            procs.add(int(r["pid"]))
    return len(procs), (hi - lo) / 1e6


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

    assert "(48, " in text(3)  # the 48 CM1 files, one run
    assert "Scheduler Allocation Details" in text(4)
    # headline numbers: the run's processes and total time (145 s, not the 339 days that mixing in
    # a trace of another machine and date gave), and no input warning
    m = re.search(r"processes: (\d+) \| total time \(s\): ([0-9.]+) \| input warnings: \[\]", text(4))
    assert m, text(4)
    procs, total = cm1_truth()
    assert int(m.group(1)) == procs == 48
    assert abs(float(m.group(2)) - total) < 1e-6 and 60 < total < 3600
    assert "separate runs" not in text(4)
    images = [o for o in outs[8] if "image/png" in o.get("data", {})]
    assert len(images) == 2
    # views, insights and the report
    assert "count" in text(10) and "busy_s" in text(10)
    assert "I/O imbalance (max/mean over processes):" in text(12)
    assert "POSIX" in text(13)
    # CM1's I/O is ~0.5 % of the run: below every rule's floors; without floors the ratios alone fire
    assert "I/O insights" in text(15) and "none of the 16 rules triggered" in text(15) and "[]" in text(15)
    assert "'metadata_time'" in text(16) and "'small_requests'" in text(16)
    assert "sections: summary, insights, layers, functions, files, processes" in text(18)
