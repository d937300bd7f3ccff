"""Views of a trace: per function, file, process, time window, context tag, epoch and layer.

Every view takes ``DFAnalyzer.events`` (a Dask DataFrame, or a pandas DataFrame with the same
columns) and returns a small pandas DataFrame. Like :mod:`dfanalyzer.summary` the work is exact
and distributed: each partition yields a small partial (counts, sums, exact histograms, merged
interval unions), partials merge in an order-preserving tree of fan-in 8 and only the merged
result reaches the client. Interval unions and exact percentiles reuse
:func:`dfanalyzer.summary.union_intervals` / :func:`~dfanalyzer.summary.merge_unions` /
:func:`~dfanalyzer.summary.histogram_percentiles`.

Events are those of :mod:`dfanalyzer.engine.events`, as in the summary: rows with ``ph`` ``"X"``
or ``"A"`` whose category is not the tracer's, and every count (``count``, ``ops``, ``events``)
counts calls: an aggregated record weighs ``dft_cnt`` (its calls take its mean duration and
size in the histograms and size buckets; it has no single offset, so no access-pattern step). Units:
timestamps and durations in µs in the trace; the views report times in seconds (``*_s``) or µs
(``*_us``), bytes in bytes, bandwidth in MiB/s (2**20 bytes per second). Every metric is
defined in ``docs/analyzer.md`` ("Views").
"""

from __future__ import annotations

import math
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from .engine import access, timebins
from .engine.events import aggregated, copy_sides, event_mask
from .engine.events import calls as _calls_of
from .engine.events import codes as _codes
from .engine.events import lut as _lut
from .engine.intervals import (
    difference,
    grouped_unions,
    histogram_percentiles,
    intersect,
    measure_within,
    merge_histograms,
    merge_unions,
    union_intervals,
    union_measure,
)
from .engine.reduce import run_metric
from .engine.vocabulary import (
    APP_IO_CATS,
    CHECKPOINT_CATS,
    COMPUTE_CATS,
    COMPUTE_EVENTS_CATS,
    COPY_NAMES,
    DEFAULT_LAYERS,
    EPOCH_EVENTS,
    EVAL_EVENTS,
    FETCH_EVENTS,
    IO_CATS,
    READ_NAMES,
    TRAIN_EVENTS,
    WRITE_NAMES,
    spans_others,
)

__all__ = [
    "IO_CATS",
    "COMPUTE_CATS",
    "APP_IO_CATS",
    "DEFAULT_LAYERS",
    "SIZE_BUCKETS",
    "function_metrics",
    "file_view",
    "process_view",
    "time_view",
    "heatmap",
    "tag_view",
    "epoch_view",
    "layer_view",
    "nested_layer_view",
    "nested_frame",
    "NESTED_LAYERS",
    "compare",
    "flatten_metrics",
    "parents_from_metadata",
]

MIB = float(2**20)
_EMPTY = np.empty(0, dtype=np.int64)
_EMPTY_U = (_EMPTY, _EMPTY)

#: Request-size histogram buckets (Darshan's): (label, lower bound in bytes); a bucket holds sizes
#: from its bound up to the next one; K = 1024, M = 2**20, G = 2**30.
SIZE_BUCKETS: Tuple[Tuple[str, int], ...] = (
    ("0_100", 0),
    ("100_1K", 100),
    ("1K_10K", 1024),
    ("10K_100K", 10 * 1024),
    ("100K_1M", 100 * 1024),
    ("1M_4M", 2**20),
    ("4M_10M", 4 * 2**20),
    ("10M_100M", 10 * 2**20),
    ("100M_1G", 100 * 2**20),
    ("1G_PLUS", 2**30),
)
_SIZE_EDGES = np.array([e for _, e in SIZE_BUCKETS], dtype=np.int64)


# ============================================================================ execution
def _run(events, partial: Callable, combine: Callable, finish: Callable, *args, client=None):
    """``finish`` of the tree reduction of ``partial`` over the partitions (engine.reduce.run_metric);
    the views' ``combine`` takes a list of partials in partition order."""
    return run_metric(events, partial, lambda *parts: combine(list(parts)), finish, *args, client=client)


def _span(events, client=None) -> Tuple[Optional[int], Optional[int]]:
    """``(min ts, max te)`` µs of the events (``ph == "X"``, not ``dftracer``); ``(None, None)`` if none."""

    def part(df):
        c = _Cols(df)
        if c.n == 0:
            return (None, None)
        return (int(c.ts.min()), int(c.te.max()))

    def comb(ps):
        ps = [p for p in ps if p[0] is not None]
        if not ps:
            return (None, None)
        return (min(p[0] for p in ps), max(p[1] for p in ps))

    return _run(events, part, comb, lambda x: x, client=client)


class _Cols:
    """Numpy columns of the events of one partition (engine.events: ``ph`` X or A, not the
    tracer's category), lazily; ``calls`` weighs each row."""

    def __init__(self, df: pd.DataFrame):
        self.df = df
        if len(df) == 0:
            self.rows = np.empty(0, dtype=np.int64)
            self.n = 0
        else:
            ph, ph_cats = _codes(df["ph"])
            cat, cat_cats = _codes(df["cat"])
            self.rows = np.flatnonzero(event_mask(ph, ph_cats, cat, cat_cats))
            self.n = int(self.rows.size)
            self._cat = (cat[self.rows], cat_cats)
            self.agg = aggregated(ph, ph_cats)[self.rows]
        self._cache = {}
        if self.n == 0:
            self.agg = np.zeros(0, dtype=bool)

    @property
    def calls(self) -> np.ndarray:
        """Calls per kept row (int64): ``dft_cnt`` of an aggregated record, else 1."""
        if "#calls" not in self._cache:
            cnt = None
            if self.agg.any() and "dft_cnt" in self.df.columns:
                cnt = pd.to_numeric(self.df["dft_cnt"], errors="coerce").fillna(1).to_numpy(dtype=np.float64)[self.rows]
            self._cache["#calls"] = _calls_of(cnt, self.agg)
        return self._cache["#calls"]

    def codes(self, col: str) -> Tuple[np.ndarray, list]:
        """(codes of the kept rows, values by code); code -1 is null."""
        if col == "cat" and self.n:
            return self._cat
        if col not in self._cache:
            if self.n == 0 or col not in self.df.columns:
                self._cache[col] = (np.full(self.n, -1, dtype=np.int64), [])
            else:
                c, u = _codes(self.df[col])
                self._cache[col] = (c[self.rows], u)
        return self._cache[col]

    def ints(self, col: str) -> np.ndarray:
        key = "#" + col
        if key not in self._cache:
            self._cache[key] = self.df[col].to_numpy(dtype=np.int64)[self.rows] if self.n else _EMPTY
        return self._cache[key]

    def nullable(self, col: str) -> Tuple[np.ndarray, np.ndarray]:
        """(int64 values with 0 for null, bool has-value) of a nullable numeric column."""
        key = "?" + col
        if key not in self._cache:
            if self.n == 0 or col not in self.df.columns:
                self._cache[key] = (np.zeros(self.n, dtype=np.int64), np.zeros(self.n, dtype=bool))
            else:
                s = self.df[col]
                has = s.notna().to_numpy(dtype=bool)[self.rows]
                if s.dtype.kind == "f":
                    v = s.to_numpy(dtype=np.float64, na_value=0).astype(np.int64)
                else:
                    v = s.to_numpy(dtype=np.int64, na_value=0)
                self._cache[key] = (v[self.rows], has)
        return self._cache[key]

    ts = property(lambda self: self.ints("ts"))
    te = property(lambda self: self.ints("te"))
    dur = property(lambda self: self.ints("dur"))

    def cat_mask(self, cats: Iterable[str]) -> np.ndarray:
        c, u = self.codes("cat")
        return _lut(u, cats)[c + 1] if self.n else np.zeros(0, dtype=bool)

    def pair_mask(self, pairs: Iterable[Tuple[str, str]]) -> np.ndarray:
        """Rows whose (cat, name) is in ``pairs``."""
        if self.n == 0:
            return np.zeros(0, dtype=bool)
        c, cu = self.codes("cat")
        nm, nu = self.codes("name")
        out = np.zeros(self.n, dtype=bool)
        for cat, name in pairs:
            out |= _lut(cu, (cat,))[c + 1] & _lut(nu, (name,))[nm + 1]
        return out

    def process_keys(self) -> Tuple[np.ndarray, list]:
        """Dense codes of (hostname, pid) for the kept rows and the key tuples by code."""
        if "proc" not in self._cache:
            h, hu = self.codes("hostname")
            pid = self.ints("pid")
            codes, uniq = pd.factorize(pd.MultiIndex.from_arrays([h, pid]))
            hn = [None] + list(hu)
            keys = [(hn[int(a) + 1], int(b)) for a, b in uniq]
            self._cache["proc"] = (codes.astype(np.int64), keys)
        return self._cache["proc"]


def _segments(codes: np.ndarray):
    """Yield ``(code, row indices)`` for every code >= 0, rows in their original order."""
    keep = codes >= 0
    idx = np.flatnonzero(keep)
    c = codes[idx]
    order = np.argsort(c, kind="stable")
    c, idx = c[order], idx[order]
    if c.size == 0:
        return
    cut = np.flatnonzero(np.diff(c)) + 1
    starts = np.concatenate(([0], cut))
    ends = np.concatenate((cut, [c.size]))
    for a, z in zip(starts, ends):
        yield int(c[a]), idx[a:z]


def _dur_hist(d: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    v, n = np.unique(d, return_counts=True)
    return v.astype(np.int64), n.astype(np.int64)


def _percentiles(hist) -> List[float]:
    vals, cnts = hist
    if vals.size == 0:
        return [math.nan] * 4
    p50, p90, p99 = histogram_percentiles(vals, cnts, (0.5, 0.9, 0.99))
    return [p50, p90, p99, float(vals[-1])]


# ============================================================================ grouped I/O metrics
class _Group:
    """Mergeable metrics of one group of events (a function, a file, a tag value, ...)."""

    __slots__ = (
        "count",
        "dur_sum",
        "bytes",
        "sized",
        "agg_calls",
        "hist",
        "union",
        "min_ts",
        "max_te",
        "procs",
        "buckets",
        "read_bytes",
        "write_bytes",
        "seq",
        "consec",
        "rand",
        "ends",
    )

    def __init__(self):
        self.count = 0
        self.dur_sum = 0
        self.bytes = 0
        self.sized = 0
        self.agg_calls = 0  # calls that come from aggregated records
        self.read_bytes = 0
        self.write_bytes = 0
        self.hist = _EMPTY_U
        self.union = _EMPTY_U
        self.min_ts = None
        self.max_te = None
        self.procs = set()
        self.buckets = np.zeros(len(_SIZE_EDGES), dtype=np.int64)
        self.seq = self.consec = self.rand = 0
        # access-pattern boundary state (engine.access.thread_steps): (host, pid, tid) -> (first offset, last end)
        self.ends = {}


def _group_partial(
    c: _Cols, sel: np.ndarray, codes: np.ndarray, keys: list, detail: bool, copy_out: Optional[np.ndarray] = None
) -> Dict:
    """key -> _Group over the rows ``sel`` (bool mask over kept rows) grouped by ``codes``.

    ``detail`` adds processes, request-size buckets, read/write bytes and access-pattern counts;
    ``copy_out`` (bool over the frame's rows, engine.events.copy_sides) marks the out sides of
    kernel copies: a copy's bytes are read bytes, on its out side written bytes.
    Vectorised over groups (sorts and ``reduceat``); only the small results loop over groups.
    """
    out = {}
    if c.n == 0:
        return out
    rows = np.flatnonzero(sel & (codes >= 0))
    if rows.size == 0:
        return out
    uniq, gi = np.unique(codes[rows], return_inverse=True)
    k = uniq.size
    ts_all, te_all, dur_all = c.ts, c.te, c.dur
    size_all, has_all = c.nullable("size")
    order = np.lexsort((ts_all[rows], gi))
    rows, gi = rows[order], gi[order]
    ts, te, dur = ts_all[rows], te_all[rows], dur_all[rows]
    has = has_all[rows]
    sz = np.where(has, size_all[rows], 0)
    first = np.flatnonzero(np.r_[True, gi[1:] != gi[:-1]])
    # an aggregated record counts as its dft_cnt calls, each of its mean duration and size
    weighted = bool(c.agg[rows].any())
    w = c.calls[rows] if weighted else None
    count = np.add.reduceat(w, first) if weighted else np.diff(np.r_[first, rows.size])
    dur_sum = np.add.reduceat(dur, first)
    nbytes = np.add.reduceat(sz, first)
    sized = np.add.reduceat(has * w if weighted else has.astype(np.int64), first)
    agg_calls = np.add.reduceat(np.where(c.agg[rows], w, 0), first) if weighted else None
    max_te = np.maximum.reduceat(te, first)
    unions = grouped_unions(gi, ts, te, k)
    # exact histograms of dur per group: distinct (group, dur) pairs
    pdur = dur // w if weighted else dur
    ho = np.lexsort((pdur, gi))
    hg, hd = gi[ho], pdur[ho]
    new = np.r_[True, (hg[1:] != hg[:-1]) | (hd[1:] != hd[:-1])]
    hf = np.flatnonzero(new)
    hn = np.add.reduceat(w[ho], hf).astype(np.int64) if weighted else np.diff(np.r_[hf, hg.size]).astype(np.int64)
    hcut = np.searchsorted(hg[hf], np.arange(k + 1))
    hvals = hd[hf]
    if detail:
        pk, pkeys = c.process_keys()
        pr = pk[rows]
        npk = max(1, len(pkeys))
        pairs = np.unique(gi.astype(np.int64) * npk + pr)
        pcut = np.searchsorted(pairs // npk, np.arange(k + 1))
        psz = sz // w if weighted else sz
        b = np.clip(np.searchsorted(_SIZE_EDGES, psz, side="right") - 1, 0, len(_SIZE_EDGES) - 1)
        buckets = np.zeros((k, len(_SIZE_EDGES)), dtype=np.int64)
        np.add.at(buckets, (gi[has], b[has]), w[has] if weighted else 1)
        nm, nu = c.codes("name")
        is_read = _lut(nu, READ_NAMES)[nm[rows] + 1]
        is_write = _lut(nu, WRITE_NAMES)[nm[rows] + 1]
        if copy_out is not None:
            is_copy = _lut(nu, COPY_NAMES)[nm[rows] + 1]
            out_side = copy_out[c.rows][rows]
            is_read = is_read | (is_copy & ~out_side)
            is_write = is_write | (is_copy & out_side)
        read_b = np.add.reduceat(np.where(is_read, sz, 0), first)
        write_b = np.add.reduceat(np.where(is_write, sz, 0), first)
        # access pattern: engine.access's "thread" ordering of the requests with an offset
        off_all, has_off = c.nullable("offset")
        dm = has & has_off[rows] & ~c.agg[rows]  # an aggregated record has no single offset
        r2 = rows[dm]
        o2 = off_all[r2]
        consec, seq, rand, ends = access.thread_steps(
            gi[dm], pr[dm], pkeys, c.ints("tid")[r2] if dm.any() else _EMPTY, r2, o2, o2 + sz[dm], k
        )
    for i in range(k):
        g = _Group()
        f = first[i]
        g.count = int(count[i])
        g.dur_sum = int(dur_sum[i])
        g.bytes = int(nbytes[i])
        g.sized = int(sized[i])
        g.agg_calls = int(agg_calls[i]) if weighted else 0
        g.min_ts, g.max_te = int(ts[f]), int(max_te[i])
        g.union = unions[i]
        g.hist = (hvals[hcut[i] : hcut[i + 1]], hn[hcut[i] : hcut[i + 1]])
        if detail:
            g.procs = {pkeys[int(x)] for x in pairs[pcut[i] : pcut[i + 1]] % npk}
            g.buckets = buckets[i]
            g.read_bytes, g.write_bytes = int(read_b[i]), int(write_b[i])
            g.seq, g.consec, g.rand, g.ends = int(seq[i]), int(consec[i]), int(rand[i]), ends[i]
        out[keys[int(uniq[i])]] = g
    return out


def _merge_groups(parts: Sequence[Dict]) -> Dict:
    """Merge ``key -> _Group`` dicts given in trace order: one union / histogram merge per key."""
    by_key: Dict = {}
    for p in parts:
        for k, g in p.items():
            by_key.setdefault(k, []).append(g)
    out: Dict = {}
    for k, gs in by_key.items():
        if len(gs) == 1:
            out[k] = gs[0]
            continue
        m = _Group()
        m.count = sum(g.count for g in gs)
        m.dur_sum = sum(g.dur_sum for g in gs)
        m.bytes = sum(g.bytes for g in gs)
        m.sized = sum(g.sized for g in gs)
        m.agg_calls = sum(g.agg_calls for g in gs)
        m.read_bytes = sum(g.read_bytes for g in gs)
        m.write_bytes = sum(g.write_bytes for g in gs)
        m.hist = merge_histograms(*(g.hist for g in gs))
        m.union = merge_unions(*(g.union for g in gs))
        m.min_ts = min(g.min_ts for g in gs)
        m.max_te = max(g.max_te for g in gs)
        m.buckets = np.sum([g.buckets for g in gs], axis=0)
        for g in gs:
            m.procs |= g.procs
            m.seq += g.seq
            m.consec += g.consec
            m.rand += g.rand
            # g follows the earlier parts in trace order: one step per thread stream in both
            c, s, r = access.join_step_ends(m.ends, g.ends)
            m.consec, m.seq, m.rand = m.consec + c, m.seq + s, m.rand + r
        out[k] = m
    return out


def _group_columns(g: _Group, total_dur: int) -> dict:
    p50, p90, p99, mx = _percentiles(g.hist)
    busy = union_measure(g.union)
    return {
        "count": g.count,
        "bytes": g.bytes,
        "time_s": g.dur_sum * 1e-6,
        "busy_s": busy * 1e-6,
        "mean_us": g.dur_sum / g.count if g.count else math.nan,
        "p50_us": p50,
        "p90_us": p90,
        "p99_us": p99,
        "max_us": mx,
        "bandwidth_mib_s": (g.bytes / MIB) / (busy * 1e-6) if busy > 0 else math.nan,
        "time_share": g.dur_sum / total_dur if total_dur else math.nan,
    }


# ---------------------------------------------------------------------------- functions
def _functions_partial(df, cats):
    c = _Cols(df)
    sel = c.cat_mask(cats)
    nm, nu = c.codes("name")
    return _group_partial(c, sel, nm, nu, False)


def _functions_combine(parts):
    return _merge_groups(parts)


def _functions_finish(groups):
    total = sum(g.dur_sum for g in groups.values())
    rows = {k: dict(_group_columns(g, total), agg_calls=g.agg_calls) for k, g in groups.items()}
    df = _frame(rows, "name", _FUNCTION_COLUMNS + ["agg_calls"])
    mark_aggregated(df, int(sum(g.agg_calls for g in groups.values())))
    return df


#: Columns of a view whose values are estimated when some of its calls come from aggregated
#: records: those calls enter with their record's mean duration (docs/aggregation.md).
ESTIMATED_WITH_AGGREGATES = ("p50_us", "p90_us", "p99_us", "max_us")


def mark_aggregated(df: pd.DataFrame, agg_calls: int) -> None:
    """Mark a view built from aggregated records: ``df.attrs["aggregated_calls"]`` (int, the
    calls that come from aggregated records), and when > 0 ``df.attrs["estimated"]`` (the columns
    of :data:`ESTIMATED_WITH_AGGREGATES` present) and ``df.attrs["note"]`` (one line)."""
    df.attrs["aggregated_calls"] = int(agg_calls)
    if agg_calls:
        df.attrs["estimated"] = [c for c in ESTIMATED_WITH_AGGREGATES if c in df.columns]
        df.attrs["note"] = (
            f"{agg_calls:,} calls come from aggregated records: counts, bytes and time sums are exact; "
            "duration percentiles, max and access order within a bucket are estimated"
        )


_FUNCTION_COLUMNS = [
    "count",
    "bytes",
    "time_s",
    "busy_s",
    "mean_us",
    "p50_us",
    "p90_us",
    "p99_us",
    "max_us",
    "bandwidth_mib_s",
    "time_share",
]


def _frame(rows: Mapping, index_name, columns: List[str], sort: Optional[str] = "time_s") -> pd.DataFrame:
    df = pd.DataFrame.from_dict(dict(rows), orient="index", columns=columns) if rows else pd.DataFrame(columns=columns)
    if isinstance(index_name, (list, tuple)):
        df.index = (
            pd.MultiIndex.from_tuples(list(df.index), names=list(index_name))
            if len(df)
            else pd.MultiIndex.from_tuples([], names=list(index_name))
        )
    else:
        df.index.name = index_name
    if sort and len(df):
        df = df.sort_values(sort, ascending=False, kind="stable")
    return df


def function_metrics(events, io_cats: Sequence[str] = IO_CATS, client=None) -> pd.DataFrame:
    """Per I/O function (event ``name`` among ``io_cats`` events), sorted by ``time_s``.

    Index ``name``; columns: ``count`` (events), ``bytes`` (sum of ``size``), ``time_s`` (sum of
    ``dur``, s), ``busy_s`` (measure of the union of its ``[ts, te)`` intervals, s),
    ``mean_us``, ``p50_us``, ``p90_us``, ``p99_us``, ``max_us`` (exact percentiles of ``dur``,
    numpy's linear method, µs), ``bandwidth_mib_s`` (bytes / busy time, MiB/s; NaN when no busy
    time), ``time_share`` (its ``time_s`` / the ``time_s`` of all I/O events), ``agg_calls`` (of
    ``count``, the calls that come from aggregated records; when > 0 the percentiles and
    ``max_us`` are estimated: :func:`mark_aggregated` sets ``attrs``).
    """
    return _run(events, _functions_partial, _functions_combine, _functions_finish, tuple(io_cats), client=client)


# ---------------------------------------------------------------------------- files
_FILE_COLUMNS = [
    "ops",
    "bytes",
    "read_bytes",
    "write_bytes",
    "time_s",
    "busy_s",
    "bandwidth_mib_s",
    "processes",
    "first_s",
    "last_s",
    "p50_us",
    "max_us",
    "consecutive",
    "sequential",
    "random",
    "pattern",
] + ["size_" + lbl for lbl, _ in SIZE_BUCKETS]


def _files_partial(df, cats):
    df, copy_out = copy_sides(df)  # a kernel copy is an event of its in and of its out file
    c = _Cols(df)
    sel = c.cat_mask(cats)
    fc, fu = c.codes("fname")
    span = (int(c.ts.min()), int(c.te.max())) if c.n else (None, None)
    return span, _group_partial(c, sel, fc, fu, True, copy_out)


def _span_merge(spans):
    spans = [s for s in spans if s[0] is not None]
    if not spans:
        return (None, None)
    return (min(s[0] for s in spans), max(s[1] for s in spans))


def _files_combine(parts):
    return _span_merge([p[0] for p in parts]), _merge_groups([p[1] for p in parts])


def _pattern(g: _Group) -> str:
    steps = g.seq + g.rand
    if steps == 0:
        return "-"
    return "sequential" if g.seq >= g.rand else "random"


def _files_finish(part):
    (t0, _), groups = part
    rows = {}
    for k, g in groups.items():
        p50, _, _, mx = _percentiles(g.hist)
        busy = union_measure(g.union)
        r = {
            "ops": g.count,
            "bytes": g.bytes,
            "read_bytes": g.read_bytes,
            "write_bytes": g.write_bytes,
            "time_s": g.dur_sum * 1e-6,
            "busy_s": busy * 1e-6,
            "bandwidth_mib_s": (g.bytes / MIB) / (busy * 1e-6) if busy > 0 else math.nan,
            "processes": len(g.procs),
            "first_s": (g.min_ts - t0) * 1e-6,
            "last_s": (g.max_te - t0) * 1e-6,
            "p50_us": p50,
            "max_us": mx,
            "consecutive": g.consec,
            "sequential": g.seq,
            "random": g.rand,
            "pattern": _pattern(g),
        }
        for (lbl, _), n in zip(SIZE_BUCKETS, g.buckets):
            r["size_" + lbl] = int(n)
        rows[k] = r
    return _frame(rows, "fname", _FILE_COLUMNS)


def file_view(events, io_cats: Sequence[str] = IO_CATS, client=None) -> pd.DataFrame:
    """Per file (non-null ``fname`` of ``io_cats`` events), sorted by ``time_s``.

    Index ``fname``; columns ``ops``, ``bytes`` (``read_bytes``/``write_bytes`` for the read and
    write families), ``time_s`` (sum of ``dur``), ``busy_s`` (union of its I/O intervals),
    ``bandwidth_mib_s`` (bytes / busy), ``processes`` (distinct (hostname, pid) touching it),
    ``first_s`` / ``last_s`` (first ``ts`` / last ``te`` on it, s since the first event of the
    frame), ``p50_us`` / ``max_us`` of ``dur``, access pattern from offsets (``consecutive``,
    ``sequential``, ``random`` step counts and ``pattern``) and the request-size histogram
    ``size_0_100`` ... ``size_1G_PLUS`` (events with a ``size`` per bucket).
    """
    return _run(events, _files_partial, _files_combine, _files_finish, tuple(io_cats), client=client)


# ---------------------------------------------------------------------------- processes
class _Proc:
    __slots__ = ("events", "io_events", "bytes", "io", "app", "cp", "min_ts", "max_te", "threads")

    def __init__(self):
        self.events = self.io_events = self.bytes = 0
        self.io = self.app = self.cp = _EMPTY_U
        self.min_ts = self.max_te = None
        self.threads = set()


def _procs_partial(df, io_cats, compute_cats, app_io_cats):
    c = _Cols(df)
    out = {}
    if c.n == 0:
        return out
    pk, keys = c.process_keys()
    io_m, cp_m, app_m = c.cat_mask(io_cats), c.cat_mask(compute_cats), c.cat_mask(app_io_cats)
    ts, te, tid = c.ts, c.te, c.ints("tid")
    size, has = c.nullable("size")
    calls = c.calls
    for code, rows in _segments(pk):
        p = _Proc()
        p.events = int(calls[rows].sum())
        p.min_ts, p.max_te = int(ts[rows].min()), int(te[rows].max())
        p.threads = set(np.unique(tid[rows]).tolist())
        r = rows[io_m[rows]]
        p.io_events = int(calls[r].sum())
        p.bytes = int(size[r][has[r]].sum())
        p.io = union_intervals(ts[r], te[r])
        r = rows[cp_m[rows]]
        p.cp = union_intervals(ts[r], te[r])
        r = rows[app_m[rows]]
        p.app = union_intervals(ts[r], te[r])
        out[keys[code]] = p
    return out


def _procs_combine(parts):
    out = {}
    for part in parts:
        for k, p in part.items():
            q = out.get(k)
            if q is None:
                out[k] = p
                continue
            q.events += p.events
            q.io_events += p.io_events
            q.bytes += p.bytes
            q.io, q.app, q.cp = merge_unions(q.io, p.io), merge_unions(q.app, p.app), merge_unions(q.cp, p.cp)
            q.min_ts, q.max_te = min(q.min_ts, p.min_ts), max(q.max_te, p.max_te)
            q.threads |= p.threads
    return out


_PROC_COLUMNS = [
    "events",
    "io_events",
    "bytes",
    "io_time_s",
    "app_io_time_s",
    "compute_time_s",
    "unoverlapped_io_s",
    "lifetime_s",
    "start_s",
    "end_s",
    "threads",
    "parent",
    "role",
]


def _procs_finish(procs, parents):
    if procs:
        t0 = min(p.min_ts for p in procs.values())
    rows = {}
    for k, p in procs.items():
        io = union_measure(p.io)
        rows[k] = {
            "events": p.events,
            "io_events": p.io_events,
            "bytes": p.bytes,
            "io_time_s": io * 1e-6,
            "app_io_time_s": union_measure(p.app) * 1e-6,
            "compute_time_s": union_measure(p.cp) * 1e-6,
            "unoverlapped_io_s": (union_measure(merge_unions(p.io, p.cp)) - union_measure(p.cp)) * 1e-6,
            "lifetime_s": (p.max_te - p.min_ts) * 1e-6,
            "start_s": (p.min_ts - t0) * 1e-6,
            "end_s": (p.max_te - t0) * 1e-6,
            "threads": len(p.threads),
            "parent": parents.get(k, parents.get(k[1])) if parents else None,
            "role": "main",
        }
    df = _frame(rows, ["hostname", "pid"], _PROC_COLUMNS, sort="io_time_s")
    traced = set(rows)
    for k in rows:
        par = rows[k]["parent"]
        if par is not None and (k[0], int(par)) in traced:
            df.loc[k, "role"] = "worker"
    df["parent"] = df["parent"].astype("Int64")
    _process_attrs(df)
    return df


def _imbalance(x: pd.Series) -> float:
    x = x[x > 0]
    if len(x) == 0:
        return math.nan
    return float(x.max() / x.mean())


def _process_attrs(df: pd.DataFrame) -> None:
    df.attrs["io_imbalance"] = _imbalance(df["io_time_s"]) if len(df) else math.nan
    df.attrs["lifetime_imbalance"] = _imbalance(df["lifetime_s"]) if len(df) else math.nan
    workers = df[df["role"] == "worker"] if len(df) else df
    df.attrs["workers"] = int(len(workers))
    df.attrs["worker_io_imbalance"] = _imbalance(workers["io_time_s"]) if len(workers) else math.nan
    df.attrs["worker_app_io_imbalance"] = _imbalance(workers["app_io_time_s"]) if len(workers) else math.nan
    df.attrs["slowest_process"] = _slowest(df)


def _slowest(df: pd.DataFrame):
    """The ``(hostname, pid)`` with the most ``io_time_s``; on a tie the smallest key (the rows'
    order comes from the reduction, so ``idxmax`` alone would depend on batch and partition order).
    None without I/O time."""
    if not len(df) or not df["io_time_s"].max() > 0:
        return None
    top = df.index[(df["io_time_s"] == df["io_time_s"].max()).to_numpy()]
    return min((str(h), int(p)) for h, p in top)


def process_view(
    events,
    io_cats: Sequence[str] = IO_CATS,
    compute_cats: Sequence[str] = COMPUTE_CATS,
    app_io_cats: Sequence[str] = APP_IO_CATS,
    parents: Optional[Mapping] = None,
    client=None,
) -> pd.DataFrame:
    """Per process ``(hostname, pid)``, sorted by ``io_time_s``.

    Columns: ``events`` (all events), ``io_events``, ``bytes`` (sum of ``size`` of its I/O
    events), ``io_time_s`` / ``app_io_time_s`` / ``compute_time_s`` (measure of the union of its
    I/O / application-I/O / compute intervals, s), ``unoverlapped_io_s`` (its I/O time not
    covered by its compute), ``lifetime_s`` (last ``te`` - first ``ts``), ``start_s`` /
    ``end_s`` (s since the first event of the frame), ``threads`` (distinct tids), ``parent``
    (parent pid from ``parents``: a mapping ``(hostname, pid) -> ppid`` or ``pid -> ppid``, e.g.
    :func:`parents_from_metadata`; null when unknown) and ``role`` (``worker`` when the parent is
    a traced process on the same host, e.g. a DataLoader worker, else ``main``).

    ``df.attrs``: ``io_imbalance`` (max / mean of ``io_time_s`` over processes with I/O),
    ``lifetime_imbalance``, ``slowest_process`` (the ``(hostname, pid)`` with the most I/O time,
    a tie to the smallest key), ``workers``, ``worker_io_imbalance`` and ``worker_app_io_imbalance``
    (over workers only; NaN when there are none).
    """
    return _run(
        events,
        _procs_partial,
        _procs_combine,
        lambda p: _procs_finish(p, dict(parents or {})),
        tuple(io_cats),
        tuple(compute_cats),
        tuple(app_io_cats),
        client=client,
    )


def parents_from_metadata(metadata: pd.DataFrame) -> Dict[int, int]:
    """``pid -> parent pid`` from ``DFAnalyzer.metadata``: our tracer's ``ppid`` records and the
    ``ppid`` arg of an upstream (DFTracer 1.x, 2.x) ``start`` record. Keyed by pid alone: the
    metadata frame carries no hostname."""
    import json

    out: Dict[int, int] = {}
    if metadata is None or len(metadata) == 0 or "name" not in metadata.columns:
        return out
    for r in metadata[metadata["name"].astype(str).isin(["ppid", "start"])].itertuples():
        try:
            if r.name == "ppid":
                out[int(r.pid)] = int(r.value)
            else:
                a = json.loads(r.args) if isinstance(r.args, str) and r.args else {}
                if "ppid" in a:
                    out[int(r.pid)] = int(a["ppid"])
        except (TypeError, ValueError):
            continue
    return out


# ---------------------------------------------------------------------------- time windows
_edges = timebins.edges
_split = timebins.split


def _time_partial(df, edges, io_cats, compute_cats, by_process):
    c = _Cols(df)
    nb = edges.size - 1
    out = {
        "io_us": np.zeros(nb, dtype=np.int64),
        "bytes": np.zeros(nb, dtype=np.float64),
        "ops": np.zeros(nb, dtype=np.int64),
        "io": _EMPTY_U,
        "cp": _EMPTY_U,
        "proc": {},
    }
    if c.n == 0:
        return out
    io = c.cat_mask(io_cats)
    cp = c.cat_mask(compute_cats)
    ts, te = c.ts, c.te
    out["io"] = union_intervals(ts[io], te[io])
    out["cp"] = union_intervals(ts[cp], te[cp])
    r = np.flatnonzero(io)
    if r.size == 0:
        return out
    ev, b, ov = _split(ts[r], te[r], edges)
    out["io_us"] = np.bincount(b, weights=ov, minlength=nb).astype(np.int64)
    out["ops"] = np.bincount(timebins.start_bins(ts[r], edges), weights=c.calls[r], minlength=nb).astype(np.int64)
    size, has = c.nullable("size")
    d = (te[r] - ts[r])[ev]
    frac = np.where(d > 0, ov / np.maximum(d, 1), 1.0)  # zero-length: all bytes to the ts bin
    w = np.where(has[r][ev], size[r][ev] * frac, 0.0)
    out["bytes"] = np.bincount(b, weights=w, minlength=nb)
    if by_process:
        pk, keys = c.process_keys()
        pr = pk[r][ev]
        for code in np.unique(pr):
            m = pr == code
            out["proc"][keys[int(code)]] = np.bincount(b[m], weights=ov[m], minlength=nb).astype(np.int64)
    return out


def _time_combine(parts):
    out = {"io_us": None, "bytes": None, "ops": None, "io": _EMPTY_U, "cp": _EMPTY_U, "proc": {}}
    for p in parts:
        for k in ("io_us", "bytes", "ops"):
            out[k] = p[k].copy() if out[k] is None else out[k] + p[k]
        for k, v in p["proc"].items():
            out["proc"][k] = v.copy() if k not in out["proc"] else out["proc"][k] + v
    out["io"] = merge_unions(*(p["io"] for p in parts))
    out["cp"] = merge_unions(*(p["cp"] for p in parts))
    return out


def _bins_for(t0, t1, bins, window_us):
    if bins is not None and window_us is not None:
        raise ValueError("give bins or window_us, not both")
    if window_us is not None:
        return timebins.window_edges(t0, t1, int(window_us))
    return timebins.edges(t0, t1, 100 if bins is None else int(bins))


def _time_finish(p, edges):
    nb = edges.size - 1
    width = np.diff(edges)
    io_busy = np.array([measure_within(p["io"], int(edges[i]), int(edges[i + 1])) for i in range(nb)], dtype=np.int64)
    cp_busy = np.array([measure_within(p["cp"], int(edges[i]), int(edges[i + 1])) for i in range(nb)], dtype=np.int64)
    both = intersect(p["io"], p["cp"])
    ov = np.array([measure_within(both, int(edges[i]), int(edges[i + 1])) for i in range(nb)], dtype=np.int64)
    t0 = int(edges[0])
    w_s = np.maximum(width, 1) * 1e-6
    io_us = p["io_us"] if p["io_us"] is not None else np.zeros(nb, dtype=np.int64)
    by = p["bytes"] if p["bytes"] is not None else np.zeros(nb)
    df = pd.DataFrame(
        {
            "start_s": (edges[:-1] - t0) * 1e-6,
            "end_s": (edges[1:] - t0) * 1e-6,
            "ops": p["ops"] if p["ops"] is not None else np.zeros(nb, dtype=np.int64),
            "bytes": by,
            "io_time_s": io_us * 1e-6,
            "io_busy_s": io_busy * 1e-6,
            "compute_busy_s": cp_busy * 1e-6,
            "overlap_s": ov * 1e-6,
            "bandwidth_mib_s": by / MIB / w_s,
            "concurrency": io_us / np.maximum(width, 1),
        }
    )
    df.index.name = "bin"
    df.attrs["t0_us"] = t0
    return df, p["proc"]


def time_view(
    events,
    bins: Optional[int] = None,
    window_us: Optional[int] = None,
    io_cats: Sequence[str] = IO_CATS,
    compute_cats: Sequence[str] = COMPUTE_CATS,
    client=None,
) -> pd.DataFrame:
    """Per time window over ``[min ts, max te)`` of the frame: ``bins`` equal windows (default
    100) or windows of ``window_us`` µs (the last one may reach past ``max te``).

    Index ``bin``; columns ``start_s`` / ``end_s`` (s since the first event), ``ops`` (I/O events
    starting in the window), ``bytes`` (``size`` of every I/O event spread over the windows its
    interval covers in proportion to the overlap; a zero-length event's bytes go to the window of
    its ``ts``), ``io_time_s`` (sum over I/O events of their overlap with the window: durations
    split across windows), ``io_busy_s`` / ``compute_busy_s`` (measure of the union of I/O /
    compute intervals in the window), ``overlap_s`` (I/O and compute both in flight),
    ``bandwidth_mib_s`` (bytes / window width), ``concurrency`` (``io_time`` / width: mean I/O
    calls in flight). ``attrs["t0_us"]`` is the first ``ts``. Raises ``ValueError`` for an empty
    frame or bad ``bins`` / ``window_us``.
    """
    df, _ = _time_and_heat(events, bins, window_us, io_cats, compute_cats, False, client)
    return df


def heatmap(
    events, bins: Optional[int] = None, window_us: Optional[int] = None, io_cats: Sequence[str] = IO_CATS, client=None
) -> pd.DataFrame:
    """Process x time I/O heat map: rows ``(hostname, pid)``, one column per window (as
    :func:`time_view`), values the I/O time (s) of that process in that window, durations split
    across windows. ``attrs["edges_s"]`` are the window edges (s since the first event)."""
    tv, proc = _time_and_heat(events, bins, window_us, io_cats, (), True, client)
    keys = sorted(proc)
    data = np.array([proc[k] for k in keys], dtype=np.float64).reshape(len(keys), len(tv)) * 1e-6
    out = pd.DataFrame(
        data, index=pd.MultiIndex.from_tuples(keys, names=["hostname", "pid"]) if keys else None, columns=tv.index
    )
    out.attrs["edges_s"] = list(tv["start_s"]) + ([float(tv["end_s"].iloc[-1])] if len(tv) else [])
    return out


def _time_and_heat(events, bins, window_us, io_cats, compute_cats, by_process, client):
    t0, t1 = _span(events, client=client)
    if t0 is None:
        raise timebins.NoEventsError("no events in the frame")
    edges = _bins_for(t0, t1, bins, window_us)
    return _run(
        events,
        _time_partial,
        _time_combine,
        lambda p: _time_finish(p, edges),
        edges,
        tuple(io_cats),
        tuple(compute_cats),
        by_process,
        client=client,
    )


# ---------------------------------------------------------------------------- context tags
def _tag_partial(df, key, io_cats, compute_cats, app_io_cats):
    c = _Cols(df)
    out = {"groups": {}, "tagged": {}, "io": _EMPTY_U, "cp": _EMPTY_U, "app": _EMPTY_U}
    if c.n == 0 or key not in df.columns:
        return out
    ts, te = c.ts, c.te
    io, cp, app = c.cat_mask(io_cats), c.cat_mask(compute_cats), c.cat_mask(app_io_cats)
    out["io"] = union_intervals(ts[io], te[io])
    out["cp"] = union_intervals(ts[cp], te[cp])
    out["app"] = union_intervals(ts[app], te[app])
    codes, values = _tag_codes(df[key], c.rows)
    out["groups"] = _group_partial(c, codes >= 0, codes, values, False)
    return out


def _tag_codes(col: pd.Series, rows: np.ndarray):
    """Codes of a tag column (categorical, integer or float) for the kept rows, and their values."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes = col.cat.codes.to_numpy().astype(np.int64)[rows]
        return codes, [str(x) for x in col.cat.categories]
    s = col.iloc[rows]
    codes, uniq = pd.factorize(s, use_na_sentinel=True)
    vals = []
    for v in uniq:
        v = v.item() if hasattr(v, "item") else v
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        vals.append(v)
    return np.asarray(codes, dtype=np.int64), vals


def _tag_combine(parts):
    return {
        "groups": _merge_groups([p["groups"] for p in parts]),
        "io": merge_unions(*(p["io"] for p in parts)),
        "cp": merge_unions(*(p["cp"] for p in parts)),
        "app": merge_unions(*(p["app"] for p in parts)),
    }


_TAG_COLUMNS = [
    "events",
    "time_s",
    "span_s",
    "io_time_s",
    "app_io_time_s",
    "compute_time_s",
    "unoverlapped_io_s",
    "start_s",
    "end_s",
]


def _tag_finish(p, key):
    rows = {}
    for v, g in p["groups"].items():
        span = g.union
        io_in = intersect(p["io"], span)
        cp_in = intersect(p["cp"], span)
        rows[v] = {
            "events": g.count,
            "time_s": g.dur_sum * 1e-6,
            "span_s": union_measure(span) * 1e-6,
            "io_time_s": union_measure(io_in) * 1e-6,
            "app_io_time_s": union_measure(intersect(p["app"], span)) * 1e-6,
            "compute_time_s": union_measure(cp_in) * 1e-6,
            "unoverlapped_io_s": union_measure(difference(io_in, cp_in)) * 1e-6,
            "start_s": g.min_ts,
            "end_s": g.max_te,
        }
    df = _frame(rows, key, _TAG_COLUMNS, sort=None)
    if len(df):
        t0 = min([int(x) for x in df["start_s"]] + ([int(p["io"][0][0])] if p["io"][0].size else []))
        df["start_s"] = (df["start_s"].astype(np.int64) - t0) * 1e-6
        df["end_s"] = (df["end_s"].astype(np.int64) - t0) * 1e-6
        try:
            df = df.sort_index()
        except TypeError:
            pass
    return df


def tag_view(
    events,
    key: str,
    io_cats: Sequence[str] = IO_CATS,
    compute_cats: Sequence[str] = COMPUTE_CATS,
    app_io_cats: Sequence[str] = APP_IO_CATS,
    client=None,
) -> pd.DataFrame:
    """Per value of the context tag ``key`` (any args column, e.g. ``epoch``, ``step``).

    The events carrying ``key == v`` define the value's time span ``S_v`` (union of their
    intervals). Index: the tag values, sorted; columns ``events`` (events carrying it),
    ``time_s`` (their summed ``dur``), ``span_s`` (``|S_v|``), ``io_time_s`` /
    ``app_io_time_s`` / ``compute_time_s`` (measure of the union of all I/O / app-I/O / compute
    intervals inside ``S_v``, whether or not those events carry the tag: POSIX calls made during
    an epoch count for that epoch), ``unoverlapped_io_s`` (I/O not covered by compute inside
    ``S_v``), ``start_s`` / ``end_s`` (s since the first tagged or I/O event). An args key that no
    event has gives an empty frame.
    """
    return _run(
        events,
        _tag_partial,
        _tag_combine,
        lambda p: _tag_finish(p, key),
        key,
        tuple(io_cats),
        tuple(compute_cats),
        tuple(app_io_cats),
        client=client,
    )


# ---------------------------------------------------------------------------- epochs
def _epoch_partial(df, io_cats):
    c = _Cols(df)
    out = {
        "epochs": [],
        "train": [],
        "io": _EMPTY_U,
        "fetch": _EMPTY_U,
        "cp": _EMPTY_U,
        "ckpt": _EMPTY_U,
        "eval": _EMPTY_U,
    }
    if c.n == 0:
        return out
    ts, te = c.ts, c.te
    pk, keys = c.process_keys()
    for label, m in (("epochs", c.pair_mask(EPOCH_EVENTS)), ("train", c.pair_mask(TRAIN_EVENTS))):
        r = np.flatnonzero(m)
        out[label] = [(keys[int(pk[i])], int(ts[i]), int(te[i])) for i in r]
    for label, m in (
        ("io", c.cat_mask(io_cats)),
        ("fetch", c.pair_mask(FETCH_EVENTS)),
        ("cp", c.cat_mask(COMPUTE_EVENTS_CATS)),
        ("ckpt", c.cat_mask(CHECKPOINT_CATS)),
        ("eval", c.pair_mask(EVAL_EVENTS)),
    ):
        out[label] = union_intervals(ts[m], te[m])
    return out


def _epoch_combine(parts):
    out = {"epochs": [], "train": []}
    for p in parts:
        out["epochs"] += p["epochs"]
        out["train"] += p["train"]
    for k in ("io", "fetch", "cp", "ckpt", "eval"):
        out[k] = merge_unions(*(p[k] for p in parts))
    return out


_EPOCH_COLUMNS = [
    "processes",
    "start_s",
    "duration_s",
    "train_s",
    "fetch_s",
    "compute_s",
    "io_s",
    "checkpoint_s",
    "eval_s",
    "fetch_unoverlapped_s",
    "io_unoverlapped_s",
    "other_s",
    "source",
]


def _epoch_finish(p):
    # epochs: the pipeline's epoch events; without them, one train event per epoch
    src = "epoch" if p["epochs"] else "train"
    evs = p["epochs"] or p["train"]
    per_proc: Dict = {}
    for proc, a, b in sorted(evs, key=lambda x: (x[0][0] or "", x[0][1], x[1])):
        per_proc.setdefault(proc, []).append((a, b))
    # epoch k = the k-th epoch interval of every process (ranks run their epochs together)
    n = max((len(v) for v in per_proc.values()), default=0)
    rows = {}
    t0 = min((a for _, a, _ in evs), default=0)
    for k in range(n):
        iv = [v[k] for v in per_proc.values() if len(v) > k]
        span = union_intervals(np.array([a for a, _ in iv]), np.array([b for _, b in iv]))
        inside = {name: intersect(p[name], span) for name in ("io", "fetch", "cp", "ckpt", "eval")}
        train_iv = [(a, b) for _, a, b in p["train"]]
        train = intersect(
            union_intervals(
                np.array([a for a, _ in train_iv], dtype=np.int64), np.array([b for _, b in train_iv], dtype=np.int64)
            ),
            span,
        )
        busy = merge_unions(inside["fetch"], inside["cp"], inside["ckpt"], inside["eval"])
        rows[k + 1] = {
            "processes": len(iv),
            "start_s": (int(span[0][0]) - t0) * 1e-6 if span[0].size else math.nan,
            "duration_s": union_measure(span) * 1e-6,
            "train_s": union_measure(train) * 1e-6,
            "fetch_s": union_measure(inside["fetch"]) * 1e-6,
            "compute_s": union_measure(inside["cp"]) * 1e-6,
            "io_s": union_measure(inside["io"]) * 1e-6,
            "checkpoint_s": union_measure(inside["ckpt"]) * 1e-6,
            "eval_s": union_measure(inside["eval"]) * 1e-6,
            "fetch_unoverlapped_s": union_measure(difference(inside["fetch"], inside["cp"])) * 1e-6,
            "io_unoverlapped_s": union_measure(difference(inside["io"], inside["cp"])) * 1e-6,
            "other_s": union_measure(difference(span, busy)) * 1e-6,
            "source": src,
        }
    return _frame(rows, "epoch", _EPOCH_COLUMNS, sort=None)


def epoch_view(events, io_cats: Sequence[str] = IO_CATS, client=None) -> pd.DataFrame:
    """Per epoch time split from the tracer's own AI events.

    Epochs are the ``ai`` API's ``pipeline`` ``epoch.block`` / ``epoch`` events or, without them,
    the train events (``pipeline`` ``train``; DLIO 2.0.0's ``DLIOBenchmark._train``), numbered
    1, 2, ... in time order per process; epoch *k* spans the union of the *k*-th intervals of all
    processes. Index ``epoch``; columns ``processes``, ``start_s`` (s since the first epoch),
    ``duration_s`` (span), and the measure inside it of the unions of: ``train_s`` (train
    events), ``fetch_s`` (waits for the next batch: ``dataloader`` ``fetch.iter`` / ``fetch``,
    DLIO's ``_train.iter`` / ``loop.iter``), ``compute_s`` (``compute`` / ``ai_framework``
    categories), ``io_s`` (``io_cats``), ``checkpoint_s`` (``checkpoint`` category), ``eval_s``
    (``evaluate`` / ``DLIOBenchmark._eval``); ``fetch_unoverlapped_s`` / ``io_unoverlapped_s``
    (not covered by compute), ``other_s`` (span covered by none of fetch, compute, checkpoint,
    eval), ``source`` (``epoch`` or ``train``). Empty when the trace has no such events.
    """
    return _run(events, _epoch_partial, _epoch_combine, _epoch_finish, tuple(io_cats), client=client)


# ---------------------------------------------------------------------------- layers
def _layer_partial(df):
    """(category, spans others) -> [events, dur sum, union]: regions that span other work
    (vocabulary.spans_others: ``*.block``, ``epoch``, ...) are kept apart from their category."""
    c = _Cols(df)
    out = {}
    if c.n == 0:
        return out
    cc, cu = c.codes("cat")
    nm, nu = c.codes("name")
    spanning = np.array([False] + [spans_others(str(n)) for n in nu], dtype=bool)[nm + 1]
    ts, te, dur = c.ts, c.te, c.dur
    for code, rows in _segments(cc * 2 + spanning):
        out[(cu[code // 2], bool(code % 2))] = [
            int(c.calls[rows].sum()),
            int(dur[rows].sum()),
            union_intervals(ts[rows], te[rows]),
        ]
    out.update(_parent_unions(c))
    return out


#: Multi-level layers (issue 24): parent category -> the categories whose calls it makes
#: underneath (an HDF5 call's MPI-IO and POSIX calls, an MPI-IO call's POSIX calls).
NESTED_LAYERS: Dict[str, Tuple[str, ...]] = {"HDF5": ("MPI-IO", "POSIX"), "MPI-IO": ("POSIX",)}


def _thread_keys(c, rows):
    """Dense codes of (cat, hostname, pid, tid) of ``rows`` and the key tuples by code."""
    cc, cu = c.codes("cat")
    h, hu = c.codes("hostname")
    hn = [None] + list(hu)
    tid = c.ints("tid") if "tid" in c.df.columns else np.zeros(c.n, dtype=np.int64)
    codes, uniq = pd.factorize(pd.MultiIndex.from_arrays([cc[rows], h[rows], c.ints("pid")[rows], tid[rows]]))
    keys = [(cu[int(a)], hn[int(b) + 1], int(p), int(t)) for a, b, p, t in uniq]
    return codes.astype(np.int64), keys


def _parent_unions(c):
    """``("#parent", cat, host, pid, tid) -> [calls, bytes, union]`` of the NESTED_LAYERS parents."""
    out = {}
    if c.n == 0:
        return out
    rows = np.flatnonzero(c.cat_mask(NESTED_LAYERS))
    if rows.size == 0:
        return out
    size, _ = c.nullable("size")
    codes, keys = _thread_keys(c, rows)
    for code, idx in _segments(codes):
        r = rows[idx]
        out[("#parent",) + keys[code]] = [int(c.calls[r].sum()), int(size[r].sum()), union_intervals(c.ts[r], c.te[r])]
    return out


def _nest_partial(df, parents):
    """``(parent, child, host, pid, tid) -> [calls, bytes, union]`` of the child-layer events whose
    ``[ts, te]`` lies inside one interval of the same thread's parent-layer union."""
    c = _Cols(df)
    out = {}
    if c.n == 0:
        return out
    kids = sorted({k for v in NESTED_LAYERS.values() for k in v})
    rows = np.flatnonzero(c.cat_mask(kids))
    if rows.size == 0:
        return out
    size, _ = c.nullable("size")
    ts, te = c.ts, c.te
    codes, keys = _thread_keys(c, rows)
    for code, idx in _segments(codes):
        child, host, pid, tid = keys[code]
        r = rows[idx]
        for parent, children in NESTED_LAYERS.items():
            u = parents.get((parent, host, pid, tid)) if child in children else None
            if u is None:
                continue
            s, e = u
            i = np.searchsorted(s, ts[r], side="right") - 1
            ok = (i >= 0) & (te[r] <= e[np.maximum(i, 0)])
            rr = r[ok]
            if rr.size:
                out[(parent, child, host, pid, tid)] = [
                    int(c.calls[rr].sum()),
                    int(size[rr].sum()),
                    union_intervals(ts[rr], te[rr]),
                ]
    return out


_NEST_COLS = [
    "parent",
    "child",
    "parent_events",
    "parent_time_s",
    "parent_bytes",
    "child_events",
    "child_time_s",
    "child_bytes",
    "time_share",
    "bytes_ratio",
]


def _nest_finish(parents, kids) -> pd.DataFrame:
    par: Dict[str, list] = {}
    for (p, _h, _pid, _tid), (n, b, u) in parents.items():
        o = par.setdefault(p, [0, 0, 0])
        o[0] += n
        o[1] += b
        o[2] += union_measure(u)
    ch: Dict[Tuple[str, str], list] = {}
    for (p, k, _h, _pid, _tid), (n, b, u) in kids.items():
        o = ch.setdefault((p, k), [0, 0, 0])
        o[0] += n
        o[1] += b
        o[2] += union_measure(u)
    rows = {}
    for p, (pn, pb, pt) in par.items():
        for k in NESTED_LAYERS[p]:
            kn, kb, kt = ch.get((p, k), (0, 0, 0))
            rows[f"{p} > {k}"] = {
                "parent": p,
                "child": k,
                "parent_events": pn,
                "parent_time_s": pt * 1e-6,
                "parent_bytes": pb,
                "child_events": kn,
                "child_time_s": kt * 1e-6,
                "child_bytes": kb,
                "time_share": kt / pt if pt else math.nan,
                "bytes_ratio": kb / pb if pb else math.nan,
            }
    df = pd.DataFrame.from_dict(rows, orient="index", columns=_NEST_COLS)
    df.index.name = "nesting"
    return df


def nested_layer_view(events, client=None, _parents=None) -> pd.DataFrame:
    """Multi-level layers: what the HDF5 and MPI-IO calls did underneath (issue 24).

    A child-layer event (MPI-IO or POSIX under HDF5, POSIX under MPI-IO: :data:`NESTED_LAYERS`)
    is nested in a parent layer when its ``[ts, te]`` lies inside one interval of the union of
    that layer's events on the same thread (hostname, pid, tid): the wrappers time each call
    around the real one, so the calls it makes underneath fall inside it. Index ``nesting``
    (``"HDF5 > POSIX"``, ...), one row per parent layer present and each of its child layers;
    columns ``parent``, ``child``, ``parent_events``, ``parent_time_s`` (the measure of the
    parent's union per thread, summed over threads, s), ``parent_bytes`` (bytes the parent calls
    asked for), ``child_events``, ``child_time_s`` (the measure of the union of the nested child
    events per thread, summed, s: overlapping children count once), ``child_bytes``,
    ``time_share`` (``child_time_s / parent_time_s``: the share of the parent layer's time spent
    in the child layer), ``bytes_ratio`` (``child_bytes / parent_bytes``; NaN without parent
    bytes). Empty (same columns) when the trace has no HDF5 nor MPI-IO events.
    """
    if _parents is None:
        _parents = {
            k[1:]: v for k, v in _run(events, _parent_unions_df, _layer_combine, lambda c: c, client=client).items()
        }
    if not _parents:
        return _nest_finish({}, {})
    unions = {k: v[2] for k, v in _parents.items()}
    kids = _run(events, _nest_partial, _layer_combine, lambda c: c, unions, client=client)
    return _nest_finish(_parents, kids)


def _parent_unions_df(df):
    return _parent_unions(_Cols(df))


def _layer_combine(parts):
    out = {}
    for p in parts:
        for k, (n, d, u) in p.items():
            if k in out:
                o = out[k]
                out[k] = [o[0] + n, o[1] + d, merge_unions(o[2], u)]
            else:
                out[k] = [n, d, u]
    return out


def _layer_finish(cats, mapping):
    layers: Dict[str, list] = {}
    members: Dict[str, set] = {}
    for key, (n, d, u) in cats.items():
        if key[0] == "#parent":  # the nested layers' parents (nested_layer_view)
            continue
        cat, spanning = key
        lay = mapping.get(cat, cat)
        if lay is None:
            continue
        if spanning:  # a container of other work: the training loop's structure, never its category's time
            lay = "pipeline"
        members.setdefault(lay, set()).add(cat)
        if lay in layers:
            o = layers[lay]
            layers[lay] = [o[0] + n, o[1] + d, merge_unions(o[2], u)]
        else:
            layers[lay] = [n, d, u]
    everything = merge_unions(*(v[2] for v in layers.values()))
    total = union_measure(everything)
    rows = {}
    for lay, (n, d, u) in layers.items():
        others = merge_unions(*(v[2] for k, v in layers.items() if k != lay))
        t = union_measure(u)
        rows[lay] = {
            "categories": ",".join(sorted(members[lay])),
            "events": n,
            "time_s": t * 1e-6,
            "dur_sum_s": d * 1e-6,
            "unoverlapped_s": (union_measure(merge_unions(u, others)) - union_measure(others)) * 1e-6,
            "share": t / total if total else math.nan,
        }
    df = _frame(rows, "layer", ["categories", "events", "time_s", "dur_sum_s", "unoverlapped_s", "share"])
    df.attrs["total_s"] = total * 1e-6
    return df


def layer_view(events, mapping: Optional[Mapping[str, Optional[str]]] = None, client=None) -> pd.DataFrame:
    """Time split per layer, sorted by ``time_s``.

    ``mapping`` (category -> layer name, or None to drop a category) is applied over
    :data:`DEFAULT_LAYERS`; a category in neither is its own layer. Regions that span other work
    (``*.block`` loops, ``epoch``, ``train``, ...: ``engine.vocabulary.spans_others``) are
    containers, never time of their category's layer: they count in the ``pipeline`` layer.
    Index ``layer``; columns
    ``categories`` (its categories, comma separated), ``events``, ``time_s`` (measure of the
    union of its intervals, s), ``dur_sum_s`` (summed ``dur``), ``unoverlapped_s`` (its time
    when no other layer is in flight: ``|L \\ ∪ others|``), ``share`` (``time_s`` / measure of
    the union of all layers). ``attrs["total_s"]`` is that union. Compare two layers with
    ``df.time_s[a] / df.time_s[b] - 1`` (e.g. "app I/O takes 55 % more time than POSIX").
    ``attrs["nested"]``: the multi-level split, HDF5 > POSIX, MPI-IO > POSIX, ... as a dict
    ``{nesting: {column: value}}`` (:func:`nested_layer_view`'s rows, :func:`nested_frame` turns it
    back into that frame; ``{}`` when the trace has no HDF5 nor MPI-IO events).
    """
    full = dict(DEFAULT_LAYERS)
    full.update(mapping or {})
    cats = _run(events, _layer_partial, _layer_combine, lambda c: c, client=client)
    df = _layer_finish(cats, full)
    parents = {k[1:]: v for k, v in cats.items() if k[0] == "#parent"}
    # a plain dict (JSON-able, comparable: frames in attrs break pd.concat and the CLI's notes)
    df.attrs["nested"] = nested_layer_view(events, client=client, _parents=parents).to_dict(orient="index")
    return df


def nested_frame(nested: Mapping[str, dict]) -> pd.DataFrame:
    """``layers().attrs["nested"]`` (``{"HDF5 > POSIX": {column: value}}``) as the frame of
    :func:`nested_layer_view`."""
    df = pd.DataFrame.from_dict(dict(nested), orient="index", columns=_NEST_COLS)
    df.index.name = "nesting"
    return df


# ============================================================================ comparison
_HIGHER_WORSE_PREFIXES = ("time.",)
_FUNC_HIGHER_WORSE = ("time_s", "busy_s", "mean_us", "p50_us", "p90_us", "p99_us", "max_us")
_FUNC_LOWER_WORSE = ("bandwidth_mib_s",)


def flatten_metrics(run) -> Dict[str, float]:
    """Flat ``{metric: number}`` of one run: every ``Summary.to_dict()`` number (``events``,
    ``time.io``, ``functions.read.size.median``, ...) and every :func:`function_metrics` column
    (``function.read.p99_us``, ...). ``run`` is a ``DFAnalyzer`` or a dict with ``summary``
    (a ``Summary`` or its ``to_dict()``) and optionally ``functions`` (a function_metrics frame).
    """
    if hasattr(run, "summary") and hasattr(run, "events"):
        s = run.summary(show=False).to_dict()
        fm = run.functions()
    else:
        s = run["summary"]
        s = s.to_dict() if hasattr(s, "to_dict") and not isinstance(s, dict) else s
        fm = run.get("functions")
    out: Dict[str, float] = {}

    def walk(prefix, v):
        if isinstance(v, dict):
            for k, x in v.items():
                walk(f"{prefix}.{k}" if prefix else str(k), x)
        elif v is None:
            return
        else:
            out[prefix] = float(v)

    walk("", s)
    if fm is not None:
        for name, r in fm.iterrows():
            for col in _FUNCTION_COLUMNS:
                v = r[col]
                if v is not None and not (isinstance(v, float) and math.isnan(v)):
                    out[f"function.{name}.{col}"] = float(v)
    return out


def _direction(metric: str) -> int:
    """+1 when higher is worse, -1 when lower is worse, 0 when neither (counts, sizes)."""
    if metric.startswith(_HIGHER_WORSE_PREFIXES):
        return 1
    if metric.startswith("function."):
        col = metric.rsplit(".", 1)[1]
        if col in _FUNC_HIGHER_WORSE:
            return 1
        if col in _FUNC_LOWER_WORSE:
            return -1
    return 0


def compare(a, b, threshold: Optional[float] = None) -> pd.DataFrame:
    """Compare run ``a`` (baseline) with run ``b`` metric by metric (see :func:`flatten_metrics`).

    Index ``metric`` (sorted); columns ``a``, ``b`` (NaN where the run lacks the metric),
    ``delta`` (``b - a``), ``ratio`` (``b / a``; NaN when ``a`` is 0 or missing),
    ``direction`` (+1 higher is worse: times and latencies; -1 lower is worse: bandwidth; 0 not
    judged: counts and sizes) and ``regression``: with ``threshold`` (a fraction, 0.1 = 10 %),
    true where a judged metric got worse by more than ``threshold`` of ``a``
    (``direction * delta > threshold * |a|``); all false without a threshold.
    """
    fa, fb = flatten_metrics(a), flatten_metrics(b)
    keys = sorted(set(fa) | set(fb))
    va = np.array([fa.get(k, math.nan) for k in keys], dtype=np.float64)
    vb = np.array([fb.get(k, math.nan) for k in keys], dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(va != 0, vb / va, math.nan)
    direction = np.array([_direction(k) for k in keys], dtype=np.int64)
    delta = vb - va
    if threshold is None:
        reg = np.zeros(len(keys), dtype=bool)
    else:
        with np.errstate(invalid="ignore"):
            reg = (direction != 0) & (direction * delta > float(threshold) * np.abs(va))
    df = pd.DataFrame(
        {"a": va, "b": vb, "delta": delta, "ratio": ratio, "direction": direction, "regression": reg},
        index=pd.Index(keys, name="metric"),
    )
    return df
