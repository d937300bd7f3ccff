"""Trace file tools: ``dftracer-merge``, ``dftracer-compact``, ``dftracer-split`` and
``dftracer-event-count`` (docs/tools.md).

They read trace files (``.pfw.gz``: concatenated gzip members, ours or any gzip stream;
``.pfw``: plain lines) member by member, and write our format (docs/format.md): a ``[`` line,
then one JSON object per line, in gzip members of at most ``--member-size`` bytes of text with
the ``DF`` size subfield, compressed by the tracer's own encoder
(``dftracer._dftracer.encode_member``).

Identity. The analyzer gives an event the host of its ``args.hostname`` (or ``args.hhash``
resolved through the file's ``HH`` records), else the *file's* host: the value of the first
``hostname`` metadata record in the file (src/reader/parser.cpp). pid and tid are fields of
every line. So that every event keeps its host in the output:

- each output file carries, before the first event of a process (host, pid), every metadata
  line (``ph`` ``M`` or ``cat`` ``dftracer``) that process had in its input up to that point;
- an event that relied on its input file's host and lands in an output file whose host is
  another one gets ``"hostname":"<host>"`` added to its ``args`` (the line is re-encoded; this
  only happens when one output file holds several hosts' events). Every other line is copied
  byte for byte.

Checks. Events are counted per (host, pid) while reading; after writing, every output file is
read again from disk and counted the same way, and indexed by the C++ indexer, whose event
count must equal the total. Any difference fails the command (exit 1, one line on stderr) and
no output is left. Outputs are written to temporary names in the output directory and renamed
when all checks passed; an input is never overwritten.

Exit status: 0 success; 1 an input could not be read, had invalid lines or damaged data (unless
``--skip-invalid``), or a count check failed; 2 usage errors (including an existing output
without ``--force``).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import stat
import sys
import zlib
from collections import Counter, OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Tuple

__all__ = [
    "ToolError",
    "UsageError",
    "InputStats",
    "read_members",
    "iter_records",
    "count_events",
    "merge_main",
    "compact_main",
    "split_main",
    "event_count_main",
]

_GZIP_MAGIC = b"\x1f\x8b\x08"
_READ_BLOCK = 4 << 20
# Text of one gzip member held before its CRC is checked; a longer member (one plain-gzip stream,
# DFTracer v1) is passed on in pieces of this size, then a CRC failure can no longer take them back.
_MEMBER_HOLD = 64 << 20
#: Text bytes all outputs may hold in their member buffers together before the largest are written
#: as smaller members (many outputs filled at once: --by-pid over interleaved processes).
HOLD_LIMIT = 256 << 20
DEFAULT_MEMBER_SIZE = 4 << 20  # the tracer's DFTRACER_WRITE_BUFFER_SIZE default, bytes of text

Identity = Tuple[Optional[str], Optional[int]]  # (host, pid); None where the trace has none


class ToolError(Exception):
    """A failure reported as one line on stderr with exit status 1."""


class UsageError(Exception):
    """A usage error reported as one line on stderr with exit status 2."""


@dataclass
class InputStats:
    """What reading one input file found (counts are lines, bytes)."""

    path: str
    events: Counter = field(default_factory=Counter)  # (host, pid) -> events
    metadata: int = 0  # metadata lines (ph "M" or cat "dftracer")
    invalid: int = 0  # lines that are not a JSON object with name and ts
    lost_bytes: int = 0  # compressed bytes of damaged members + text of an unterminated last line
    cut_short: bool = False  # the last gzip member is incomplete (its whole lines are kept)
    problems: List[str] = field(default_factory=list)

    @property
    def total_events(self) -> int:
        return sum(self.events.values())

    def damage(self) -> Optional[str]:
        """One line naming what was invalid or lost, or None."""
        parts = []
        if self.invalid:
            parts.append("%d invalid lines (not a JSON object with name and ts)" % self.invalid)
        if self.lost_bytes:
            parts.append("%d bytes lost (%s)" % (self.lost_bytes, "; ".join(dict.fromkeys(self.problems))))
        if self.cut_short:
            parts.append("cut short (the last gzip member is incomplete; its whole lines are kept)")
        return "%s: %s" % (self.path, ", ".join(parts)) if parts else None


# ---------------------------------------------------------------------------------------------
# reading


def read_members(path: str, st: InputStats) -> Iterator[bytes]:
    """Uncompressed text of ``path``, one piece per gzip member (pieces of at most
    ``_MEMBER_HOLD`` bytes for a longer member), or the plain file in blocks.

    A member that fails to inflate or its CRC is dropped whole and counted in ``st.lost_bytes``
    (compressed bytes up to the next gzip header); a cut-short last member gives what it could
    decode (its whole lines are kept by the caller, as the analyzer does). Raises ``OSError``
    when the file cannot be opened or read."""
    with open(path, "rb") as f:
        head = f.read(_READ_BLOCK)
        if not head.startswith(_GZIP_MAGIC):
            while head:
                yield head
                head = f.read(_READ_BLOCK)
            return
        buf = head
        eof = False
        while buf or not eof:
            d = zlib.decompressobj(31)
            out: List[bytes] = []
            held = 0
            consumed = 0  # compressed bytes of this member read so far
            ok = True
            while not d.eof:
                if not buf:
                    if eof:
                        break
                    buf = f.read(_READ_BLOCK)
                    if not buf:
                        eof = True
                        break
                try:
                    piece = d.decompress(buf)
                except zlib.error as e:
                    ok = False
                    st.problems.append("damaged gzip member: %s" % e)
                    break
                consumed += len(buf) - len(d.unused_data)
                buf = d.unused_data
                if piece:
                    out.append(piece)
                    held += len(piece)
                    if held >= _MEMBER_HOLD:
                        yield b"".join(out)
                        out, held = [], 0
            if not ok:
                # skip to the next member header after this one's start; count what was skipped
                lost = consumed
                nxt = buf.find(_GZIP_MAGIC, 1 if consumed == 0 else 0)
                while nxt < 0 and not eof:
                    lost += max(0, len(buf) - 2)
                    buf = buf[-2:]
                    more = f.read(_READ_BLOCK)
                    if not more:
                        eof = True
                    buf += more
                    nxt = buf.find(_GZIP_MAGIC)
                if nxt < 0:
                    lost += len(buf)
                    buf = b""
                else:
                    lost += nxt
                    buf = buf[nxt:]
                st.lost_bytes += lost
                continue
            if not d.eof:  # the file ends inside this member
                if consumed:
                    st.cut_short = True
                if out:
                    yield b"".join(out)
                return
            if out:
                yield b"".join(out)
            if not buf and not eof:
                buf = f.read(_READ_BLOCK)
                if not buf:
                    eof = True


def iter_lines(path: str, st: InputStats) -> Iterator[bytes]:
    """Lines of ``path`` without their ``\\n``; an unterminated last line is dropped and counted
    lost (a cut-short file), as the analyzer does."""
    rest = b""
    overlong = False  # inside a line longer than _MEMBER_HOLD (not a trace: binary data)
    for piece in read_members(path, st):
        if overlong:
            cut = piece.find(b"\n")
            if cut < 0:
                st.lost_bytes += len(piece)
                continue
            st.lost_bytes += cut + 1
            piece, overlong = piece[cut + 1 :], False
        if rest:
            piece = rest + piece
        lines = piece.split(b"\n")
        rest = lines.pop()
        yield from lines
        if len(rest) > _MEMBER_HOLD:  # never held whole: counted and skipped to its end
            st.lost_bytes += len(rest)
            st.problems.append("a line longer than %d bytes" % _MEMBER_HOLD)
            rest, overlong = b"", True
    if overlong:
        return
    if rest.strip() and rest.strip() != b"]":  # DFTracer v1 ends with "]" and no newline
        st.lost_bytes += len(rest)
        st.problems.append("unterminated last line")


try:  # a faster parser when installed; json decides what is valid (it also takes NaN, big ints)
    import orjson as _orjson

    def _loads(line: bytes):
        try:
            return _orjson.loads(line)
        except ValueError:
            return json.loads(line)

except ImportError:  # pragma: no cover - orjson is a dependency
    _loads = json.loads


class Record:
    """One input line: ``line`` (bytes, no newline), ``meta`` (a metadata line), ``ident``
    ((host, pid): the host the analyzer gives it), ``explicit`` (the line names its host), and
    ``obj`` (the parsed object)."""

    __slots__ = ("line", "meta", "ident", "explicit", "obj")

    def __init__(self, line: bytes, meta: bool, ident: Identity, explicit: bool, obj: dict):
        self.line, self.meta, self.ident, self.explicit, self.obj = line, meta, ident, explicit, obj


_STRUCTURAL = (b"", b"[", b"]")


def iter_records(path: str, st: InputStats) -> Iterator[Record]:
    """Every valid record of ``path`` (structural ``[``/``]``/blank lines are left out, invalid
    lines are counted in ``st.invalid``), with the identity the analyzer gives it. Event counts
    per identity go to ``st.events``."""
    loads = _loads
    file_host: Optional[str] = None
    pid_host: Dict[int, str] = {}
    hh: Dict[str, str] = {}
    counts: Dict[Identity, int] = {}  # a plain dict in the loop, added to st.events at the end
    invalid = 0
    try:
        for line in iter_lines(path, st):
            try:
                obj = loads(line)
            except ValueError:
                if line.strip() not in _STRUCTURAL:
                    invalid += 1
                continue
            if type(obj) is not dict or "name" not in obj:
                invalid += 1
                continue
            pid = obj.get("pid")
            if type(pid) is not int:
                pid = None
            args = obj.get("args")
            ph = obj.get("ph")
            if ph == "M" or ph == 4 or obj.get("cat") == "dftracer":
                if type(args) is dict and (ph == "M" or ph == 4):
                    name = obj.get("name")
                    value = args.get("value")
                    if name == "hostname" and isinstance(value, str):
                        if file_host is None:
                            file_host = value
                        if pid is not None:
                            pid_host[pid] = value
                    elif name == "HH" and value is not None and isinstance(args.get("name"), str):
                        hh[str(value)] = args["name"]
                host = pid_host.get(pid, file_host) if pid is not None else file_host
                st.metadata += 1
                yield Record(line, True, (host, pid), False, obj)
                continue
            ts = obj.get("ts")
            if type(ts) is not int and type(ts) is not float:  # the analyzer skips such events
                invalid += 1
                continue
            host = None
            if type(args) is dict:
                host = args.get("hostname")
                if type(host) is not str:
                    host = None
                    hv = args.get("hhash")
                    if hv is not None:
                        host = hh.get(str(hv), "hhash:%s" % hv)
            explicit = host is not None
            if not explicit:
                host = file_host
            ident = (host, pid)
            counts[ident] = counts.get(ident, 0) + 1
            yield Record(line, False, ident, explicit, obj)
    finally:
        st.events.update(counts)
        st.invalid += invalid


def count_events(path: str) -> InputStats:
    """Read ``path`` whole and count its events per (host, pid)."""
    st = InputStats(path)
    for _ in iter_records(path, st):
        pass
    return st


# ---------------------------------------------------------------------------------------------
# writing


def _encode(data: bytes, level: int) -> bytes:
    from dftracer import _dftracer

    return _dftracer.encode_member(data, level)


class OutFile:
    """One output trace written to a temporary name: members of at most ``member_size`` bytes
    of whole lines, compressed on the shared pool; metadata of each process before its first
    event; host added to events whose host is not the file's."""

    def __init__(self, writer: "Writer", final: str):
        self.w = writer
        self.final = final
        d, b = os.path.split(final)
        self.tmp = os.path.join(d, ".%s.tmp-%d" % (b, os.getpid()))
        # opened per member written (not held: --by-pid may have thousands of outputs)
        open(self.tmp, "wb").close()
        self.closed = False
        self.buf: List[bytes] = [b"[\n"]
        self.buf_bytes = 2
        writer.buffered += 2
        self.pending: List = []
        self.compressed = 0  # bytes written so far
        self.text = 0
        self.host: Optional[str] = None  # the first hostname metadata value written
        self.host_known = False
        self.with_meta: set = set()  # identities whose metadata this file already has
        self.meta_lines: set = set()  # (identity, metadata line) already in this file
        self.events = 0

    def _line(self, line: bytes) -> None:
        self.buf.append(line)
        self.buf.append(b"\n")
        self.buf_bytes += len(line) + 1
        self.w.buffered += len(line) + 1
        if self.buf_bytes >= self.w.member_size:
            self.flush_member()
        elif self.w.buffered > self.w.hold_limit:
            self.w.spill()

    def add_meta(self, rec: Record) -> None:
        key = (rec.ident, rec.line)  # two hosts' processes may write the same line
        if key in self.meta_lines:
            return
        self.meta_lines.add(key)
        if not self.host_known and rec.obj.get("name") == "hostname":
            args = rec.obj.get("args")
            if isinstance(args, dict) and isinstance(args.get("value"), str):
                self.host, self.host_known = args["value"], True
        self._line(rec.line)

    def add_event(self, rec: Record, metadata: Dict[Identity, "OrderedDict[bytes, Record]"]) -> None:
        if rec.ident not in self.with_meta:
            self.with_meta.add(rec.ident)
            # a file without hostname records (DFTracer v1: hosts through args.hhash and HH
            # records) files its metadata under (None, pid)
            keys = [rec.ident] if rec.ident[0] is None else [(None, rec.ident[1]), rec.ident]
            for k in keys:
                for m in metadata.get(k, {}).values():
                    self.add_meta(m)
        line = rec.line
        if not rec.explicit and rec.ident[0] is not None and rec.ident[0] != self.host:
            if not self.host_known:  # the file's host is decided by its first hostname record
                self.host, self.host_known = rec.ident[0], True
            if rec.ident[0] != self.host:
                obj = dict(rec.obj)
                args = dict(obj["args"]) if isinstance(obj.get("args"), dict) else {}
                args["hostname"] = rec.ident[0]
                obj["args"] = args
                line = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
                self.w.rehosted += 1
        self.events += 1
        self._line(line)

    def flush_member(self) -> None:
        if self.buf_bytes == 0:
            return
        data = b"".join(self.buf)
        self.w.buffered -= self.buf_bytes
        self.buf, self.buf_bytes = [], 0
        self.text += len(data)
        self.pending.append(self.w.pool.submit(_encode, data, self.w.level))
        while len(self.pending) > 2:
            self._write(self.pending.pop(0).result())

    def _write(self, member: bytes) -> None:
        with open(self.tmp, "ab") as f:
            f.write(member)
        self.compressed += len(member)

    def size_estimate(self) -> int:
        """Compressed bytes written plus a guess for what is not written yet (text / 8)."""
        return self.compressed + (self.buf_bytes + sum(1 for _ in self.pending) * self.w.member_size) // 8

    def close(self) -> None:
        self.flush_member()
        for p in self.pending:
            self._write(p.result())
        self.pending = []
        self.closed = True


class Writer:
    """A set of output files committed together (``commit``) or removed (``abort``)."""

    def __init__(self, member_size: int, level: int, force: bool, inputs: List[str]):
        self.member_size = member_size
        self.level = level
        self.force = force
        self.inputs = {_file_id(p) for p in inputs}
        self.pool = ThreadPoolExecutor(max_workers=2)
        self.files: List[OutFile] = []
        self.finals: set = set()
        self.rehosted = 0
        self.buffered = 0  # text bytes waiting in the outputs' member buffers
        self.hold_limit = max(HOLD_LIMIT, 2 * member_size)

    def spill(self) -> None:
        """Many outputs filled at once (--by-pid over interleaved processes): write the largest
        buffers as (smaller) members until half the limit is held."""
        for o in sorted((o for o in self.files if not o.closed), key=lambda o: -o.buf_bytes):
            if self.buffered <= self.hold_limit // 2:
                break
            o.flush_member()

    def open(self, final: str) -> OutFile:
        fid = _file_id(final)
        if fid is not None and fid in self.inputs:
            raise UsageError("output %s is one of the inputs; inputs are never overwritten" % final)
        if os.path.lexists(final) and not self.force:
            raise UsageError("output %s exists (use --force to replace it)" % final)
        parent = os.path.dirname(final)
        if parent:
            os.makedirs(parent, exist_ok=True)
        if final in self.finals:
            raise UsageError("two outputs would be named %s" % final)
        self.finals.add(final)
        o = OutFile(self, final)
        self.files.append(o)
        return o

    def close_all(self) -> None:
        for o in self.files:
            if not o.closed:
                o.close()

    def abort(self) -> None:
        for o in self.files:
            try:
                o.closed = True
                os.unlink(o.tmp)
            except OSError:
                pass
        self.pool.shutdown(wait=False)

    def commit(self) -> None:
        for o in self.files:
            os.replace(o.tmp, o.final)
        self.pool.shutdown()


def _file_id(path: str) -> Optional[Tuple[int, int]]:
    try:
        s = os.stat(path)
    except OSError:
        return None
    return (s.st_dev, s.st_ino)


# ---------------------------------------------------------------------------------------------
# the common run: read, write, verify, index, commit


class Run:
    """Reads inputs, hands records to a layout (merge, compact, split), checks and commits."""

    def __init__(self, prog: str, a: argparse.Namespace, inputs: List[str]):
        self.prog = prog
        self.a = a
        self.inputs = inputs
        self.stats: List[InputStats] = []
        self.expected: Counter = Counter()
        self.metadata: Dict[Identity, "OrderedDict[bytes, Record]"] = {}
        self.w = Writer(a.member_size, a.level, a.force, inputs)

    def records(self, path: str) -> Iterator[Record]:
        """Records of one input; metadata lines are remembered per identity (so that an output
        file that starts in the middle of a process can repeat them)."""
        st = InputStats(path)
        self.stats.append(st)
        try:
            for rec in iter_records(path, st):
                if rec.meta:
                    self.metadata.setdefault(rec.ident, OrderedDict())[rec.line] = rec
                yield rec
        except OSError as e:
            raise ToolError("cannot read %s: %s" % (path, e.strerror or e)) from None
        self.expected.update(st.events)
        msg = st.damage()
        if msg:
            if not self.a.skip_invalid:
                raise ToolError(msg + "; nothing written (--skip-invalid drops such lines and data)")
            print("%s: warning: %s (dropped, --skip-invalid)" % (self.prog, msg), file=sys.stderr)

    def finish(self, quiet: bool = False) -> int:
        """Close, verify every output against the input counts, commit, index; exit status."""
        self.w.close_all()
        got: Counter = Counter()
        for o in self.w.files:
            st = count_events(o.tmp)
            if st.invalid or st.lost_bytes or st.cut_short:
                raise ToolError("verification failed: %s" % st.damage())
            got.update(st.events)
        if got != self.expected:
            diff = []
            for k in sorted(set(got) | set(self.expected), key=repr):
                if got[k] != self.expected[k]:
                    diff.append("host %s pid %s: %d in, %d out" % (k[0], k[1], self.expected[k], got[k]))
            raise ToolError(
                "verification failed: %d events in, %d out; %s%s"
                % (sum(self.expected.values()), sum(got.values()), "; ".join(diff[:3]), " ..." if len(diff) > 3 else "")
            )
        self.w.commit()
        total_events = sum(got.values())
        indexed_events = None
        if not self.a.no_index:
            from . import reader

            indexed_events = 0
            problem = None
            for o in self.w.files:
                try:
                    s = reader.scan(o.final, self.a.index_dir)
                except (OSError, ValueError) as e:
                    problem = "indexing %s failed: %s" % (o.final, e)
                    break
                indexed_events += int(s["events"])
            if problem is None and indexed_events != total_events:
                problem = "verification failed: the indexer counts %d events in the outputs, %d were read" % (
                    indexed_events,
                    total_events,
                )
            if problem is not None:  # nothing is left behind, as for the checks before the rename
                for o in self.w.files:
                    for f in (o.final, reader.index_path(o.final, self.a.index_dir)):
                        try:
                            os.unlink(f)
                        except OSError:
                            pass
                raise ToolError(problem)
        if not quiet:
            report = {
                "inputs": len(self.inputs),
                "outputs": [o.final for o in self.w.files],
                "events": total_events,
                "processes": len(got),
                "metadata_lines_in": sum(s.metadata for s in self.stats),
                "invalid_lines_dropped": sum(s.invalid for s in self.stats),
                "lost_bytes": sum(s.lost_bytes for s in self.stats),
                "events_given_hostname": self.w.rehosted,
                "bytes_in": sum(_size(p) for p in self.inputs),
                "bytes_out": sum(o.compressed for o in self.w.files),
            }
            if self.a.json:
                json.dump(report, sys.stdout, indent=1)
                sys.stdout.write("\n")
            else:
                print(
                    "%s: %d events of %d processes from %d files (%s) into %d files (%s); counts verified%s"
                    % (
                        self.prog,
                        total_events,
                        len(got),
                        len(self.inputs),
                        _human(report["bytes_in"]),
                        len(self.w.files),
                        _human(report["bytes_out"]),
                        "" if self.a.no_index else ", indexed",
                    )
                )
        return 0


def _size(p: str) -> int:
    try:
        return os.path.getsize(p)
    except OSError:
        return 0


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.1f %s" % (n, unit))
        n /= 1024.0
    return str(n)  # pragma: no cover


_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.I)


def parse_size(text: str) -> int:
    """``64MB``, ``64M``, ``64MiB``, ``1.5G``, ``4096`` -> bytes (powers of 1024; a bare number is
    bytes). Raises ``argparse.ArgumentTypeError``."""
    m = _SIZE_RE.match(text)
    if not m:
        raise argparse.ArgumentTypeError("not a size: %r (examples: 64MB, 512KiB, 1G, 4096)" % text)
    n = float(m.group(1)) * (1024 ** " KMGT".index(m.group(2).upper() or " "))
    if n < 1:
        raise argparse.ArgumentTypeError("size must be at least 1 byte: %r" % text)
    return int(n)


def expand_inputs(patterns: List[str]) -> List[str]:
    """Trace paths for ``patterns``: a directory stands for its ``*.pfw`` and ``*.pfw.gz``, a glob
    for its matches, a path for itself; sorted per pattern, repeats of one file (same inode)
    dropped. Raises ``UsageError`` for a pattern that names no file."""
    out: List[str] = []
    seen = set()
    for pat in patterns:
        if os.path.isdir(pat):
            hits = sorted(glob.glob(os.path.join(pat, "*.pfw")) + glob.glob(os.path.join(pat, "*.pfw.gz")))
        elif os.path.lexists(pat):
            hits = [pat]
        else:
            hits = sorted(glob.glob(pat))
            if not hits:
                raise ToolError("cannot read %s: no such file" % pat)
        for h in hits:
            try:
                s = os.stat(h)
            except OSError as e:
                raise ToolError("cannot read %s: %s" % (h, e.strerror)) from None
            if not stat.S_ISREG(s.st_mode):
                raise ToolError("cannot read %s: not a regular file" % h)
            key = (s.st_dev, s.st_ino)
            if key in seen:
                continue
            seen.add(key)
            out.append(h)
    return out


def _common_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--member-size",
        type=parse_size,
        default=DEFAULT_MEMBER_SIZE,
        help="text bytes per gzip member (default 4MiB, the tracer's buffer size)",
    )
    ap.add_argument(
        "--level", type=int, choices=range(1, 10), default=1, help="compression level (1: the tracer's default)"
    )
    ap.add_argument("--force", action="store_true", help="replace existing output files (never an input)")
    ap.add_argument(
        "--skip-invalid",
        action="store_true",
        help="drop invalid lines and damaged members (counted on stderr) instead of failing",
    )
    ap.add_argument("--no-index", action="store_true", help="do not index the outputs")
    ap.add_argument("--index-dir", default=None, help="directory for the outputs' .zindex files")
    ap.add_argument("--json", action="store_true", help="print the result as one JSON document")


def _run(prog: str, body, argv: Optional[List[str]], ap: argparse.ArgumentParser) -> int:
    a = ap.parse_args(argv)  # exits 2 on usage errors
    run = None
    try:
        run = Run(prog, a, expand_inputs(a.inputs))
        body(a, run)
        return run.finish()
    except UsageError as e:
        if run is not None:
            run.w.abort()
        print("%s: error: %s" % (prog, e), file=sys.stderr)
        return 2
    except ToolError as e:
        if run is not None:
            run.w.abort()
        print("%s: %s" % (prog, e), file=sys.stderr)
        return 1
    except OSError as e:  # writing an output (reading errors are ToolErrors)
        if run is not None:
            run.w.abort()
        print("%s: cannot write %s: %s" % (prog, e.filename or "output", e.strerror or e), file=sys.stderr)
        return 1
    except BaseException:
        if run is not None:
            run.w.abort()
        raise


def _safe_name(text: Optional[str]) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text) if text else "unknown"


def _output_dir(path: str) -> str:
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError("%s is not a directory" % path)
    os.makedirs(path, exist_ok=True)
    return path


def _trace_name(path: str) -> str:
    return path if path.endswith(".pfw.gz") else path + ".pfw.gz"


# ---------------------------------------------------------------------------------------------
# dftracer-merge


def merge_main(argv: Optional[List[str]] = None) -> int:
    """``dftracer-merge INPUT... -o OUT [--by-pid]``: every input into one file ``OUT``
    (``.pfw.gz`` added when missing), inputs in the order given (a directory sorted by name),
    or with ``--by-pid`` one file per process ``OUT/<prefix>-<host>-<pid>.pfw.gz``."""
    prog = "dftracer-merge"
    ap = argparse.ArgumentParser(prog=prog, description="Merge trace files into one, or into one per process.")
    ap.add_argument("inputs", nargs="+", help="trace files, directories or globs")
    ap.add_argument("-o", "--output", required=True, help="output file (directory with --by-pid)")
    ap.add_argument(
        "--by-pid", "--by-process", dest="by_pid", action="store_true", help="one output file per (host, pid)"
    )
    ap.add_argument("--prefix", default="trace", help="file name prefix with --by-pid (default: trace)")
    _common_args(ap)

    def body(a, run):
        if a.by_pid:
            out_dir = _output_dir(a.output)
            outs: Dict[Identity, OutFile] = {}
            for path in run.inputs:
                for rec in run.records(path):
                    if rec.meta:
                        o = outs.get(rec.ident)
                        if o is not None:
                            o.add_meta(rec)
                        continue
                    o = outs.get(rec.ident)
                    if o is None:
                        host, pid = rec.ident
                        name = "%s-%s-%s" % (a.prefix, _safe_name(host), "unknown" if pid is None else pid)
                        path, k = os.path.join(out_dir, name + ".pfw.gz"), 1
                        while path in run.w.finals:  # two host names made the same by _safe_name
                            path, k = os.path.join(out_dir, "%s.%d.pfw.gz" % (name, k)), k + 1
                        o = outs[rec.ident] = run.w.open(path)
                    o.add_event(rec, run.metadata)
            # a process with metadata and no event still gets its file (its lines are kept)
            pids_out = {pid for _, pid in outs}
            for ident, lines in run.metadata.items():
                if ident in outs or (ident[0] is None and ident[1] in pids_out):
                    continue
                host, pid = ident
                name = "%s-%s-%s.pfw.gz" % (a.prefix, _safe_name(host), "unknown" if pid is None else pid)
                o = outs[ident] = run.w.open(os.path.join(out_dir, name))
                for m in lines.values():
                    o.add_meta(m)
        else:
            o = run.w.open(_trace_name(a.output))
            for path in run.inputs:
                for rec in run.records(path):
                    if rec.meta:
                        o.add_meta(rec)
                    else:
                        o.add_event(rec, run.metadata)

    return _run(prog, body, argv, ap)


# ---------------------------------------------------------------------------------------------
# dftracer-compact


def _first_identity(path: str) -> Tuple[str, int]:
    """(host, pid) of the first record of ``path`` that has them (for ordering inputs by
    process); ("", -1) when unknown or unreadable (the error is reported when it is read)."""
    st = InputStats(path)
    host, pid = None, None
    try:
        for rec in iter_records(path, st):
            h, p = rec.ident
            host = host if host is not None else h
            pid = pid if pid is not None else p
            if host is not None and pid is not None:
                break
    except OSError:
        pass
    return (host or "", -1 if pid is None else pid)


def compact_main(argv: Optional[List[str]] = None) -> int:
    """``dftracer-compact INPUT... -o DIR --size 64MB``: inputs ordered by (host, pid, path),
    written to ``DIR/<prefix>-NNNNN.pfw.gz`` files of about ``--size`` compressed bytes. A new
    file starts before an input that would not fit in what is left of the current one (so one
    process's file stays in one output when it fits in one); an input larger than ``--size`` is
    cut where the size is reached, and the next file repeats its process's metadata."""
    prog = "dftracer-compact"
    ap = argparse.ArgumentParser(prog=prog, description="Compact many trace files into files of about N MB.")
    ap.add_argument("inputs", nargs="+", help="trace files, directories or globs")
    ap.add_argument("-o", "--output", required=True, help="output directory")
    ap.add_argument("--size", type=parse_size, default=parse_size("64MiB"), help="target file size (default 64MiB)")
    ap.add_argument("--prefix", default="compact", help="output file name prefix (default: compact)")
    ap.add_argument("--keep-order", action="store_true", help="keep the input order instead of ordering by process")
    _common_args(ap)

    def body(a, run):
        out_dir = _output_dir(a.output)
        paths = list(run.inputs)
        if not a.keep_order:
            # small files: their heads are read twice (cheap); big ones: one member
            paths.sort(key=lambda p: (_first_identity(p), p))
        o: Optional[OutFile] = None

        def new_file() -> OutFile:
            return run.w.open(os.path.join(out_dir, "%s-%05d.pfw.gz" % (a.prefix, len(run.w.files))))

        for path in paths:
            size = _size(path)
            if o is not None and o.events and o.size_estimate() + size > a.size:
                o.close()
                o = None
            # an input that fits is never cut (the size estimate may overshoot on the way); one
            # that started its file and still outgrows it is cut at the size
            whole = o is not None and o.size_estimate() + size <= a.size
            for rec in run.records(path):
                if o is None:
                    o = new_file()
                elif not whole and not rec.meta and o.size_estimate() >= a.size:
                    o.close()
                    o = new_file()
                if rec.meta:
                    o.add_meta(rec)
                else:
                    o.add_event(rec, run.metadata)

    return _run(prog, body, argv, ap)


# ---------------------------------------------------------------------------------------------
# dftracer-split


def split_main(argv: Optional[List[str]] = None) -> int:
    """``dftracer-split FILE -o DIR (--lines N | --size S | --chunks K)``: ``FILE`` into
    ``DIR/<stem>-NNNNN.pfw.gz`` chunks of N events each, of about S compressed bytes each, or K
    chunks of equal event counts (the last may hold fewer). Each chunk starts every process's
    events with that process's metadata lines."""
    prog = "dftracer-split"
    ap = argparse.ArgumentParser(prog=prog, description="Split one trace file into equal chunks.")
    ap.add_argument("inputs", nargs=1, metavar="input", help="one trace file")
    ap.add_argument("-o", "--output", required=True, help="output directory")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--lines", type=int, help="events per chunk")
    g.add_argument("--size", type=parse_size, help="compressed bytes per chunk (about)")
    g.add_argument("--chunks", type=int, help="number of chunks of equal event counts")
    ap.add_argument("--prefix", default=None, help="output file name prefix (default: the input's name)")
    _common_args(ap)

    def body(a, run):
        if (a.lines is not None and a.lines < 1) or (a.chunks is not None and a.chunks < 1):
            raise UsageError("--lines and --chunks must be at least 1")
        if len(run.inputs) != 1:
            raise UsageError("dftracer-split takes one file (%d given)" % len(run.inputs))
        path = run.inputs[0]
        out_dir = _output_dir(a.output)
        stem = a.prefix or re.sub(r"\.pfw(\.gz)?$", "", os.path.basename(path))
        per = a.lines
        if a.chunks is not None:
            st = count_events(path)  # one counting pass (its damage is reported by the main pass)
            per = max(1, -(-st.total_events // a.chunks))
        o: Optional[OutFile] = None

        def new_file() -> OutFile:
            return run.w.open(os.path.join(out_dir, "%s-%05d.pfw.gz" % (stem, len(run.w.files))))

        for rec in run.records(path):
            if o is None:
                o = new_file()
            elif not rec.meta and (
                (per is not None and o.events >= per) or (a.size is not None and o.size_estimate() >= a.size)
            ):
                o.close()
                o = new_file()
            if rec.meta:
                o.add_meta(rec)
            else:
                o.add_event(rec, run.metadata)

    return _run(prog, body, argv, ap)


# ---------------------------------------------------------------------------------------------
# dftracer-event-count


def event_count_main(argv: Optional[List[str]] = None) -> int:
    """``dftracer-event-count INPUT... [--by-pid] [--json]``: events (lines that are not
    metadata) per file and in total; ``--by-pid`` per (host, pid). Exit 1 when a file could not
    be read or had invalid lines or damage (still counted and printed)."""
    prog = "dftracer-event-count"
    ap = argparse.ArgumentParser(prog=prog, description="Count the events of trace files.")
    ap.add_argument("inputs", nargs="+", help="trace files, directories or globs")
    ap.add_argument("--by-pid", "--by-process", dest="by_pid", action="store_true", help="counts per (host, pid)")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    a = ap.parse_args(argv)
    rc = 0
    try:
        inputs = expand_inputs(a.inputs)
    except ToolError as e:
        print("%s: %s" % (prog, e), file=sys.stderr)
        return 1
    files = []
    total: Counter = Counter()
    for p in inputs:
        try:
            st = count_events(p)
        except OSError as e:
            print("%s: cannot read %s: %s" % (prog, p, e.strerror or e), file=sys.stderr)
            rc = 1
            continue
        msg = st.damage()
        if msg:
            print("%s: %s" % (prog, msg), file=sys.stderr)
            rc = 1
        total.update(st.events)
        files.append({"file": p, "events": st.total_events, "invalid_lines": st.invalid, "lost_bytes": st.lost_bytes})
    doc = {"files": files, "total": sum(total.values())}
    if a.by_pid:
        doc["processes"] = [
            {"hostname": h, "pid": pid, "events": n}
            for (h, pid), n in sorted(total.items(), key=lambda kv: repr(kv[0]))
        ]
    if a.json:
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        for f in files:
            print("%d\t%s" % (f["events"], f["file"]))
        if a.by_pid:
            for r in doc["processes"]:
                print("%d\thost %s pid %s" % (r["events"], r["hostname"], r["pid"]))
        print("%d\ttotal" % doc["total"])
    return rc
