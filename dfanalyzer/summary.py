"""Summary of a trace (paper Section IV-D, Figure 6): exact, computed distributed.

The work is split so that no worker ever holds all events:

* :func:`partition_partial` runs on one pandas partition of ``DFAnalyzer.events`` and returns a
  small :class:`Partial`: counts, distinct-key sets, merged interval unions (sorted, disjoint
  ``[start, end)`` arrays in µs) and, per I/O function, an exact histogram of the ``size`` column.
* :func:`combine_partials` merges partials (a tree reduction on the cluster).
* :func:`finish` turns the final partial into a :class:`Summary` (seconds, exact percentiles).

Interval unions: an interval is ``[ts, ts + dur)`` in µs (``te = ts + dur``); zero-length
intervals are empty. A union is stored as two sorted int64 arrays ``(starts, ends)`` with
``ends[i] < starts[i + 1]`` (touching intervals are merged).

Aggregated records (DFTracer 2.x ``DFTRACER_ENABLE_AGGREGATION=1``, ``ph == "A"``): one row stands
for ``dft_cnt`` calls of one function by one thread within one time interval; how they enter
each metric is defined in docs/analyzer.md ("Aggregated records").

Percentiles are numpy's default ("linear", Hyndman & Fan type 7) computed from the exact
histogram, with numpy's own interpolation formula, so they are bit-identical to
``numpy.percentile`` over all sizes.
"""

from __future__ import annotations

import dataclasses
import tempfile
import threading
import weakref
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence

import numpy as np

from ._lazy import pandas as pd  # (imported on first use: dfanalyzer._lazy)
from .engine.events import AGGREGATE_COLUMNS, FrameColumns, ReaderColumns, aggregated, calls, event_mask
from .engine.events import lut as _lut
from .engine.intervals import (
    EMPTY,
    Union,
    difference_measure,
    histogram_percentiles,
    merge_histograms,
    merge_unions,
    union_intervals,
    union_measure,
)
from .engine.reduce import FAN_IN, Folder
from .engine.vocabulary import TRACER_CATEGORY as TRACER_CAT  # the tracer's own records, never events

__all__ = [
    "Summary",
    "Partial",
    "union_intervals",
    "merge_unions",
    "union_measure",
    "difference_measure",
    "histogram_percentiles",
    "partition_partial",
    "combine_partials",
    "PartialFolder",
    "SpilledUnions",
    "HeldUnions",
    "hold_unions",
    "SPILL_INTERVALS",
    "partial_from_columns",
    "finish",
    "TRACER_CAT",
    "AGGREGATE_COLUMNS",
    "FrameColumns",
    "ReaderColumns",
]

_EMPTY = EMPTY
TIME_KEYS = (
    "total",
    "app_io",
    "unoverlapped_app_io",
    "unoverlapped_app_compute",
    "compute",
    "io",
    "unoverlapped_io",
    "unoverlapped_compute",
)
SIZE_KEYS = ("min", "p25", "mean", "median", "p75", "max")


# ----------------------------------------------------------------------------- partials
@dataclass
class Partial:
    """Mergeable summary state of a set of events (one or more partitions)."""

    events: int = 0
    min_ts: Optional[int] = None
    max_te: Optional[int] = None
    hosts: set = field(default_factory=set)
    processes: set = field(default_factory=set)
    threads_compute: set = field(default_factory=set)
    threads_io: set = field(default_factory=set)
    files: set = field(default_factory=set)
    io: Union = (_EMPTY, _EMPTY)
    compute: Union = (_EMPTY, _EMPTY)
    app_io: Union = (_EMPTY, _EMPTY)
    # name -> [count, (values, counts) histogram of the exactly known per-call sizes,
    #          None | [calls, bytes, min, max] of aggregated calls whose sizes are not all equal]
    functions: Dict[str, list] = field(default_factory=dict)
    agg_records: int = 0  # aggregated records among the events, and the calls they stand for
    agg_calls: int = 0
    # interval unions moved to disk by a spilling PartialFolder, or held unmerged (hold_unions):
    # their intervals belong to io / compute / app_io as if still there; only in the process
    # that folded them, never pickled
    spilled: List["SpilledUnions | HeldUnions"] = field(default_factory=list)


def _factorize(v: np.ndarray):
    """``(codes, uniq)`` of an int64 array: ``uniq`` its distinct values (sorted), ``codes[i]``
    the index of ``v[i]`` in ``uniq``. What ``pandas.factorize`` gives up to the order of
    ``uniq`` (every caller's result is independent of that order), without pandas (the
    threaded summary does not import it): a lookup table when the values span a small range
    (sizes, pids, dense keys: one pass), else a sort (``np.unique``)."""
    if v.size == 0:
        return np.zeros(0, dtype=np.intp), v[:0]
    lo, hi = int(v.min()), int(v.max())
    if hi - lo <= 4 * v.size + 4096:
        off = v - lo
        present = np.zeros(hi - lo + 1, dtype=bool)
        present[off] = True
        uniq = np.flatnonzero(present)
        # codes by a scatter, not a cumsum over the range: NumPy's bool -> intp cumsum runs
        # holding the GIL, a scatter of an arange releases it (the threaded summary's pool)
        code_of = np.empty(present.size, dtype=np.intp)
        code_of[uniq] = np.arange(uniq.size, dtype=np.intp)
        return code_of[off], uniq + lo
    uniq, codes = np.unique(v, return_inverse=True)
    return codes.reshape(-1), uniq


def _representatives(key: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """One row index (from ``rows``) per distinct value of ``key`` (``key[i]`` belongs to ``rows[i]``)."""
    codes, uniq = _factorize(key)
    rep = np.empty(len(uniq), dtype=np.int64)
    rep[codes] = rows
    return rep


def partition_partial(df: pd.DataFrame, io_cats, compute_cats, app_io_cats) -> Partial:
    """Summary state of one partition of ``DFAnalyzer.events`` (pandas DataFrame).

    Uses columns ``ph``, ``cat``, ``name``, ``hostname``, ``pid``, ``tid``, ``ts``, ``te``,
    ``fname`` and ``size``, and for aggregated rows the :data:`AGGREGATE_COLUMNS` present. Events
    are rows with ``ph`` ``"X"`` (one call each) or ``"A"`` (``dft_cnt`` calls each) and
    ``cat != "dftracer"``. See :func:`partial_from_columns`.
    """
    return partial_from_columns(FrameColumns(df), io_cats, compute_cats, app_io_cats)


def _run_starts(*keys: np.ndarray) -> np.ndarray:
    """Indices where a run of equal consecutive key tuples starts (trace rows come in long
    per-process/per-thread runs, so these are few; every distinct tuple has one among them)."""
    n = keys[0].size
    new = np.empty(n, dtype=bool)
    if n == 0:
        return np.flatnonzero(new)
    new[0] = True
    np.not_equal(keys[0][1:], keys[0][:-1], out=new[1:])
    for k in keys[1:]:
        new[1:] |= k[1:] != k[:-1]
    return np.flatnonzero(new)


def partial_from_columns(cols, io_cats, compute_cats, app_io_cats) -> Partial:
    """Summary state of a set of events given as :class:`FrameColumns` or :class:`ReaderColumns`.

    One pass over numpy arrays and categorical codes: only the used columns are touched and
    distinct keys are found by hashing integer codes (of the rows where a run of equal keys
    starts), never by building Python objects per row.
    """
    p = Partial()
    if cols.rows == 0:
        return p
    ph, ph_cats = cols.codes("ph")
    cat, cat_cats = cols.codes("cat")
    keep = event_mask(ph, ph_cats, cat, cat_cats)
    rows = None if keep.all() else np.flatnonzero(keep)

    def take(a: np.ndarray) -> np.ndarray:
        return a if rows is None else a[rows]

    cat = take(cat)
    if cat.size == 0:
        return p
    agg = take(aggregated(ph, ph_cats))
    calls = _calls(cols, agg, take) if agg.any() else None  # calls per row (None: one each)
    p.events = int(cat.size if calls is None else calls.sum())
    if calls is not None:
        p.agg_records = int(agg.sum())
        p.agg_calls = int(calls[agg].sum())
    ts = take(cols.ints("ts"))
    te = take(cols.ints("te"))
    p.min_ts, p.max_te = int(ts.min()), int(te.max())
    host, host_cats = cols.codes("hostname")
    host = take(host)
    pid = take(cols.ints("pid"))
    tid = take(cols.ints("tid"))
    hname = [None] + host_cats  # by code + 1

    p.hosts = {hname[c] for c in _present(host + 1, len(hname))}
    io_m = _lut(cat_cats, io_cats)[cat + 1]
    cp_m = _lut(cat_cats, compute_cats)[cat + 1]
    app_m = _lut(cat_cats, app_io_cats)[cat + 1]
    ids = _packed_ids(host, pid, tid, len(hname))
    if ids is not None:  # (host, pid, tid) as one int64 each: a few NumPy calls per set
        p.processes = _distinct_packed(hname, ids >> _PID_BITS, False)
        for m, attr in ((io_m, "threads_io"), (cp_m, "threads_compute")):
            if m.any():
                setattr(p, attr, _distinct_packed(hname, ids[m], True))
    else:
        runs = _run_starts(host, pid)
        p.processes = _distinct(hname, host[runs], pid[runs])
        for m, attr in ((io_m, "threads_io"), (cp_m, "threads_compute")):
            if m.any():
                r = np.flatnonzero(m)
                h, pi, ti = host[r], pid[r], tid[r]
                runs = _run_starts(h, pi, ti)
                setattr(p, attr, _distinct(hname, h[runs], pi[runs], ti[runs]))
    p.io = union_intervals(ts[io_m], te[io_m])
    p.compute = union_intervals(ts[cp_m], te[cp_m])
    p.app_io = union_intervals(ts[app_m], te[app_m])
    if io_m.any():
        fname, fname_cats = cols.codes("fname")
        f = take(fname)[io_m]
        p.files = {fname_cats[c - 1] for c in _present(f + 1, len(fname_cats) + 1) if c}
        name, name_cats = cols.codes("name")
        sv, has = cols.sizes()
        has = take(has)[io_m]
        sv = take(sv)
        if calls is None:
            p.functions = _function_histograms(take(name)[io_m], name_cats, sv[io_m], has)
        else:
            per_call, weight, spread = _aggregated_sizes(cols, take, agg, calls, sv)
            p.functions = _function_histograms(
                take(name)[io_m], name_cats, per_call[io_m], has & ~spread[io_m], calls[io_m], weight[io_m]
            )
            _add_spread(
                p.functions,
                take(name)[io_m],
                name_cats,
                has & spread[io_m],
                calls[io_m],
                sv[io_m],
                *(a[io_m] for a in _spread_bounds(cols, take, agg)),
            )
    return p


# (host code + 1, pid, tid) packed in one non-negative int64: 19 + 22 + 22 bits (Linux pids and
# tids are below 2**22, the limit of pid_max); other values take the general path
_PID_BITS = 22
_PID_MASK = (1 << _PID_BITS) - 1
_HOST_LIMIT = 1 << (63 - 2 * _PID_BITS)


def _packed_ids(host: np.ndarray, pid: np.ndarray, tid: np.ndarray, n_hosts: int) -> Optional[np.ndarray]:
    """``(host + 1) << 44 | pid << 22 | tid`` per row (int64), or None when a value does not fit
    (``n_hosts`` host codes + 1 at most, pids and tids in ``[0, 2**22)``)."""
    if n_hosts > _HOST_LIMIT:
        return None
    for v in (pid, tid):
        if int(v.min()) < 0 or int(v.max()) > _PID_MASK:
            return None
    return ((host + 1) << (2 * _PID_BITS)) | (pid << _PID_BITS) | tid


def _distinct_packed(hname: list, key: np.ndarray, with_tid: bool) -> set:
    """:func:`_distinct` of packed keys (:func:`_packed_ids`, or its ``>> 22`` for
    ``(host, pid)``): the distinct keys by one sort of the rows where a run of equal keys starts
    (NumPy releases the GIL for it), unpacked into tuples."""
    k = np.unique(key[_run_starts(key)])
    tid = None
    if with_tid:
        tid = (k & _PID_MASK).tolist()
        k = k >> _PID_BITS
    pid = (k & _PID_MASK).tolist()
    hosts = [hname[c] for c in (k >> _PID_BITS).tolist()]
    return set(zip(hosts, pid)) if tid is None else set(zip(hosts, pid, tid))


def _present(codes: np.ndarray, n: int) -> np.ndarray:
    """The distinct values (sorted) of ``codes``, ints in ``[0, n)``: a scatter into ``n`` flags
    (``np.bincount`` would count them, holding the GIL for its pass; a scatter releases it)."""
    flags = np.zeros(n, dtype=bool)
    flags[codes] = True
    return np.flatnonzero(flags)


def _distinct(hname: list, host: np.ndarray, pid: np.ndarray, tid: Optional[np.ndarray] = None) -> set:
    """Set of distinct ``(hostname, pid)`` or ``(hostname, pid, tid)`` tuples of the given rows
    (host codes index ``hname`` at code + 1)."""
    pid_code, pid_uniq = _factorize(pid)
    key = (host + 1) * len(pid_uniq) + pid_code  # dense int64 keys (no overflow: codes < rows)
    if tid is not None:
        proc_code, _ = _factorize(key)
        tid_code, tid_uniq = _factorize(tid)
        key = proc_code.astype(np.int64) * len(tid_uniq) + tid_code
    rep = _representatives(key, np.arange(key.size, dtype=np.int64))
    hosts = [hname[c + 1] for c in host[rep]]
    if tid is None:
        return set(zip(hosts, pid[rep].tolist()))
    return set(zip(hosts, pid[rep].tolist(), tid[rep].tolist()))


def _int_column(cols, key: str, take, fill: int) -> np.ndarray:
    """Args column ``key`` of the kept rows as int64, ``fill`` where null or absent."""
    col = cols.numeric(key, fill)
    if col is None:
        return np.full(take(np.zeros(cols.rows, dtype=np.int64)).size, fill, dtype=np.int64)
    return take(col).astype(np.int64)


def _calls(cols, agg: np.ndarray, take) -> np.ndarray:
    """Calls per kept row (engine.events.calls)."""
    col = cols.numeric("dft_cnt", 1)
    return calls(None if col is None else take(col), agg)


def _aggregated_sizes(cols, take, agg, calls, sv):
    """Per-call size, histogram weight and "sizes differ" flag per kept row.

    A complete event is one call of ``size`` bytes. An aggregated row's ``size`` is the bytes of
    all its ``dft_cnt`` calls; when its calls moved equal amounts (one call, or ``ret_min ==
    ret_max`` and ``size_min == size_max``) each call moved ``size / dft_cnt`` bytes exactly,
    otherwise (``spread``) only the total, ``ret_min``/``ret_max`` bounds are known.
    """
    rmin = _int_column(cols, "ret_min", take, 0)
    rmax = _int_column(cols, "ret_max", take, 0)
    smin = _int_column(cols, "size_min", take, 0)
    smax = _int_column(cols, "size_max", take, 0)
    spread = agg & (calls > 1) & ((rmin != rmax) | (smin != smax))
    per_call = np.where(agg & ~spread, sv // calls, sv)
    weight = np.where(agg & ~spread, calls, 1)
    return per_call, weight, spread


def _spread_bounds(cols, take, agg):
    """Per-call bytes bounds of aggregated rows: ``ret_min × size_min`` and ``ret_max × size_max``
    (``size_*`` taken as 1 when absent: read/write family)."""
    rmin = _int_column(cols, "ret_min", take, 0)
    rmax = _int_column(cols, "ret_max", take, 0)
    smin = _int_column(cols, "size_min", take, 1)
    smax = _int_column(cols, "size_max", take, 1)
    return rmin * smin, rmax * smax


def _add_spread(functions, codes, uniq, rows, calls, total, lo, hi) -> None:
    """Record, per function, the calls, bytes and extremes of aggregated rows with unequal sizes."""
    for i in np.flatnonzero(rows):
        n = uniq[codes[i]] if codes[i] >= 0 else None
        if n is None:
            continue
        f = functions.setdefault(n, [0, (_EMPTY, _EMPTY), None])
        f[2] = _merge_spread(f[2], [int(calls[i]), int(total[i]), int(lo[i]), int(hi[i])])


def _merge_spread(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return [a[0] + b[0], a[1] + b[1], min(a[2], b[2]), max(a[3], b[3])]


# (name code, size) packed in one int64 key: sizes below 2**43 bytes (8 TiB), up to 2**20 names
_PAIR_BITS = 43
_PAIR_SIZE = (1 << _PAIR_BITS) - 1
_PAIR_NAMES = 1 << 20


def _function_histograms(
    codes: np.ndarray,
    uniq: list,
    sizes: np.ndarray,
    has: np.ndarray,
    calls: Optional[np.ndarray] = None,
    weight: Optional[np.ndarray] = None,
) -> Dict[str, list]:
    """name -> [count, (values, counts), None]: calls and exact histogram of the non-null sizes.

    ``codes`` are name codes (-1 = null name, ignored), ``uniq`` their names, ``sizes`` int64
    bytes valid where ``has``; ``calls`` (default 1) counts calls per row and ``weight`` (default
    1) is how many calls moved ``sizes`` bytes each.
    """
    named = codes >= 0
    counts = np.bincount(codes[named], weights=None if calls is None else calls[named], minlength=len(uniq))
    counts = counts.astype(np.int64)
    has = named & has
    c = codes[has]
    v = sizes[has]
    w = None if weight is None else weight[has]
    if w is None and c.size and len(uniq) <= _PAIR_NAMES and int(v.min()) >= 0 and int(v.max()) <= _PAIR_SIZE:
        # (name, size) pairs as one int64 key each, sorted: one sort (NumPy releases the GIL for
        # it) gives the pairs in (name, size) order and their counts as run lengths
        key = np.sort((c.astype(np.int64) << _PAIR_BITS) | v)
        new = np.empty(key.size, dtype=bool)
        new[0] = True
        np.not_equal(key[1:], key[:-1], out=new[1:])
        first = np.flatnonzero(new)
        pk = key[first]
        pn = np.diff(np.append(first, key.size)).astype(np.int64)
        return _histogram_dict(counts, uniq, key, pk >> _PAIR_BITS, pk & _PAIR_SIZE, pn)
    if w is None and c.size:
        # count (name, size) pairs by hashing the sizes (few distinct) instead of sorting the rows
        v_code, v_uniq = _factorize(v)
        width = max(1, len(v_uniq))
        if len(uniq) * width <= 4 * c.size + 4096:
            pair = np.bincount(c.astype(np.int64) * width + v_code, minlength=len(uniq) * width)
            nz = np.flatnonzero(pair)
            pc, pv = nz // width, np.asarray(v_uniq, dtype=np.int64)[nz % width]
            order = np.lexsort((pv, pc))
            c, pc, pv, pn = pc, pc[order], pv[order], pair[nz][order].astype(np.int64)
            return _histogram_dict(counts, uniq, c, pc, pv, pn)
    order = np.lexsort((v, c))
    c, v = c[order], v[order]
    pc = pv = pn = None
    if c.size:
        new = np.empty(c.size, dtype=bool)
        new[0] = True
        new[1:] = (c[1:] != c[:-1]) | (v[1:] != v[:-1])
        first = np.flatnonzero(new)
        pc, pv = c[first], v[first]
        if w is None:
            pn = np.diff(np.append(first, c.size)).astype(np.int64)
        else:
            pn = np.add.reduceat(w[order].astype(np.int64), first)
    return _histogram_dict(counts, uniq, c, pc, pv, pn)


def _histogram_dict(counts, uniq, c, pc, pv, pn) -> Dict[str, list]:
    """name -> [count, (values, counts), None] from pairs ``(pc, pv)`` sorted by name code then
    value, with ``pn`` calls each (``c`` empty: no sizes at all)."""
    if c.size:
        cut = np.searchsorted(pc, np.arange(len(uniq) + 1))
    out = {}
    for i in np.flatnonzero(counts):
        if c.size and cut[i] < cut[i + 1]:
            hist = (pv[cut[i] : cut[i + 1]], pn[cut[i] : cut[i + 1]])
        else:
            hist = (_EMPTY, _EMPTY)
        out[uniq[i]] = [int(counts[i]), hist, None]
    return out


def combine_partials(parts: Iterable[Partial]) -> Partial:
    """Merge partials (associative, commutative)."""
    parts = list(parts)
    out = Partial()
    for p in parts:
        out.events += p.events
        out.agg_records += p.agg_records
        out.agg_calls += p.agg_calls
        if p.min_ts is not None:
            out.min_ts = p.min_ts if out.min_ts is None else min(out.min_ts, p.min_ts)
            out.max_te = p.max_te if out.max_te is None else max(out.max_te, p.max_te)
        out.hosts |= p.hosts
        out.processes |= p.processes
        out.threads_compute |= p.threads_compute
        out.threads_io |= p.threads_io
        out.files |= p.files
        out.spilled = out.spilled + p.spilled
    out.io = merge_unions(*(p.io for p in parts))
    out.compute = merge_unions(*(p.compute for p in parts))
    out.app_io = merge_unions(*(p.app_io for p in parts))
    names = sorted({n for p in parts for n in p.functions})
    for n in names:
        got = [p.functions[n] for p in parts if n in p.functions]
        spread = None
        for g in got:
            spread = _merge_spread(spread, g[2])
        out.functions[n] = [sum(g[0] for g in got), merge_histograms(*(g[1] for g in got)), spread]
    return out


UNION_KEYS = ("io", "compute", "app_io")
# Disjoint intervals a spilling PartialFolder holds in memory at most (16 B each): beyond it the
# held partials' unions are merged and go to disk. 2**21 intervals = 32 MiB.
SPILL_INTERVALS = 1 << 21


def _intervals(p: Partial) -> int:
    return sum(getattr(p, k)[0].size for k in UNION_KEYS)


class SpilledUnions:
    """Interval unions moved out of memory: per union key (``io``, ``compute``, ``app_io``) a list
    of *runs*, each a sorted disjoint union ``(starts, ends)`` appended as two int64 arrays to one
    anonymous temporary file (in ``directory`` or the system's temporary directory; unlinked at
    once, so nothing stays behind even if the process is killed; closed by :meth:`cleanup` or
    when the object is collected). Runs of one key may overlap each other; :func:`finish` merges
    them exactly, one time window at a time (:func:`spilled_measures`)."""

    def __init__(self, directory: Optional[str] = None):
        self.file = tempfile.TemporaryFile(prefix="dfanalyzer-unions-", dir=directory)
        self._close = weakref.finalize(self, self.file.close)
        # key -> [(byte offset, intervals, first start, last end)]
        self.runs: Dict[str, List[tuple]] = {k: [] for k in UNION_KEYS}
        self.intervals = 0
        self._end = 0

    def add(self, key: str, u: Union) -> None:
        """Append the union ``u`` of ``key`` as one run (nothing for an empty one)."""
        n = int(u[0].size)
        if n == 0:
            return
        self.file.seek(self._end)
        np.ascontiguousarray(u[0], dtype=np.int64).tofile(self.file)
        np.ascontiguousarray(u[1], dtype=np.int64).tofile(self.file)
        self.runs[key].append((self._end, n, int(u[0][0]), int(u[1][-1])))
        self._end += 16 * n
        self.intervals += n

    def sample(self, offset: int, n: int, stride: int) -> np.ndarray:
        """Every ``stride``-th start of the run at ``offset`` holding ``n``."""
        self.file.flush()
        mm = np.memmap(self.file, dtype=np.int64, mode="r", offset=offset, shape=(n,))
        out = np.array(mm[::stride])
        del mm
        return out

    def cleanup(self) -> None:
        """Close (and so free) the file (idempotent)."""
        self._close()

    def __reduce__(self):
        raise TypeError("SpilledUnions live on this machine's disk: finish() them where they were folded")


class HeldUnions:
    """Interval unions held in memory unmerged: per union key a list of *runs*, each a sorted
    disjoint union (the chunk partials' unions gathered by the distributed summary,
    :func:`hold_unions`). In ``Partial.spilled`` beside :class:`SpilledUnions` (the same role:
    their intervals belong to ``io`` / ``compute`` / ``app_io``): :func:`finish` merges and
    measures them one time window at a time (:func:`spilled_measures`), so no merged copy is
    ever made. ``cleanup()`` drops them; never pickled."""

    def __init__(self, runs: Dict[str, List[Union]]):
        self.runs: Dict[str, List[Union]] = {k: [u for u in runs.get(k, ()) if u[0].size] for k in UNION_KEYS}
        self.intervals = sum(int(u[0].size) for v in self.runs.values() for u in v)

    def cleanup(self) -> None:
        """Drop the runs (idempotent)."""
        self.runs = {k: [] for k in UNION_KEYS}

    def __reduce__(self):
        raise TypeError("HeldUnions are measured where they were gathered: finish() them there")


def hold_unions(parts: Sequence[Partial]) -> Partial:
    """:func:`combine_partials` of ``parts`` except their interval unions, which are not merged:
    they are held as they are (one :class:`HeldUnions` in ``spilled``) for :func:`finish` to
    merge and measure window by window, on its thread pool when given one. The serial work is
    the small fields' (sets, histograms); memory: the unions of ``parts`` (shared, not copied)."""
    empty = dict(io=(_EMPTY, _EMPTY), compute=(_EMPTY, _EMPTY), app_io=(_EMPTY, _EMPTY))
    out = combine_partials([dataclasses.replace(p, **empty) for p in parts])
    held = HeldUnions({k: [getattr(p, k) for p in parts] for k in UNION_KEYS})
    if held.intervals:
        out.spilled = out.spilled + [held]
    return out


def _mem_window(u: Union, a: int, b: int) -> Union:
    lo = int(np.searchsorted(u[1], a, side="right"))
    hi = int(np.searchsorted(u[0], b, side="left"))
    if hi <= lo:
        return _EMPTY, _EMPTY
    return np.maximum(u[0][lo:hi], a), np.minimum(u[1][lo:hi], b)


def _run_window(src, run, a: int, b: int) -> Union:
    """The intervals of one run (``src`` "mem": ``run`` is the union; else ``run`` is a run of
    the :class:`SpilledUnions` ``src``) that meet ``[a, b)``, clipped to it (new arrays). A
    spilled run is mapped only for the call: its binary searches touch a few pages, its slice
    is read, and the mapping goes again (memory stays one window per thread)."""
    if src == "mem":  # (a run that misses the window: no binary search; held runs are many)
        if run[0].size == 0 or int(run[1][-1]) <= a or int(run[0][0]) >= b:
            return _EMPTY, _EMPTY
        return _mem_window(run, a, b)
    offset, n, first, last = run
    if last <= a or first >= b:
        return _EMPTY, _EMPTY
    mm = np.memmap(src.file, dtype=np.int64, mode="r", offset=offset, shape=(2, n))  # starts, then ends
    try:
        return _mem_window((mm[0], mm[1]), a, b)
    finally:
        del mm


def _window_measures(runs: Dict[str, list], a: int, b: int) -> Dict[str, int]:
    """The five measures of :func:`spilled_measures` within ``[a, b)``."""
    w = {k: merge_unions(*(_run_window(src, r, a, b) for src, r in runs[k])) for k in UNION_KEYS}
    m = {k: union_measure(w[k]) for k in UNION_KEYS}
    m["io|compute"] = union_measure(merge_unions(w["io"], w["compute"]))
    m["app_io|compute"] = union_measure(merge_unions(w["app_io"], w["compute"]))
    return m


#: the least intervals per run in a window that :func:`spilled_measures` measures on a pool
MIN_WINDOW_STRIDE = 8192


#: about the most intervals (all runs together) a window of :func:`spilled_measures` over held
#: runs is made to hold (16 B each: some MiB of arrays while it is merged)
CACHED_WINDOW = 1 << 18


def spilled_measures(p: Partial, window: int = SPILL_INTERVALS, pool=None, ways: int = 1) -> Dict[str, int]:
    """Exact µs measures of ``io``, ``compute``, ``app_io``, ``io ∪ compute`` and
    ``app_io ∪ compute`` of a partial whose unions are partly spilled or held unmerged
    (``p.spilled``: :class:`SpilledUnions`, :class:`HeldUnions`) and partly in the partial's
    own unions (or only there): the time axis is cut at sampled interval starts into windows
    holding about ``window`` intervals of all runs together, each window's clipped intervals
    are merged and measured, and the measures (integers, additive over disjoint windows)
    summed. Memory: one window. With a thread ``pool`` and ``ways`` > 1 the windows are
    measured on the pool (NumPy's sorts release the GIL), each about ``window / ways``
    intervals but no fewer than :data:`MIN_WINDOW_STRIDE` per run (so with many spilled runs
    up to ``ways`` windows of that size at once), and at least ``2 * ways`` windows when there
    are enough intervals; the same sums. With held runs (many: one per chunk and key) the
    windows hold at most about 1.5 × ``min(window, CACHED_WINDOW)`` intervals (on a pool, at
    least :data:`MIN_WINDOW_STRIDE` per run on disk, plus one), however many runs there are."""
    runs = {k: [("mem", getattr(p, k))] for k in UNION_KEYS}
    held = False
    for sp in p.spilled:
        if isinstance(sp, HeldUnions):  # (runs in memory: measured as the partial's own unions)
            held = True
            for k in UNION_KEYS:
                runs[k].extend(("mem", u) for u in sp.runs[k])
            continue
        sp.file.flush()
        for k in UNION_KEYS:
            runs[k].extend((sp, r) for r in sp.runs[k])
    parallel = pool is not None and ways > 1
    cuts = (_held_cuts if held else _run_cuts)(runs, int(window), ways if parallel else 1)
    edges = [np.iinfo(np.int64).min] + cuts.tolist() + [np.iinfo(np.int64).max]
    pairs = list(zip(edges[:-1], edges[1:]))
    if parallel and len(pairs) > 1:
        parts = pool.map(lambda ab: _window_measures(runs, ab[0], ab[1]), pairs)
    else:
        parts = (_window_measures(runs, a, b) for a, b in pairs)
    total = dict.fromkeys(("io", "compute", "app_io", "io|compute", "app_io|compute"), 0)
    for m in parts:
        for k, v in m.items():
            total[k] += v
    return total


def _run_size(src, r) -> int:
    return int(r[0].size) if src == "mem" else int(r[1])


def _sample(src, r, stride: int) -> np.ndarray:
    return r[0][::stride] if src == "mem" else src.sample(r[0], r[1], stride)


def _run_cuts(runs: Dict[str, list], window: int, ways: int) -> np.ndarray:
    """Window edges of :func:`spilled_measures` (few runs: the partial's own, a few spilled):
    every stride-th start of every run, so no run has more than stride starts per window."""
    n_runs = sum(len(v) for v in runs.values())
    stride = max(1, window // n_runs)
    if ways > 1:  # (windows of at least MIN_WINDOW_STRIDE intervals per run: each costs ~40 µs per run)
        total_n = sum(_run_size(src, r) for v in runs.values() for src, r in v)
        stride = min(stride, max(MIN_WINDOW_STRIDE, min(window // (n_runs * ways), -(-total_n // (2 * ways)))))
    samples = [_sample(src, r, stride) for k in UNION_KEYS for src, r in runs[k]]
    return np.unique(np.concatenate(samples)) if samples else _EMPTY


def _held_cuts(runs: Dict[str, list], window: int, ways: int) -> np.ndarray:
    """Window edges of :func:`spilled_measures` with held runs (one per chunk and key: cutting
    at every run's samples, as :func:`_run_cuts`, would multiply the windows by the runs, and
    each window visits every run): every stride-th start of every run, cut at every q-th of
    those samples in time order. A window holds at most q samples (plus one per run sharing a
    cut's value) and a run's intervals in it are at most stride per sample of its own, plus
    stride + 1 (before its first sample, across the window's start): about
    ``q * stride + 2 * runs * stride`` ≤ 1.5 × the target."""
    sizes = [_run_size(src, r) for v in runs.values() for src, r in v if _run_size(src, r)]
    n_runs, total_n = max(1, len(sizes)), sum(sizes)
    disk = sum(1 for v in runs.values() for src, r in v if src != "mem")
    # (windows that stay in the caches: fresh arrays of tens of MiB cost page faults; in the
    # calling thread, a quarter: glibc's main arena gives back the freed top of its heap, and
    # windows of some MiB fault their pages in again, each time; pool threads' arenas keep them)
    cap = CACHED_WINDOW if ways > 1 else CACHED_WINDOW // 4
    target = max(1, min(window, max(cap, MIN_WINDOW_STRIDE * (disk + 1))))
    if ways > 1:  # (a window costs ~40 µs per spilled run it meets, ~1 µs per held run it misses)
        target = min(target, max(MIN_WINDOW_STRIDE * (disk + 1), min(target // ways, -(-total_n // (2 * ways)))))
    stride = max(1, target // (2 * n_runs))
    q = max(1, target // (2 * stride))
    samples = [_sample(src, r, stride) for k in UNION_KEYS for src, r in runs[k] if _run_size(src, r)]
    return np.unique(np.sort(np.concatenate(samples))[q::q]) if samples else _EMPTY


class PartialFolder(Folder):
    """A streaming :class:`~dfanalyzer.engine.reduce.Folder` of summary partials: ``add`` them
    as they arrive, ``result()`` is :func:`combine_partials` of all of them.

    ``spill_intervals`` bounds memory (None: no bound): whenever the partials held hold more
    disjoint intervals than that in their unions, their unions are merged and written to disk
    (:class:`SpilledUnions`, in ``spill_dir`` or the system's temporary directory), one run per
    union key. Exact: :func:`finish` measures spilled and held unions together. The
    result's ``spilled`` must be finished in this process (call ``cleanup()`` on each after)."""

    def __init__(
        self,
        fan_in: int = FAN_IN,
        spill_intervals: Optional[int] = None,
        spill_dir: Optional[str] = None,
        shared: Optional["SharedSpill"] = None,
    ):
        super().__init__(lambda *parts: combine_partials(parts), fan_in)
        self.spill_intervals = None if spill_intervals is None else max(1, int(spill_intervals))
        self.spill_dir = spill_dir
        self.spill: Optional[SpilledUnions] = None
        self.shared = shared
        if shared is not None:
            self._lock = threading.Lock()
            shared.join(self)

    def add(self, part) -> None:
        if self.shared is not None:  # (one bound for the folders of all threads: SharedSpill)
            n = _intervals(part)
            with self._lock:
                super().add(part)
                self._held = self._held + n if self.levels[0] else sum(_intervals(p) for p in self._parts())
            self.shared.check()
            return
        if self.spill_intervals is None:
            return super().add(part)
        n = _intervals(part)
        super().add(part)
        if self.levels[0]:  # no merge: one more partial held
            self._held += n
        else:  # merged (unions shrink): count again
            self._held = sum(_intervals(p) for lv in self.levels for p in lv)
        if self._held > self.spill_intervals:
            self._bound()

    _held = 0  # intervals in the unions of the partials held

    def _bound(self) -> None:
        """Past the bound: the unions of all held partials, merged, become one run per key (few
        runs keep :func:`spilled_measures` cheap: its windows visit every run)."""
        self._held = sum(_intervals(p) for lv in self.levels for p in lv)
        if self._held <= self.spill_intervals:
            return
        if self.spill is None:
            self.spill = SpilledUnions(self.spill_dir)
        for k in UNION_KEYS:
            self.spill.add(k, merge_unions(*(getattr(p, k) for lv in self.levels for p in lv)))
        empty = dict(io=(_EMPTY, _EMPTY), compute=(_EMPTY, _EMPTY), app_io=(_EMPTY, _EMPTY))
        # copies: the caller's partials (level 0) are not changed
        self.levels = [[dataclasses.replace(p, **empty) for p in lv] for lv in self.levels]
        self._held = 0

    def result(self):
        if self.shared is not None:  # (no more adds: leaves the shared bound, then merges)
            self.shared.leave(self)
        out = super().result()
        if self.spill is not None and self.spill not in out.spilled:
            out.spilled = out.spilled + [self.spill]
        return out

    def _parts(self):
        return [p for lv in self.levels for p in lv]

    def _drop_unions(self) -> None:
        """The held partials' unions are on disk now: hold copies without them."""
        empty = dict(io=(_EMPTY, _EMPTY), compute=(_EMPTY, _EMPTY), app_io=(_EMPTY, _EMPTY))
        self.levels = [[dataclasses.replace(p, **empty) for p in lv] for lv in self.levels]
        self._held = 0


class SharedSpill:
    """One memory bound for several :class:`PartialFolder` folding in parallel threads (the
    threaded streamed summary: every pool thread folds its own batches' partials,
    :func:`fold_in_threads`): whenever the folders together hold more than ``spill_intervals``
    disjoint intervals, the unions of all of them are merged into one run per union key of one
    :class:`SpilledUnions` (so runs are as few and as long as with one folder; a folder that is
    adding waits for the spill). ``store`` is that store (None until the first spill); the
    final partial must carry it (:func:`fold_in_threads` does)."""

    def __init__(self, spill_intervals: int, spill_dir: Optional[str] = None):
        self.spill_intervals = max(1, int(spill_intervals))
        self.spill_dir = spill_dir
        self.store: Optional[SpilledUnions] = None
        self.folders: List[PartialFolder] = []
        self._lock = threading.Lock()  # (taken before any folder's lock, never after one)

    def join(self, folder: PartialFolder) -> None:
        with self._lock:
            self.folders.append(folder)

    def leave(self, folder: PartialFolder) -> None:
        with self._lock:
            if folder in self.folders:
                self.folders.remove(folder)

    def check(self) -> None:
        """Spill when past the bound (called by a folder after each add, holding no lock)."""
        if sum(f._held for f in self.folders) <= self.spill_intervals:  # (a racy read: rechecked below)
            return
        with self._lock:
            folders = list(self.folders)
            for f in folders:
                f._lock.acquire()
            try:
                if sum(f._held for f in folders) <= self.spill_intervals:
                    return
                if self.store is None:
                    self.store = SpilledUnions(self.spill_dir)
                for k in UNION_KEYS:
                    self.store.add(k, merge_unions(*(getattr(p, k) for f in folders for p in f._parts())))
                for f in folders:
                    f._drop_unions()
            finally:
                for f in folders:
                    f._lock.release()


def fold_in_threads(pool, threads: int, order: Sequence[int], run, spill_intervals=None, spill_dir=None):
    """Run ``run(i)`` → ``(partial, *rest)`` for every item ``i`` of ``order`` in ``threads``
    loops on the thread ``pool``, each loop taking the next item of ``order`` and folding its
    partials itself (a :class:`PartialFolder`; with ``spill_intervals``, one
    :class:`SharedSpill` bound for all of them), so this thread only combines ``threads``
    partials at the end, not one per item.

    A generator: yields ``(i, rest)`` in this (the calling) thread as each item finishes, then
    returns the folded :class:`Partial` (``StopIteration.value``; ``yield from`` gives it).
    An exception of ``run(i)`` is raised here as ``ItemFailed(i, exc)``, one of a loop's fold
    as itself; the loops stop taking items as soon as the generator ends early (an exception,
    ``close()``)."""
    import queue

    order = list(order)
    done: "queue.SimpleQueue" = queue.SimpleQueue()
    stop = threading.Event()
    taken = iter(order)
    take_lock = threading.Lock()
    shared = None if spill_intervals is None else SharedSpill(spill_intervals, spill_dir)

    def loop():
        fold = PartialFolder(shared=shared) if shared is not None else PartialFolder()
        try:
            while not stop.is_set():
                with take_lock:
                    i = next(taken, None)
                if i is None:
                    break
                try:
                    part, *rest = run(i)
                except BaseException as exc:  # (reported by the calling thread, naming item i)
                    done.put((i, None, ItemFailed(i, exc)))
                    return None
                fold.add(part)
                done.put((i, rest, None))
            return fold.result()
        except BaseException as exc:  # the fold itself (memory, the spill file)
            done.put((None, None, exc))
            raise

    n = max(1, min(int(threads), len(order)))
    futures = [pool.submit(loop) for _ in range(n)] if order else []
    try:
        for _ in order:
            i, rest, exc = done.get()
            if exc is not None:
                raise exc
            yield i, rest
        parts = [f.result() for f in futures]
    finally:
        stop.set()
    if not parts:
        return Partial()
    # the threads' unions (up to the spill bound) are merged window by window in the pool
    # (NumPy's sort releases the GIL), the rest of the partials here (sets, histograms: small)
    empty = dict(io=(_EMPTY, _EMPTY), compute=(_EMPTY, _EMPTY), app_io=(_EMPTY, _EMPTY))
    out = combine_partials([dataclasses.replace(p, **empty) for p in parts])
    for k in UNION_KEYS:
        setattr(out, k, merge_unions_parallel([getattr(p, k) for p in parts], pool, n))
    if shared is not None and shared.store is not None:
        out.spilled = out.spilled + [shared.store]
    return out


#: below this many intervals in all, :func:`merge_unions_parallel` merges in one call
PARALLEL_MERGE_INTERVALS = 1 << 17


def merge_unions_parallel(unions: List[Union], pool, ways: int, min_intervals: Optional[int] = None) -> Union:
    """:func:`merge_unions` of ``unions``, cut into ``ways`` time windows merged in parallel on
    the thread ``pool`` (NumPy's sort releases the GIL): the windows' edges are evenly spaced
    starts of the largest union; each union is clipped to each window (``[a, b)``), the clipped
    pieces merged per window, and the windows' results joined again where an interval was cut
    at an edge (touching pieces). Exact: the same arrays as :func:`merge_unions`. With fewer
    than ``min_intervals`` (default :data:`PARALLEL_MERGE_INTERVALS`) intervals in all, or one
    way, one :func:`merge_unions` call."""
    unions = [u for u in unions if u[0].size]
    total = sum(int(u[0].size) for u in unions)
    least = PARALLEL_MERGE_INTERVALS if min_intervals is None else min_intervals
    if len(unions) < 2 or ways < 2 or total < least:
        return merge_unions(*unions)
    big = max(unions, key=lambda u: u[0].size)[0]
    cuts = np.unique(big[(np.arange(1, ways) * big.size) // ways])
    edges = [np.iinfo(np.int64).min] + cuts.tolist() + [np.iinfo(np.int64).max]
    pieces = list(
        pool.map(lambda ab: merge_unions(*(_mem_window(u, ab[0], ab[1]) for u in unions)), zip(edges[:-1], edges[1:]))
    )
    # join the pieces where an interval was cut at an edge (the last of one window's pieces ends
    # where the next one's first starts): only the edges are looked at, this thread does one
    # copy of the result and no pass over it (it is a serial step of the threaded summary)
    starts, ends = [], []
    for ps, pe in pieces:
        if ps.size == 0:
            continue
        if ends and ends[-1][-1] >= ps[0]:  # (windows are disjoint: touching, never overlapping)
            ps = ps.copy()
            ps[0] = starts[-1][-1]
            starts[-1], ends[-1] = starts[-1][:-1], ends[-1][:-1]
        starts.append(ps)
        ends.append(pe)
    if not starts:
        return _EMPTY, _EMPTY
    return np.concatenate(starts), np.concatenate(ends)


class ItemFailed(Exception):
    """``run(item)`` of :func:`fold_in_threads` raised ``exc`` (``__cause__``)."""

    def __init__(self, item: int, exc: BaseException):
        super().__init__(item, exc)
        self.item, self.exc = item, exc


# ----------------------------------------------------------------------------- result
@dataclass
class Summary:
    """Result of :meth:`DFAnalyzer.summary` (paper Figure 6).

    Counts are ints; ``time`` values are floats in seconds; ``functions`` maps an I/O function
    name to ``{"count": int, "size": None | {"min","p25","mean","median","p75","max"}}`` with
    sizes in bytes. ``skipped`` lists files with skipped lines or lost bytes (not part of
    :meth:`to_dict`): dicts with ``path``, ``skipped_lines``, ``lost_bytes``, ``warnings``.
    ``warnings`` (not part of :meth:`to_dict`) are input warnings shown in the panel, e.g.
    unresolved file/host hashes (:meth:`DFAnalyzer.input_warnings`).
    ``aggregated`` says which numbers come from aggregated records (``ph`` 3 / ``"A"``):
    ``{"records": int, "calls": int}``, the records and the calls they stand for (0, 0 for a trace
    without them). Their counts, bytes and time sums are exact; the size quantiles of functions
    whose aggregated calls moved unequal amounts are None, and time unions treat a record as one
    interval ``[ts, ts + dur_sum)`` (docs/aggregation.md, "What is exact").
    """

    events: int
    nodes: int
    processes: int
    threads: Dict[str, int]
    files: int
    time: Dict[str, float]
    functions: Dict[str, dict]
    skipped: List[dict] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    aggregated: Dict[str, int] = field(default_factory=lambda: {"records": 0, "calls": 0})

    def to_dict(self) -> dict:
        """The JSON shape of the issue: plain ints, floats, dicts and None."""
        return {
            "events": int(self.events),
            "nodes": int(self.nodes),
            "processes": int(self.processes),
            "threads": {"compute": int(self.threads["compute"]), "io": int(self.threads["io"])},
            "files": int(self.files),
            "time": {k: float(self.time[k]) for k in TIME_KEYS},
            "functions": {
                n: {
                    "count": int(f["count"]),
                    "size": None
                    if f["size"] is None
                    else {k: None if f["size"][k] is None else float(f["size"][k]) for k in SIZE_KEYS},
                }
                for n, f in self.functions.items()
            },
            "aggregated": {"records": int(self.aggregated["records"]), "calls": int(self.aggregated["calls"])},
        }

    # rich rendering ------------------------------------------------------------------------
    def __rich__(self):
        return self.panel()

    def panel(self):
        """A ``rich.panel.Panel`` laid out like the paper's Figure 6."""
        from rich.console import Group
        from rich.panel import Panel
        from rich.table import Table
        from rich.text import Text

        from .safetext import cell, escape

        t = self.time
        lines = Text()

        def head(s):
            lines.append(s + "\n", style="bold cyan")

        def row(label, value, indent=1):
            lines.append("  " * indent + f"{label}: ", style="bold")
            lines.append(f"{value}\n")

        head("Scheduler Allocation Details")
        row("Nodes", f"{self.nodes:,}")
        row("Processes", f"{self.processes:,}")
        lines.append("  Thread allocations across nodes (includes dynamically created threads)\n", style="bold")
        row("Compute", f"{self.threads['compute']:,}", 2)
        row("I/O", f"{self.threads['io']:,}", 2)
        row("Events Recorded", _human_count(self.events))
        if self.aggregated["calls"]:
            row(
                "From aggregated records",
                f"{self.aggregated['calls']:,} calls in {self.aggregated['records']:,} records "
                "(exact counts, bytes, time sums; per-call quantiles and timelines estimated)",
                2,
            )
        head("Description of Dataset Used")
        row("Files", f"{self.files:,}")
        head("Behavior of Application")
        lines.append("  Split of Time in application\n", style="bold")
        for label, key in (
            ("Total Time", "total"),
            ("Overall App Level I/O", "app_io"),
            ("Unoverlapped App I/O", "unoverlapped_app_io"),
            ("Unoverlapped App Compute", "unoverlapped_app_compute"),
            ("Compute", "compute"),
            ("Overall I/O", "io"),
            ("Unoverlapped I/O", "unoverlapped_io"),
            ("Unoverlapped Compute", "unoverlapped_compute"),
        ):
            row(label, f"{t[key]:.3f} sec", 2)
        if self.skipped:
            lines.append("Skipped input\n", style="bold red")
            lines.append(
                f"  {sum(s['skipped_lines'] for s in self.skipped):,} lines and "
                f"{sum(s['lost_bytes'] for s in self.skipped):,} bytes skipped in {len(self.skipped)} file(s)\n"
            )
            for s in self.skipped:
                lines.append(f"    {escape(s['path'])}: {s['skipped_lines']:,} lines, {s['lost_bytes']:,} bytes\n")
        if self.warnings:
            lines.append("Warnings\n", style="bold red")
            for w in self.warnings:
                lines.append(f"  {escape(w)}\n")
        head("Metrics by function")
        table = Table(show_edge=True, header_style="bold")
        table.add_column("Function", no_wrap=True)
        table.add_column("count", justify="right")
        for k, lbl in zip(SIZE_KEYS, ("min", "25", "mean", "median", "75", "max")):
            table.add_column(f"size {lbl}", justify="right")
        for n in sorted(self.functions):
            f = self.functions[n]
            cells = (
                ["-"] * 6
                if f["size"] is None
                else ["-" if f["size"][k] is None else _human_bytes(f["size"][k]) for k in SIZE_KEYS]
            )
            table.add_row(cell(n), _human_count(f["count"]), *cells)  # (a trace's text: no markup)
        return Panel(Group(lines, table), title="Summary", expand=False)

    def __str__(self) -> str:
        from rich.console import Console

        console = Console(width=120, record=True, file=_NullFile(), color_system=None)
        console.print(self.panel())
        return console.export_text()


class _NullFile:
    def write(self, s):
        return len(s)

    def flush(self):
        pass


def _human_count(n: float) -> str:
    n = float(n)
    for unit in ("", "K", "M", "B"):
        if abs(n) < 1000 or unit == "B":
            return f"{int(n)}" if unit == "" else f"{n:.1f}{unit}"
        n /= 1000.0
    return str(n)


def _human_bytes(n: float) -> str:
    """Bytes with binary units (1 KiB = 1024 B): ``512B``, ``4.0KiB``, ``1.5MiB``."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024.0
    return str(n)


def finish(p: Partial, skipped: Optional[List[dict]] = None, pool=None, ways: int = 1) -> Summary:
    """Final :class:`Summary` from the fully merged partial (µs → seconds). With a thread
    ``pool`` and ``ways`` > 1, unions (spilled, held or the partial's own) of at least
    :data:`PARALLEL_MERGE_INTERVALS` intervals in all are measured in time windows on the pool
    (:func:`spilled_measures`; the same integers)."""
    us = 1e-6
    total = (p.max_te - p.min_ts) if p.min_ts is not None else 0
    if p.spilled:  # unions partly on disk (a spilling PartialFolder) or held: window by window
        big = _intervals(p) + sum(sp.intervals for sp in p.spilled) >= PARALLEL_MERGE_INTERVALS
        m = spilled_measures(p, pool=pool, ways=ways) if big else spilled_measures(p)
    elif pool is not None and ways > 1 and _intervals(p) >= PARALLEL_MERGE_INTERVALS:
        m = spilled_measures(p, pool=pool, ways=ways)
    else:
        m = {"io": union_measure(p.io), "compute": union_measure(p.compute), "app_io": union_measure(p.app_io)}
        m["io|compute"] = union_measure(merge_unions(p.io, p.compute))
        m["app_io|compute"] = union_measure(merge_unions(p.app_io, p.compute))
    io_m, cp_m, app_m = m["io"], m["compute"], m["app_io"]
    time = {  # |a \ b| = |a ∪ b| - |b| (engine.intervals.difference_measure)
        "total": total * us,
        "app_io": app_m * us,
        "unoverlapped_app_io": (m["app_io|compute"] - cp_m) * us,
        "unoverlapped_app_compute": (m["app_io|compute"] - app_m) * us,
        "compute": cp_m * us,
        "io": io_m * us,
        "unoverlapped_io": (m["io|compute"] - cp_m) * us,
        "unoverlapped_compute": (m["io|compute"] - io_m) * us,
    }
    functions = {}
    for n in sorted(p.functions):
        count, (vals, cnts), spread = p.functions[n]
        if vals.size == 0 and spread is None:
            functions[n] = {"count": count, "size": None}
            continue
        k = int(cnts.sum())
        total_size = int((vals * cnts).sum(dtype=np.int64))
        if spread is None:
            p25, med, p75 = histogram_percentiles(vals, cnts, (0.25, 0.5, 0.75))
            lo, hi = float(vals[0]), float(vals[-1])
        else:  # some aggregated calls' sizes are only known as a total and bounds
            p25 = med = p75 = None
            k += spread[0]
            total_size += spread[1]
            lo = float(min(spread[2], vals[0])) if vals.size else float(spread[2])
            hi = float(max(spread[3], vals[-1])) if vals.size else float(spread[3])
        functions[n] = {
            "count": count,
            "size": {
                "min": lo,
                "p25": p25,
                "mean": float(np.float64(total_size) / np.float64(k)),
                "median": med,
                "p75": p75,
                "max": hi,
            },
        }
    return Summary(
        events=p.events,
        nodes=len(p.hosts),
        processes=len(p.processes),
        threads={"compute": len(p.threads_compute), "io": len(p.threads_io)},
        files=len(p.files),
        time=time,
        functions=functions,
        skipped=list(skipped or []),
        aggregated={"records": p.agg_records, "calls": p.agg_calls},
    )
