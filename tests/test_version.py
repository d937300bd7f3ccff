"""The package version is written once (dftracer/_version.py); every place that reports it agrees:
the wheel metadata, ``dftracer.__version__``, ``python -m dftracer --version``, the binding's
``_dftracer.__version__`` and the ``version`` metadata record of a trace the core writes."""

import os
import re
import subprocess
import sys
from importlib import metadata

from conftest import ROOT, pythonpath_env, read_trace

import dftracer
from dftracer import _dftracer


def _source_version():
    with open(os.path.join(ROOT, "dftracer", "_version.py"), encoding="utf-8") as fh:
        (v,) = re.findall(r'^__version__ = "([^"]+)"$', fh.read(), re.M)
    return v


def test_every_reported_version_agrees(tmp_path):
    want = _source_version()
    assert dftracer.__version__ == want
    assert metadata.version("dftracer") == want
    assert _dftracer.__version__ == want
    env = pythonpath_env({k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_")})
    cli = subprocess.run(
        [sys.executable, "-m", "dftracer", "--version"], env=env, capture_output=True, text=True, timeout=60
    )
    assert cli.returncode == 0 and cli.stdout == want + "\n"

    env.update(DFTRACER_ENABLE="1", DFTRACER_LOG_FILE=str(tmp_path / "trace"))
    code = (
        "from dftracer.python import dftracer, dft_fn\n"
        "log = dftracer.initialize_log(None, None, -1)\n"
        "dft_fn('APP').log(lambda: None)()\n"
        "log.finalize()\n"
    )
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    (trace,) = tmp_path.glob("trace*.pfw.gz")
    records = read_trace(trace)
    versions = [r["args"]["value"] for r in records if r["name"] == "version" and r["cat"] == "dftracer"]
    assert versions == [want]
