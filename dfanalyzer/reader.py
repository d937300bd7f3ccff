"""Python face of the C++ indexer / batch reader / parser (``dfanalyzer._reader``).

Contract: docs/design.md ("Reader binding"); index schema and formats: docs/index.md.

Event columns (one row per trace event; ``ph == "M"`` records and the tracer's own ``cat ==
"dftracer"`` records go to ``Batch.metadata`` instead):

==========  ===================  ==============================================================
column      dtype                meaning
==========  ===================  ==============================================================
name        category             event name
cat         category             category (POSIX, STDIO, app, ...)
ph          category             phase letter ("X", "i", ...; DFTracer 2.x integers: 1 "X",
                                 2 "C", 3 "A" aggregated, 4 "M")
hostname    category             args.hostname, HH resolution of args.hhash, or the file's host
fname       category             args.fname or FH resolution of args.fhash
pid, tid    int64
ts, dur     int64                µs since the epoch / µs (aggregated "A" rows: interval start /
                                 args.dur_sum, the summed µs of their args.dft_cnt calls)
te          int64                ts + dur, µs
size        Int64                bytes moved (read/write family, kernel copies: ret when >= 0;
                                 fread/fwrite: ret * args.size), else null
offset      Int64                args.offset, bytes
<args key>  Int64/Float64/cat.   every other args key; an args key named like a core column
                                 (``name cat ph pid tid ts dur te``) or ``size`` is column
                                 ``arg_<key>`` (``arg_size``, ``arg_dur``, ...)
args_extra  category             JSON object text of the args that did not get a column (see
                                 below), null when the event had none
==========  ===================  ==============================================================

Bounded args columns: at most :data:`MAX_ARG_COLUMNS` (256) args keys of a batch become columns
(the first ones met); the values of every other key go, as their exact JSON text, into the one
``args_extra`` column (a JSON object per event; null args values are left out, as they are absent
in columns; an args key literally named ``args_extra`` always goes there). So a trace with
100,000 distinct keys needs memory per event bounded by its line, not 100,000 columns.
:class:`dfanalyzer.DFAnalyzer` then picks the globally most frequent keys over all batches and
reloads the batches that disagree with ``columns=<that list>, extra=True``, so every partition
has the same columns.

Timestamp sanity: an event line (not a metadata record) with ``ts`` outside ``[0, MAX_TS)`` µs
(``MAX_TS`` = 2100-01-01T00:00:00Z since the epoch), ``ts + dur >= MAX_TS`` or a negative ``dur``
is invalid: skipped and counted (``ts_out_of_range_lines``, ``negative_dur_lines``, both part of
``skipped_lines``). ``ts`` before 1990 is accepted as a relative timestamp (µs since some origin,
as the Chrome trace-event format allows).

Projection: ``columns=`` of :func:`load_batch` / :func:`load_files` names the args columns to
build (None: all). The core columns are always built; the args keys left out are still parsed and
checked (the same lines are accepted or skipped, the same ``size`` and aggregated ``dur``) but
their columns are never made, which is most of the parse cost of traces with many args keys.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterable, List, Optional

from . import _reader

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from .reader import Batch  # (made on first use: _batch_class)
# pandas (and dfanalyzer.schema, which needs it) are imported by the functions that build frames,
# so that the index and line tools (dftracer-index, dftracer-lines) start without them.

# EVENT_META and CORE_COLUMNS are resolved by the module __getattr__ below
__all__ = [  # noqa: F822
    "Batch",
    "EVENT_META",
    "CORE_COLUMNS",
    "ReaderError",
    "build_index",
    "checkpoint_stats",
    "index_path",
    "load_batch",
    "load_files",
    "read_checkpoints",
    "read_lines",
    "read_lines_checked",
    "scan",
]

ReaderError = _reader.ReaderError
#: Most args keys of a batch that become their own column (the others go to ``args_extra``).
MAX_ARG_COLUMNS: int = int(_reader.MAX_ARG_COLUMNS)
#: 2100-01-01T00:00:00Z in µs since the epoch: event times at or after it are invalid.
MAX_TS: int = int(_reader.MAX_TS)
#: Args keys that never become a column of their own name (core column names and ``size``): their
#: column is ``arg_<key>``.
RENAMED_ARGS = frozenset(("name", "cat", "ph", "pid", "tid", "ts", "dur", "te", "size"))


def __getattr__(name: str):
    """``EVENT_META`` (core event column -> kind, ``dfanalyzer.schema``), ``CORE_COLUMNS``
    (their names, frame order) and :class:`Batch`, resolved on first use."""
    if name == "Batch":
        return _batch_class()
    from . import schema

    if name == "EVENT_META":
        return dict(schema.CORE_COLUMNS)
    if name == "CORE_COLUMNS":
        return list(schema.CORE_NAMES)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _batch_class() -> type:
    """:class:`Batch`, made on first use (module ``__getattr__``): ``dataclasses`` (with
    ``inspect``, ~10 ms) is not imported by the threaded summary's start-up, which imports this
    module to index (docs/perf/i28-boot.md). One class per process: the first one made is kept."""
    cls = globals().get("Batch")
    if cls is not None:
        return cls
    from dataclasses import dataclass, field

    @dataclass
    class Batch:
        """Result of :func:`load_batch`."""

        __qualname__ = "Batch"  # (pickled, printed as the module-level class it was)

        events: pd.DataFrame
        metadata: pd.DataFrame
        skipped_lines: int = 0  # lines that are not valid JSON or lack name/ts
        lost_bytes: int = 0  # bytes of undecodable / cut-short data in this batch
        lost_lines: int = 0  # lines of members that failed their CRC/ISIZE (as decoded)
        unresolved_hashes: int = 0  # fhash/hhash values without a FH/HH record in the file
        warnings: List[str] = field(default_factory=list)
        header_mismatches: int = 0  # members read by plain inflation because their header lied
        #: args column -> events with a value, including the keys in ``args_extra`` (named as their
        #: column would be: ``arg_<key>`` for :data:`RENAMED_ARGS`)
        arg_counts: dict = field(default_factory=dict)
        #: ``(min ts, max te)`` of ``events`` in µs (:func:`dfanalyzer.sanity.span`), None when it has
        #: no row; taken from the core arrays before the frame is built (no pandas column access)
        span: Optional[tuple] = None

    return globals().setdefault("Batch", Batch)


def _nullable(values: np.ndarray, mask: np.ndarray):
    import pandas as pd

    if values.dtype.kind == "f":
        return pd.arrays.FloatingArray(values, mask, copy=False)
    return pd.arrays.IntegerArray(values, mask, copy=False)


def load_batch(
    path: str,
    first_checkpoint: int,
    last_checkpoint: int,
    index_dir: Optional[str] = None,
    columns: Optional[Iterable[str]] = None,
    extra: bool = False,
) -> Batch:
    """Decompress and parse checkpoints ``[first_checkpoint, last_checkpoint]`` of ``path``.

    Columns are NumPy views of C++ buffers (no copy); args columns are those the batch's events
    have (kinds and union rule in :mod:`dfanalyzer.schema`), limited to the names in ``columns``
    when it is given (projection, see the module docstring; core columns are always there).
    Without ``columns`` at most :data:`MAX_ARG_COLUMNS` args keys become columns, the others go
    to ``args_extra`` (module docstring); with ``columns`` and ``extra`` the keys left out go to
    ``args_extra`` instead of being dropped.
    Raises :class:`ReaderError` (an ``OSError``) for unreadable files, ``IndexError`` for a bad
    checkpoint range and ``TypeError`` when ``columns`` is a str.
    """
    kw = {"extra": True} if extra else {}
    r = _reader.load_batch(
        os.fspath(path), int(first_checkpoint), int(last_checkpoint), index_dir, _projection(columns), **kw
    )
    return _batch(r, path)


def _projection(columns: Optional[Iterable[str]]) -> Optional[List[str]]:
    """``columns`` as the binding takes it (None: every args column)."""
    if columns is None:
        return None
    if isinstance(columns, (str, bytes)):
        raise TypeError("columns must be an iterable of column names, not a single name")
    return [str(c) for c in columns]


def load_files(paths: List[str], columns: Optional[Iterable[str]] = None, extra: bool = False):
    """Read and parse many small files whole into one :class:`Batch` (one call, no SQLite index).

    Each file is indexed in memory only (reading a small file whole costs less than an index
    file). Returns ``(batch, files)``: ``files`` has one dict per path, in order, with ``path``,
    ``error`` (None or the message of the ReaderError that made the file unreadable), ``kind``,
    ``lines``, ``compressed_bytes``, ``uncompressed_bytes``, ``checkpoints``, ``rows`` (its events
    in the batch, consecutive), ``skipped_lines``, ``lost_bytes``, ``lost_lines`` and ``warnings``.
    ``columns``, ``extra``: the args columns to build, as in :func:`load_batch`.
    """
    kw = {"extra": True} if extra else {}
    r = _reader.load_files([os.fspath(p) for p in paths], _projection(columns), **kw)
    files = list(r["files"])
    for f in files:
        if f["skipped_lines"]:
            f["warnings"].append(_skipped_warning(f["path"], f))
        if f["unresolved_hashes"]:
            f["warnings"].append("%s: %d file/host hashes without a FH/HH record" % (f["path"], f["unresolved_hashes"]))
    return _batch(r, None), files


def _batch(r: dict, path: Optional[str]) -> Batch:
    from . import sanity, schema

    core = r["core"]
    span = sanity.span(core["ts"], core["te"]) if int(r["rows"]) else None
    names = []
    cols = []
    for c in schema.CORE_NAMES:
        v = core[c]
        if c in schema.CATEGORICAL_CORE:
            cols.append(schema.categorical(*v))
        elif c in schema.NULLABLE_CORE:
            cols.append(_nullable(*v))
        else:
            cols.append(v)
        names.append(c)
    for key, dtype, payload in r["args"]:
        kind = schema.kind_of_reader(dtype)
        cols.append(schema.categorical(*payload) if kind == schema.CATEGORY else _nullable(*payload))
        names.append(key)
    warnings, lost_bytes, lost_lines = batch_problems(r, path)
    return _batch_class()(
        events=schema.frame_of_columns(names, cols, int(r["rows"])),
        metadata=metadata_frame(r["metadata"]),
        skipped_lines=int(r["skipped_lines"]),
        lost_bytes=lost_bytes,
        lost_lines=lost_lines,
        warnings=warnings,
        header_mismatches=int(r["header_mismatches"]),
        unresolved_hashes=int(r["unresolved_hashes"]),
        arg_counts=arg_counts(r),
        span=span,
    )


#: Columns of the ``metadata`` frame and their dtypes, in order.
_METADATA_COLUMNS = (
    ("name", "object"),
    ("cat", "object"),
    ("ph", "object"),
    ("pid", "int64"),
    ("tid", "int64"),
    ("ts", "Int64"),
    ("dur", "Int64"),
    ("key", "object"),
    ("value", "object"),
    ("args", "object"),
)


def metadata_frame(m: dict) -> pd.DataFrame:
    """The ``metadata`` DataFrame of :class:`Batch` from the C++ reader's metadata columns:
    ``name cat ph`` object (str), ``pid tid`` int64, ``ts dur`` Int64 µs (null when the record has
    none), ``key value args`` object (str); a ``RangeIndex``."""
    import numpy as np

    from . import schema

    n = len(m["name"])
    names, cols = [], []
    for c, kind in _METADATA_COLUMNS:
        v = m[c]
        if kind == "object":
            a = np.empty(n, dtype=object)
            a[:] = v
        elif kind == "int64":
            a = np.array(v, dtype=np.int64).reshape(n)
        else:
            mask = np.fromiter((x is None for x in v), dtype=bool, count=n)
            a = _nullable(np.fromiter((0 if x is None else x for x in v), dtype=np.int64, count=n), mask)
        names.append(c)
        cols.append(a)
    return schema.frame_of_columns(names, cols, n, consolidate=True)


def _skipped_warning(path: str, r: dict) -> str:
    """The warning for the skipped lines of a reader result or file dict, with the counted
    timestamp reasons."""
    msg = "%s: %d lines skipped (invalid JSON or missing/invalid name or ts" % (path, r["skipped_lines"])
    why = []
    if r.get("ts_out_of_range_lines"):
        why.append("%d with ts or ts + dur outside [0, 2100-01-01) µs" % r["ts_out_of_range_lines"])
    if r.get("negative_dur_lines"):
        why.append("%d with a negative dur" % r["negative_dur_lines"])
    return msg + ("; " + ", ".join(why) if why else "") + ")"


def arg_counts(r: dict) -> dict:
    """Args column -> events with a value, of a C++ reader result: its columns' counts plus
    the keys it put into ``args_extra`` (under their column names)."""
    out = dict(r.get("arg_counts", {}))
    out.pop("args_extra", None)
    for k, n in r.get("extra_keys", {}).items():
        if k == "args_extra":
            continue
        c = "arg_" + k if k in RENAMED_ARGS else k
        out[c] = out.get(c, 0) + int(n)
    return out


def batch_problems(r: dict, path: Optional[str]):
    """``(warnings, lost_bytes, lost_lines)`` of a C++ reader result (``path`` None: a
    :func:`load_files` result, whose per-file warnings are in its ``files``)."""
    warnings = list(r["warnings"])
    if path is not None:  # (load_files gives these per file)
        if r["skipped_lines"]:
            warnings.append(_skipped_warning(path, r))
        if r["unresolved_hashes"]:
            warnings.append("%s: %d file/host hashes without a FH/HH record" % (path, r["unresolved_hashes"]))
    lost_bytes = sum(f["lost_bytes"] for f in r["files"]) if path is None else r["lost_bytes"]
    lost_lines = sum(f["lost_lines"] for f in r["files"]) if path is None else r["lost_lines"]
    return warnings, int(lost_bytes), int(lost_lines)


def build_index(path: str, index_dir: Optional[str] = None, force: bool = False, verify: bool = False) -> dict:
    """Build (or load a valid) index; returns the dict of docs/design.md ("kind", "lines",
    "checkpoints", ...). An index that does not match the file is rebuilt (docs/index.md, "Trust
    rules"): ``warnings`` then says why unless it was merely stale; ``in_memory`` is True (and
    ``index_path`` "") when no safe writable index location exists or writing failed.
    ``lost_lines``, ``lost_bytes`` and ``header_mismatches`` count what indexing found damaged;
    ``verify`` rebuilds inflating every member to check all its header fields."""
    return _reader.build_index(os.fspath(path), index_dir, force, verify)


def scan(path: str, index_dir: Optional[str] = None) -> dict:
    """:func:`build_index` plus one parse pass: ``events``, ``metadata_records``,
    ``skipped_lines``, ``read_lost_lines``, ``read_lost_bytes``, ``read_header_mismatches``,
    ``hostname`` and ``context_sizes``. Cached in the index. (Args columns are not listed: the
    analyzer takes each batch's args columns from the batch itself and merges them with
    :func:`dfanalyzer.schema.union_schema`.)"""
    return _reader.scan(os.fspath(path), index_dir)


def read_lines(path: str, first_line: int, n_lines: int, index_dir: Optional[str] = None) -> List[str]:
    """Lines ``[first_line, first_line + n_lines)`` (0-based, without newline) through the index."""
    return _reader.read_lines(os.fspath(path), int(first_line), int(n_lines), index_dir)


def read_lines_checked(path: str, first_line: int, n_lines: int, index_dir: Optional[str] = None) -> dict:
    """:func:`read_lines` plus what could not be read in that range: a dict with ``lines``
    (list of str), ``lost_lines``, ``lost_bytes`` (ints), ``warnings`` (list of str) and
    ``reindexed`` (the index was rebuilt with every member verified because a member's line
    count disagreed with it). Lost regions and failed members are never returned as lines."""
    return _reader.read_lines_checked(os.fspath(path), int(first_line), int(n_lines), index_dir)


def read_checkpoints(path: str, first: int, last: int, index_dir: Optional[str] = None) -> bytes:
    """Raw uncompressed bytes of checkpoints ``[first, last]`` (inclusive)."""
    return _reader.read_checkpoints(os.fspath(path), int(first), int(last), index_dir)


def index_path(path: str, index_dir: Optional[str] = None) -> str:
    """Where the index of ``path`` lives (``<path>.zindex`` or inside the index directory)."""
    return _reader.index_path(os.fspath(path), index_dir)


def checkpoint_stats(path: str, index_dir: Optional[str] = None) -> List[dict]:
    """Per checkpoint of ``path``: ``number``, ``events`` (-1 for a damaged checkpoint), ``min_ts``,
    ``max_ts``, ``min_te``, ``max_te`` (µs) and ``cats`` / ``names`` (lists of the distinct
    categories / names, or None when there are more than 256). Computed with one parse of each
    checkpoint the first time, then read from the index (table ``checkpoint_stats``). Used to skip
    checkpoints a filter cannot match (``dfanalyzer.filters``)."""
    return _reader.checkpoint_stats(os.fspath(path), index_dir)
