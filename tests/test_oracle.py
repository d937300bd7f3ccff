"""The oracle's own tests: tiny traces whose every number was computed by hand (issue 20, item 2).

The expected values below come from the intervals written in the comments, not from running any
code; they pin tests/oracle.py so that the differential tests (test_oracle_diff.py) compare the
analyzer with something known to be right.
"""

import gzip
import json

import pytest
from oracle import Oracle

US = 1e-6


def _line(d):
    return (json.dumps(d, separators=(",", ":")) + "\n").encode()


def _write(path, members):
    """``members``: lists of records; each list becomes one gzip member (the first starts with ``[``)."""
    out = b""
    for i, recs in enumerate(members):
        out += gzip.compress((b"[\n" if i == 0 else b"") + b"".join(_line(r) for r in recs))
    path.write_bytes(out)
    return str(path)


def X(name, cat, pid, tid, ts, dur, **args):
    return {"id": 0, "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "ph": "X", "args": args}


def host(pid, h):
    return {
        "name": "hostname",
        "cat": "dftracer",
        "pid": pid,
        "tid": pid,
        "ts": 0,
        "ph": "M",
        "args": {"name": "hostname", "value": h},
    }


@pytest.fixture
def tiny(tmp_path):
    # Host hA, pid 10. Its hostname record is in the *second* gzip member, after all events.
    a = _write(
        tmp_path / "a.pfw.gz",
        [
            [
                X("open64", "POSIX", 10, 10, 1000, 10, fname="/d/a", ret=3),  # [1000,1010)
                X("read", "POSIX", 10, 10, 1010, 20, fname="/d/a", ret=100),  # [1010,1030)
                X("pread64", "POSIX", 10, 11, 1020, 20, fname="/d/a", ret=50, offset=0),  # [1020,1040)
                X("pread64", "POSIX", 10, 11, 1050, 10, fname="/d/a", ret=50, offset=50),  # consecutive
                X("pread64", "POSIX", 10, 11, 1070, 10, fname="/d/a", ret=50, offset=0),  # random
                X("compute", "compute", 10, 10, 1030, 40, epoch=1),  # [1030,1070)
            ],
            [host(10, "hA")],
        ],
    )
    # Host hB, the same pid 10; upstream integer phases (3 = aggregated, 4 = metadata).
    b = _write(
        tmp_path / "b.pfw.gz",
        [
            [
                {
                    "name": "hostname",
                    "cat": "dftracer",
                    "pid": 10,
                    "tid": 10,
                    "ph": 4,
                    "args": {"name": "hostname", "value": "hB"},
                },
                # 3 writes of 100 bytes, 10 µs each: [2000,2030)
                {
                    "name": "write",
                    "cat": "POSIX",
                    "pid": 10,
                    "tid": 10,
                    "ts": 2000,
                    "ph": 3,
                    "args": {
                        "fname": "/d/a",
                        "dur_sum": 30,
                        "dur_min": 10,
                        "dur_max": 10,
                        "ret_sum": 300,
                        "ret_min": 100,
                        "ret_max": 100,
                        "dft_cnt": 3,
                    },
                },
                # 2 readv of 100 and 300 bytes (per call unknown), 1 and 5 µs: [2040,2046)
                {
                    "name": "readv",
                    "cat": "POSIX",
                    "pid": 10,
                    "tid": 10,
                    "ts": 2040,
                    "ph": "A",
                    "args": {
                        "dur_sum": 6,
                        "dur_min": 1,
                        "dur_max": 5,
                        "ret_sum": 400,
                        "ret_min": 100,
                        "ret_max": 300,
                        "dft_cnt": 2,
                    },
                },
            ],
            [X("fwrite", "STDIO", 10, 10, 2100, 5, fname="/d/b", ret=2, size=8)],  # [2100,2105), 16 bytes
        ],
    )
    return Oracle([a, b])


def test_summary_by_hand(tiny):
    s = tiny.summary()
    assert s["events"] == 6 + 3 + 2 + 1
    assert (s["nodes"], s["processes"]) == (2, 2)
    assert s["threads"] == {"compute": 1, "io": 3}
    assert s["files"] == 2
    t = s["time"]
    # job [1000, 2105); I/O union [1000,1040) [1050,1060) [1070,1080) [2000,2030) [2040,2046) [2100,2105)
    assert t["total"] == pytest.approx(1105 * US)
    assert t["io"] == pytest.approx((40 + 10 + 10 + 30 + 6 + 5) * US)
    assert t["compute"] == pytest.approx(40 * US)
    assert t["unoverlapped_io"] == pytest.approx((30 + 10 + 30 + 6 + 5) * US)
    assert t["unoverlapped_compute"] == pytest.approx((10 + 10) * US)
    assert t["app_io"] == 0 and t["unoverlapped_app_io"] == 0
    assert t["unoverlapped_app_compute"] == pytest.approx(40 * US)
    f = s["functions"]
    assert f["open64"] == {"count": 1, "size": None}
    assert f["pread64"]["count"] == 3 and f["pread64"]["size"] == {
        "min": 50,
        "p25": 50,
        "mean": 50,
        "median": 50,
        "p75": 50,
        "max": 50,
    }
    assert f["write"]["count"] == 3 and f["write"]["size"]["median"] == 100 and f["write"]["size"]["max"] == 100
    # unequal aggregated calls: only min, max, mean are known
    assert f["readv"] == {
        "count": 2,
        "size": {"min": 100, "p25": None, "mean": 200, "median": None, "p75": None, "max": 300},
    }
    assert f["fwrite"]["size"]["mean"] == 16


def test_functions_by_hand(tiny):
    fv = tiny.functions()
    p = fv.loc["pread64"]
    assert (p["count"], p["bytes"]) == (3, 150)
    assert p["time_s"] == pytest.approx(40 * US) and p["busy_s"] == pytest.approx(40 * US)
    assert p["mean_us"] == pytest.approx(40 / 3)
    assert p["p50_us"] == 10 and p["p90_us"] == pytest.approx(18) and p["max_us"] == 20  # sorted 10, 10, 20
    assert p["time_share"] == pytest.approx(40 / (10 + 20 + 40 + 30 + 6 + 5))
    assert p["bandwidth_mib_s"] == pytest.approx(150 / 2**20 / 40e-6)
    w = fv.loc["write"]
    assert (w["count"], w["bytes"], w["p50_us"], w["max_us"]) == (3, 300, 10, 10)
    r = fv.loc["readv"]
    # an aggregated record's calls enter the percentiles with its mean duration, 6 // 2 = 3 µs
    # (docs/analyzer.md: estimates; its dur_min 1 / dur_max 5 are not used)
    assert (r["count"], r["bytes"], r["mean_us"], r["p50_us"], r["max_us"]) == (2, 400, 3, 3, 3)


def test_files_by_hand(tiny):
    fv = tiny.files()
    a = fv.loc["/d/a"]
    assert (a["ops"], a["bytes"], a["read_bytes"], a["write_bytes"]) == (8, 550, 250, 300)
    assert a["time_s"] == pytest.approx(100 * US) and a["busy_s"] == pytest.approx(90 * US)
    assert a["processes"] == 2
    assert (a["first_s"], a["last_s"]) == (0, pytest.approx(1030 * US))
    # thread (hA, 10, 11): 0+50 -> 50 consecutive; 50+50 -> 0 random
    assert (a["consecutive"], a["sequential"], a["random"], a["pattern"]) == (1, 1, 1, "sequential")
    assert (a["size_0_100"], a["size_100_1K"], a["size_1K_10K"]) == (3, 4, 0)
    b = fv.loc["/d/b"]
    assert (b["ops"], b["write_bytes"], b["pattern"], b["size_0_100"]) == (1, 16, "-", 1)


def test_processes_by_hand(tiny):
    pv = tiny.processes()
    a, b = pv.loc[("hA", 10)], pv.loc[("hB", 10)]
    assert (a["events"], a["io_events"], a["bytes"], a["threads"]) == (6, 5, 250, 2)
    assert a["io_time_s"] == pytest.approx(60 * US) and a["compute_time_s"] == pytest.approx(40 * US)
    assert a["unoverlapped_io_s"] == pytest.approx(40 * US) and a["lifetime_s"] == pytest.approx(80 * US)
    assert (b["events"], b["io_events"], b["bytes"], b["threads"]) == (6, 6, 716, 1)
    assert b["io_time_s"] == pytest.approx(41 * US) and b["start_s"] == pytest.approx(1000 * US)
    assert b["lifetime_s"] == pytest.approx(105 * US)
    assert pv.attrs["io_imbalance"] == pytest.approx(60 / 50.5)
    assert pv.attrs["slowest_process"] == ("hA", 10)


def test_time_tag_layers_by_hand(tiny):
    tw = tiny.time_windows(bins=2)  # edges 1000, 1552, 2105
    assert list(tw["ops"]) == [5, 6]
    assert list(tw["bytes"]) == [250, 716]
    assert tw["io_time_s"].tolist() == pytest.approx([70 * US, 41 * US])
    assert tw["io_busy_s"].tolist() == pytest.approx([60 * US, 41 * US])
    assert tw["overlap_s"].tolist() == pytest.approx([20 * US, 0])
    tg = tiny.by_tag("epoch").loc[1]
    assert (tg["events"], tg["span_s"], tg["io_time_s"]) == (1, pytest.approx(40 * US), pytest.approx(20 * US))
    assert tg["unoverlapped_io_s"] == 0
    ly = tiny.layers()
    assert ly.loc["POSIX", "time_s"] == pytest.approx(96 * US) and ly.loc["POSIX", "events"] == 10
    assert ly.loc["POSIX", "unoverlapped_s"] == pytest.approx(76 * US)
    assert ly.loc["compute", "unoverlapped_s"] == pytest.approx(20 * US)
    assert ly.attrs["total_s"] == pytest.approx(121 * US)


def test_insight_metrics_by_hand(tiny):
    m = tiny.insight_metrics()
    # reads: read 100, pread64 3 x 50, readv 2 (<= 300 each); writes: write 3 x 100, fwrite 16
    assert m["small_requests"] == {
        "reads": 6,
        "small_reads": 6,
        "small_read_share": 1.0,
        "writes": 4,
        "small_writes": 4,
        "small_write_share": 1.0,
    }
    assert m["stdio_share"] == {"stdio_bytes": 16, "total_bytes": 966, "stdio_share": round(16 / 966, 6)}
    assert m["metadata_time"]["meta_time_s"] == pytest.approx(10 * US)  # open64
    # /d/a is used by (hA,10) in [1000,1080] and by (hB,10) in [2000,2030]: not in overlapping
    # time, so not shared (docs/analyzer.md "Shared files")
    assert m["rank_imbalance"] == {"imbalanced_files": 0, "max_imbalance": None}
    assert m["stragglers"] == {"straggler_files": 0, "max_time_imbalance": None}


def test_shared_files_by_hand(tmp_path):
    # /s: (h,1) in [0,100] (2 reads of 100 bytes, 10 µs each), (h,2) in [50,80] (50 bytes, 30 µs):
    # they overlap. (h,3) in [100,200] (1000 bytes, 100 µs) only touches (h,1)'s end: not counted.
    # /t: (h,1) in [300,310], (h,2) in [400,410]: not shared.
    def proc(pid, *recs):
        return _write(tmp_path / f"p{pid}.pfw.gz", [[host(pid, "h"), *recs]])

    p1 = proc(
        1,
        X("read", "POSIX", 1, 1, 0, 10, fname="/s", ret=100),
        X("read", "POSIX", 1, 1, 90, 10, fname="/s", ret=100),
        X("read", "POSIX", 1, 1, 300, 10, fname="/t", ret=7),
    )
    p2 = proc(
        2,
        X("read", "POSIX", 2, 2, 50, 30, fname="/s", ret=50),
        X("read", "POSIX", 2, 2, 400, 10, fname="/t", ret=9000),
    )
    p3 = proc(3, X("read", "POSIX", 3, 3, 100, 100, fname="/s", ret=1000))
    m = Oracle([p1, p2, p3]).insight_metrics()
    # read bytes over (h,1), (h,2): (200 - 50) / 200; I/O time: (30 - 20) / (20 + 30)
    assert m["rank_imbalance"] == {"imbalanced_files": 1, "max_imbalance": 0.75}
    assert m["stragglers"] == {"straggler_files": 1, "max_time_imbalance": 0.2}


def test_hashes_resolved_from_later_records(tmp_path):
    # DFTracer v1 style: the FH/HH records come after the event that uses them.
    p = _write(
        tmp_path / "h.pfw.gz",
        [
            [X("read", "POSIX", 7, 7, 5000, 4, fhash="f1", hhash="h1", ret=10)],
            [
                {
                    "name": "FH",
                    "cat": "dftracer",
                    "pid": 7,
                    "tid": 7,
                    "ph": "M",
                    "args": {"name": "/x/late", "value": "f1"},
                },
                {"name": "HH", "cat": "dftracer", "pid": 7, "tid": 7, "ph": "M", "args": {"name": "hC", "value": "h1"}},
            ],
        ],
    )
    o = Oracle([p])
    assert o.ev[["hostname", "fname", "size"]].values.tolist() == [["hC", "/x/late", 10]]
    assert o.summary()["files"] == 1


def test_epochs_by_hand(tmp_path):
    # Process 1: epochs [1000,1100) and [1200,1300); a fetch wait [1010,1030), compute [1030,1060),
    # a read [1020,1040). Process 2 (a second file): epochs [1050,1120) and [1250,1260).
    p1 = _write(
        tmp_path / "p1.pfw.gz",
        [
            [
                host(1, "hA"),
                X("epoch", "pipeline", 1, 1, 1000, 100, epoch=1),
                X("fetch.iter", "dataloader", 1, 1, 1010, 20),
                X("compute", "compute", 1, 1, 1030, 30),
                X("read", "POSIX", 1, 1, 1020, 20, fname="/d/x", ret=8),
                X("epoch", "pipeline", 1, 1, 1200, 100, epoch=2),
            ]
        ],
    )
    p2 = _write(
        tmp_path / "p2.pfw.gz",
        [[host(2, "hA"), X("epoch", "pipeline", 2, 2, 1050, 70), X("epoch", "pipeline", 2, 2, 1250, 10)]],
    )
    ep = Oracle([p1, p2]).epochs()
    e1, e2 = ep.loc[1], ep.loc[2]
    assert (e1["processes"], e1["start_s"], e1["source"]) == (2, 0, "epoch")
    assert e1["duration_s"] == pytest.approx(120 * US)  # [1000,1120)
    assert e1["fetch_s"] == pytest.approx(20 * US) and e1["compute_s"] == pytest.approx(30 * US)
    assert e1["io_s"] == pytest.approx(20 * US)
    assert e1["fetch_unoverlapped_s"] == pytest.approx(20 * US)
    assert e1["io_unoverlapped_s"] == pytest.approx(10 * US)  # [1020,1030)
    assert e1["other_s"] == pytest.approx(70 * US)  # 120 - [1010,1060)
    assert (e2["processes"], e2["start_s"]) == (2, pytest.approx(200 * US))
    assert e2["duration_s"] == pytest.approx(100 * US) and e2["other_s"] == pytest.approx(100 * US)
    assert e2["io_s"] == 0 and e2["compute_s"] == 0


def test_placement_by_hand(tiny, tmp_path):
    m = tiny.insight_metrics()
    # placed: the three pread64 (offsets 0, 50, 0; 50 bytes); read, readv, write, fwrite carry no
    # offset and no fd: unplaced
    assert m["misaligned_requests"] == {
        "placed_requests": 3,
        "misaligned_requests": 1,
        "misaligned_share": round(1 / 3, 6),
        "alignment": 4096,
    }
    assert m["random_access"]["random_reads"] == 1 and m["random_access"]["reads"] == 6
    assert m["redundant_reads"] == {
        "read_bytes": 150,
        "unique_read_bytes": 100,
        "redundant_read_bytes": 50,
        "redundant_share": round(50 / 150, 6),
        "unplaced_read_bytes": 100 + 400,
    }
    # positions replayed per (hostname, pid, fd) in ts order: open -> 0, reads advance, lseek resets
    p = _write(
        tmp_path / "fd.pfw.gz",
        [
            [
                host(3, "hA"),
                X("open64", "POSIX", 3, 3, 10, 1, fname="/d/f", ret=5),
                X("read", "POSIX", 3, 3, 20, 1, fname="/d/f", fd=5, ret=4096),  # [0, 4096)
                X("read", "POSIX", 3, 4, 30, 1, fname="/d/f", fd=5, ret=100),  # [4096, 4196), another thread
                X("lseek64", "POSIX", 3, 3, 40, 1, fname="/d/f", fd=5, offset=0, whence=0, ret=0),
                X("read", "POSIX", 3, 3, 50, 1, fname="/d/f", fd=5, ret=50),  # [0, 50): random, redundant
                X("fread", "STDIO", 3, 3, 60, 1, fname="/d/f", fd=7, size=10, ret=1),  # no open of fd 7
            ]
        ],
    )
    m = Oracle([p]).insight_metrics()
    assert m["misaligned_requests"]["placed_requests"] == 3 and m["misaligned_requests"]["misaligned_requests"] == 0
    assert m["random_access"]["random_reads"] == 1
    assert m["redundant_reads"] == {
        "read_bytes": 4246,
        "unique_read_bytes": 4196,
        "redundant_read_bytes": 50,
        "redundant_share": round(50 / 4246, 6),
        "unplaced_read_bytes": 10,
    }


def test_ai_metrics_by_hand(tmp_path):
    # fetch waits 20 + 10 µs, compute 30 µs; epoch 1 [1000,1100): I/O + fetch \ compute inside it
    p = _write(
        tmp_path / "ai.pfw.gz",
        [
            [
                host(1, "hA"),
                X("epoch", "pipeline", 1, 1, 1000, 100, epoch=1),
                X("fetch.iter", "dataloader", 1, 1, 1010, 20),  # [1010,1030)
                X("compute", "compute", 1, 1, 1030, 30),  # [1030,1060)
                X("fetch.iter", "dataloader", 1, 1, 1060, 10),  # [1060,1070)
                X("read", "POSIX", 1, 1, 1050, 20, fname="/d/x", ret=8),  # [1050,1070)
            ]
        ],
    )
    m = Oracle([p]).insight_metrics()
    assert m["dataloader_stall"] == {
        "fetch_wait_s": 3e-05,
        "compute_s": 3e-05,
        "stall_share": 0.5,
        "batches": 2,
        "mean_wait_s": 15e-6,
    }
    # (fetch [1010,1030) [1060,1070) + read [1050,1070)) minus compute [1030,1060) = 20 + 10 = 30 of 100
    assert m["io_bound_epochs"] == {"epochs": 1, "io_bound_epochs": 1, "max_io_share": 0.3}


def test_workers_samples_epochs_by_hand(tmp_path):
    trainer = _write(
        tmp_path / "t.pfw.gz",
        [
            [
                host(1, "hA"),
                X("epoch", "pipeline", 1, 1, 1000, 100, epoch=1),
                X("compute", "compute", 1, 1, 1000, 5),
                X("pread64", "POSIX", 1, 1, 1010, 1, fname="/d/r", ret=100, offset=0),  # epoch 1: [0,100)
                X("epoch", "pipeline", 1, 1, 1200, 100, epoch=2),
                X("pread64", "POSIX", 1, 1, 1210, 1, fname="/d/r", ret=100, offset=50),  # epoch 2: [50,150)
            ]
        ],
    )
    w2 = _write(
        tmp_path / "w2.pfw.gz",
        [
            [
                host(2, "hA"),
                X("open64", "POSIX", 2, 2, 2000, 1, fname="/d/s1", ret=3),
                X("read", "POSIX", 2, 2, 2001, 1, fname="/d/s1", fd=3, ret=100),
                X("item", "data", 2, 2, 2000, 20),
                X("item", "data", 2, 2, 2030, 10),
            ]
        ],
    )
    w3 = _write(
        tmp_path / "w3.pfw.gz",
        [
            [
                host(3, "hA"),
                X("open64", "POSIX", 3, 3, 2000, 1, fname="/d/s2", ret=3),
                X("read", "POSIX", 3, 3, 2001, 1, fname="/d/s2", fd=3, ret=20),
                X("open64", "POSIX", 3, 3, 2010, 1, fname="/d/s2", ret=4),
                X("read", "POSIX", 3, 3, 2011, 1, fname="/d/s2", fd=4, ret=30),
                X("item", "data", 3, 3, 2000, 10),
            ]
        ],
    )
    m = Oracle([trainer, w2, w3]).insight_metrics()
    # workers 2 and 3 (no compute, no fetch wait): busy 30 and 10 µs of samples
    assert m["worker_imbalance"] == {
        "workers": 2,
        "max_over_mean": 1.5,
        "max_busy_s": 3e-05,
        "mean_busy_s": 2e-05,
        "min_busy_s": 1e-05,
    }
    # /d/s1: 100 bytes in 1 open, /d/s2: 50 bytes in 2 opens; /d/r is never opened; 3 samples
    assert m["small_files_per_sample"] == {
        "samples": 3,
        "small_file_opens": 3,
        "small_files": 2,
        "opens_per_sample": 1.0,
        "median_bytes_per_open": 62.5,
    }
    # /d/r: epoch 1 [0,100), epoch 2 [50,150): 50 of 200 bytes again
    assert m["repeated_epoch_reads"] == {
        "epochs": 2,
        "bytes_read_in_epochs": 200,
        "repeated_bytes": 50,
        "repeated_share": 0.25,
        "unique_bytes": 150,
        "files_reread": 1,
    }
