"""benchmarks/scaling.py runs end to end, threads and ``--scheduler`` (issue 22, Deliver 2's table).

The ``--scheduler`` summary runs on a worker (``cli.SUMMARY_ON_WORKER``): the script times its
phases there and reads them back; before, the command's own timers stayed empty and the script
failed (``KeyError: 'plan'``) at its first cluster row. One worker on a small generated set; the
script itself checks that every run's JSON equals the first one's.
"""

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import gen_traces  # noqa: E402
from conftest import PKG_ROOT  # noqa: E402


def _rows(text: str, first_cells: str) -> list:
    """Markdown table rows starting with ``| first_cells |``, as lists of cells."""
    out = []
    for line in text.splitlines():
        if line.startswith(f"| {first_cells} |"):
            out.append([c.strip() for c in line.strip().strip("|").split("|")])
    return out


def test_scaling_table_threads_and_cluster(tmp_path):
    d = tmp_path / "set"
    gen_traces.generate(str(d), 4 * 2000, 4, member_bytes=16 << 10, jobs=1)
    # the children (the timed commands, the cluster) import the dfanalyzer these tests import
    env = dict(os.environ, DFA_BENCH_TREE=PKG_ROOT)
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "scaling.py"), str(d), "--workers", "1"]
    cmd += ["--index-dir", str(tmp_path / "idx")]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:] + p.stdout[-3000:]
    main_rows = _rows(p.stdout, "1")
    # the main table's row: threads wall, CPU, µs/event, vs 1, then the cluster's four cells
    table = [r for r in main_rows if len(r) == 11]
    assert len(table) == 1, p.stdout
    assert table[0][4] == "1.00" and table[0][8] == "1.00"  # (each against itself at 1 worker)
    assert all(re.fullmatch(r"[0-9.]+( \([0-9. +]+\))?", c) for c in table[0][1:]), table
    serial = {r[1]: r for r in main_rows if len(r) == 12}
    assert set(serial) == {"threads", "cluster"}, p.stdout
    steps = ("interpreter", "imports", "plan", "fold", "finish", "sanity", "other", "exit")
    for run, row in serial.items():
        values = dict(zip(steps, (float(c) for c in row[2:10])))
        assert abs(sum(values.values()) - float(row[10])) < 0.01, (run, row)
        # the command's import of distributed and its connection are untimed client work
        assert run == "threads" or values["other"] > 0, (run, row)
