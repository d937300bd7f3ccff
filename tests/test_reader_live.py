"""A trace that is still being written (issue 21, problem 4): the program still runs, so the file
ends inside a gzip member, or grows between indexing and loading. Every complete member is
loaded, one warning says "still being written: N complete members", nothing is called invalid
JSON, and no more bytes are counted lost than the file holds.

Truth: plain zlib + json over the same bytes (members decoded one by one; the last, incomplete
one up to its last newline), never our reader.
"""

import json
import os
import shutil
import subprocess
import sys
import zlib

import pytest
from conftest import pythonpath_env

N_EVENTS = 6000

_APP = r"""
import sys
from dftracer.python import dftracer, dft_fn
log = dftracer.initialize_log(logfile=sys.argv[1], data_dir=None, process_id=0)
dlp = dft_fn("app")
for i in range(int(sys.argv[2])):
    dlp.update(step=i)
    with dlp:
        pass
log.finalize()
"""


@pytest.fixture(scope="module")
def full_trace(tmp_path_factory):
    """One trace of our tracer with many small members (4 KiB write buffer): (bytes, member starts)."""
    d = tmp_path_factory.mktemp("live")
    env = pythonpath_env(dict(os.environ, DFTRACER_ENABLE="1", DFTRACER_WRITE_BUFFER_SIZE="4096"))
    for k in ("LD_PRELOAD", "DFTRACER_INIT", "DFTRACER_LOG_FILE"):
        env.pop(k, None)
    subprocess.run([sys.executable, "-c", _APP, str(d / "t.pfw"), str(N_EVENTS)], env=env, check=True, timeout=120)
    (path,) = [p for p in d.iterdir() if p.name.endswith(".pfw.gz")]
    raw = path.read_bytes()
    starts, pos = [], 0
    while pos < len(raw):
        starts.append(pos)
        z = zlib.decompressobj(31)
        z.decompress(raw[pos:])
        assert z.eof
        pos = len(raw) - len(z.unused_data)
    assert len(starts) > 50  # many members: cuts fall inside one
    return raw, starts


def _truth(prefix: bytes):
    """(complete members, events, metadata records) in ``prefix``: complete members, then the
    whole lines the incomplete last member decodes to."""
    out, pos, complete = b"", 0, 0
    while pos < len(prefix):
        z = zlib.decompressobj(31)
        try:
            data = z.decompress(prefix[pos:])
        except zlib.error:  # a header cut short
            break
        if not z.eof:  # the member being written: its whole lines
            out += data[: data.rfind(b"\n") + 1]
            break
        out += data
        complete += 1
        pos = len(prefix) - len(z.unused_data)
    events = meta = 0
    for line in out.split(b"\n"):
        if line.startswith(b"{"):
            rec = json.loads(line)
            if rec.get("ph") == "M":
                meta += 1
            else:
                events += 1
    return complete, events, meta


def _cuts(starts, size):
    # inside a member, 1 byte after a member start (header cut), at a member boundary, and two
    # arbitrary offsets
    mid = starts[len(starts) // 2]
    return sorted({mid + 700, mid + 1, mid, int(size * 0.37), int(size * 0.83)})


def _analyze(path, **kw):
    from dfanalyzer import DFAnalyzer

    return DFAnalyzer(str(path), small_file_mb=0, index_dir=str(path.parent / "idx"), **kw)


def test_cut_at_arbitrary_offsets_loads_every_complete_member(full_trace, tmp_path):
    raw, starts = full_trace
    for cut in _cuts(starts, len(raw)):
        d = tmp_path / str(cut)
        d.mkdir()
        p = d / "run-host-1.pfw.gz"
        p.write_bytes(raw[:cut])
        complete, events, _ = _truth(raw[:cut])
        a = _analyze(p)
        try:
            s = a.summary(show=False)
            st = a.stats
            assert st["events"] == events, cut
            assert st["skipped_lines"] == 0 and st["lost_lines"] == 0, cut
            assert st["lost_bytes"] <= cut, cut
            warns = [w for f in a.skipped_files() for w in f["warnings"]]
            if cut in starts:  # a clean member boundary: the trace is complete as it is
                assert not warns and complete == starts.index(cut), (cut, warns)
            else:
                assert any(f"still being written: {complete} complete members" in w for w in warns), (cut, warns)
            assert s.to_dict()["events"] == events
        finally:
            a.close()


def test_file_grows_between_index_and_load(full_trace, tmp_path):
    """Indexed at one size, loaded after the program appended more: the indexed part is loaded
    whole (no "file changed" loss, nothing lost), with the "still being written" warning."""
    raw, starts = full_trace
    cut = starts[len(starts) // 3] + 900  # inside a member
    p = tmp_path / "run-host-2.pfw.gz"
    p.write_bytes(raw[:cut])
    complete, events, _ = _truth(raw[:cut])
    a = _analyze(p)  # indexes now
    try:
        with open(p, "ab") as f:  # the program goes on writing
            f.write(raw[cut:])
        a.summary(show=False)
        st = a.stats
        assert (st["events"], st["lost_lines"], st["lost_bytes"], st["skipped_lines"]) == (events, 0, 0, 0)
        warns = [w for f in a.skipped_files() for w in f["warnings"]]
        want = f"still being written: {complete} complete members loaded ({cut} bytes indexed; the file has grown to {len(raw)}"
        assert any(want in w for w in warns), warns
    finally:
        a.close()
    # a new analysis indexes the file as it is now: all of it
    b = _analyze(p)
    try:
        b.summary(show=False)
        assert b.stats["events"] == _truth(raw)[1] and not b.skipped_files()
    finally:
        b.close()


def test_file_rewritten_after_index_reports_the_reason_not_invalid_json(full_trace, tmp_path):
    """A trace changed otherwise (shrunk) after indexing: its batches are lost lines with the
    reason, never "lines skipped (invalid JSON)", and the CLI prints the reason too."""
    raw, starts = full_trace
    p = tmp_path / "run-host-3.pfw.gz"
    p.write_bytes(raw)
    a = _analyze(p, batch_size_mb=0.05)
    try:
        p.write_bytes(raw[: starts[len(starts) // 2]])  # shrunk (rewritten) after indexing
        a.summary(show=False)
        st = a.stats
        assert st["skipped_lines"] == 0 and st["lost_lines"] > 0
        warns = [w for f in a.skipped_files() for w in f["warnings"]]
        assert any("changed since it was indexed" in w for w in warns), warns
    finally:
        a.close()


def test_cli_says_still_being_written(full_trace, tmp_path):
    raw, starts = full_trace
    cut = starts[len(starts) // 2] + 1234
    d = tmp_path / "t"
    d.mkdir()
    p = d / "run-host-4.pfw.gz"
    p.write_bytes(raw[:cut])
    complete, events, _ = _truth(raw[:cut])
    shutil.rmtree(tmp_path / "idx", ignore_errors=True)
    for small in ("0", "1"):  # indexed file, and a small file read whole
        r = subprocess.run(
            [sys.executable, "-m", "dfanalyzer.cli", "summary", str(p), "--json", "--small-file-mb", small]
            + ["--no-progress", "--index-dir", str(tmp_path / "idx")],
            env=pythonpath_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["events"] == events
        assert f"still being written: {complete} complete members" in r.stderr, r.stderr
        assert "invalid JSON" not in r.stderr and "Traceback" not in r.stderr


def test_checkpoint_reads_keep_the_index_line_reads_see_the_file_now(full_trace, tmp_path):
    """Low level: a batch of checkpoints planned on an index is read as indexed after the file
    grew; a line-addressed read (dftracer-cat) re-indexes and sees the whole file."""
    from dfanalyzer import reader

    raw, starts = full_trace
    cut = starts[10] + 300  # inside member 10
    p = tmp_path / "run-host-5.pfw.gz"
    p.write_bytes(raw[:cut])
    idx = reader.build_index(str(p))
    assert len(idx["checkpoints"]) == 11 and idx["truncated_bytes"] > 0
    with open(p, "ab") as f:
        f.write(raw[cut:])
    b = reader.load_batch(str(p), 0, 10)
    _, events, _ = _truth(raw[:cut])
    assert len(b.events) == events and b.lost_bytes == 0 and b.skipped_lines == 0
    assert any("still being written: 10 complete members loaded" in w for w in b.warnings), b.warnings
    whole = b"".join(_members(raw))
    assert len(reader.read_lines(str(p), 0, 10**9)) == whole.count(b"\n")


def _members(raw):
    pos = 0
    while pos < len(raw):
        z = zlib.decompressobj(31)
        yield z.decompress(raw[pos:])
        pos = len(raw) - len(z.unused_data)
