"""Integration test: a one-node Slurm on this host (slurmctld + slurmd + munged), Dask workers
submitted by dask-jobqueue's SLURMCluster, through the detached service of
``python -m dfanalyzer.slurm start`` (scripts/start_dask_slurm.sh) and through
``setup_dask_cluster(config=...)``, and the same analysis run there and on a LocalCluster must
give identical results.

Needs root and Debian's slurm-wlm + munge (scripts/slurm_local_setup.sh installs them if missing).
"""

import collections
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dfanalyzer import DFAnalyzer
from dfanalyzer.cluster import setup_dask_cluster

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
FIXTURES = ROOT / "tests" / "data" / "dftracer-v1.0.5-cm1"
PARTITION = "debug"


def _make_file_stats():
    # A local function: pickle cannot ship it by reference, so Dask sends it by value
    # (cloudpickle) and the Slurm workers never need to import this test module.
    def file_stats(path):
        """Per trace file: lines, ph "X" events (not the tracer's own), their total dur (µs), per cat."""
        # Own reader on purpose: runs on Slurm workers (no tests/ there) over upstream DFTracer fixtures.
        stats = collections.Counter()
        with gzip.open(path, "rt") as fh:
            for line in fh:
                stats["lines"] += 1
                text = line.strip().rstrip(",")
                if not text.startswith("{"):
                    continue
                event = json.loads(text)
                if event.get("ph") == "X" and event.get("cat") != "dftracer":
                    stats["events"] += 1
                    stats["dur"] += int(event["dur"])
                    stats["cat:" + event["cat"]] += 1
        stats["pid:" + str(os.getpid())] = 0  # where it ran (dropped before comparing)
        return dict(stats)

    return file_stats


_file_stats = _make_file_stats()


def _fixture_stats(client):
    files = sorted(str(p) for p in FIXTURES.glob("*.pfw.gz"))
    per_file = client.gather(client.map(_file_stats, files, pure=False))
    total = collections.Counter()
    for stats in per_file:
        total.update({k: v for k, v in stats.items() if not k.startswith("pid:")})
    total["files"] = len(per_file)
    return dict(total)


def _squeue_ids():
    out = subprocess.run(["squeue", "-h", "-o", "%i"], check=True, capture_output=True, text=True).stdout
    return set(out.split())


def _wait_jobs_gone(ids, timeout=120):
    deadline = time.monotonic() + timeout
    while _squeue_ids() & set(ids):
        assert time.monotonic() < deadline, f"jobs {sorted(_squeue_ids() & set(ids))} still queued"
        time.sleep(1)


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture(scope="module")
def slurm_node():
    """Slurm up on this host; returns the node name."""
    subprocess.run([str(SCRIPTS / "slurm_local_setup.sh")], check=True, timeout=900)
    out = subprocess.run(
        ["sinfo", "-h", "-p", PARTITION, "-o", "%n %T"], check=True, capture_output=True, text=True
    ).stdout.split()
    assert out[1] in ("idle", "mixed", "allocated"), out
    return out[0]


@pytest.fixture(scope="module")
def local_reference():
    with setup_dask_cluster(n_workers=2) as client:
        return _fixture_stats(client)


def test_local_reference_counts(local_reference):
    # 283,945 application events in the fixture set (48 files), of which POSIX 231,337 and STDIO 52,608.
    assert local_reference["files"] == 48
    assert local_reference["events"] == 283945
    assert local_reference["cat:POSIX"] == 231337 and local_reference["cat:STDIO"] == 52608


def _summary_cli(*extra, index_dir):
    """``dfanalyzer summary FIXTURES --json`` as a dict."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dfanalyzer.cli",
            "summary",
            str(FIXTURES / "*.pfw.gz"),
            "--json",
            "--index-dir",
            str(index_dir),
            *extra,
        ],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def local_summary(tmp_path_factory):
    """The summary of the CLI in 2 threads (its default: no cluster): the reference for the Slurm runs."""
    result = _summary_cli("--workers", "2", index_dir=tmp_path_factory.mktemp("index-local"))
    assert result["events"] == 283945
    return result


def _env():
    # Subprocesses and Slurm jobs inherit this environment (sbatch --export=ALL), so they import
    # the same dfanalyzer as this test (installed package, or PYTHONPATH in a development tree).
    env = dict(os.environ)
    env["DFA_PYTHON"] = sys.executable
    return env


class TestScripts:
    """scripts/start_dask_slurm.sh -> SLURMCluster service + sbatch'ed dask workers -> stop_dask_slurm.sh."""

    @pytest.fixture(scope="class")
    def dask_slurm(self, slurm_node, tmp_path_factory):
        work = tmp_path_factory.mktemp("dask-slurm")
        sched = work / "scheduler.json"
        state = work / "scheduler.state"
        proc = subprocess.run(
            [
                str(SCRIPTS / "start_dask_slurm.sh"),
                "-f",
                str(sched),
                "-n",
                "2",
                "-c",
                "1",
                "-m",
                "1GB",
                "-p",
                PARTITION,
                "-t",
                "00:20:00",
                "--timeout",
                "300",
            ],
            env=_env(),
            capture_output=True,
            text=True,
            timeout=400,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        info = dict(line.split("=", 1) for line in state.read_text().splitlines())
        yield {"scheduler_file": sched, "state": state, "work": work, "info": info}
        if state.exists():  # the last test normally stops it; clean up after a failure
            subprocess.run([str(SCRIPTS / "stop_dask_slurm.sh"), "-s", str(state)], timeout=120)

    def test_workers_run_in_the_submitted_jobs(self, dask_slurm):
        jobs = dask_slurm["info"]["JOB_IDS"].split()
        assert len(jobs) == 2
        assert set(jobs) <= _squeue_ids()
        with setup_dask_cluster(scheduler_file=str(dask_slurm["scheduler_file"])) as client:
            where = client.run(lambda: os.environ.get("SLURM_JOB_ID"))
        assert sorted(where.values()) == sorted(jobs)
        script = Path(dask_slurm["info"]["JOB_SCRIPT"]).read_text()
        assert Path(dask_slurm["info"]["JOB_SCRIPT"]).parent.parent == dask_slurm["work"]
        address = json.loads(dask_slurm["scheduler_file"].read_text())["address"]
        assert f"#SBATCH -p {PARTITION}" in script.splitlines() and "#SBATCH -t 00:20:00" in script.splitlines()
        assert f"distributed.cli.dask_worker {address} " in script and "--nthreads 1 " in script

    def test_plain_dask_computation_matches_local(self, dask_slurm, local_reference):
        with setup_dask_cluster(scheduler_file=str(dask_slurm["scheduler_file"])) as client:
            assert len(client.scheduler_info(n_workers=-1)["workers"]) == 2
            assert _fixture_stats(client) == local_reference

    def test_summary_cli_on_slurm_matches_local(self, dask_slurm, local_summary, tmp_path):
        sched = str(dask_slurm["scheduler_file"])

        def tasks_done():
            with setup_dask_cluster(scheduler_file=sched) as client:
                return sum(client.run(lambda dask_worker: dask_worker.state.transition_counter).values())

        before = tasks_done()
        on_slurm = _summary_cli("--scheduler-file", sched, index_dir=tmp_path)
        assert tasks_done() > before  # the summary's tasks ran on the Slurm workers
        assert on_slurm == local_summary

    def test_stop_cancels_jobs_and_scheduler(self, dask_slurm):
        jobs = dask_slurm["info"]["JOB_IDS"].split()
        pid = int(dask_slurm["info"]["SCHEDULER_PID"])
        proc = subprocess.run(
            [str(SCRIPTS / "stop_dask_slurm.sh"), "-f", str(dask_slurm["scheduler_file"])],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert not (_squeue_ids() & set(jobs))
        assert not _alive(pid)
        assert not dask_slurm["state"].exists() and not dask_slurm["scheduler_file"].exists()


def test_start_script_fails_cleanly_on_bad_partition(slurm_node, tmp_path):
    sched = tmp_path / "s.json"
    proc = subprocess.run(
        [
            str(SCRIPTS / "start_dask_slurm.sh"),
            "-f",
            str(sched),
            "-n",
            "1",
            "-m",
            "1GB",
            "-p",
            "no_such_partition",
            "--timeout",
            "60",
        ],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "sbatch failed" in proc.stderr and "invalid partition" in proc.stderr.lower()
    assert not sched.exists() and not (tmp_path / "s.state").exists()
    (log,) = tmp_path.glob("dask-slurm.*/dask-scheduler.log")  # the run's private directory
    assert "sbatch failed" in log.read_text()
    assert not _squeue_ids()  # nothing was submitted


def test_start_script_never_writes_through_planted_links(tmp_path):
    """Links planted at the names the service writes (state temp file, scheduler log, job script)
    are left alone: files are created with mktemp in a private directory. A stand-in sbatch that
    rejects the job makes the service stop right after writing them (no Slurm needed)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text("#!/bin/sh\necho 'sbatch: error: invalid partition specified' >&2\nexit 1\n")
    (bin_dir / "sbatch").chmod(0o755)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    work = tmp_path / "work"
    work.mkdir()
    for name in ("s.state.tmp", "dask-scheduler.log", "dask-worker.sbatch"):
        os.symlink(victim, work / name)
    os.symlink(tmp_path / "absent", work / "s.state.tmp2")  # a dangling one too
    env = _env()
    env["PATH"] = f"{bin_dir}:{os.path.dirname(sys.executable)}:{env['PATH']}"
    proc = subprocess.run(
        [str(SCRIPTS / "start_dask_slurm.sh"), "-f", str(work / "s.json"), "-m", "1GB", "--timeout", "30"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and "sbatch failed" in proc.stderr, proc.stderr
    assert victim.read_text() == "precious\n" and not (tmp_path / "absent").exists()
    assert "without TLS" in proc.stderr
    assert all((work / n).is_symlink() for n in ("s.state.tmp", "dask-scheduler.log", "dask-worker.sbatch"))
    (run,) = work.glob("dask-slurm.*")
    assert run.stat().st_mode & 0o777 == 0o700
    assert "sbatch failed: sbatch: error: invalid partition" in (run / "dask-scheduler.log").read_text()
    assert "distributed.cli.dask_worker tcp://" in (run / "dask-worker.sbatch").read_text()
    assert not (work / "s.state").exists() and not (work / "s.json").exists()


def test_script_option_errors(tmp_path):
    for args, msg in (
        (["-n", "0", "-m", "1GB"], "--workers must be a positive integer, got 0"),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["-c"], "argument -c/--cores: expected one argument"),
        ([], "give the memory per job: -m/--memory"),
        (["-m", "1GB", "-t", "5400x"], "key 'walltime' must be a Slurm time string"),
        (["-m", "1GB", "--tls-cert", "c.pem"], "--tls-ca-file, --tls-cert and --tls-key go together"),
    ):
        proc = subprocess.run(
            [str(SCRIPTS / "start_dask_slurm.sh"), "-f", str(tmp_path / "s.json"), *args],
            env=_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2 and msg in proc.stderr, (args, proc.stderr)
    assert os.listdir(tmp_path) == []  # a usage error writes nothing
    proc = subprocess.run(
        [str(SCRIPTS / "stop_dask_slurm.sh"), "-f", str(tmp_path / "none.json")],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1 and "no state file" in proc.stderr


class TestJobqueue:
    """setup_dask_cluster(config=YAML with cluster: slurm) -> dask_jobqueue.SLURMCluster."""

    def test_slurmcluster_from_yaml_matches_local(self, slurm_node, local_reference, local_summary, tmp_path):
        cfg = tmp_path / "slurm.yaml"
        cfg.write_text(
            f"cluster: slurm\nqueue: {PARTITION}\ncores: 1\nmemory: 2GB\nwalltime: '00:20:00'\n"
            f"jobs: 2\nwait_timeout: 300\nlog_directory: {tmp_path / 'logs'}\n"
        )
        client = setup_dask_cluster(config=str(cfg))
        try:
            assert f"#SBATCH -p {PARTITION}" in client.cluster.job_script().splitlines()
            job_ids = [job.job_id for job in client.cluster.workers.values()]
            assert len(job_ids) == 2 and set(job_ids) <= _squeue_ids()
            where = client.run(lambda: os.environ.get("SLURM_JOB_ID"))
            assert sorted(where.values()) == sorted(job_ids)
            assert _fixture_stats(client) == local_reference
            analyzer = DFAnalyzer(str(FIXTURES / "*.pfw.gz"), index_dir=tmp_path / "index", client=client)
            summary = json.loads(json.dumps(analyzer.summary(show=False).to_dict()))
            assert summary == local_summary
        finally:
            client.close()
        _wait_jobs_gone(job_ids)  # closing the client closed the cluster and cancelled its jobs

    def test_workers_that_never_start_time_out(self, slurm_node, tmp_path):
        cfg = {
            "cluster": "slurm",
            "queue": "no_such_partition",
            "cores": 1,
            "memory": "1GB",
            "jobs": 1,
            "wait_timeout": 10,
            "log_directory": str(tmp_path / "logs"),
        }
        with pytest.raises(TimeoutError, match=r"0 of 1 Slurm workers.*1 job\(s\) could not be submitted"):
            setup_dask_cluster(config=cfg)


def test_start_with_tls_puts_tls_on_scheduler_and_workers(tmp_path):
    """--tls-ca-file/--tls-cert/--tls-key: the scheduler listens on tls://, the job script starts
    the workers with the same files, no plain-TCP warning. A stand-in sbatch rejects the job (no
    Slurm needed), so the service stops after writing the job script."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
        ],
        check=True,
        capture_output=True,
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text("#!/bin/sh\necho 'sbatch: error: invalid partition specified' >&2\nexit 1\n")
    (bin_dir / "sbatch").chmod(0o755)
    env = _env()
    env["PATH"] = f"{bin_dir}:{os.path.dirname(sys.executable)}:{env['PATH']}"
    work = tmp_path / "work"
    proc = subprocess.run(
        [
            str(SCRIPTS / "start_dask_slurm.sh"),
            "-f",
            str(work / "s.json"),
            "-m",
            "1GB",
            "--tls-ca-file",
            str(cert),
            "--tls-cert",
            str(cert),
            "--tls-key",
            str(key),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and "sbatch failed" in proc.stderr, proc.stderr
    assert ", address tls://" in proc.stderr and "without TLS" not in proc.stderr
    (script,) = work.glob("dask-slurm.*/dask-worker.sbatch")
    text = script.read_text()
    assert f"--tls-ca-file {cert} --tls-cert {cert} --tls-key {key}" in text and " tls://" in text
    assert not (work / "s.state").exists() and not (work / "s.json").exists()
