"""The one time binning of the engine: the time view, the heatmap, the plotted timeline and the
insights' evidence windows all cut the job's span with these edges.

Bins are half-open ``[edges[i], edges[i + 1])`` in µs. ``edges(t0, t1, bins)`` cuts ``[t0, t1)``
into ``bins`` integer-edged bins (``t0 + i * span // bins``, ``span = max(1, t1 - t0)``);
``window_edges`` into fixed windows. An event is in the bin of its ``ts`` (:func:`start_bins`,
for counts of calls and request sizes) or split over the bins its ``[ts, te)`` overlaps in
proportion to the overlap (:func:`split`, for time and bytes); times outside the edges fall in
the first / last bin.
"""

from __future__ import annotations

from .._lazy import LazyModule

np = LazyModule("numpy")  # (on first use: the threaded summary plans before NumPy is imported)

__all__ = ["MAX_BINS", "NoEventsError", "edges", "window_edges", "start_bins", "split"]

#: most bins (time windows) of any binning: ``--bins``, ``--window``, ``time_bins`` (the time
#: view and the heatmap hold a few arrays of this length per partition and per process)
MAX_BINS = 100_000


class NoEventsError(ValueError):
    """There is no event (after the query, if any) and so no time span to cut: raised by the
    time view, the heatmap, the plotted timeline and the insights (``dfanalyzer`` exits 1)."""


def edges(t0: int, t1: int, bins: int) -> np.ndarray:
    """``bins + 1`` int64 edges (µs) over ``[t0, t1)``; raises ``ValueError`` unless
    ``1 <= bins <= MAX_BINS``."""
    if not 1 <= bins <= MAX_BINS:
        raise ValueError(f"bins must be in 1..{MAX_BINS}, got {bins}")
    span = max(1, int(t1) - int(t0))
    return int(t0) + (np.arange(bins + 1, dtype=np.int64) * span) // bins


def window_edges(t0: int, t1: int, window_us: int) -> np.ndarray:
    """Edges of fixed windows of ``window_us`` µs from ``t0`` covering ``t1``; raises
    ``ValueError`` when that takes more than ``MAX_BINS`` windows."""
    if window_us <= 0:
        raise ValueError(f"window_us must be > 0, got {window_us}")
    bins = max(1, -(-(int(t1) - int(t0)) // int(window_us)))
    if bins > MAX_BINS:
        raise ValueError(
            f"a window of {int(window_us)} us cuts the {(int(t1) - int(t0)) / 1e6:.6g} s span into {bins} windows, "
            f"more than {MAX_BINS}: use a longer window"
        )
    return int(t0) + np.arange(bins + 1, dtype=np.int64) * int(window_us)


def start_bins(ts: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Bin (int64) of each ``ts`` (µs)."""
    nb = e.size - 1
    return np.clip(np.searchsorted(e, np.asarray(ts, dtype=np.int64), side="right") - 1, 0, nb - 1).astype(np.int64)


def split(ts: np.ndarray, te: np.ndarray, e: np.ndarray):
    """Pieces of intervals cut at the edges: ``(event index, bin, overlap µs)``, int64 arrays; a
    zero-length interval gives one piece of length 0 in the bin of its ``ts``."""
    nb = e.size - 1
    b0 = np.clip(np.searchsorted(e, ts, side="right") - 1, 0, nb - 1)
    b1 = np.clip(np.searchsorted(e, np.maximum(te - 1, ts), side="right") - 1, 0, nb - 1)
    n = (b1 - b0 + 1).astype(np.int64)
    ev = np.repeat(np.arange(ts.size, dtype=np.int64), n)
    first = np.repeat(np.cumsum(n) - n, n)
    b = np.repeat(b0, n) + (np.arange(ev.size, dtype=np.int64) - first)
    ov = np.minimum(te[ev], e[b + 1]) - np.maximum(ts[ev], e[b])
    return ev, b, np.maximum(ov, 0)


def split_amounts(amount: np.ndarray, ev: np.ndarray, ov: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Integer share (int64) of each event's ``amount`` (e.g. bytes) per piece of :func:`split`,
    in proportion to the piece's overlap ``ov`` of the event's ``dur``: floor shares, the rest on
    the event's last piece, so every event's shares sum exactly to its amount; a zero-length event
    puts it all on its one piece."""
    a = np.asarray(amount, dtype=np.int64)[ev]
    d = np.asarray(dur, dtype=np.int64)[ev]
    share = np.where(d > 0, np.floor(a * (ov / np.maximum(d, 1))), a).astype(np.int64)
    if ev.size:
        last = np.flatnonzero(np.r_[ev[1:] != ev[:-1], True])
        given = np.add.reduceat(share, np.r_[0, last[:-1] + 1])
        share[last] += a[last] - given
    return share
