"""A detached Dask-on-Slurm service: ``python -m dfanalyzer.slurm start|stop`` (docs/cluster.md).

``start`` runs a ``dask_jobqueue.SLURMCluster`` (built by :func:`dfanalyzer.cluster.make_slurm_cluster`
from a ``cluster: slurm`` config plus command-line overrides) in a background process of its own
session, so several analyses can share the workers through the scheduler file
(``dfanalyzer summary ... --scheduler-file F``, ``setup_dask_cluster(scheduler_file=F)``). It
returns once every worker is connected and records the service's pid, the job ids and the log
paths in a state file; ``stop`` ends that process, which closes the cluster (``scancel`` of its
jobs), and waits until the jobs have left ``squeue``. ``scripts/start_dask_slurm.sh`` and
``scripts/stop_dask_slurm.sh`` are thin wrappers over these two commands.

Exit status: 0 on success, 1 on failure (a failed start leaves nothing running: no job, no
process, no scheduler or state file), 2 for usage errors.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import List, Optional

PROG = "python -m dfanalyzer.slurm"
_STATUS_FD_ENV = "DFA_SLURM_STATUS_FD"
_TLS_WARNING = (
    "warning: the scheduler listens on all addresses in plain TCP without TLS; anyone who can reach "
    "{address} can run code as you (use --tls-ca-file/--tls-cert/--tls-key, docs/cluster.md)"
)


def _say(msg: str) -> None:
    print("dfanalyzer.slurm: " + msg, file=sys.stderr, flush=True)


class _Fail(Exception):
    """A start/stop failure: printed as one message, exit status 1."""


# ------------------------------------------------------------------------------------------------
# command line


def _parser() -> argparse.ArgumentParser:
    env = os.environ.get
    ap = argparse.ArgumentParser(
        prog=PROG, description="Dask workers on Slurm (dask-jobqueue), shared through a scheduler file."
    )
    sub = ap.add_subparsers(dest="command", required=True)
    st = sub.add_parser("start", help="start the scheduler service and submit the worker jobs")
    st.add_argument("--config", help="YAML with cluster: slurm keys (docs/cluster.md); the options below override it")
    st.add_argument(
        "-f",
        "--scheduler-file",
        default=env("DFA_SCHEDULER_FILE", "dask-scheduler.json"),
        help="scheduler file, on a file system the nodes share [DFA_SCHEDULER_FILE] (./dask-scheduler.json)",
    )
    st.add_argument(
        "-s",
        "--state-file",
        default=env("DFA_SLURM_STATE"),
        help="state file [DFA_SLURM_STATE] (the scheduler file with .json replaced by .state)",
    )
    st.add_argument(
        "-n",
        "--workers",
        type=int,
        default=_env_int("DFA_SLURM_WORKERS"),
        help="worker jobs to submit, one worker each [DFA_SLURM_WORKERS] (config jobs, else 1)",
    )
    st.add_argument(
        "-c",
        "--cores",
        type=int,
        default=_env_int("DFA_SLURM_CORES"),
        help="cores per job = worker threads [DFA_SLURM_CORES] (config cores, else 1)",
    )
    st.add_argument(
        "-m",
        "--memory",
        default=env("DFA_SLURM_MEMORY"),
        help="memory per job, e.g. 8GB: worker memory limit and sbatch --mem [DFA_SLURM_MEMORY] (required unless in --config)",
    )
    st.add_argument(
        "--mem",
        default=env("DFA_SLURM_MEM"),
        help="sbatch --mem in Slurm syntax, overriding --memory's [DFA_SLURM_MEM]",
    )
    st.add_argument("-p", "--partition", default=env("DFA_SLURM_PARTITION"), help="sbatch -p [DFA_SLURM_PARTITION]")
    st.add_argument("-A", "--account", default=env("DFA_SLURM_ACCOUNT"), help="sbatch -A [DFA_SLURM_ACCOUNT]")
    st.add_argument(
        "-t", "--time", default=env("DFA_SLURM_TIME"), help="walltime of each job [DFA_SLURM_TIME] (00:30:00)"
    )
    st.add_argument(
        "-l",
        "--log-dir",
        default=env("DFA_SLURM_LOG_DIR"),
        help="where the run's private directory of logs is made [DFA_SLURM_LOG_DIR] (beside the scheduler file)",
    )
    st.add_argument(
        "--port",
        type=int,
        default=_env_int("DFA_SCHEDULER_PORT", 0),
        help="scheduler port [DFA_SCHEDULER_PORT] (0: a free one)",
    )
    st.add_argument(
        "--dashboard", default=env("DFA_DASHBOARD"), help="dashboard host:port [DFA_DASHBOARD] (127.0.0.1:0)"
    )
    st.add_argument("--interface", help="network interface of scheduler and workers (ib0, hsn0)")
    st.add_argument(
        "--timeout",
        type=int,
        default=_env_int("DFA_SLURM_TIMEOUT"),
        help="seconds to wait for every worker [DFA_SLURM_TIMEOUT] (config wait_timeout, else 600)",
    )
    st.add_argument(
        "--sbatch-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra #SBATCH directive, repeatable, e.g. --sbatch-arg=--qos=debug",
    )
    st.add_argument("--python", help="Python that runs the workers on the nodes (default: this one)")
    st.add_argument("--tls-ca-file", default=env("DFA_TLS_CA_FILE"), help="TLS CA file [DFA_TLS_CA_FILE]")
    st.add_argument("--tls-cert", default=env("DFA_TLS_CERT"), help="TLS certificate [DFA_TLS_CERT]")
    st.add_argument("--tls-key", default=env("DFA_TLS_KEY"), help="TLS private key [DFA_TLS_KEY]")
    sp = sub.add_parser("stop", help="stop what start started (its jobs and its scheduler)")
    sp.add_argument("-f", "--scheduler-file", default=env("DFA_SCHEDULER_FILE", "dask-scheduler.json"))
    sp.add_argument("-s", "--state-file", default=env("DFA_SLURM_STATE"))
    sp.add_argument(
        "--timeout",
        type=int,
        default=_env_int("DFA_SLURM_TIMEOUT", 60),
        help="seconds to wait for the service and the jobs to end (60)",
    )
    sv = sub.add_parser("serve")  # internal: the background process that start runs
    sv.add_argument("spec")
    return ap


def _env_int(name: str, default: Optional[int] = None) -> Optional[int]:
    v = os.environ.get(name)
    if v is None or v == "":
        return default
    try:
        return int(v)
    except ValueError:
        raise SystemExit(f"{PROG}: {name} must be an integer, got {v!r}") from None


def _state_path(scheduler_file: str, state_file: Optional[str]) -> str:
    if state_file:
        return os.path.abspath(state_file)
    base = scheduler_file[:-5] if scheduler_file.endswith(".json") else scheduler_file
    return base + ".state"


def _read_state(path: str) -> dict:
    with open(path, encoding="utf-8") as fh:
        return dict(line.rstrip("\n").split("=", 1) for line in fh if "=" in line)


def _write_state(path: str, state: dict) -> None:
    """mktemp beside ``path`` and rename: a link planted at the name is replaced, never written through."""
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", dir=os.path.dirname(path))
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.writelines(f"{k}={v}\n" for k, v in state.items())
    os.replace(tmp, path)


def _is_service(pid: int) -> bool:
    """True if ``pid`` is alive (not a zombie) and still runs ``dfanalyzer.slurm serve`` (pids get reused)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
    except (OSError, IndexError):
        return False
    return b"dfanalyzer.slurm" in argv and b"serve" in argv


def _squeue(job_ids: List[str]) -> List[str]:
    if not job_ids:
        return []
    out = subprocess.run(["squeue", "-h", "-j", ",".join(job_ids), "-o", "%i"], capture_output=True, text=True)
    return out.stdout.split()


# ------------------------------------------------------------------------------------------------
# start


def _config(a: argparse.Namespace) -> dict:
    """The cluster: slurm config of ``start``: --config, then the options. Raises ValueError."""
    from .cluster import load_cluster_config

    cfg = load_cluster_config(a.config) if a.config else {"cluster": "slurm"}
    if cfg["cluster"] != "slurm":
        raise ValueError(f"{a.config}: key 'cluster' must be 'slurm' here, got {cfg['cluster']!r}")
    for key, value in (
        ("cores", a.cores),
        ("memory", a.memory),
        ("job_mem", a.mem),
        ("queue", a.partition),
        ("account", a.account),
        ("walltime", a.time),
        ("wait_timeout", a.timeout),
        ("dashboard_address", a.dashboard),
        ("interface", a.interface),
        ("python", a.python),
    ):
        if value is not None:
            cfg[key] = value
    if a.workers is not None:
        if a.workers < 1:
            raise ValueError(f"--workers must be a positive integer, got {a.workers}")
        cfg.pop("n_workers", None)
        cfg["jobs"] = a.workers
    if cfg.get("n_workers") is None and cfg.get("jobs") is None:
        cfg["jobs"] = 1
    cfg.setdefault("cores", 1)
    cfg.setdefault("walltime", "00:30:00")
    if cfg.get("memory") is None:
        raise ValueError("give the memory per job: -m/--memory (e.g. 8GB) or memory: in --config")
    if a.sbatch_arg:
        cfg["job_extra_directives"] = list(cfg.get("job_extra_directives") or []) + a.sbatch_arg
    if a.port is not None:
        if a.port < 0:
            raise ValueError(f"--port must be >= 0, got {a.port}")
        cfg["scheduler_options"] = {**(cfg.get("scheduler_options") or {}), "port": a.port}
    if a.timeout is not None and a.timeout < 1:
        raise ValueError(f"--timeout must be a positive number of seconds, got {a.timeout}")
    return load_cluster_config(cfg)  # validate the result too


def _tls(a: argparse.Namespace) -> Optional[dict]:
    given = [a.tls_ca_file, a.tls_cert, a.tls_key]
    if not any(given):
        return None
    if not all(given):
        raise ValueError("--tls-ca-file, --tls-cert and --tls-key go together")
    for f in given:
        if not os.access(f, os.R_OK):
            raise ValueError(f"cannot read TLS file {f!r}")
    return {
        "ca_file": os.path.abspath(a.tls_ca_file),
        "cert": os.path.abspath(a.tls_cert),
        "key": os.path.abspath(a.tls_key),
    }


def _start(a: argparse.Namespace) -> int:
    try:
        cfg = _config(a)
        tls = _tls(a)
    except (OSError, ValueError) as exc:
        _say(str(exc))
        return 2 if isinstance(exc, ValueError) else 1
    sched_file = os.path.abspath(a.scheduler_file)
    state_path = _state_path(sched_file, a.state_file)
    if state_path == sched_file:
        state_path += ".state"
    os.makedirs(os.path.dirname(sched_file), exist_ok=True)
    if os.path.exists(state_path):
        old = _read_state(state_path).get("SCHEDULER_PID", "")
        if old.isdigit() and _is_service(int(old)):
            _say(
                f"a service from {state_path} is still running (pid {old}); stop it first: {PROG} stop -s {state_path}"
            )
            return 1
        os.unlink(state_path)
    if os.path.lexists(sched_file):
        os.unlink(sched_file)
    log_dir = os.path.abspath(a.log_dir or os.path.dirname(sched_file))
    os.makedirs(log_dir, exist_ok=True)
    # A fresh private directory (mkdtemp: O_EXCL, mode 0700): fixed names inside cannot be planted.
    run_dir = tempfile.mkdtemp(prefix="dask-slurm.", dir=log_dir)
    cfg.setdefault("log_directory", run_dir)
    spec = {"config": cfg, "tls": tls, "scheduler_file": sched_file, "state_file": state_path, "run_dir": run_dir}
    spec_path = os.path.join(run_dir, "service.json")
    with open(spec_path, "x", encoding="utf-8") as fh:
        json.dump(spec, fh)
    log_path = os.path.join(run_dir, "dask-scheduler.log")
    rfd, wfd = os.pipe()
    env = dict(os.environ, **{_STATUS_FD_ENV: str(wfd)})
    with open(log_path, "x", encoding="utf-8") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dfanalyzer.slurm", "serve", spec_path],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            pass_fds=(wfd,),
            start_new_session=True,
        )
    os.close(wfd)
    deadline = time.monotonic() + cfg.get("wait_timeout", 600) + 120
    ok = False
    with os.fdopen(rfd, "r", encoding="utf-8") as status:
        for line in status:  # one JSON message a line; EOF when the service exits or is ready
            msg = json.loads(line)
            if msg["event"] == "scheduler":
                _say(f"scheduler pid {proc.pid}, address {msg['address']}, scheduler file {sched_file}")
                if not tls:
                    _say(_TLS_WARNING.format(address=msg["address"]))
            elif msg["event"] == "ready":
                ok = True
                _say(f"{msg['workers']} workers connected in jobs {' '.join(msg['jobs'])}; state in {state_path}")
                _say(f"stop with: {PROG} stop -s {state_path}  (or scripts/stop_dask_slurm.sh -s {state_path})")
                break
            elif msg["event"] == "error":
                _say(msg["message"])
            if time.monotonic() > deadline:
                break
    if ok:
        return 0
    try:
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait(timeout=120)
    with open(log_path, encoding="utf-8", errors="replace") as fh:
        tail = fh.read().splitlines()[-15:]
    _say(f"start failed; the service's log ({log_path}) ends with:\n  " + "\n  ".join(tail))
    for path in (state_path, sched_file):
        if os.path.lexists(path):
            os.unlink(path)
    return 1


# ------------------------------------------------------------------------------------------------
# serve (the background process)


def _serve(spec_path: str) -> int:
    from distributed import Client
    from distributed.security import Security

    from .cluster import _close_cluster, make_slurm_cluster

    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    status = os.fdopen(int(os.environ.pop(_STATUS_FD_ENV)), "w", encoding="utf-8")

    def report(event: str, **fields) -> None:
        status.write(json.dumps({"event": event, **fields}) + "\n")
        status.flush()

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    cfg, tls = spec["config"], spec["tls"]
    sched_file, state_path, run_dir = spec["scheduler_file"], spec["state_file"], spec["run_dir"]
    security = None
    if tls:
        security = Security(
            tls_ca_file=tls["ca_file"],
            require_encryption=True,
            **{
                f"tls_{role}_{part}": tls[part]
                for role in ("scheduler", "worker", "client")
                for part in ("cert", "key")
            },
        )
        # Jobs inherit this environment (sbatch --export=ALL): the same config for every client.
        os.environ.update(
            {
                "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "True",
                "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": tls["ca_file"],
            }
        )
        for role in ("CLIENT", "WORKER", "SCHEDULER"):
            os.environ[f"DASK_DISTRIBUTED__COMM__TLS__{role}__CERT"] = tls["cert"]
            os.environ[f"DASK_DISTRIBUTED__COMM__TLS__{role}__KEY"] = tls["key"]
    cfg["scheduler_options"] = {**(cfg.get("scheduler_options") or {}), "scheduler_file": sched_file}
    state = {
        "SCHEDULER_FILE": sched_file,
        "SCHEDULER_PID": os.getpid(),
        "SCHEDULER_LOG": os.path.join(run_dir, "dask-scheduler.log"),
        "LOG_DIR": run_dir,
        "JOB_SCRIPT": os.path.join(run_dir, "dask-worker.sbatch"),
        "JOB_IDS": "",
    }
    _write_state(state_path, state)
    cluster = client = None
    try:
        cluster = make_slurm_cluster(cfg, security=security)
        report("scheduler", address=cluster.scheduler_address)
        script = cluster.job_script()
        with open(state["JOB_SCRIPT"], "x", encoding="utf-8") as fh:
            fh.write(script)
        # Submit nothing that sbatch would refuse (bad partition, account, limits): its own check.
        test = subprocess.run(["sbatch", "--test-only", state["JOB_SCRIPT"]], capture_output=True, text=True)
        if test.returncode != 0:
            raise _Fail(f"sbatch failed: {(test.stderr or test.stdout).strip()}")
        processes = cfg.get("processes") or 1
        if cfg.get("n_workers") is not None:
            cluster.scale(n=cfg["n_workers"])
            expected = cfg["n_workers"]
        else:
            cluster.scale(jobs=cfg["jobs"])
            expected = cfg["jobs"] * processes
        n_jobs = -(-expected // processes)
        client = Client(cluster, security=security)
        deadline = time.monotonic() + cfg.get("wait_timeout", 600)
        have = 0
        while True:
            have = len(client.scheduler_info(n_workers=-1).get("workers", {}))
            jobs = list(cluster.workers.values())
            if len(jobs) >= n_jobs:  # every submission has finished (jobqueue adds them together)
                state["JOB_IDS"] = " ".join(j.job_id for j in jobs if j.job_id)
                _write_state(state_path, state)
                unsent = sum(1 for j in jobs if j.job_id is None)
                if unsent:
                    raise _Fail(f"sbatch failed for {unsent} job(s); see {state['SCHEDULER_LOG']}")
                if have >= expected:
                    break
                queued = _squeue([j.job_id for j in jobs])
                if len(queued) * processes + have < expected:
                    raise _Fail(
                        f"{n_jobs - len(queued)} worker job(s) ended before connecting "
                        f"(logs: {cfg['log_directory']}/*-<jobid>.err)"
                    )
            if stop:
                raise _Fail("stopped before the workers connected")
            if time.monotonic() > deadline:
                raise _Fail(
                    f"only {have} of {expected} workers connected within {cfg.get('wait_timeout', 600)} s "
                    f"(squeue: {' '.join(_squeue(state['JOB_IDS'].split())) or 'none queued'})"
                )
            time.sleep(1)
        report("ready", workers=have, jobs=state["JOB_IDS"].split())
        status.close()
        while not stop:  # until stop's SIGTERM (or SIGINT)
            time.sleep(0.5)
        return 0
    except BaseException as exc:
        if not status.closed:
            msg = str(exc) if isinstance(exc, _Fail) else f"{type(exc).__name__}: {exc}"
            report("error", message=msg)
            print(f"dfanalyzer.slurm serve: {msg}", file=sys.stderr, flush=True)
        return 1
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            _close_cluster(cluster)  # scancel of the jobs
        for path in (sched_file, state_path):
            if os.path.lexists(path):
                os.unlink(path)


# ------------------------------------------------------------------------------------------------
# stop


def _stop(a: argparse.Namespace) -> int:
    state_path = _state_path(os.path.abspath(a.scheduler_file), a.state_file)
    if not os.path.exists(state_path):
        _say(f"no state file {state_path} (was start run with this scheduler file?)")
        return 1
    state = _read_state(state_path)
    jobs = state.get("JOB_IDS", "").split()
    pid = int(state["SCHEDULER_PID"]) if state.get("SCHEDULER_PID", "").isdigit() else None
    deadline = time.monotonic() + a.timeout
    rc = 0
    if pid is not None and _is_service(pid):
        os.kill(pid, signal.SIGTERM)  # the service closes its cluster: scancel of its jobs
        while _is_service(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _is_service(pid):
            _say(f"service pid {pid} still running after {a.timeout} s; killing it")
            os.kill(pid, signal.SIGKILL)
            rc = 1
        _say(f"stopped the service (scheduler) pid {pid}")
    left = _squeue(jobs)
    if left:  # a killed service cancelled nothing
        subprocess.run(["scancel", *left], capture_output=True)
    while _squeue(jobs):
        if time.monotonic() >= deadline:
            _say(f"jobs still in squeue after {a.timeout} s: {' '.join(_squeue(jobs))}")
            rc = 1
            break
        time.sleep(0.5)
    if jobs:
        _say(f"cancelled worker jobs {' '.join(jobs)}")
    for path in (state_path, state.get("SCHEDULER_FILE", "")):
        if path and os.path.lexists(path):
            os.unlink(path)
    return rc


def main(argv: Optional[List[str]] = None) -> int:
    a = _parser().parse_args(argv)
    if a.command == "serve":
        return _serve(a.spec)
    return _start(a) if a.command == "start" else _stop(a)


if __name__ == "__main__":
    raise SystemExit(main())
