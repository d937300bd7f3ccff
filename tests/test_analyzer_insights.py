"""Insight rules: each on a trace built to trigger it and one built not to; CLI and YAML config.

Every trigger is above the rule's absolute floors (``floors`` in insights.yaml: at least a second
of time lost, 1 % of the run, 100 MiB where the rule is about bytes), so the tests state what a
real finding looks like; tests/test_insights_rules.py runs the same patterns below the floors.

The traces are written by the real tracer: this file's ``__main__`` forks one child per
(scenario, rank), which calls ``dftracer.initialize_log(logfile, process_id=rank)`` and logs the
scenario's events with ``log_event`` (explicit timestamps, so durations are exact), then
``finalize()``. One generator subprocess writes all scenarios (about a second).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

if __name__ != "__main__":  # the generator subprocess runs this file as a script
    from conftest import DATA, pythonpath_env

MiB = 1 << 20
KiB = 1 << 10


# ----------------------------------------------------------------------------- scenarios
# A scenario: {rank: [(name, cat, ts µs from the job start, dur µs, args)]}.
def _open(fname, fd, ts, dur=5):
    return ("open64", "POSIX", ts, dur, {"fname": fname, "fd": fd, "ret": fd})


def _close(fname, fd, ts, dur=5):
    return ("close", "POSIX", ts, dur, {"fname": fname, "fd": fd, "ret": 0})


def _read(fname, fd, n, ts, dur=10):
    return ("read", "POSIX", ts, dur, {"fname": fname, "fd": fd, "count": n, "ret": n})


def _pread(fname, fd, n, off, ts, dur=10):
    return ("pread64", "POSIX", ts, dur, {"fname": fname, "fd": fd, "count": n, "ret": n, "offset": off})


def seq_reads(fname, nreq, size, t=0, dur=10, fd=3):
    evs = [_open(fname, fd, t)]
    for i in range(nreq):
        evs.append(_read(fname, fd, size, t + 10 + i * (dur + 1), dur))
    evs.append(_close(fname, fd, t + 10 + nreq * (dur + 1)))
    return evs


def preads(fname, offsets, size, t=0, dur=10, fd=3):
    evs = [_open(fname, fd, t)]
    for i, off in enumerate(offsets):
        evs.append(_pread(fname, fd, size, int(off), t + 10 + i * (dur + 1), dur))
    evs.append(_close(fname, fd, t + 10 + len(offsets) * (dur + 1)))
    return evs


def ai_trainer(steps, fetch_us, compute_us, t=0, epoch=None, fetch="fetch.iter"):
    """``fetch`` (wait: ``fetch.iter`` of the ai API's loop or its ``ai.dataloader.fetch`` region)
    then compute, per step; returns (events, end time)."""
    evs = []
    for s in range(steps):
        a = {"count": s + 1}
        if epoch is not None:
            a["epoch"] = epoch
        evs.append((fetch, "dataloader", t, fetch_us, a))
        t += fetch_us
        evs.append(("compute", "compute", t, compute_us, dict(a, step=s + 1)))
        t += compute_us
    return evs, t


def epochs_trainer(splits, steps=10):
    """One epoch.block per (fetch_us, compute_us) split."""
    evs, t = [], 0
    for e, (f, c) in enumerate(splits, start=1):
        body, end = ai_trainer(steps, f, c, t, epoch=e)
        evs.append(("epoch.block", "pipeline", t, end - t, {"epoch": e}))
        # the loop over the loader spans the body: a container, never app I/O (io_bound_epochs)
        evs.append(("fetch.block", "dataloader", t, end - t, {"epoch": e}))
        evs += body
        t = end + 10
    return evs


def worker(items, item_us, t=0, fname="/data/shard.bin", fd=7, size=MiB):
    """A loader worker: ``items`` samples of ``item_us`` each, one pread per sample."""
    evs = [_open(fname, fd, t)]
    t += 10
    for i in range(items):
        evs.append(("item", "data", t, item_us, {"image_idx": i}))
        evs.append(_pread(fname, fd, size, i * size, t + 1, 5))
        t += item_us + 1
    return evs


def checkpoint_job(ck_us, total_us=10_000_000):
    evs = [("compute", "compute", 0, total_us - ck_us - 100, {})]
    t = total_us - ck_us
    evs.append(("checkpoint", "checkpoint", t, ck_us, {"epoch": 1}))
    evs.append(_open("/ckpt/model.pt", 9, t + 1))
    for i in range(4):
        evs.append(
            ("write", "POSIX", t + 10 + i * 20, 10, {"fname": "/ckpt/model.pt", "fd": 9, "count": MiB, "ret": MiB})
        )
    evs.append(_close("/ckpt/model.pt", 9, t + 200))
    return evs


def small_files(samples, one_file):
    evs, t = [], 0
    if one_file:
        evs.append(_open("/data/all.bin", 5, t))
    for i in range(samples):
        evs.append(("item", "data", t, 9_000, {"image_idx": i}))
        if one_file:
            evs.append(_pread("/data/all.bin", 5, 100 * KiB, i * 100 * KiB, t + 1, 6_000))
        else:
            f = f"/data/img_{i}.jpg"
            evs += [_open(f, 5, t + 1), _read(f, 5, 100 * KiB, t + 10, 6_000), _close(f, 5, t + 7_000)]
        t += 10_000
    return {0: ai_trainer(samples // 10, 10, 1000, t + 10)[0], 1: evs}


def epoch_reads(reread):
    """3 epochs; each reads 10 files of 8 MiB fully: the same files each epoch, or new ones."""
    tr = epochs_trainer([(10_000, 90_000)] * 3)
    epochs = [e for e in tr if e[0] == "epoch.block"]
    w = []
    for e, (_, _, t, _d, _) in enumerate(epochs):
        for i in range(10):
            f = f"/data/sample_{i if reread else e * 10 + i}.npz"
            w += seq_reads(f, 1, 8 * MiB, t + 10 + i * 90_000, dur=50_000, fd=11)
    return {0: tr, 1: w}


SCENARIOS = {
    "small_requests": (
        {0: seq_reads("/data/small.bin", 1200, 4 * KiB, dur=1000)},
        {0: seq_reads("/data/small.bin", 1200, MiB, dur=1000)},
    ),
    "misaligned_requests": (
        {0: preads("/data/m.bin", [i * MiB + 100 for i in range(100)], MiB, dur=20_000)},
        {0: preads("/data/m.bin", [i * MiB for i in range(100)], MiB, dur=20_000)},
    ),
    "random_access": (
        {0: preads("/data/r.bin", [i * MiB for i in range(1199, -1, -1)], MiB, dur=1000)},
        {0: preads("/data/r.bin", [i * MiB for i in range(1200)], MiB, dur=1000)},
    ),
    "redundant_reads": (
        {0: preads("/data/d.bin", [i * 32 * MiB for i in list(range(4)) * 2], 32 * MiB, dur=200_000)},
        {0: preads("/data/d.bin", [i * 32 * MiB for i in range(8)], 32 * MiB, dur=200_000)},
    ),
    "metadata_time": (
        {
            0: [
                e
                for i in range(20)
                for e in (
                    _open(f"/data/f{i}", 3, i * 200_000, 80_000),
                    _read(f"/data/f{i}", 3, MiB, i * 200_000 + 90_000, 10_000),
                    _close(f"/data/f{i}", 3, i * 200_000 + 110_000, 80_000),
                )
            ]
        },
        {
            0: [
                e
                for i in range(20)
                for e in (
                    _open(f"/data/f{i}", 3, i * 200_000, 1_000),
                    _read(f"/data/f{i}", 3, MiB, i * 200_000 + 2_000, 100_000),
                    _close(f"/data/f{i}", 3, i * 200_000 + 110_000, 1_000),
                )
            ]
        },
    ),
    "stdio_share": (
        {
            0: [("fopen", "STDIO", 0, 5, {"fname": "/data/s.txt", "fd": 4, "ret": 0})]
            + [
                (
                    "fread",
                    "STDIO",
                    10 + i * 200_000,
                    150_000,
                    {"fname": "/data/s.txt", "fd": 4, "count": 16 * MiB, "size": 1, "ret": 16 * MiB},
                )
                for i in range(10)
            ]
            + seq_reads("/data/p.bin", 1, MiB, 2_100_000)
        },
        {0: seq_reads("/data/p.bin", 10, 16 * MiB, dur=150_000)},
    ),
    "rank_imbalance": (
        {
            0: preads("/data/shared.bin", [i * 32 * MiB for i in range(8)], 32 * MiB, dur=250_000),
            1: preads("/data/shared.bin", [(8 + i) * 32 * MiB for i in range(2)], 32 * MiB, dur=1_000_000),
        },
        {
            0: preads("/data/shared.bin", [i * 32 * MiB for i in range(4)], 32 * MiB, dur=500_000),
            1: preads("/data/shared.bin", [(4 + i) * 32 * MiB for i in range(4)], 32 * MiB, dur=500_000),
        },
    ),
    "stragglers": (
        {
            0: preads("/data/shared.bin", [i * MiB for i in range(4)], MiB, dur=50_000),
            1: preads("/data/shared.bin", [(4 + i) * MiB for i in range(4)], MiB, dur=500_000),
        },
        {
            0: preads("/data/shared.bin", [i * MiB for i in range(4)], MiB, dur=50_000),
            1: preads("/data/shared.bin", [(4 + i) * MiB for i in range(4)], MiB, dur=55_000),
        },
    ),
    # the trigger waits in ai.dataloader.fetch regions (event "fetch"): fetch wait as in epochs()
    "dataloader_stall": (
        {0: ai_trainer(10, 200_000, 200_000, fetch="fetch")[0]},
        {0: ai_trainer(10, 4_000, 200_000, fetch="fetch")[0]},
    ),
    "io_bound_epochs": (
        {0: epochs_trainer([(160_000, 40_000), (20_000, 180_000)])},
        {0: epochs_trainer([(20_000, 180_000), (20_000, 180_000)])},
    ),
    "worker_imbalance": (
        {0: ai_trainer(10, 100, 500_000)[0], 1: worker(10, 100_000), 2: worker(10, 400_000, fd=8)},
        {0: ai_trainer(10, 100, 500_000)[0], 1: worker(10, 200_000), 2: worker(10, 210_000, fd=8)},
    ),
    "checkpoint_time": ({0: checkpoint_job(2_000_000)}, {0: checkpoint_job(500_000)}),
    "small_files_per_sample": (small_files(200, one_file=False), small_files(200, one_file=True)),
    "repeated_epoch_reads": (epoch_reads(True), epoch_reads(False)),
}


def generate(outdir):
    """Write every scenario with the real tracer: one forked child per (scenario, variant, rank)."""
    write_traces(
        outdir,
        {
            f"{scen}/{variant}": ranks
            for scen, variants in SCENARIOS.items()
            for variant, ranks in zip(("trigger", "clean"), variants)
        },
    )


def write_traces(outdir, table):
    """``table``: ``{"dir/sub": {rank: events}}``; each rank's events are logged by a forked child
    with ``dftracer.initialize_log`` + ``log_event`` into ``outdir/dir/sub/trace-<rank>.pfw``;
    ``outdir/pids.json`` maps ``"dir/sub"`` to ``{rank: pid}``."""
    import time

    from dftracer.python import dftracer

    base = int(time.time() * 1e6) - 60_000_000  # µs; log_event takes explicit timestamps
    children, pids = [], {}
    for key, ranks in table.items():
        d = os.path.join(outdir, key)
        os.makedirs(d, exist_ok=True)
        for rank, events in ranks.items():
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    log = dftracer.initialize_log(
                        logfile=os.path.join(d, f"trace-{rank}.pfw"), data_dir=None, process_id=rank
                    )
                    for name, cat, ts, dur, args in events:
                        log.log_event(name, cat, base + int(ts), int(dur), args)
                    log.finalize()
                    code = 0
                finally:
                    os._exit(code)
            children.append(pid)
            pids.setdefault(key, {})[rank] = pid
    bad = [p for p in children if os.waitpid(p, 0)[1] != 0]
    if bad:
        raise SystemExit(f"{len(bad)} generator children failed")
    # events carry the OS pid (process_id is recorded as metadata only)
    with open(os.path.join(outdir, "pids.json"), "w") as f:
        json.dump(pids, f)


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def scenarios(tmp_path_factory):
    out = tmp_path_factory.mktemp("insight-traces")
    env = pythonpath_env({k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_") and k != "LD_PRELOAD"})
    env["DFTRACER_ENABLE"] = "1"
    subprocess.run([sys.executable, os.path.abspath(__file__), str(out)], env=env, check=True, timeout=120)
    return out


def run(scenarios, dask_client, rule, variant, config=None):
    from dfanalyzer import DFAnalyzer

    d = scenarios / rule / variant
    assert any(p.name.endswith(".pfw.gz") or p.name.endswith(".pfw") for p in d.iterdir())
    an = DFAnalyzer(str(d), client=dask_client)
    try:
        return an.insights(config=config, show=False), an.events.compute(scheduler=dask_client)
    finally:
        an.close()


# ----------------------------------------------------------------------------- per-rule tests
@pytest.mark.parametrize("rule", list(SCENARIOS))
def test_rule_triggers_and_stays_quiet(scenarios, dask_client, rule):
    rep, ev = run(scenarios, dask_client, rule, "trigger")
    got = rep.get(rule)
    assert got is not None, (rule, rep.rules())
    assert got.severity in ("high", "warn", "info") and got.recommendations and got.message
    assert got.evidence["metrics"]
    pids = json.loads((scenarios / "pids.json").read_text())[f"{rule}/trigger"]
    CHECKS[rule](got, ev, {int(k): v for k, v in pids.items()})
    clean, _ = run(scenarios, dask_client, rule, "clean")
    assert rule in clean.checked and clean.get(rule) is None, (rule, clean.rules())


def _small(ins, ev, pid):
    m = ins.evidence["metrics"]
    assert m["reads"] == 1200 and m["small_reads"] == 1200 and m["small_read_share"] == 1.0
    assert ins.evidence["files"][0] == {
        "fname": "/data/small.bin",
        "small_reads": 1200,
        "small_writes": 0,
        "reads": 1200,
        "writes": 0,
    }
    assert sum(w["small_requests"] for w in ins.evidence["time_windows"]) <= 1200


def _misaligned(ins, ev, pid):
    m = ins.evidence["metrics"]
    assert m["placed_requests"] == 100 and m["misaligned_requests"] == 100
    assert ins.evidence["files"][0]["fname"] == "/data/m.bin"


def _random(ins, ev, pid):
    m = ins.evidence["metrics"]
    # descending offsets: every read but the first starts before the previous one ended
    assert m["reads"] == 1200 and m["random_reads"] == 1199


def _redundant(ins, ev, pid):
    m = ins.evidence["metrics"]
    assert m["read_bytes"] == 256 * MiB and m["unique_read_bytes"] == 128 * MiB
    assert m["redundant_read_bytes"] == 128 * MiB and m["unplaced_read_bytes"] == 0
    assert m["affected_time_s"] == pytest.approx(1.6) and m["run_share"] > 0.9
    assert "could not be placed" not in ins.message  # every read has its offset


def _metadata(ins, ev, pid):
    m = ins.evidence["metrics"]
    io = ev[ev["cat"] == "POSIX"]
    meta = io[io["name"].isin(["open64", "close"])]["dur"].sum()
    assert m["meta_time_s"] == pytest.approx(meta / 1e6) and meta == 20 * 160_000
    assert m["meta_share"] == pytest.approx(meta / io["dur"].sum())
    assert ins.evidence["processes"][0]["pid"] == pid[0]


def _stdio(ins, ev, pid):
    m = ins.evidence["metrics"]
    assert m["stdio_bytes"] == 160 * MiB and m["total_bytes"] == 161 * MiB
    assert m["affected_time_s"] == pytest.approx(1.500005)  # 10 freads of 150 ms + the fopen
    assert ins.evidence["files"][0] == {"fname": "/data/s.txt", "stdio_bytes": 160 * MiB}


def _rank(ins, ev, pid):
    f = ins.evidence["files"][0]
    assert f["fname"] == "/data/shared.bin" and f["direction"] == "read"
    assert f["max_bytes"] == 256 * MiB and f["min_bytes"] == 64 * MiB and f["imbalance"] == 0.75
    assert f["max_process"].endswith(f":{pid[0]}") and f["min_process"].endswith(f":{pid[1]}")


def _strag(ins, ev, pid):
    f = ins.evidence["files"][0]
    assert f["slowest_process"].endswith(f":{pid[1]}")
    # 4 preads of 500 ms (50 ms) + open and close of 5 µs each
    assert f["slowest_io_time_s"] == pytest.approx(2.00001) and f["fastest_io_time_s"] == pytest.approx(0.20001)
    assert f["time_imbalance"] == pytest.approx(1.8 / 2.20002, abs=1e-6)
    assert f["extra_io_time_s"] == pytest.approx(1.8)


def _stall(ins, ev, pid):
    m = ins.evidence["metrics"]
    assert m["fetch_wait_s"] == pytest.approx(2.0) and m["compute_s"] == pytest.approx(2.0)
    assert m["stall_share"] == 0.5 and m["batches"] == 10
    assert len(ins.evidence["time_windows"]) == 5 and ins.evidence["time_windows"][0]["wait_s"] == 0.2


def _io_bound(ins, ev, pid):
    m = ins.evidence["metrics"]
    assert m["epochs"] == 2 and m["io_bound_epochs"] == 1
    tw = ins.evidence["time_windows"]
    assert [w["epoch"] for w in tw] == [1]
    assert tw[0]["unoverlapped_io_s"] == pytest.approx(1.6) and tw[0]["compute_s"] == pytest.approx(0.4)


def _workers(ins, ev, pid):
    m = ins.evidence["metrics"]
    assert m["workers"] == 2
    assert m["max_busy_s"] == pytest.approx(4.0) and m["min_busy_s"] == pytest.approx(1.0)
    assert m["max_over_mean"] == pytest.approx(1.6)
    assert ins.evidence["processes"][0]["pid"] == pid[2]


def _ckpt(ins, ev, pid):
    m = ins.evidence["metrics"]
    assert m["checkpoint_s"] == pytest.approx(2.0) and m["checkpoint_bytes"] == 4 * MiB
    assert m["checkpoint_share"] == pytest.approx(2.0 / 10.0, abs=1e-4)
    assert ins.evidence["files"][0] == {"fname": "/ckpt/model.pt", "checkpoint_bytes": 4 * MiB}


def _small_files(ins, ev, pid):
    m = ins.evidence["metrics"]
    assert m["samples"] == 200 and m["small_file_opens"] == 200 and m["small_files"] == 200
    assert m["median_bytes_per_open"] == 100 * KiB


def _epoch_reads(ins, ev, pid):
    m = ins.evidence["metrics"]
    assert m["epochs"] == 3 and m["bytes_read_in_epochs"] == 240 * MiB
    assert m["repeated_bytes"] == 160 * MiB and m["unique_bytes"] == 80 * MiB and m["files_reread"] == 10


CHECKS = {
    "small_requests": _small,
    "misaligned_requests": _misaligned,
    "random_access": _random,
    "redundant_reads": _redundant,
    "metadata_time": _metadata,
    "stdio_share": _stdio,
    "rank_imbalance": _rank,
    "stragglers": _strag,
    "dataloader_stall": _stall,
    "io_bound_epochs": _io_bound,
    "worker_imbalance": _workers,
    "checkpoint_time": _ckpt,
    "small_files_per_sample": _small_files,
    "repeated_epoch_reads": _epoch_reads,
}


# ----------------------------------------------------------------------------- config, CLI, CM1
def test_yaml_thresholds_override(scenarios, dask_client, tmp_path):
    from dfanalyzer.insights import load_config

    cfg = tmp_path / "th.yaml"
    cfg.write_text("thresholds:\n  small_requests_absolute: 5000\nrules:\n  random_access: {severity: info}\n")
    rep, _ = run(scenarios, dask_client, "small_requests", "trigger", config=str(cfg))
    assert rep.get("small_requests") is None and rep.thresholds["small_requests_absolute"] == 5000
    off, _ = run(
        scenarios, dask_client, "small_requests", "trigger", config={"rules": {"small_requests": {"enabled": False}}}
    )
    assert "small_requests" not in off.checked
    with pytest.raises(ValueError, match="no_such_key"):
        load_config({"thresholds": {"no_such_key": 1}})
    with pytest.raises(ValueError, match="must be a number"):
        load_config({"thresholds": {"small_bytes": "big"}})
    assert load_config()["thresholds"]["small_bytes"] == MiB


def test_cli_insights_json_and_table(scenarios, tmp_path):
    d = scenarios / "small_requests" / "trigger"
    env = pythonpath_env()
    out = subprocess.run(
        [sys.executable, "-m", "dfanalyzer.cli", "insights", str(d), "--json", "--workers", "1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert [i["rule"] for i in doc["insights"]] == ["small_requests"]
    assert doc["insights"][0]["evidence"]["metrics"]["small_reads"] == 1200
    assert len(doc["checked"]) == len(SCENARIOS) + 2  # + small_hdf5_reads, independent_mpiio (test_analyzer_layers.py)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("thresholds: {small_bytes: 1024}\n")
    out = subprocess.run(
        [sys.executable, "-m", "dfanalyzer.cli", "insights", str(d), "--config", str(cfg), "--workers", "1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "none of the 16 rules triggered" in out.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("thresholds: {nope: 1}\n")
    out = subprocess.run(
        [sys.executable, "-m", "dfanalyzer.cli", "insights", str(d), "--config", str(bad)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 2 and "nope" in out.stderr


def test_cm1_facts_match_pandas(dask_client, tmp_path):
    """On the CM1 traces the counters the rules read equal a pandas recount."""
    import shutil

    from dfanalyzer import DFAnalyzer
    from dfanalyzer.insights import READ_NAMES, WRITE_NAMES

    shutil.copytree(os.path.join(DATA, "dftracer-v1.0.5-cm1"), tmp_path / "cm1")
    an = DFAnalyzer(str(tmp_path / "cm1" / "cm1-DEFAULT-353778*.pfw.gz"), client=dask_client)
    try:
        rep = an.insights(show=False)
        ev = an.events.compute(scheduler=dask_client)
    finally:
        an.close()
    n = rep.facts.n
    x = ev[(ev["ph"] == "X") & (ev["cat"].isin(["POSIX", "STDIO"]))]
    r = x[x["name"].isin(READ_NAMES) & x["size"].notna()]
    w = x[x["name"].isin(WRITE_NAMES) & x["size"].notna()]
    assert n["reads"] == len(r) and n["writes"] == len(w) and n["reads"] + n["writes"] > 0
    assert n["small_reads"] == int((r["size"] < MiB).sum()) and n["small_writes"] == int((w["size"] < MiB).sum())
    assert n["bytes_stdio"] == int(pd_sum(x[x["cat"] == "STDIO"], READ_NAMES | WRITE_NAMES))
    assert n["io_time"] == int(x["dur"].sum())
    from dfanalyzer.insights import DATA_NAMES

    assert n["meta_time"] == int(x[~x["name"].isin(DATA_NAMES)]["dur"].sum())
    files = rep.facts.files
    assert int(files["bytes_read"].sum()) == int(r[r["fname"].notna()]["size"].sum())
    json.dumps(rep.to_dict())  # the report is JSON-serialisable


def pd_sum(df, names):
    return df[df["name"].isin(names)]["size"].fillna(0).astype(np.int64).sum()


if __name__ == "__main__":
    generate(sys.argv[1])


def test_file_positions_carry_across_partitions():
    """A read whose open (or lseek) is in an earlier partition is still placed exactly."""
    import numpy as np
    import pandas as pd

    from dfanalyzer.insights import _place_requests, _stream_carry, stream_positions

    def part(rows):
        df = pd.DataFrame(rows, columns=["name", "ts", "fd", "ret", "size", "offset"])
        df["hostname"], df["pid"], df["cat"], df["ph"] = "n0", 7, "POSIX", "X"
        return df.astype({"size": "Float64", "offset": "Float64", "fd": "Int64", "ret": "Int64"})

    nan = None
    p0 = part([("open64", 1, nan, 3, nan, nan), ("read", 2, 3, 100, 100, nan)])
    p1 = part([("read", 3, 3, 100, 100, nan), ("read", 4, 3, 50, 50, nan), ("lseek", 5, 3, 4096, nan, nan)])
    p2 = part([("read", 6, 3, 10, 10, nan), ("read", 7, 9, 10, 10, nan)])  # fd 9: never opened
    ctx = {"io_cats": ["POSIX"]}
    starts = stream_positions([_stream_carry(p, ctx) for p in (p0, p1, p2)])
    assert starts[0] == {}
    assert starts[1] == {("n0", 7, 3.0): 100.0}
    assert starts[2] == {("n0", 7, 3.0): 4096.0}
    assert _place_requests(p1, starts[1]).tolist()[:2] == [100.0, 200.0]
    got = _place_requests(p2, starts[2]).tolist()
    assert got[0] == 4096.0 and np.isnan(got[1])
    assert np.isnan(_place_requests(p1).iloc[0])  # without the carry the read is unplaced
