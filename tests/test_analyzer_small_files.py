"""Many small files (read whole in groups, no index files) and the same file reached by several
paths (de-duplicated by device and inode) -- issue 15."""

import gzip
import json
import os
import subprocess
import sys

from dfanalyzer import DFAnalyzer, tools
from dfanalyzer import analyzer as A

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import gen_traces  # noqa: E402
from conftest import pythonpath_env  # noqa: E402

FILES = 2000
PER_FILE = 7  # events per file: pid p has events with dur 1..7


def _events(pid, n=PER_FILE):
    out = [
        b'{"id":0,"name":"hostname","cat":"dftracer","pid":%d,"tid":%d,"ts":1,"ph":"M",'
        b'"args":{"name":"hostname","value":"n%d"}}\n' % (pid, pid, pid % 3)
    ]
    for i in range(n):
        out.append(
            b'{"id":%d,"name":"read","cat":"POSIX","pid":%d,"tid":%d,"ts":%d,"dur":%d,"ph":"X",'
            b'"args":{"fname":"/d/f%d","ret":10}}\n' % (i + 1, pid, pid, 1000 * pid + 10 * i, i + 1, i)
        )
    return out


def test_small_files_exact_totals(tmp_path, dask_client):
    d = tmp_path / "many"
    d.mkdir()
    for pid in range(1, FILES + 1):
        lines = _events(pid)
        if pid % 500 == 0:  # a few plain gzip (DFTracer v1 style) files among our member files
            (d / f"t-{pid}.pfw.gz").write_bytes(gzip.compress(b"".join(lines)))
        else:
            (d / f"t-{pid}.pfw.gz").write_bytes(
                gen_traces.gzip_member(b"".join(lines[:4])) + gen_traces.gzip_member(b"".join(lines[4:]))
            )
    member = gen_traces.gzip_member(b"".join(_events(FILES + 1)))
    (d / "cut.pfw.gz").write_bytes(member[: len(member) - 30])  # cut short: its whole lines are kept
    (d / "bad.pfw.gz").write_bytes(b"not gzip\n" * 20)
    an = DFAnalyzer(str(d), client=dask_client)
    st = an.stats
    assert st["files"] == FILES + 2 and st["small_files"] == FILES + 2 and st["batches"] == 0
    assert not list(d.glob("*.zindex*"))  # small files leave no index file
    per = st["per_file"].set_index("path")
    assert (per.loc[[str(d / f"t-{p}.pfw.gz") for p in range(1, FILES + 1)], "events"] == PER_FILE).all()
    cut, bad = str(d / "cut.pfw.gz"), str(d / "bad.pfw.gz")
    assert per.loc[bad, "events"] == 0 and per.loc[bad, "lost_bytes"] == 180
    assert per.loc[cut, "events"] < PER_FILE and per.loc[cut, "warnings"]
    cut_events = int(per.loc[cut, "events"])
    s = an.summary(show=False).to_dict()
    assert s["events"] == st["events"] == FILES * PER_FILE + cut_events
    assert s["processes"] == FILES + (1 if cut_events else 0)
    ev = an.events.compute(scheduler=dask_client)
    assert int(ev["dur"].sum()) == FILES * sum(range(1, PER_FILE + 1)) + sum(range(1, cut_events + 1))
    assert int(ev["size"].sum()) == 10 * len(ev)
    assert sorted(ev["hostname"].astype(str).unique()) == ["n0", "n1", "n2"]
    assert len(an.metadata) == FILES + 1
    # a cut-short end is reported like a corrupt file (its dropped tail is lost data), as when indexed
    assert {s["path"] for s in an.skipped_files()} == {bad, cut}


def test_small_and_indexed_paths_agree(tmp_path, dask_client):
    d = tmp_path / "few"
    d.mkdir()
    for pid in range(1, 6):
        (d / f"t-{pid}.pfw.gz").write_bytes(gen_traces.gzip_member(b"".join(_events(pid, 40))))
    grouped = DFAnalyzer(str(d), client=dask_client)
    indexed = DFAnalyzer(str(d), client=dask_client, small_file_mb=0)
    assert grouped.stats["small_files"] == 5 and indexed.stats["small_files"] == 0
    assert grouped.summary(show=False).to_dict() == indexed.summary(show=False).to_dict()
    a = grouped.stats["per_file"].drop(columns=["checkpoints"])
    b = indexed.stats["per_file"].drop(columns=["checkpoints"])
    assert a.to_dict("records") == b.to_dict("records")


def _linked(tmp_path):
    d = tmp_path / "links"
    d.mkdir()
    target = d / "real.pfw.gz"
    target.write_bytes(gen_traces.gzip_member(b"".join(_events(1, 100))))
    os.symlink(target, d / "a.pfw.gz")
    os.symlink(target, d / "b.pfw.gz")
    os.link(target, d / "hard.pfw.gz")
    return d, target


def test_same_file_by_several_paths_loaded_once(tmp_path, dask_client):
    d, target = _linked(tmp_path)
    dups = []
    files = A.expand_patterns([str(d), str(target)], dups)
    assert files == [str(d / "a.pfw.gz")]
    assert sorted(p for p, _ in dups) == sorted(str(d / n) for n in ("b.pfw.gz", "hard.pfw.gz", "real.pfw.gz"))
    an = DFAnalyzer([str(d), str(target)], client=dask_client)
    assert an.stats["events"] == 100 and an.stats["duplicates"] == 3
    assert len(an.notes) == 3 and all("the same file as" in n for n in an.notes)


def test_dftracer_index_lists_a_file_once(tmp_path, capsys):
    d, target = _linked(tmp_path)
    assert tools.index_main([str(d / "a.pfw.gz"), str(target), str(d / "b.pfw.gz"), "--json"]) == 0
    out, err = capsys.readouterr()
    assert [r["file"] for r in json.loads(out)["files"]] == [str(d / "a.pfw.gz")]
    assert err.count("is the same file as") == 2


def test_cli_summary_notes_duplicates(tmp_path):
    d, target = _linked(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "dfanalyzer.cli", "summary", str(d), "--json", "--workers", "1"],
        env=pythonpath_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert '"events": 100,' in proc.stdout
    assert proc.stderr.count("the same file as") == 3
