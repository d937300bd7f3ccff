"""Shared pytest fixtures and helpers (generic; parts may add their own below)."""

import json
import os
import signal
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
    """One in-process Dask LocalCluster (2 workers x 1 thread) shared by the session (default client)."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None, silence_logs=40)
    client = Client(cluster)
    yield client
    client.close()
    cluster.close()
