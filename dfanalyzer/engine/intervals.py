"""Interval algebra of the engine: unions, measures, set operations and exact histograms.

An interval is ``[start, end)`` in µs (an event's ``[ts, te)``); zero-length intervals are empty.
A *union* is two sorted int64 arrays ``(starts, ends)`` with ``ends[i] < starts[i + 1]``
(touching intervals are merged). Every analysis (summary, views, insights, plots) uses these
functions; none has its own copy. Histograms are ``(values, counts)``: sorted distinct int64
values and their int64 counts; percentiles from them equal ``numpy.percentile`` bit for bit.
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from .._lazy import pandas as pd  # (imported on first use: dfanalyzer._lazy)

__all__ = [
    "Union",
    "EMPTY",
    "EMPTY_UNION",
    "union_intervals",
    "merge_unions",
    "union_measure",
    "difference_measure",
    "measure_within",
    "intersect",
    "covered",
    "difference",
    "grouped_unions",
    "unions_by",
    "merge_histograms",
    "histogram_percentiles",
]

EMPTY = np.empty(0, dtype=np.int64)
Union = Tuple[np.ndarray, np.ndarray]
EMPTY_UNION: Union = (EMPTY, EMPTY)
_EMPTY = EMPTY
_EMPTY_U = EMPTY_UNION


def union_intervals(starts, ends) -> Union:
    """Union of half-open intervals ``[starts[i], ends[i])`` (int64 µs).

    Returns ``(starts, ends)``: sorted, disjoint, non-touching int64 arrays. Empty intervals
    (``end <= start``) are dropped. Starts and ends are sorted independently (no argsort): with
    both sorted, a gap lies between ``ends[i]`` and ``starts[i + 1]`` exactly when
    ``starts[i + 1] > ends[i]`` (the first i + 1 intervals, whichever they are, have all ended
    there and no other has begun). O(n log n) in numpy, no Python loop over intervals; sorted
    runs (one process's intervals, or unions being merged) sort in about linear time.
    """
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    if not keep.all():
        s, e = s[keep], e[keep]
    if s.size == 0:
        return _EMPTY, _EMPTY
    s = np.sort(s, kind="stable")  # timsort: linear on already sorted runs
    e = np.sort(e, kind="stable")
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    np.greater(s[1:], e[:-1], out=new[1:])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, s.size - 1)
    return s[first], e[last]


def merge_unions(*unions: Union) -> Union:
    """Union of several interval unions (each as returned by :func:`union_intervals`)."""
    parts = [u for u in unions if u[0].size]
    if not parts:
        return _EMPTY, _EMPTY
    if len(parts) == 1:
        return parts[0]
    return union_intervals(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))


def union_measure(u: Union) -> int:
    """Total length of a union, µs (exact integer)."""
    return int((u[1] - u[0]).sum())


def difference_measure(a: Union, b: Union) -> int:
    """Measure of ``a \\ b`` in µs: ``|a ∪ b| - |b|`` (exact integer)."""
    return union_measure(merge_unions(a, b)) - union_measure(b)


def merge_histograms(*hists: Tuple[np.ndarray, np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
    """Merge ``(values, counts)`` histograms; result sorted by value, values distinct."""
    parts = [h for h in hists if h[0].size]
    if not parts:
        return _EMPTY, _EMPTY
    if len(parts) == 1:
        return parts[0]
    v = np.concatenate([p[0] for p in parts])
    c = np.concatenate([p[1] for p in parts])
    # a stable argsort and sums per run of equal values: NumPy releases the GIL for the sort,
    # while np.unique's inverse (a cumsum) and bincount hold it (the threads' folds run this);
    # the counts of one value are summed in input order, as bincount summed them
    order = np.argsort(v, kind="stable")
    v = v[order]
    new = np.empty(v.size, dtype=bool)
    new[0] = True
    np.not_equal(v[1:], v[:-1], out=new[1:])
    first = np.flatnonzero(new)
    return v[first], np.add.reduceat(c[order], first).astype(np.int64)


def _lerp(a: float, b: float, t: float) -> float:
    # numpy's _lerp (numpy/lib/_function_base_impl.py), scalar form, so results match bit for bit
    diff = b - a
    if t >= 0.5:
        return float(b - diff * (1 - t))
    return float(a + diff * t)


def histogram_percentiles(values: np.ndarray, counts: np.ndarray, qs: Sequence[float]) -> List[float]:
    """Exact percentiles (``qs`` in [0, 1]) of the multiset given as a sorted histogram.

    Same result as ``numpy.percentile(expanded, 100 * q)`` with the default linear method.
    Raises ``ValueError`` on an empty histogram.
    """
    n = int(counts.sum())
    if n == 0:
        raise ValueError("percentile of an empty histogram")
    cum = np.cumsum(counts)
    vals = values.astype(np.float64)
    out = []
    for q in qs:
        virtual = (n - 1) * q  # numpy's "linear" get_virtual_index (not the generic alpha/beta form:
        # that rounds differently, e.g. q=0.99)
        lo = int(np.floor(virtual))
        t = virtual - lo
        lo = min(max(lo, 0), n - 1)
        hi = min(lo + 1, n - 1)
        a = vals[int(np.searchsorted(cum, lo, side="right"))]
        b = vals[int(np.searchsorted(cum, hi, side="right"))]
        out.append(_lerp(a, b, t))
    return out


def measure_within(u, a: int, b: int) -> int:
    """|u ∩ [a, b)| µs for a union ``u``."""
    s, e = u
    if s.size == 0 or b <= a:
        return 0
    lo = int(np.searchsorted(e, a, side="right"))
    hi = int(np.searchsorted(s, b, side="left"))
    if hi <= lo:
        return 0
    ss = np.maximum(s[lo:hi], a)
    ee = np.minimum(e[lo:hi], b)
    return int(np.clip(ee - ss, 0, None).sum())


def intersect(a, b):
    """Intersection of two unions (a union)."""
    if a[0].size == 0 or b[0].size == 0:
        return _EMPTY_U
    # |a ∩ b| by sweeping: intervals of b clipped to each run of a
    s = np.concatenate([a[0], b[0]])
    e = np.concatenate([a[1], b[1]])
    pts = np.unique(np.concatenate([s, e]))
    if pts.size < 2:
        return _EMPTY_U
    lo, hi = pts[:-1], pts[1:]
    mid_in_a = covered(a, lo)
    mid_in_b = covered(b, lo)
    both = mid_in_a & mid_in_b
    return union_intervals(lo[both], hi[both])


def covered(u, x: np.ndarray) -> np.ndarray:
    """x[i] lies in union u (half-open intervals)."""
    i = np.searchsorted(u[0], x, side="right") - 1
    ok = i >= 0
    out = np.zeros(x.size, dtype=bool)
    out[ok] = x[ok] < u[1][i[ok]]
    return out


def difference(a, b):
    """a \\ b as a union."""
    if a[0].size == 0 or b[0].size == 0:
        return a
    pts = np.unique(np.concatenate([a[0], a[1], b[0], b[1]]))
    lo, hi = pts[:-1], pts[1:]
    keep = covered(a, lo) & ~covered(b, lo)
    return union_intervals(lo[keep], hi[keep])


def grouped_unions(g: np.ndarray, ts: np.ndarray, te: np.ndarray, k: int) -> List[Tuple[np.ndarray, np.ndarray]]:
    """Per group ordinal ``0..k-1`` (``g``), the union of its intervals; one numpy union for all
    groups: group ``i``'s intervals are shifted by ``i * S`` (``S`` > the span) so they never meet."""
    base = int(ts.min())
    span = int(te.max()) - base + 1
    if k * span >= 2**62:  # shift would overflow: one union per group
        return [union_intervals(ts[g == i], te[g == i]) for i in range(k)]
    shift = g.astype(np.int64) * span - base
    us, ue = union_intervals(ts + shift, te + shift)
    grp = us // span
    cut = np.searchsorted(grp, np.arange(k + 1))
    out = []
    for i in range(k):
        a, z = cut[i], cut[i + 1]
        off = i * span - base
        out.append((us[a:z] - off, ue[a:z] - off))
    return out


def unions_by(keys: pd.Series, starts: np.ndarray, ends: np.ndarray) -> Dict[Any, Tuple[np.ndarray, np.ndarray]]:
    """Per distinct key of ``keys`` (a Series aligned with ``starts``/``ends``), the union of its
    intervals (here byte ranges or µs)."""
    out = {}
    if len(starts) == 0:
        return out
    codes, uniq = pd.factorize(keys)
    order = np.argsort(codes, kind="stable")
    cut = np.flatnonzero(np.diff(codes[order])) + 1
    for grp in np.split(order, cut):
        out[uniq[codes[grp[0]]]] = union_intervals(starts[grp], ends[grp])
    return out
