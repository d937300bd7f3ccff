"""Unit tests for dfanalyzer.cluster.setup_dask_cluster and the cluster config (no Slurm needed)."""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from distributed import LocalCluster

from dfanalyzer.cluster import (
    load_cluster_config,
    make_slurm_cluster,
    setup_dask_cluster,
    usable_cores,
)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "slurm.yaml"


def _listen_hosts(port):
    """IPv4 addresses with a LISTEN socket on ``port`` (from /proc/net/tcp)."""
    hosts = set()
    with open("/proc/net/tcp") as fh:
        next(fh)
        for line in fh:
            local, state = line.split()[1], line.split()[3]
            hexip, hexport = local.split(":")
            if state == "0A" and int(hexport, 16) == port:
                b = bytes.fromhex(hexip)[::-1]
                hosts.add(".".join(str(x) for x in b))
    return hosts


def test_default_is_local_cluster_on_localhost():
    client = setup_dask_cluster(n_workers=1)
    cluster = client.cluster
    try:
        assert isinstance(cluster, LocalCluster)
        assert client.scheduler.address.startswith("tcp://127.0.0.1:")
        workers = client.scheduler_info()["workers"]
        assert len(workers) == 1
        assert [w["nthreads"] for w in workers.values()] == [1]
        assert all(addr.startswith("tcp://127.0.0.1:") for addr in workers)
        port = int(client.dashboard_link.split(":")[2].split("/")[0])
        assert _listen_hosts(port) == {"127.0.0.1"}
        assert client.submit(pow, 2, 10).result() == 1024
    finally:
        client.close()
    assert cluster.status.name == "closed"  # the client owns the cluster it started


def test_default_workers_is_usable_cores():
    with setup_dask_cluster(processes=False) as client:
        workers = client.scheduler_info()["workers"]
        assert len(workers) == usable_cores() == len(os.sched_getaffinity(0))
        assert {w["nthreads"] for w in workers.values()} == {1}


def test_local_config_and_explicit_n_workers():
    cfg = {"cluster": "local", "n_workers": 2, "threads_per_worker": 2, "processes": False}
    with setup_dask_cluster(config=cfg) as client:
        nthreads = [w["nthreads"] for w in client.scheduler_info()["workers"].values()]
        assert nthreads == [2, 2]
    with setup_dask_cluster(config=cfg, n_workers=1) as client:  # explicit argument wins
        assert len(client.scheduler_info()["workers"]) == 1


def test_connect_by_address_leaves_cluster_running():
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        client = setup_dask_cluster(scheduler_address=cluster.scheduler_address)
        assert client.scheduler.address == cluster.scheduler_address
        assert client.submit(sum, [1, 2, 3]).result() == 6
        client.close()
        assert cluster.status.name == "running"


def test_connect_by_scheduler_file(tmp_path):
    dask = shutil.which("dask")
    assert dask, "the dask CLI (distributed) must be installed"
    sched_file = tmp_path / "scheduler.json"
    procs = [
        subprocess.Popen(
            [
                dask,
                "scheduler",
                "--scheduler-file",
                str(sched_file),
                "--port",
                "0",
                "--dashboard-address",
                "127.0.0.1:0",
                "--host",
                "127.0.0.1",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        for _ in range(600):
            if sched_file.exists() and sched_file.stat().st_size:
                break
            time.sleep(0.1)
        address = json.loads(sched_file.read_text())["address"]
        procs.append(
            subprocess.Popen(
                [
                    dask,
                    "worker",
                    "--scheduler-file",
                    str(sched_file),
                    "--nthreads",
                    "1",
                    "--no-nanny",
                    "--host",
                    "127.0.0.1",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        with setup_dask_cluster(scheduler_file=str(sched_file)) as client:
            assert client.scheduler.address == address
            client.wait_for_workers(1, timeout=60)
            assert client.submit(pow, 3, 4).result() == 81
        assert procs[0].poll() is None  # still running after the client closed
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(timeout=30)


def test_argument_conflicts():
    with pytest.raises(ValueError, match="not both"):
        setup_dask_cluster(scheduler_address="tcp://127.0.0.1:1", scheduler_file="x.json")
    with pytest.raises(ValueError, match="config"):
        setup_dask_cluster(scheduler_address="tcp://127.0.0.1:1", config={"cluster": "local"})
    with pytest.raises(ValueError, match="n_workers"):
        setup_dask_cluster(n_workers=-1)
    with pytest.raises(ValueError, match="n_workers"):
        setup_dask_cluster(n_workers=0)
    with pytest.raises(ValueError, match="n_workers"):
        setup_dask_cluster(n_workers=2.5)
    with pytest.raises(FileNotFoundError, match="nope.json"):
        setup_dask_cluster(scheduler_file="/nonexistent/nope.json")


@pytest.mark.parametrize(
    "cfg, key",
    [
        ({"cluster": "pbs"}, "'cluster'"),
        ({"cluster": "local", "cores": 4}, "'cores'"),
        ({"cluster": "local", "n_workers": 0}, "'n_workers'"),
        ({"cluster": "local", "processes": "yes"}, "'processes'"),
        ({"cluster": "local", "memory_limit": "lots"}, "'memory_limit'"),
        ({"cluster": "slurm", "memory": "4GB"}, "'cores'"),
        ({"cluster": "slurm", "cores": 4}, "'memory'"),
        ({"cluster": "slurm", "cores": 0, "memory": "4GB"}, "'cores'"),
        ({"cluster": "slurm", "cores": "4", "memory": "4GB"}, "'cores'"),
        ({"cluster": "slurm", "cores": 4, "memory": "4 bananas"}, "'memory'"),
        ({"cluster": "slurm", "cores": 4, "memory": "4GB", "walltime": 5400}, "'walltime'"),
        ({"cluster": "slurm", "cores": 4, "memory": "4GB", "walltime": "1h"}, "'walltime'"),
        ({"cluster": "slurm", "cores": 4, "memory": "4GB", "processes": 8}, "'processes'"),
        ({"cluster": "slurm", "cores": 4, "memory": "4GB", "queue": 3}, "'queue'"),
        (
            {"cluster": "slurm", "cores": 4, "memory": "4GB", "job_extra_directives": "--exclusive"},
            "'job_extra_directives'",
        ),
        ({"cluster": "slurm", "cores": 4, "memory": "4GB", "jobs": 2, "n_workers": 4}, "'n_workers'"),
        ({"cluster": "slurm", "cores": 4, "memory": "4GB", "jobs": -1}, "'jobs'"),
        ({"cluster": "slurm", "cores": 4, "memory": "4GB", "wait_timeout": 0}, "'wait_timeout'"),
        ({"cluster": "slurm", "cores": 4, "memory": "4GB", "partition": "debug"}, "'partition'"),
        ({"cluster": "slurm", "cores": 4, "memory": "4GB", "scheduler_options": [1]}, "'scheduler_options'"),
    ],
)
def test_bad_config_names_the_key(cfg, key):
    with pytest.raises(ValueError) as err:
        load_cluster_config(cfg)
    assert key in str(err.value)
    with pytest.raises(ValueError) as err:  # the same error through the public entry point
        setup_dask_cluster(config=cfg)
    assert key in str(err.value)


def test_bad_yaml_files(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster: slurm\ncores: [4\n")
    with pytest.raises(ValueError, match="invalid YAML"):
        load_cluster_config(bad)
    lst = tmp_path / "list.yaml"
    lst.write_text("- cluster\n- slurm\n")
    with pytest.raises(ValueError, match="mapping"):
        load_cluster_config(str(lst))
    unquoted = tmp_path / "walltime.yaml"
    unquoted.write_text("cluster: slurm\ncores: 2\nmemory: 4GB\nwalltime: 1:30:00\n")
    with pytest.raises(ValueError, match="'walltime'.*5400.*quote"):  # YAML 1.1 sexagesimal
        load_cluster_config(unquoted)
    with pytest.raises(FileNotFoundError):
        load_cluster_config(tmp_path / "missing.yaml")
    with pytest.raises(ValueError, match="YAML file path or a mapping"):
        load_cluster_config(42)


def test_empty_yaml_is_local_default(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_cluster_config(empty) == {"cluster": "local"}


def test_slurm_job_script_from_yaml(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # log_directory is created relative to the working directory
    yaml_file = tmp_path / "slurm.yaml"
    yaml_file.write_text(
        "cluster: slurm\n"
        "queue: pdebug\n"
        "account: dftrace\n"
        "cores: 8\n"
        "memory: 32GB\n"
        "processes: 4\n"
        "walltime: '00:45:00'\n"
        "job_extra_directives: ['--exclusive', '--constraint=haswell']\n"
        "job_script_prologue: ['module load python']\n"
        "jobs: 3\n"
    )
    cluster = make_slurm_cluster(yaml_file)
    try:
        script = cluster.job_script()
        lines = script.splitlines()
        for expected in (
            "#SBATCH -p pdebug",
            "#SBATCH -A dftrace",
            "#SBATCH -n 1",
            "#SBATCH --cpus-per-task=8",
            "#SBATCH --mem=30G",
            "#SBATCH -t 00:45:00",
            "#SBATCH --exclusive",
            "#SBATCH --constraint=haswell",
            "module load python",
        ):
            assert expected in lines, expected
        worker = [ln for ln in lines if "distributed.cli.dask_worker" in ln]
        assert len(worker) == 1
        assert "--nthreads 2" in worker[0] and "--nworkers 4" in worker[0]
        assert "--memory-limit 7.45GiB" in worker[0]  # 32 GB / 4 workers
        assert cluster.scheduler_address in worker[0]
        assert len(cluster.workers) == 0  # nothing submitted
    finally:
        cluster.close()


def test_example_config_parses(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_cluster_config(EXAMPLE)
    assert cfg["cluster"] == "slurm" and cfg["jobs"] == 4 and cfg["walltime"] == "01:30:00"
    cluster = make_slurm_cluster(EXAMPLE)
    try:
        lines = cluster.job_script().splitlines()
        assert "#SBATCH -p pbatch" in lines and "#SBATCH --cpus-per-task=4" in lines
        assert "#SBATCH --mem=15G" in lines and "#SBATCH -t 01:30:00" in lines
    finally:
        cluster.close()


def test_make_slurm_cluster_rejects_local():
    with pytest.raises(ValueError, match="'slurm'"):
        make_slurm_cluster({"cluster": "local"})
