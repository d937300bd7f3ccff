"""Two nodes for real: a Dask cluster across two network namespaces joined by a veth pair.

Namespace A holds the scheduler (10.77.0.1) and one worker, namespace B (10.77.0.2) the other
worker; those addresses exist only inside the two namespaces, so every byte between the workers
and the scheduler crosses the veth "wire". The trace files are on the file system both see (what
a shared parallel file system is on a real cluster). ``dfanalyzer summary --json --scheduler``
run inside A must print the same JSON as the local threaded run, its event count must equal the
count read with plain gzip + json, and both workers must have run summary tasks (counted from
each worker's own transition log through ``Client.run``).

Needs root and ``ip netns`` (iproute2); skipped with the reason when the container forbids it.
"""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from conftest import pythonpath_env, read_trace

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))
import gen_traces  # noqa: E402

A_ADDR, B_ADDR = "10.77.0.1", "10.77.0.2"
TAG = f"dfa{os.getpid() % 100000}"  # namespace and link names of this run (links: <= 15 chars)
NS_A, NS_B = f"{TAG}a", f"{TAG}b"


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def _netns_unavailable():
    """Why two namespaces with a veth pair cannot be made here (None: they can)."""
    if shutil.which("ip") is None:
        return "iproute2 'ip' not installed"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    probe = f"{TAG}p"
    r = _ip("netns", "add", probe, check=False)
    if r.returncode != 0:
        return f"'ip netns add' is not permitted in this container: {r.stderr.strip()}"
    try:
        r = _ip("link", "add", f"{probe}x", "type", "veth", "peer", "name", f"{probe}y", check=False)
        if r.returncode != 0:
            return f"'ip link add ... type veth' is not permitted: {r.stderr.strip()}"
        _ip("link", "del", f"{probe}x", check=False)
    finally:
        _ip("netns", "del", probe, check=False)
    return None


@pytest.fixture
def two_nodes():
    """Namespaces A (10.77.0.1/24) and B (10.77.0.2/24) joined by a veth pair; always removed."""
    why = _netns_unavailable()
    if why:
        pytest.skip(why)
    try:
        _ip("netns", "add", NS_A)
        _ip("netns", "add", NS_B)
        _ip("link", "add", f"{TAG}x", "type", "veth", "peer", "name", f"{TAG}y")
        for link, ns, addr in ((f"{TAG}x", NS_A, A_ADDR), (f"{TAG}y", NS_B, B_ADDR)):
            _ip("link", "set", link, "netns", ns)
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", link)
            _ip("-n", ns, "link", "set", link, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        yield
    finally:
        for ns in (NS_A, NS_B):  # deleting a namespace deletes its end of the pair, then the pair
            _ip("netns", "del", ns, check=False)


def _in(ns, *cmd):
    return ["ip", "netns", "exec", ns, *cmd]


def _true_events(paths):
    """Events by plain gzip + json: complete (``X``) records that are not the tracer's own."""
    return sum(1 for p in paths for r in read_trace(p) if r.get("ph") == "X" and r.get("cat") != "dftracer")


# run inside namespace A: tasks each worker ran to completion, by task name
_COUNT = r"""
import collections, json, sys
from distributed import Client

def count(dask_worker):
    done = collections.Counter()
    for e in dask_worker.state.log:
        if len(e) > 2 and e[1] in ("executing", "long-running") and e[2] == "memory":  # (long-running: seceded)
            key = e[0][0] if isinstance(e[0], tuple) else e[0]
            done[str(key).split("-")[0]] += 1
    return dict(done)

with Client(sys.argv[1], timeout=30) as c:
    print(json.dumps(c.run(count)))
"""


def test_summary_across_two_namespaces(two_nodes, tmp_path):
    data = tmp_path / "traces"
    # 4 indexed files cut into ~1 MiB batches (dozens of batches, several per chunk task) and
    # 2 small files read whole as a group: every kind of summary work crosses the wire
    paths = gen_traces.generate(str(data), 4 * 60_000, 4, member_bytes=64 << 10, jobs=1)
    paths += gen_traces.generate(str(data), 2 * 500, 2, member_bytes=8 << 10, jobs=1, first_file=4)
    env = pythonpath_env()
    env.pop("PYTHONSAFEPATH", None)
    env["DASK_DISTRIBUTED__WORKER__DAEMON"] = "False"
    cli = [sys.executable, "-m", "dfanalyzer.cli", "summary", str(data), "--json", "--no-progress"]
    cli += ["--batch-size-mb", "1"]
    local = subprocess.run(cli + ["--workers", "2"], capture_output=True, text=True, env=env, timeout=180)
    assert local.returncode == 0, local.stderr

    sched_file = tmp_path / "scheduler.json"
    logs = open(tmp_path / "cluster.log", "w")
    procs = []
    try:
        procs.append(
            subprocess.Popen(
                _in(NS_A, sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", A_ADDR, "--port", "0")
                + ["--no-dashboard", "--scheduler-file", str(sched_file)],
                stdout=logs,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=tmp_path,
            )
        )
        t = time.monotonic()
        while not sched_file.exists():
            assert time.monotonic() - t < 40, "the scheduler did not start: " + (tmp_path / "cluster.log").read_text()
            assert procs[0].poll() is None, (tmp_path / "cluster.log").read_text()
            time.sleep(0.1)
        time.sleep(0.2)  # the file is complete once written; give the writer its close
        address = json.loads(sched_file.read_text())["address"]
        assert address.startswith(f"tcp://{A_ADDR}:")
        for ns, host in ((NS_A, A_ADDR), (NS_B, B_ADDR)):
            procs.append(
                subprocess.Popen(
                    _in(ns, sys.executable, "-m", "distributed.cli.dask_worker", address, "--host", host)
                    + ["--nthreads", "1", "--no-nanny", "--no-dashboard", "--local-directory", str(tmp_path)],
                    stdout=logs,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=tmp_path,
                )
            )
        wait = "from distributed import Client; import sys; Client(sys.argv[1], timeout=30).wait_for_workers(2, timeout=40)"
        r = subprocess.run(
            _in(NS_A, sys.executable, "-c", wait, address), capture_output=True, text=True, env=env, timeout=60
        )
        assert r.returncode == 0, r.stderr + (tmp_path / "cluster.log").read_text()

        remote = subprocess.run(
            _in(NS_A, *cli, "--scheduler", address), capture_output=True, text=True, env=env, timeout=180
        )
        assert remote.returncode == 0, remote.stderr
        counts = subprocess.run(
            _in(NS_A, sys.executable, "-c", _COUNT, address), capture_output=True, text=True, env=env, timeout=60
        )
        assert counts.returncode == 0, counts.stderr
        per_worker = json.loads(counts.stdout)
    finally:
        for p in procs[::-1]:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        logs.close()

    got, want = json.loads(remote.stdout), json.loads(local.stdout)
    assert got == want
    assert got["events"] == _true_events(paths)
    assert got["processes"] == 6
    # each namespace's worker (keyed by its own address) ran summary work
    assert {w.split("//")[1].split(":")[0] for w in per_worker} == {A_ADDR, B_ADDR}
    for done in per_worker.values():
        assert done.get("_summary_chunk_task", 0) >= 1, per_worker
    assert sum(d.get("_summary_chunk_task", 0) for d in per_worker.values()) >= 2
    # the summary itself (index, plan, chunks, fold) ran as one task on a worker (cli._summary_on_worker)
    assert sum(d.get("_summary_on_worker", 0) for d in per_worker.values()) == 1, per_worker
    # the 4 big files, indexed there: one task per worker thread (dfanalyzer.analyzer.plan_index_groups)
    assert sum(d.get("_index_files_task", 0) for d in per_worker.values()) == 2
