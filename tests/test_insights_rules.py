"""Insights that do not cry wolf (issue 20) and the sanity of the inputs.

- every rule's trigger pattern of tests/test_analyzer_insights.py, with its times divided by 1000
  (microsecond effects) or, for the rules with a byte floor, its bytes divided by 32, raises
  nothing with the shipped floors, and fires with the floors set to zero (its ratios alone would);
- "shared file" needs two processes using the file in overlapping time;
- a rule that relies on placed offsets states the bytes / requests it could not place;
- on the CM1 traces and on a DataLoader-like run under the preload no finding is raised below its
  floors (checked against a pandas recount of the events);
- inputs from runs far apart in time or from different command lines are named in a warning.

The traces are written by the real tracer: this file's ``__main__`` (the generator subprocess)
uses ``write_traces`` of tests/test_analyzer_insights.py (``dftracer.initialize_log`` +
``log_event`` in forked children); the DataLoader-like run is a multiprocessing reader loop under
``python -m dftracer run`` (the preload).
"""

import os
import subprocess
import sys
import textwrap
import warnings

import pytest

if __name__ == "__main__":  # the generator subprocess: PYTHONSAFEPATH=1 leaves tests/ off sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import test_analyzer_insights as base  # noqa: E402

if __name__ != "__main__":
    from conftest import DATA, pythonpath_env

MiB = 1 << 20
HOUR_US = 3_600_000_000
BYTE_RULES = ("redundant_reads", "stdio_share", "rank_imbalance", "repeated_epoch_reads")
SIZE_KEYS = ("count", "ret", "offset")


def scale_time(events, k):
    """The events with every timestamp and duration divided by ``k`` (at least 1 µs)."""
    return [(n, c, ts // k, max(1, dur // k), a) for n, c, ts, dur, a in events]


def scale_bytes(events, k):
    """The events with request sizes, results and offsets of data calls divided by ``k``."""
    out = []
    for n, c, ts, dur, a in events:
        if "count" in a:
            a = {key: (v // k if key in SIZE_KEYS and isinstance(v, int) else v) for key, v in a.items()}
        out.append((n, c, ts, dur, a))
    return out


def _preads(fname, offsets, size, t0, dur, fd=3):
    return base.preads(fname, offsets, size, t=t0, dur=dur, fd=fd)


def shared_scenarios():
    """One file read by two processes: unevenly (bytes and time), either one after the other (as
    DataLoader workers of different epochs do) or at the same time."""
    f = "/data/sample_000.npz"
    slow = _preads(f, [i * 32 * MiB for i in range(8)], 32 * MiB, 0, 500_000)  # 8 x 32 MiB, 4 s

    def fast(t0):  # 2 x 32 MiB, 0.1 s
        return _preads(f, [(8 + i) * 32 * MiB for i in range(2)], 32 * MiB, t0, 50_000)

    return {
        "shared/apart": {0: slow, 1: fast(5_000_000)},  # rank 1 starts after rank 0 closed the file
        "shared/overlap": {0: slow, 1: fast(100_000)},
    }


def unplaced_scenario():
    """Redundant preads of 256 MiB (4 ranges read twice) and 64 MiB of read() on fd 9, which has no
    open in the trace: its file offset is unknown."""
    evs = _preads("/data/d.bin", [i * 32 * MiB for i in list(range(4)) * 2], 32 * MiB, 0, 200_000)
    t = evs[-1][2] + 10
    for i in range(4):
        evs.append(
            (
                "read",
                "POSIX",
                t + i * 200_000,
                150_000,
                {"fname": "/data/d.bin", "fd": 9, "count": 16 * MiB, "ret": 16 * MiB},
            )
        )
    return {"unplaced/trigger": {0: evs}}


def sanity_scenarios():
    """The same small job twice: 2 hours apart, and 10 minutes apart (one run)."""
    job = base.seq_reads("/data/p.bin", 10, MiB, dur=1000)
    return {
        "apart/a": {0: job},
        "apart/b": {0: [(n, c, ts + 2 * HOUR_US, d, a) for n, c, ts, d, a in job]},
        "near/a": {0: job},
        "near/b": {0: [(n, c, ts + 600_000_000, d, a) for n, c, ts, d, a in job]},
    }


def table():
    t = {}
    for rule, (trigger, _clean) in base.SCENARIOS.items():
        t[f"tiny_time/{rule}"] = {r: scale_time(ev, 1000) for r, ev in trigger.items()}
        if rule in BYTE_RULES:
            t[f"tiny_bytes/{rule}"] = {r: scale_bytes(ev, 32) for r, ev in trigger.items()}
    t.update(shared_scenarios())
    t.update(unplaced_scenario())
    t.update(sanity_scenarios())
    return t


ZERO_FLOORS = {"floors": {r: {"seconds": 0, "run_share": 0} for r in base.SCENARIOS}}
for _r in BYTE_RULES:
    ZERO_FLOORS["floors"][_r]["bytes"] = 0


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    out = tmp_path_factory.mktemp("floor-traces")
    env = pythonpath_env({k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_") and k != "LD_PRELOAD"})
    env["DFTRACER_ENABLE"] = "1"
    subprocess.run([sys.executable, os.path.abspath(__file__), str(out)], env=env, check=True, timeout=120)
    return out


def analyse(path, dask_client, config=None):
    """(insights report, events) of the traces under ``path`` (a directory or a pattern)."""
    from dfanalyzer import DFAnalyzer

    an = DFAnalyzer(str(path), client=dask_client)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return an.insights(config=config, show=False), an.events.compute(scheduler=dask_client)
    finally:
        an.close()


# ----------------------------------------------------------------------------- floors
@pytest.mark.parametrize("kind", ["tiny_time", "tiny_bytes"])
def test_below_floor_raises_nothing(traces, dask_client, kind):
    """The trigger patterns below a floor: nothing with the shipped floors, the rule with none."""
    from dfanalyzer.insights import load_config, run_rules

    rules = list(base.SCENARIOS) if kind == "tiny_time" else list(BYTE_RULES)
    for rule in rules:
        rep, _ = analyse(traces / kind / rule, dask_client)
        assert rule in rep.checked and rep.get(rule) is None, (kind, rule, [i.message for i in rep])
        # the facts do not depend on the floors: the same facts with the floors at zero fire the rule
        bare = run_rules(rep.facts, load_config(ZERO_FLOORS))
        assert bare.get(rule) is not None, (kind, rule, bare.rules())


def test_floors_are_configurable(traces, dask_client):
    from dfanalyzer.insights import load_config

    cfg = load_config()
    # + the multi-level rules (their floors: tests/test_analyzer_layers.py)
    assert set(cfg["floors"]) == set(base.SCENARIOS) | {"small_hdf5_reads", "independent_mpiio"}
    for rule, fl in cfg["floors"].items():
        assert fl["seconds"] == 1.0 and fl["run_share"] == 0.01, rule
        assert ("bytes" in fl) == (rule in BYTE_RULES), rule
    with pytest.raises(ValueError, match="floors.stragglers.minutes"):
        load_config({"floors": {"stragglers": {"minutes": 1}}})
    # a stricter floor silences a real finding: the straggler's extra I/O time there is 3.9 s
    rep, _ = analyse(traces / "shared" / "overlap", dask_client, {"floors": {"stragglers": {"seconds": 5.0}}})
    assert rep.get("stragglers") is None and rep.get("rank_imbalance") is not None
    assert rep.floors["stragglers"]["seconds"] == 5.0 and rep.to_dict()["floors"]["stragglers"]["seconds"] == 5.0


# ----------------------------------------------------------------------------- shared files
def test_shared_file_needs_overlapping_use(traces, dask_client):
    apart, ev = analyse(traces / "shared" / "apart", dask_client)
    # truth: two processes used the file, one after the other
    x = ev[(ev["fname"] == "/data/sample_000.npz") & (ev["cat"] == "POSIX")]
    span = x.groupby("pid").agg(first=("ts", "min"), last=("te", "max")).sort_values("first")
    assert len(span) == 2 and span["last"].iloc[0] <= span["first"].iloc[1]
    assert apart.get("rank_imbalance") is None and apart.get("stragglers") is None, apart.rules()
    over, _ = analyse(traces / "shared" / "overlap", dask_client)
    ri, st = over.get("rank_imbalance"), over.get("stragglers")
    assert ri is not None and st is not None, over.rules()
    assert ri.evidence["files"][0]["max_bytes"] == 256 * MiB and ri.evidence["files"][0]["min_bytes"] == 64 * MiB
    assert st.evidence["files"][0]["extra_io_time_s"] == pytest.approx(4.0 - 0.1)


# ----------------------------------------------------------------------------- unplaced bytes
def test_unplaced_bytes_in_message(traces, dask_client):
    rep, ev = analyse(traces / "unplaced" / "trigger", dask_client)
    ins = rep.get("redundant_reads")
    assert ins is not None, rep.rules()
    reads = ev[ev["name"].isin(["read", "pread64"])]
    unplaced = int(reads[reads["name"] == "read"]["size"].sum())
    total = int(reads["size"].sum())
    assert (unplaced, total) == (64 * MiB, 320 * MiB)
    assert f"{unplaced:,} of {total:,} bytes read could not be placed" in ins.message
    assert ins.evidence["metrics"]["unplaced_read_bytes"] == unplaced
    assert ins.evidence["metrics"]["redundant_read_bytes"] == 128 * MiB


# ----------------------------------------------------------------------------- done when: CM1, DataLoader
def _check_above_floors(rep, ev):
    """Every finding passes its floors, by a pandas recount where the rule's effect is a plain sum."""
    x = ev[(ev["ph"] == "X") & ev["cat"].isin(["POSIX", "STDIO"])]
    life = ev[ev["ph"] == "X"].groupby(["hostname", "pid"], observed=True).agg(a=("ts", "min"), b=("te", "max"))
    proc_time = int((life["b"] - life["a"]).sum())
    for ins in rep:
        fl = rep.floors[ins.rule]
        m = ins.evidence["metrics"]
        secs = m.get("affected_time_s", m.get("meta_time_s", m.get("max_extra_io_time_s")))
        if secs is not None:
            assert secs >= fl["seconds"], (ins.rule, m)
        if "run_share" in m:
            assert m["run_share"] >= fl["run_share"], (ins.rule, m)
    return x, proc_time


def test_cm1_no_finding_below_floors(dask_client, tmp_path):
    import shutil

    from dfanalyzer.insights import DATA_NAMES, load_config, run_rules

    shutil.copytree(os.path.join(DATA, "dftracer-v1.0.5-cm1"), tmp_path / "cm1")
    rep, ev = analyse(tmp_path / "cm1" / "*.pfw.gz", dask_client)
    x, proc_time = _check_above_floors(rep, ev)
    # truth (pandas): CM1's metadata calls take 26.8 s summed over 48 processes that live 145 s
    # each, 0.4 % of the run: below the 1 % floor, no "metadata time" finding
    meta = int(x[~x["name"].isin(DATA_NAMES)]["dur"].sum())
    assert 0 < meta / proc_time < 0.01
    assert rep.get("metadata_time") is None
    # the largest per-shared-file difference of process I/O time is far below a second
    f = x[x["fname"].notna()].groupby(["fname", "pid"], observed=True)["dur"].sum()
    g = f.groupby(level="fname", observed=True)
    spread = (g.max() - g.min())[g.size() >= 2]
    assert spread.max() < 1e6 and rep.get("stragglers") is None
    assert not [i for i in rep if i.severity == "high"], [i.message for i in rep]
    # without floors the ratios alone raise HIGH findings (what the floors silence)
    bare = run_rules(rep.facts, load_config(ZERO_FLOORS))
    assert {"metadata_time", "small_requests"} <= set(bare.rules())
    assert bare.get("metadata_time").severity == "high"


LOADER = textwrap.dedent(
    """
    import multiprocessing as mp
    import os
    import random
    import sys


    def item(job):  # a Dataset.__getitem__: open, read the sample, close
        epoch, path = job
        with open(path, "rb") as f:
            return epoch, os.getpid(), os.path.basename(path), len(f.read())


    if __name__ == "__main__":
        root = sys.argv[1]
        files = sorted(os.path.join(root, n) for n in os.listdir(root))
        rng = random.Random(int(sys.argv[2]))
        total = 0
        for epoch in range(3):  # new workers every epoch (DataLoader without persistent_workers)
            order = files[:]
            rng.shuffle(order)
            with mp.get_context("fork").Pool(2) as pool:
                # what each worker read: "read <epoch> <pid> <sample> <bytes>"
                for e, pid, name, n in pool.map(item, [(epoch, p) for p in order], chunksize=4):
                    print("read", e, pid, name, n)
                    total += n
        print(total)
    """
)


def run_loader(tmp_path, seed=1, tag="loader"):
    """A DataLoader-like multiprocessing reader loop (64 samples, 2 workers, 3 epochs) under the
    preload; returns the trace prefix, the bytes the program read and its own report of every
    sample read: ``(epoch, worker pid, sample name, bytes)``."""
    data = tmp_path / "samples"
    if not data.exists():
        data.mkdir()
        for i in range(64):
            (data / f"sample_{i:03d}.npz").write_bytes(bytes([i]) * (64 * 1024 + 512 * i))
    (tmp_path / "loader.py").write_text(LOADER)
    env = pythonpath_env({k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_") and k != "LD_PRELOAD"})
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "dftracer",
            "run",
            "--log-file",
            f"out/{tag}",
            "--data-dir",
            str(data),
            "--metadata",
            "--",
            sys.executable,
            "loader.py",
            str(data),
            str(seed),
        ],
        cwd=str(tmp_path),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    reads = [(int(e), int(p), n, int(b)) for _, e, p, n, b in (x.split() for x in lines if x.startswith("read "))]
    return str(tmp_path / "out" / tag), int(out.stdout.split()[-1]), reads


def test_dataloader_run_no_finding_below_floors(dask_client, tmp_path):
    prefix, nbytes, reads = run_loader(tmp_path)
    assert nbytes == 3 * sum(64 * 1024 + 512 * i for i in range(64)) == sum(r[3] for r in reads)
    # the program's own report: every sample read once per epoch, by the epoch's workers (a Pool
    # of 2 per epoch; one may get no work, and the OS may reuse a pid in a later epoch)
    assert sorted((e, n) for e, _, n, _ in reads) == sorted(
        (e, f"sample_{i:03d}.npz") for e in range(3) for i in range(64)
    )
    workers = {(e, p) for e, p, _, _ in reads}
    assert {e for e, _ in workers} == {0, 1, 2} and len(workers) <= 6
    rep, ev = analyse(prefix + "*.pfw*", dask_client)
    _check_above_floors(rep, ev)
    assert not [i for i in rep if i.severity == "high"], [i.message for i in rep]
    # truth: the trace's sample reads are the program's ((pid, sample) pairs, bytes); a sample
    # read by two workers was read in different epochs, never at the same time, so no file is
    # "shared" -- unless one pid read it in two epochs (pid reuse): then the trace cannot tell the
    # two processes apart and (hostname, pid) spans both epochs
    r = ev[(ev["name"] == "read") & ev["fname"].astype(str).str.contains("sample_")]
    assert int(r["size"].sum()) == nbytes
    got = r[r["size"] > 0]
    assert set(zip(got["pid"].astype(int), got["fname"].astype(str).map(os.path.basename))) == {
        (p, n) for _, p, n, _ in reads
    }
    epochs_of = {}
    for e, p, n, _ in reads:
        epochs_of.setdefault((n, p), set()).add(e)
    reused = {n for (n, _), es in epochs_of.items() if len(es) > 1}
    per = r.groupby(["fname", "pid"], observed=True).agg(a=("ts", "min"), b=("te", "max")).reset_index()
    for fname, g in per.groupby("fname", observed=True):
        if os.path.basename(str(fname)) in reused:
            continue
        g = g.sort_values("a")
        assert (g["a"].to_numpy()[1:] >= g["b"].to_numpy()[:-1]).all()
    from dfanalyzer.insights import _shared

    shared = _shared(rep.facts)
    names = set() if shared is None else set(shared.index.get_level_values("fname"))
    assert {os.path.basename(str(n)) for n in names if "sample_" in str(n)} <= reused, names
    if not reused:
        assert rep.get("rank_imbalance") is None and rep.get("stragglers") is None


# ----------------------------------------------------------------------------- input sanity
def test_runs_far_apart_are_named(traces, dask_client):
    from dfanalyzer import DFAnalyzer
    from dfanalyzer.sanity import InputWarning

    pattern = [str(traces / "apart" / "a"), str(traces / "apart" / "b")]
    an = DFAnalyzer(pattern)
    try:
        with pytest.warns(InputWarning, match="2 separate runs"):
            s = an.summary(show=False)
    finally:
        an.close()
    (w,) = [w for w in s.warnings if "separate runs" in w]
    assert "run 1: 1 file(s) (trace-0.pfw" in w and "2.0 hours after run 1" in w
    assert "Warnings" in _render(s.panel())
    near = DFAnalyzer([str(traces / "near" / "a"), str(traces / "near" / "b")])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", InputWarning)
            assert not [w for w in near.summary(show=False).warnings if "separate runs" in w]
    finally:
        near.close()
    # the CLI prints it on stderr; the insights report carries it too
    out = subprocess.run(
        [sys.executable, "-m", "dfanalyzer.cli", "summary", *pattern, "--json"],
        capture_output=True,
        text=True,
        env=pythonpath_env(),
        timeout=120,
    )
    assert out.returncode == 0 and "warning: the inputs look like 2 separate runs" in out.stderr, out.stderr
    an = DFAnalyzer(pattern, client=dask_client)
    try:
        with pytest.warns(InputWarning):
            rep = an.insights(show=False)
    finally:
        an.close()
    assert any("separate runs" in w for w in rep.warnings) and "Input warnings" in _render(rep.panel())


def test_different_command_lines_are_named(tmp_path):
    from dfanalyzer import DFAnalyzer

    one, *_ = run_loader(tmp_path, seed=1, tag="a")
    two, *_ = run_loader(tmp_path, seed=2, tag="b")
    an = DFAnalyzer([one + "*.pfw*"])
    try:
        assert not [w for w in an.summary(show=False).warnings if "command lines" in w]
    finally:
        an.close()
    an = DFAnalyzer([one + "*.pfw*", two + "*.pfw*"])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (w,) = [w for w in an.summary(show=False).warnings if "command lines" in w]
    finally:
        an.close()
    # each run's processes (the parent and its forked workers) share its command line
    assert "2 different command lines" in w and "loader.py" in w and " 1'" in w and " 2'" in w


def test_sanity_groups_by_gap():
    from dfanalyzer.sanity import commands, run_groups

    h = HOUR_US
    spans = {"a": (0, 10), "b": (5, h), "c": (2 * h + 11, 3 * h), "d": (3 * h + 1, 3 * h + 5)}
    runs = run_groups(spans)
    assert [r["files"] for r in runs] == [["a", "b"], ["c", "d"]]
    assert run_groups(spans, gap_s=2 * 3600)[0]["files"] == ["a", "b", "c", "d"]
    import pandas as pd

    md = pd.DataFrame(
        {
            "name": ["cmd_line", "cmd_line", "SH", "start"],
            "pid": [1, 2, 3, 3],
            "key": ["cmd_line", "cmd_line", "./cm1.exe", None],
            "value": ["python a.py", "python a.py", "33764", None],
            "args": [None, None, None, '{"cmd_hash":33764}'],
        }
    )
    assert commands(md) == {"python a.py": 2, "./cm1.exe": 1}
    # DFTracer 2.2.0 (tests/data/dftracer-v2.2.0/c-agg.pfw): hexadecimal string hashes
    md = pd.DataFrame(
        {
            "name": ["SH", "SH", "start"],
            "pid": [26927, 26927, 26927],
            "key": ["./io;/tmp/dft220/data", "io", None],
            "value": ["480079a3a781ec42", "f9d04d50de100547", None],
            "args": [None, None, '{"cmd_hash":"480079a3a781ec42","exec_hash":"f9d04d50de100547"}'],
        }
    )
    assert commands(md) == {"./io;/tmp/dft220/data": 1}


def _render(renderable) -> str:
    from rich.console import Console

    c = Console(width=200, record=True, file=open(os.devnull, "w"))
    c.print(renderable)
    return c.export_text()


if __name__ == "__main__":
    base.write_traces(sys.argv[1], table())
