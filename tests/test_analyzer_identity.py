"""A file's identity (hostname, pid) is carried into every batch (issue 20).

A real preload trace of two processes (an I/O loop and its forked child), written in small gzip
members so that each file spans many load batches at a small ``batch_size_mb``. Only the first
batch of a file holds the tracer's ``hostname`` metadata record; every later batch must still
put its events on the file's host. The truth is computed with plain gzip + json
(conftest.read_trace): hosts from the ``hostname`` records, events per pid, processes per file.
"""

from __future__ import annotations

import collections
import subprocess

import pytest
from test_preload_helpers import compile_c, preload_lib, read_trace, trace_files, traced_env

from dfanalyzer import DFAnalyzer

READS = 8000  # per process: ~55 members of 32 KiB per file


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("identity")
    exe = compile_c("io_loop_fork", str(d))
    data = d / "data"
    data.mkdir()
    prefix = str(d / "trace")
    env = traced_env(preload_lib(), prefix, str(data), DFTRACER_WRITE_BUFFER_SIZE="32K", DFTRACER_FLUSH_INTERVAL="0")
    subprocess.run([exe, str(data / "input.bin"), str(READS)], env=env, check=True, timeout=120)
    files = trace_files(prefix)
    assert len(files) == 2, files
    return prefix, files, str(data / "input.bin")


def truth(files):
    """Hosts, {(host, pid): events}, {fname: {(host, pid)}} from plain gzip + json."""
    events = collections.Counter()
    users = collections.defaultdict(set)
    hosts = set()
    for f in files:
        recs = read_trace(f)
        host = next(r["args"]["value"] for r in recs if r.get("ph") == "M" and r["name"] == "hostname")
        hosts.add(host)
        for r in recs:
            if r.get("ph") not in ("X", "A") or r.get("cat") == "dftracer":
                continue
            key = (host, r["pid"])
            events[key] += int(r.get("args", {}).get("dft_cnt", 1))
            fname = r.get("args", {}).get("fname")
            if fname:
                users[fname].add(key)
    return hosts, events, users


@pytest.mark.parametrize("batch_mb", [0.005, 0.05])
def test_every_batch_knows_the_file_identity(run, dask_client, batch_mb):
    prefix, files, input_path = run
    hosts, events, users = truth(files)
    assert len(events) == 2 and all(n >= READS for n in events.values())
    an = DFAnalyzer(prefix + "*.pfw.gz", client=dask_client, batch_size_mb=batch_mb, small_file_mb=0)
    try:
        assert an.stats["batches"] >= 2 * 10, an.stats  # many batches per file
        s = an.summary(show=False).to_dict()
        assert (s["nodes"], s["processes"]) == (len(hosts), 2)
        assert s["events"] == sum(events.values())

        # the Dask frame: every event has its file's host
        ev = an.events[["hostname", "pid"]].compute(scheduler=dask_client)
        assert ev["hostname"].isna().sum() == 0
        got = collections.Counter(zip(ev["hostname"].astype(str), ev["pid"].astype(int)))
        assert set(got) == set(events)

        pv = an.processes()
        assert len(pv) == 2, pv
        assert {(h, int(p)): int(n) for (h, p), n in pv["events"].items()} == dict(events)

        fv = an.files()
        assert int(fv.loc[input_path, "processes"]) == len(users[input_path]) == 2
    finally:
        an.close()
