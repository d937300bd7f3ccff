"""What the threaded summary imports before its first load (issue 22, Deliver 2: the serial
start-up; docs/perf/i28-boot.md).

Everything imported before ``_reader.Prefetch`` starts the native loads is serial work that no
thread can shorten; what is imported after it overlaps the loads. In a fresh interpreter the
command ``dfanalyzer summary ONE_FILE --json --workers 2`` is run with ``_reader.Prefetch``
wrapped to record ``sys.modules`` when it is called: the package's modules then must be exactly
the start-up's own (indexing, planning, the command line), and none of the modules that only the
loads' results need (NumPy, pandas, ``dataclasses`` with ``inspect``, ``json``, ``logging``,
``concurrent.futures``, ``uuid``, ``datetime``, the summary engine) may be among them (modules
the interpreter's own start imported, ``site`` hooks, are not counted). The
command's stdout must be the in-process command's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import pythonpath_env

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))
import gen_traces  # noqa: E402

#: the package's modules imported before the first load (the command line, indexing, planning)
START_UP_MODULES = {
    "dfanalyzer",
    "dfanalyzer._lazy",
    "dfanalyzer._loaded",
    "dfanalyzer._paths",
    "dfanalyzer._reader",
    "dfanalyzer.analyzer",
    "dfanalyzer.cli",
    "dfanalyzer.cluster",
    "dfanalyzer.engine",
    "dfanalyzer.engine.reduce",
    "dfanalyzer.engine.timebins",
    "dfanalyzer.engine.vocabulary",
    "dfanalyzer.reader",
    "dfanalyzer.safetext",
    "dfanalyzer.sanity",
    "dfanalyzer.schema",
}

#: imported only once the loads run (their results, the summary, the output)
AFTER_FIRST_LOAD = (
    "numpy",
    "pandas",
    "dataclasses",
    "inspect",
    "json",
    "logging",
    "concurrent.futures",
    "uuid",
    "platform",
    "datetime",
    "dfanalyzer.records",
    "dfanalyzer.summary",
)

_PROBE = (
    "import sys\n"
    "before = set(sys.modules)\n"  # (what the interpreter's site hooks import is not ours)
    "from dfanalyzer import _reader\n"
    "made, seen = _reader.Prefetch, []\n"
    "def prefetch(items, threads):\n"
    "    seen.append(sorted(set(sys.modules) - before))\n"
    "    return made(items, threads)\n"
    "_reader.Prefetch = prefetch\n"
    "from dfanalyzer import cli\n"
    "status = cli.main(sys.argv[1:])\n"
    "print(repr(seen), file=sys.stderr)\n"
    "sys.exit(status)\n"
)


def test_imports_before_the_first_load(tmp_path, capsys):
    from dfanalyzer import cli

    (path,) = gen_traces.generate(str(tmp_path / "one"), 20_000, 1, member_bytes=16 << 10, jobs=1)
    idx = str(tmp_path / "idx")
    argv = ["summary", path, "--index-dir", idx, *"--json --workers 2 --batch-size-mb 0.05 --small-file-mb 0".split()]
    assert cli.main(argv) == 0
    want = capsys.readouterr().out
    assert json.loads(want)["events"] == 20_000
    p = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv],
        env=pythonpath_env(),
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout == want
    seen = eval(p.stderr.strip().splitlines()[-1])
    assert len(seen) == 1, seen  # (one Prefetch: the first loads)
    mods = set(seen[0])
    ours = {m for m in mods if m.split(".")[0] == "dfanalyzer"}
    assert ours == START_UP_MODULES, (sorted(ours - START_UP_MODULES), sorted(START_UP_MODULES - ours))
    assert [m for m in AFTER_FIRST_LOAD if m in mods] == []
