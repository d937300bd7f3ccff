"""Dask cluster setup for DFAnalyzer: an embedded LocalCluster, an existing scheduler, or Slurm.

The analysis pipeline (paper Section IV, Figure 2) runs as Dask tasks; this module only decides
*where* those tasks run. It uses Dask distributed and dask-jobqueue (``SLURMCluster``), never a
scheduler of its own. The YAML keys are documented in ``docs/cluster.md``.

``python -m dfanalyzer.slurm start|stop`` runs a ``SLURMCluster`` from :func:`make_slurm_cluster` as
a detached service shared through a scheduler file (``scripts/start_dask_slurm.sh`` wraps it).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, Mapping, Optional, Union

if TYPE_CHECKING:  # annotations only: distributed is imported when a client is made
    from distributed import Client

# distributed is imported where a client is made: `dfanalyzer summary` on a local machine runs
# without a cluster, and importing distributed alone costs ~0.5 s of its start-up.


def _import_distributed(hide_numpy: bool = False):
    """``import distributed`` (the module), with Dask's YAML configuration parsed by libyaml.

    Importing dask and distributed reads their default configuration (``dask.yaml``,
    ``distributed.yaml``, ~60 kB) and the user's files (``~/.config/dask/*.yaml``) with
    ``yaml.safe_load``, PyYAML's pure-Python parser: ~50 ms of the ~0.5 s import, a serial step
    of every ``--scheduler`` command (docs/perf/i26-client.md). When PyYAML has libyaml
    (``yaml.CSafeLoader``: the same constructors and resolver, the parser in C) and dask is not
    imported yet, ``yaml.safe_load`` parses with it for the duration of the import only (restored
    after, even on error): the configuration is the same (tested), in ~5 ms. Without libyaml, or
    when dask is already imported, this is a plain import.

    ``hide_numpy`` (the ``--scheduler`` summary's client, which folds nothing itself: the
    summary runs on a worker, ``cli._summary_on_worker``): when NumPy is not imported yet,
    distributed is imported as where NumPy is not installed (``sys.modules["numpy"] = None``
    for the duration of the import only, removed after, even on error). Nothing in dask or
    distributed needs NumPy at import: ``distributed.protocol.utils.host_array`` (buffers for
    received frames) takes its fallback, a ``bytearray``, every NumPy hook of theirs is
    registered lazily and runs if NumPy is imported later (it stays importable). That is
    ~0.1-0.15 s of the client's start-up (docs/perf/i27-import.md)."""
    import sys

    if "distributed" in sys.modules:
        return sys.modules["distributed"]
    if hide_numpy and "numpy" not in sys.modules:
        sys.modules["numpy"] = None  # (import numpy raises ImportError, as when not installed)
        try:
            return _import_distributed()
        finally:
            if sys.modules.get("numpy", 0) is None:
                del sys.modules["numpy"]
    yaml = None
    if "dask" not in sys.modules:
        try:
            import yaml
        except ImportError:
            yaml = None
    loader = getattr(yaml, "CSafeLoader", None) if yaml is not None else None
    if loader is None:
        import distributed

        return distributed
    plain = yaml.safe_load

    def safe_load(stream):
        return yaml.load(stream, Loader=loader)

    yaml.safe_load = safe_load
    try:
        import distributed
    finally:
        if yaml.safe_load is safe_load:  # (unless something else replaced it meanwhile)
            yaml.safe_load = plain
    return distributed


__all__ = ["setup_dask_cluster", "load_cluster_config", "make_slurm_cluster", "usable_cores"]

ConfigLike = Union[str, "os.PathLike[str]", Mapping[str, Any]]

# Dask settings for the clusters this module starts (and recommended for `dask worker` / `dask
# scheduler` run by hand, docs/cluster.md): distributed's statistical profiler samples every
# worker thread's stack 100 times a second, its event loop ticks 50 times a second and its system
# monitor polls psutil twice a second. Measured on 2 cores (docs/perf/analyzer.md) they make an
# idle scheduler + 2 workers burn ~0.09 CPU s per s, ~0.03 with these, which a summary of a few
# seconds of CPU pays for its whole wall time. The worker's memory monitor (pause, spill,
# terminate at the memory limit's thresholds) reads its RSS every 100 ms by default; once a
# second halves an idle worker's CPU (0.010 -> 0.005 CPU s per s; 0.028 -> 0.018 for a scheduler
# + 2 workers, docs/perf/i22-client.md) and still reacts within a second.
QUIET_CONFIG = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1000ms",
    "distributed.admin.system-monitor.interval": "2000ms",
    "distributed.worker.memory.monitor-interval": "1000ms",
}

# Keys accepted for ``cluster: local``.
LOCAL_KEYS = frozenset({"cluster", "n_workers", "threads_per_worker", "processes", "memory_limit", "dashboard_address"})
# Keys accepted for ``cluster: slurm`` (names follow dask-jobqueue's SLURMCluster arguments).
SLURM_KEYS = frozenset(
    {
        "cluster",
        "queue",
        "account",
        "cores",
        "memory",
        "processes",
        "walltime",
        "job_extra_directives",
        "job_script_prologue",
        "job_cpu",
        "job_mem",
        "job_name",
        "interface",
        "local_directory",
        "log_directory",
        "python",
        "worker_extra_args",
        "death_timeout",
        "scheduler_options",
        "dashboard_address",
        "n_workers",
        "jobs",
        "wait_timeout",
    }
)
_WALLTIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")  # Slurm --time forms: M, M:S, H:M:S, D-H[:M[:S]]


def usable_cores() -> int:
    """Number of CPUs this process may run on (``sched_getaffinity``, else ``os.cpu_count()``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def load_cluster_config(config: ConfigLike) -> dict:
    """Read a cluster config: a YAML file path or a mapping. Returns a validated plain ``dict``.

    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` (naming the offending key)
    for anything malformed: YAML syntax, not a mapping, unknown ``cluster`` kind, unknown keys,
    wrong types or values.
    """
    if isinstance(config, Mapping):
        cfg = dict(config)
        where = "cluster config"
    elif isinstance(config, (str, os.PathLike)):
        import yaml

        where = os.fspath(config)
        with open(where, "r", encoding="utf-8") as fh:
            try:
                cfg = yaml.safe_load(fh)
            except yaml.YAMLError as exc:
                raise ValueError(f"{where}: invalid YAML: {exc}") from None
        if cfg is None:
            cfg = {}
        if not isinstance(cfg, dict):
            raise ValueError(f"{where}: expected a mapping of keys, got {type(cfg).__name__}")
    else:
        raise ValueError(f"config must be a YAML file path or a mapping, got {type(config).__name__}")

    for key in cfg:
        if not isinstance(key, str):
            raise ValueError(f"{where}: key {key!r} is not a string")
    kind = cfg.get("cluster", "local")
    if kind not in ("local", "slurm"):
        raise ValueError(f"{where}: key 'cluster' must be 'local' or 'slurm', got {kind!r}")
    cfg["cluster"] = kind
    allowed = LOCAL_KEYS if kind == "local" else SLURM_KEYS
    unknown = sorted(set(cfg) - allowed)
    if unknown:
        raise ValueError(
            f"{where}: unknown key {unknown[0]!r} for cluster: {kind} (allowed: {', '.join(sorted(allowed))})"
        )
    (_check_local if kind == "local" else _check_slurm)(cfg, where)
    return cfg


def _bad(where: str, key: str, what: str, value: Any) -> ValueError:
    return ValueError(f"{where}: key {key!r} must be {what}, got {value!r}")


def _int(cfg: dict, key: str, where: str, minimum: int) -> None:
    if key in cfg and cfg[key] is not None:
        v = cfg[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise _bad(where, key, f"an integer >= {minimum}", v)


def _str(cfg: dict, key: str, where: str) -> None:
    if key in cfg and cfg[key] is not None and not isinstance(cfg[key], str):
        raise _bad(where, key, "a string", cfg[key])


def _str_list(cfg: dict, key: str, where: str) -> None:
    if key in cfg and cfg[key] is not None:
        v = cfg[key]
        if isinstance(v, str) or not isinstance(v, (list, tuple)) or not all(isinstance(s, str) for s in v):
            raise _bad(where, key, "a list of strings", v)
        cfg[key] = list(v)


def _bytes(cfg: dict, key: str, where: str, allow_auto: bool = False) -> None:
    if key in cfg and cfg[key] is not None:
        v = cfg[key]
        if allow_auto and v == "auto":
            return
        if isinstance(v, bool):
            raise _bad(where, key, "a size such as '16GB'", v)
        if isinstance(v, (int, float)) and v > 0:
            return
        try:
            import dask.utils  # (imported here: a summary without a cluster never loads Dask)

            ok = isinstance(v, str) and dask.utils.parse_bytes(v) > 0
        except ValueError:
            ok = False
        if not ok:
            raise _bad(where, key, "a size such as '16GB'" + (" or 'auto'" if allow_auto else ""), v)


def _check_local(cfg: dict, where: str) -> None:
    _int(cfg, "n_workers", where, 1)
    _int(cfg, "threads_per_worker", where, 1)
    if "processes" in cfg and not isinstance(cfg["processes"], bool):
        raise _bad(where, "processes", "true or false", cfg["processes"])
    _bytes(cfg, "memory_limit", where, allow_auto=True)
    _str(cfg, "dashboard_address", where)


def _check_slurm(cfg: dict, where: str) -> None:
    for key in ("cores", "memory"):
        if cfg.get(key) is None:
            raise ValueError(f"{where}: key {key!r} is required for cluster: slurm")
    _int(cfg, "cores", where, 1)
    _bytes(cfg, "memory", where)
    _int(cfg, "processes", where, 1)
    if cfg.get("processes") and cfg["processes"] > cfg["cores"]:
        raise _bad(where, "processes", f"<= cores ({cfg['cores']})", cfg["processes"])
    for key in (
        "queue",
        "account",
        "job_mem",
        "job_name",
        "interface",
        "local_directory",
        "log_directory",
        "python",
        "dashboard_address",
    ):
        _str(cfg, key, where)
    _int(cfg, "job_cpu", where, 1)
    if "walltime" in cfg and cfg["walltime"] is not None:
        w = cfg["walltime"]
        if not isinstance(w, str) or not _WALLTIME.match(w):
            hint = " (quote it in YAML: 1:30:00 unquoted is the number 5400)" if isinstance(w, int) else ""
            raise ValueError(f"{where}: key 'walltime' must be a Slurm time string such as '01:30:00', got {w!r}{hint}")
    for key in ("job_extra_directives", "job_script_prologue", "worker_extra_args"):
        _str_list(cfg, key, where)
    _int(cfg, "n_workers", where, 0)
    _int(cfg, "jobs", where, 0)
    if cfg.get("n_workers") is not None and cfg.get("jobs") is not None:
        raise ValueError(f"{where}: keys 'n_workers' and 'jobs' are exclusive; give one")
    if "death_timeout" in cfg and cfg["death_timeout"] is not None:
        v = cfg["death_timeout"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            raise _bad(where, "death_timeout", "a positive number of seconds", v)
    if "wait_timeout" in cfg and cfg["wait_timeout"] is not None:
        v = cfg["wait_timeout"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            raise _bad(where, "wait_timeout", "a positive number of seconds", v)
    if "scheduler_options" in cfg and cfg["scheduler_options"] is not None:
        if not isinstance(cfg["scheduler_options"], Mapping):
            raise _bad(where, "scheduler_options", "a mapping", cfg["scheduler_options"])


def make_slurm_cluster(config: ConfigLike, dashboard_address: str = "127.0.0.1:0", security=None):
    """Build a ``dask_jobqueue.SLURMCluster`` from a ``cluster: slurm`` config, submitting no job.

    The scheduler starts in this process; call ``cluster.scale(...)`` (or use
    :func:`setup_dask_cluster`) to submit worker jobs, ``cluster.job_script()`` to see the batch
    script. ``memory`` is per job; each job runs ``processes`` workers of ``cores/processes``
    threads. The dashboard listens on ``dashboard_address`` unless the config sets
    ``dashboard_address``. ``security``: a ``distributed.security.Security`` (TLS) for the
    scheduler and, through the job script, the workers. Raises ``ValueError`` for a bad config.
    """
    from dask_jobqueue import SLURMCluster

    cfg = load_cluster_config(config)
    if cfg["cluster"] != "slurm":
        raise ValueError(f"key 'cluster' must be 'slurm' here, got {cfg['cluster']!r}")
    kwargs = {
        k: v for k, v in cfg.items() if k not in ("cluster", "n_workers", "jobs", "wait_timeout") and v is not None
    }
    kwargs.setdefault("processes", 1)
    dashboard = kwargs.pop("dashboard_address", dashboard_address)
    kwargs["scheduler_options"] = {"dashboard_address": dashboard, **kwargs.get("scheduler_options", {})}
    if security is not None:
        kwargs["security"] = security
    return SLURMCluster(**kwargs)


def _cluster_client(cluster):
    """A ``distributed.Client`` of ``cluster`` that also closes ``cluster`` when it is closed."""
    from distributed import Client

    class _ClusterClient(Client):
        def close(self, *args, **kwargs):
            try:
                return super().close(*args, **kwargs)
            finally:
                owned = getattr(self, "_dfa_owned_cluster", None)
                if owned is not None:
                    self._dfa_owned_cluster = None
                    _close_cluster(owned)

    client = _ClusterClient(cluster)
    client._dfa_owned_cluster = cluster
    return client


def _close_cluster(cluster) -> None:
    """Close a SpecCluster; cancels its jobs. A job whose sbatch failed stays in status "created",
    which makes SpecCluster.close() end with an AssertionError after everything else is closed."""
    try:
        cluster.close()
    except AssertionError:
        pass


def _slurm_client(cfg: dict, n_workers: Optional[int], dashboard_address: str) -> Client:
    cluster = make_slurm_cluster(cfg, dashboard_address=dashboard_address)
    try:
        processes = cfg.get("processes") or 1
        if n_workers is not None:
            cluster.scale(n=n_workers)
            expected = n_workers
        elif cfg.get("n_workers") is not None:
            cluster.scale(n=cfg["n_workers"])
            expected = cfg["n_workers"]
        else:
            jobs = cfg["jobs"] if cfg.get("jobs") is not None else 1
            cluster.scale(jobs=jobs)
            expected = jobs * processes
        client = _cluster_client(cluster)
    except BaseException:
        _close_cluster(cluster)
        raise
    if expected > 0:
        timeout = cfg.get("wait_timeout", 600)
        try:
            client.wait_for_workers(expected, timeout=timeout)
        except BaseException as exc:
            if not isinstance(exc, Exception):  # e.g. KeyboardInterrupt: cancel the jobs, re-raise
                client.close()
                raise
            have = len(client.scheduler_info(n_workers=-1).get("workers", {}))
            unsent = sum(1 for job in cluster.workers.values() if job.status.name == "created")
            client.close()
            why = f"; {unsent} job(s) could not be submitted (sbatch failed, see the log)" if unsent else ""
            raise TimeoutError(
                f"only {have} of {expected} Slurm workers connected within {timeout} s{why} "
                f"(check `squeue` and the job logs): {exc}"
            ) from exc
    return client


def _guarded(tree, line: int) -> bool:
    """True when ``line`` of the module ``tree`` is inside an ``if __name__ == "__main__":`` body."""
    import ast

    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        names = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)}
        consts = {n.value for n in ast.walk(node.test) if isinstance(n, ast.Constant)}
        if "__name__" in names and "__main__" in consts and node.body:
            if node.body[0].lineno <= line <= max(getattr(b, "end_lineno", b.lineno) for b in node.body):
                return True
    return False


def main_script_unguarded() -> bool:
    """True when this call comes from the top level of the ``__main__`` script (a file run by
    ``python script.py`` or ``python -m``) outside an ``if __name__ == "__main__":`` block.

    Worker processes are started with the ``spawn`` method, which imports ``__main__`` again in
    every worker: such a script would run its analysis once per worker and the workers would
    fail to start ("Nanny failed to start"). Interactive sessions, notebooks and ``-c`` are fine."""
    import sys

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path or not str(path).endswith(".py"):
        return False
    frame, line = sys._getframe(1), None
    while frame is not None:  # the outermost frame running the script's own top level
        if frame.f_globals is main.__dict__ and frame.f_code.co_name == "<module>":
            line = frame.f_lineno
        frame = frame.f_back
    if line is None:
        return False
    try:
        import ast

        with open(path, encoding="utf-8") as f:
            return not _guarded(ast.parse(f.read()), line)
    except (OSError, SyntaxError, ValueError):
        return False


def setup_dask_cluster(
    scheduler_address: Optional[str] = None,
    scheduler_file: Optional[str] = None,
    n_workers: Optional[int] = None,
    threads_per_worker: int = 1,
    config: Optional[ConfigLike] = None,
    dashboard_address: str = "127.0.0.1:0",
    processes: bool = True,
    silence_logs: Optional[int] = None,
) -> Client:
    """Return a ``distributed.Client`` for the analysis.

    - ``scheduler_address`` (e.g. ``"tcp://10.0.0.1:8786"``) or ``scheduler_file`` (the JSON file
      written by ``dask scheduler --scheduler-file``): connect to that running scheduler; nothing
      is started and ``client.close()`` leaves the scheduler running.
    - ``config``: a YAML file path or a mapping with ``cluster: local`` or ``cluster: slurm``
      (keys in ``docs/cluster.md``). For Slurm a ``dask_jobqueue.SLURMCluster`` submits the
      worker jobs and the call blocks until they connect (``wait_timeout`` seconds, default 600,
      then ``TimeoutError``). Config values win over the keyword defaults; an explicit
      ``n_workers`` wins over the config.
    - otherwise an embedded ``LocalCluster`` with ``n_workers`` workers (default: usable cores)
      of ``threads_per_worker`` threads each, worker processes if ``processes``, scheduler and
      dashboard bound to localhost (``dashboard_address``, default a free port on 127.0.0.1).
      Called from the top level of a script without an ``if __name__ == "__main__":`` guard
      (:func:`main_script_unguarded`), the workers are threads of this process instead
      (``processes=False``): worker processes would run the script again.

    ``silence_logs``: the level below which the embedded cluster's (scheduler's, workers') log
    records are dropped (distributed's default: ``logging.WARNING``).

    A cluster this function starts is closed by ``client.close()``. Raises ``ValueError`` for
    conflicting arguments or a bad config, ``FileNotFoundError`` for a missing config or
    scheduler file (distributed itself would wait forever for the latter).
    """
    if scheduler_address is not None and scheduler_file is not None:
        raise ValueError("give scheduler_address or scheduler_file, not both")
    if (scheduler_address is not None or scheduler_file is not None) and config is not None:
        raise ValueError("config starts a cluster; it cannot be combined with scheduler_address/scheduler_file")
    if n_workers is not None and (isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 0):
        raise ValueError(f"n_workers must be a non-negative integer, got {n_workers!r}")
    Client = _import_distributed().Client

    if scheduler_address is not None:
        return Client(scheduler_address)
    if scheduler_file is not None:
        if not os.path.exists(scheduler_file):
            raise FileNotFoundError(f"scheduler file not found: {scheduler_file}")
        return Client(scheduler_file=os.fspath(scheduler_file))

    cfg = load_cluster_config(config) if config is not None else {"cluster": "local"}
    if cfg["cluster"] == "slurm":
        return _slurm_client(cfg, n_workers, dashboard_address)

    if n_workers is None:
        n_workers = cfg.get("n_workers") or usable_cores()
    elif n_workers == 0:
        raise ValueError("n_workers must be >= 1 for a local cluster")
    processes = cfg.get("processes", processes)
    if processes and main_script_unguarded():
        processes = False  # (spawned workers would import and run the unguarded script again)
    local_kwargs = dict(
        n_workers=n_workers,
        threads_per_worker=cfg.get("threads_per_worker", threads_per_worker),
        processes=processes,
        dashboard_address=cfg.get("dashboard_address", dashboard_address),
    )
    if cfg.get("memory_limit") is not None:
        local_kwargs["memory_limit"] = cfg["memory_limit"]
    if silence_logs is not None:
        local_kwargs["silence_logs"] = silence_logs
    import dask

    # Client() with no address starts and owns a LocalCluster: client.close() also closes it.
    # (the workers' nannies take the config current when they are made)
    with dask.config.set(QUIET_CONFIG):
        return Client(**local_kwargs)
