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
size        Int64                bytes moved (read/write family: ret when >= 0; fread/fwrite:
                                 ret * args.size), else null
offset      Int64                args.offset, bytes
<args key>  Int64/Float64/cat.   every other args key; an args key named like a core column
                                 (``name cat ph pid tid ts dur te``) or ``size`` is column
                                 ``arg_<key>`` (``arg_size``, ``arg_dur``, ...)
==========  ===================  ==============================================================
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional

import numpy as np
import pandas as pd

from . import _reader

__all__ = [
    "Batch", "EVENT_META", "CORE_COLUMNS", "ReaderError", "build_index", "empty_events_frame",
    "checkpoint_stats", "index_path", "load_batch", "load_files", "read_checkpoints", "read_lines",
    "read_lines_checked", "scan",
    "scan_arg_columns",
]

ReaderError = _reader.ReaderError

#: Core event columns and their pandas dtypes, in frame order.
EVENT_META: Dict[str, str] = {
    "name": "category", "cat": "category", "ph": "category", "hostname": "category",
    "fname": "category", "pid": "int64", "tid": "int64", "ts": "int64", "dur": "int64",
    "te": "int64", "size": "Int64", "offset": "Int64",
}
CORE_COLUMNS = list(EVENT_META)
_CATEGORICAL = {"name", "cat", "ph", "hostname", "fname"}

#: Columns of ``Batch.metadata``.
METADATA_COLUMNS = ["name", "cat", "ph", "pid", "tid", "ts", "dur", "key", "value", "args"]


def _dtype(d: str):
    if d == "category" or d == "string":
        return pd.CategoricalDtype(pd.Index([], dtype=object))
    return pd.Int64Dtype() if d == "Int64" else pd.Float64Dtype() if d == "Float64" else np.dtype(d)


def empty_events_frame(arg_columns: Optional[Mapping[str, str]] = None) -> pd.DataFrame:
    """An empty events frame with the exact column dtypes (usable as Dask ``meta``).

    ``arg_columns`` maps args keys to ``"Int64" | "Float64" | "string"`` (as returned by
    :func:`scan_arg_columns`); string args are categorical like ``name``.
    """
    cols = {c: pd.Series([], dtype=_dtype(d)) for c, d in EVENT_META.items()}
    for k, d in sorted((arg_columns or {}).items()):
        cols[k] = pd.Series([], dtype=_dtype(d))
    return pd.DataFrame(cols)


@dataclass
class Batch:
    """Result of :func:`load_batch`."""
    events: pd.DataFrame
    metadata: pd.DataFrame
    skipped_lines: int = 0          # lines that are not valid JSON or lack name/ts
    lost_bytes: int = 0             # bytes of undecodable / cut-short data in this batch
    lost_lines: int = 0             # lines of members that failed their CRC/ISIZE (as decoded)
    unresolved_hashes: int = 0      # fhash/hhash values without a FH/HH record in the file
    warnings: List[str] = field(default_factory=list)
    header_mismatches: int = 0      # members read by plain inflation because their header lied


def _categorical(codes: np.ndarray, categories: list) -> pd.Categorical:
    return pd.Categorical.from_codes(codes, categories=pd.Index(categories, dtype=object), validate=False)


def _nullable(values: np.ndarray, mask: np.ndarray):
    if values.dtype.kind == "f":
        return pd.arrays.FloatingArray(values, mask, copy=False)
    return pd.arrays.IntegerArray(values, mask, copy=False)


def _conform(df: pd.DataFrame, arg_columns: Mapping[str, str]) -> pd.DataFrame:
    """Give ``df`` exactly the args columns of ``arg_columns`` (missing -> null, cast dtypes)."""
    n = len(df)
    out = {c: df[c] for c in CORE_COLUMNS}
    for k, d in sorted(arg_columns.items()):
        dt = _dtype(d)
        if k not in df.columns:
            out[k] = pd.Series(pd.array([None] * n, dtype=dt) if d != "string" else
                               pd.Categorical([None] * n), index=df.index)
            continue
        s = df[k]
        if d == "string" and not isinstance(s.dtype, pd.CategoricalDtype):
            s = s.astype("string").astype("category")
        elif d != "string" and s.dtype != dt:
            s = s.astype(dt)
        out[k] = s
    return pd.DataFrame(out, index=df.index)


def load_batch(path: str, first_checkpoint: int, last_checkpoint: int, index_dir: Optional[str] = None,
               arg_columns: Optional[Mapping[str, str]] = None) -> Batch:
    """Decompress and parse checkpoints ``[first_checkpoint, last_checkpoint]`` of ``path``.

    Columns are NumPy views of C++ buffers (no copy). With ``arg_columns`` the frame gets exactly
    those args columns (Dask meta from :func:`scan_arg_columns`). Raises :class:`ReaderError`
    (an ``OSError``) for unreadable files and ``IndexError`` for a bad checkpoint range.
    """
    r = _reader.load_batch(os.fspath(path), int(first_checkpoint), int(last_checkpoint), index_dir)
    return _batch(r, path, arg_columns)


def load_files(paths: List[str], arg_columns: Optional[Mapping[str, str]] = None):
    """Read and parse many small files whole into one :class:`Batch` (one call, no SQLite index).

    Each file is indexed in memory only (reading a small file whole costs less than an index
    file). Returns ``(batch, files)``: ``files`` has one dict per path, in order, with ``path``,
    ``error`` (None or the message of the ReaderError that made the file unreadable), ``kind``,
    ``lines``, ``compressed_bytes``, ``uncompressed_bytes``, ``checkpoints``, ``rows`` (its events
    in the batch, consecutive), ``skipped_lines``, ``lost_bytes``, ``lost_lines`` and ``warnings``.
    """
    r = _reader.load_files([os.fspath(p) for p in paths])
    files = list(r["files"])
    for f in files:
        if f["skipped_lines"]:
            f["warnings"].append("%s: %d lines skipped (invalid JSON or missing/invalid name or ts)"
                                 % (f["path"], f["skipped_lines"]))
        if f["unresolved_hashes"]:
            f["warnings"].append("%s: %d file/host hashes without a FH/HH record" % (f["path"], f["unresolved_hashes"]))
    return _batch(r, None, arg_columns), files


def _batch(r: dict, path: Optional[str], arg_columns: Optional[Mapping[str, str]]) -> Batch:
    core = r["core"]
    n = r["rows"]
    data = {}
    for c in CORE_COLUMNS:
        v = core[c]
        if c in _CATEGORICAL:
            data[c] = _categorical(*v)
        elif c in ("size", "offset"):
            data[c] = _nullable(*v)
        else:
            data[c] = v
    for key, dtype, payload in r["args"]:
        data[key] = _categorical(*payload) if dtype == "string" else _nullable(*payload)
    events = pd.DataFrame(data, index=pd.RangeIndex(n), copy=False)
    if arg_columns is not None:
        events = _conform(events, arg_columns)
    m = r["metadata"]
    metadata = pd.DataFrame({
        "name": pd.Series(m["name"], dtype=object), "cat": pd.Series(m["cat"], dtype=object),
        "ph": pd.Series(m["ph"], dtype=object), "pid": pd.Series(m["pid"], dtype="int64"),
        "tid": pd.Series(m["tid"], dtype="int64"), "ts": pd.array(m["ts"], dtype="Int64"),
        "dur": pd.array(m["dur"], dtype="Int64"), "key": pd.Series(m["key"], dtype=object),
        "value": pd.Series(m["value"], dtype=object), "args": pd.Series(m["args"], dtype=object),
    })
    warnings = list(r["warnings"])
    if path is not None:  # (load_files gives these per file)
        if r["skipped_lines"]:
            warnings.append("%s: %d lines skipped (invalid JSON or missing/invalid name or ts)"
                            % (path, r["skipped_lines"]))
        if r["unresolved_hashes"]:
            warnings.append("%s: %d file/host hashes without a FH/HH record" % (path, r["unresolved_hashes"]))
    lost_bytes = sum(f["lost_bytes"] for f in r["files"]) if path is None else r["lost_bytes"]
    lost_lines = sum(f["lost_lines"] for f in r["files"]) if path is None else r["lost_lines"]
    return Batch(events=events, metadata=metadata, skipped_lines=int(r["skipped_lines"]),
                 lost_bytes=int(lost_bytes), lost_lines=int(lost_lines), warnings=warnings,
                 header_mismatches=int(r["header_mismatches"]), unresolved_hashes=int(r["unresolved_hashes"]))


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
    ``skipped_lines`` and ``arg_columns`` ([(key, dtype)]). Cached in the index."""
    return _reader.scan(os.fspath(path), index_dir)


def scan_arg_columns(path: str, index_dir: Optional[str] = None) -> Dict[str, str]:
    """Args columns of ``path`` -> ``"Int64" | "Float64" | "string"``; one parse of the file the
    first time, then read from the index."""
    return dict(scan(path, index_dir)["arg_columns"])


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
