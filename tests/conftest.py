"""Shared pytest fixtures and helpers (generic; parts may add their own below)."""

import json
import os
import signal
import subprocess
import sys
import zlib

import pytest

import dfanalyzer


def _survive(signum, frame):  # pragma: no cover - only runs when such a signal arrives
    pass


def _signal_dispositions():
    """Tests assert how traced programs react to SIGHUP and SIGINT, and how many sigaction calls
    the tracer makes: their programs must start with those signals at their default. A signal
    ignored when the suite starts (``nohup`` ignores SIGHUP; a background job of a
    non-interactive shell ignores SIGINT) would stay ignored in every child across ``exec``.
    A handler that does nothing keeps this process running as the ignore meant, and ``exec``
    resets a handled signal to its default in the children."""
    for sig in (signal.SIGHUP, signal.SIGINT):
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, _survive)


_signal_dispositions()

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
#: Directory that holds the dftracer/dfanalyzer packages this test run imports: the source tree
#: in a development build (PYTHONPATH=<repo>), site-packages after `pip install .`. Subprocesses
#: get it first on PYTHONPATH so they run the same build as the tests.
PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(dfanalyzer.__file__)))


def pythonpath_env(env=None):
    """A copy of ``env`` (default os.environ) with PKG_ROOT first on PYTHONPATH."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = PKG_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def python_json(code, *argv, env=None, cwd=None, timeout=120):
    """Run ``python -c code argv...`` in a fresh interpreter (``env`` default
    :func:`pythonpath_env`); the JSON it prints on stdout. Fails the test on a non-zero exit."""
    r = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        env=pythonpath_env() if env is None else env,
        timeout=timeout,
        cwd=None if cwd is None else str(cwd),
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def decompress_members(raw):
    """Concatenated gzip members -> (bytes, complete). Stops at a truncated or damaged member."""
    out = bytearray()
    pos = 0
    while pos < len(raw):
        d = zlib.decompressobj(31)
        try:
            out += d.decompress(raw[pos:])
        except zlib.error:
            return bytes(out), False
        if not d.eof:
            return bytes(out), False
        pos = len(raw) - len(d.unused_data)
    return bytes(out), True


def read_trace(path, allow_truncated=False):
    """All records (dicts) of one trace file written by our tracer, ``.pfw`` or ``.pfw.gz``.

    Checks the layout of docs/format.md while reading: the first line is ``[``, every other line
    one JSON object in valid UTF-8 (a closing ``]`` line is skipped), the gzip members are
    complete and the file ends with a complete line; the last two only with
    ``allow_truncated=False``. Raises AssertionError naming the file and line otherwise."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        raw = f.read()
    if path.endswith(".gz"):
        data, complete = decompress_members(raw)
        assert complete or allow_truncated, f"{path}: truncated gzip member"
    else:
        data = raw
    lines = data.split(b"\n")
    tail = lines.pop()  # text after the last newline: empty for a complete file
    assert tail == b"" or allow_truncated, f"{path}: unterminated last line {tail[:80]!r}"
    assert lines and lines[0] == b"[", f"{path}: first line is {lines[0][:40]!r}" if lines else path
    records = []
    for i, line in enumerate(lines[1:], start=2):
        if line.strip() == b"]":
            continue
        text = line.decode("utf-8")  # strict: valid UTF-8
        try:
            rec = json.loads(text)
        except json.JSONDecodeError as exc:  # pragma: no cover - failure message
            raise AssertionError(f"{path}:{i}: invalid JSON {text[:200]!r}: {exc}") from None
        assert isinstance(rec, dict), f"{path}:{i}: not an object"
        records.append(rec)
    return records


@pytest.fixture(scope="session")
def dask_client():
    """One in-process Dask LocalCluster (2 workers x 1 thread) shared by the session. It is never
    the default client: a test that wants it passes it (``DFAnalyzer(..., client=dask_client)``,
    ``dask_client.compute(frame).result()``, ``--scheduler dask_client.scheduler.address``), and a
    ``DFAnalyzer`` made without ``client=`` runs in threads even after this fixture exists (as
    default, it sent such tests to this cluster for the rest of the session)."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None, silence_logs=40)
    client = Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="module")
def cluster_client():
    """A 2-worker LocalCluster of worker *processes* (1 thread each) per test module, never the
    default client: what the frame path meets on a real cluster (pickling, ``dask.sizeof`` in the
    workers, worker-held partitions), unlike the in-process :func:`dask_client`."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40) as cl,
        Client(cl, set_as_default=False) as c,
    ):
        yield c


def _default_dask_client():
    """The client ``DFAnalyzer`` would take without ``client=`` (``distributed.default_client``), or None."""
    import sys

    if "distributed" not in sys.modules:
        return None
    from distributed import default_client

    try:
        return default_client()
    except ValueError:  # "No clients found"
        return None


@pytest.fixture(autouse=True)
def _no_default_dask_client():
    """No test starts or ends with a default Dask client: one left behind (a ``Client`` made with
    ``set_as_default=True`` and not closed) would silently move every later ``DFAnalyzer``
    without ``client=`` from threads onto its cluster. A test that means the default-client path
    makes one current itself (``with client.as_current():``)."""
    before = _default_dask_client()
    assert before is None, f"a default Dask client exists before the test: {before!r}"
    yield
    left = _default_dask_client()
    if left is not None:
        from distributed.client import _del_global_client  # (private; only on this failure)

        _del_global_client(left)  # (not the default of the next tests: only this one fails)
        pytest.fail(f"the test left a default Dask client: {left!r} (close it, or set_as_default=False)")
