"""Timeline plots of I/O behaviour (paper Figures 8a and 8b), matplotlib with the Agg canvas.

The job's time span ``[min(ts), max(te))`` is cut into ``bins`` bins by the engine's one time
binning (``dfanalyzer.engine.timebins``, the same edges as the time view). Per bin, computed as
per-partition sums on the cluster (no event leaves its worker), over the I/O events (cat in
``io_cats``, events as in ``engine.events``):

* ``bytes``: ``size`` split over the bins an event's ``[ts, te)`` overlaps, in proportion to
  the overlap, in whole bytes (every event's shares sum to its size);
* ``io_time``: ``dur`` split the same way, seconds (time spent in I/O by all processes);
* ``bandwidth``: ``bytes / bin width``, MiB/s (aggregate I/O bandwidth seen by the application);
* ``xfer_mean`` / ``xfer_max``: mean and largest per-call ``size`` of the calls that moved bytes,
  in the bin of their ``ts``.

Files written by :func:`plot_timeline`: ``io_bandwidth_time.png`` (Fig. 8a: bandwidth and I/O
time over time) and ``transfer_size.png`` (Fig. 8b: transfer size over time).
"""

from __future__ import annotations

import os
from typing import Dict, List, Sequence

import numpy as np
import pandas as pd

from .engine import timebins
from .engine.reduce import run_metric
from .safetext import PLAIN_TEXT, escape
from .views import _Cols, _span

__all__ = ["timeline_partial", "combine_timelines", "timeline", "render_timeline", "plot_timeline"]

FILES = ("io_bandwidth_time.png", "transfer_size.png")


def timeline_partial(df: pd.DataFrame, t0: int, t1: int, bins: int, io_cats: Sequence[str]) -> Dict[str, np.ndarray]:
    """Per-bin sums for one partition over ``engine.timebins.edges(t0, t1, bins)``: ``bytes`` and
    ``dur`` (µs) of the I/O events split over the bins their ``[ts, te)`` overlaps (as the time
    view), ``n_sized`` (calls with a size) and ``xfer_max`` (largest per-call size) in the bin of
    their ``ts``; int64 arrays. Events as in engine.events (aggregated records weigh dft_cnt)."""
    out = {k: np.zeros(bins, dtype=np.int64) for k in ("bytes", "dur", "n_sized", "xfer_max")}
    c = _Cols(df)
    if c.n == 0:
        return out
    io = np.flatnonzero(c.cat_mask(io_cats))
    if io.size == 0:
        return out
    e = timebins.edges(t0, t1, bins)
    ts, te = c.ts[io], c.te[io]
    ev, b, ov = timebins.split(ts, te, e)
    out["dur"] = np.bincount(b, weights=ov, minlength=bins).astype(np.int64)
    size, has = c.nullable("size")
    size, has = size[io], has[io]
    if has.any():
        nbytes = timebins.split_amounts(np.where(has, size, 0), ev, ov, te - ts)
        out["bytes"] = np.bincount(b, weights=nbytes, minlength=bins).astype(np.int64)
        calls = c.calls[io][has]
        sb = timebins.start_bins(ts[has], e)
        out["n_sized"] = np.bincount(sb, weights=calls, minlength=bins).astype(np.int64)
        np.maximum.at(out["xfer_max"], sb, size[has] // calls)
    return out


def combine_timelines(*parts: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Sum partial timelines (``xfer_max`` takes the maximum)."""
    out = {k: v.copy() for k, v in parts[0].items()}
    for p in parts[1:]:
        for k in ("bytes", "dur", "n_sized"):
            out[k] += p[k]
        out["xfer_max"] = np.maximum(out["xfer_max"], p["xfer_max"])
    return out


def timeline(analyzer, bins: int = 100) -> pd.DataFrame:
    """Per-bin I/O timeline of ``analyzer.events``, computed on the cluster.

    Returns a pandas DataFrame indexed by bin with ``start`` (seconds since the first event),
    ``bytes``, ``io_time`` (s), ``bandwidth`` (MiB/s), ``xfer_mean`` and ``xfer_max`` (bytes;
    NaN where no bytes moved). Raises ``ValueError`` when there are no events.
    """
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    ev = analyzer.events
    t0, t1 = _span(ev, client=analyzer.client)
    if t0 is None:
        raise timebins.NoEventsError("no events to plot")
    h = run_metric(
        ev, timeline_partial, combine_timelines, lambda x: x, t0, t1, bins, analyzer.io_cats, client=analyzer.client
    )
    e = timebins.edges(t0, t1, bins)
    width_s = np.diff(e) / 1e6
    n = h["n_sized"]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, h["bytes"] / np.maximum(n, 1), np.nan)
    return pd.DataFrame(
        {
            "start": (e[:-1] - t0) / 1e6,
            "bytes": h["bytes"],
            "io_time": h["dur"] / 1e6,
            "bandwidth": h["bytes"] / np.maximum(width_s, 1e-6) / 2**20,
            "xfer_mean": mean,
            "xfer_max": np.where(n > 0, h["xfer_max"], np.nan),
        }
    )


def render_timeline(tl: pd.DataFrame, outdir: str) -> List[str]:
    """Write the two PNGs for a timeline from :func:`timeline`; returns their paths."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    os.makedirs(outdir, exist_ok=True)
    width = float(tl["start"].iloc[1] - tl["start"].iloc[0]) if len(tl) > 1 else 1.0
    x = tl["start"] + width / 2
    paths = []

    fig = Figure(figsize=(9, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(x, tl["bandwidth"], color="tab:blue", label="I/O bandwidth")
    ax.set_xlabel("time since first event (s)")
    ax.set_ylabel("I/O bandwidth (MiB/s)", color="tab:blue")
    ax2 = ax.twinx()
    ax2.bar(x, tl["io_time"], width=width, color="tab:orange", alpha=0.4, label="I/O time")
    ax2.set_ylabel("I/O time per bin (s, all processes)", color="tab:orange")
    ax.set_title("I/O bandwidth and I/O time over time")
    fig.tight_layout()
    paths.append(os.path.join(outdir, FILES[0]))
    fig.savefig(paths[-1])

    fig = Figure(figsize=(9, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(x, tl["xfer_mean"], marker=".", color="tab:green", label="mean transfer size")
    ax.plot(x, tl["xfer_max"], color="tab:red", alpha=0.5, label="largest transfer")
    ax.set_xlabel("time since first event (s)")
    ax.set_ylabel("transfer size (bytes)")
    if np.nanmax(np.append(tl["xfer_max"].to_numpy(dtype=float), 0)) > 0:
        ax.set_yscale("log")
    ax.legend(loc="upper right")
    ax.set_title("Transfer size over time")
    fig.tight_layout()
    paths.append(os.path.join(outdir, FILES[1]))
    fig.savefig(paths[-1])
    return paths


def plot_timeline(analyzer, outdir: str, bins: int = 100) -> List[str]:
    """Compute the timeline of ``analyzer`` and save ``io_bandwidth_time.png`` and ``transfer_size.png``."""
    return render_timeline(timeline(analyzer, bins=bins), outdir)


def render_heatmap(hm: pd.DataFrame, path: str, title: str = "I/O time per process and time window") -> str:
    """Write a process x time heat map PNG from :func:`dfanalyzer.views.heatmap` (rows
    ``(hostname, pid)``, one column per window, I/O time in s); returns ``path``.

    Rows are processes in heat-map order, the x axis is time since the first event (s, from
    ``hm.attrs["edges_s"]``), colour the seconds of I/O of that process in that window.
    Raises ``ValueError`` for an empty heat map.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if hm.shape[0] == 0 or hm.shape[1] == 0:
        raise ValueError("empty heat map: no I/O events")
    edges = np.asarray(hm.attrs.get("edges_s") or np.arange(hm.shape[1] + 1), dtype=float)
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    rows = hm.shape[0]
    fig = Figure(figsize=(10, max(3.0, min(12.0, 1.5 + 0.18 * rows))), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    mesh = ax.pcolormesh(edges, np.arange(rows + 1), hm.to_numpy(dtype=float), cmap="viridis", shading="flat")
    labels = [f"{h}:{p}" for h, p in hm.index] if isinstance(hm.index, pd.MultiIndex) else [str(i) for i in hm.index]
    step = max(1, rows // 40)
    ax.set_yticks(np.arange(0, rows, step) + 0.5)
    # host names are the traced application's text: plain, never mathtext ("$\\frac{A$" raises)
    ax.set_yticklabels([escape(x) for x in labels[::step]], fontsize=7, **PLAIN_TEXT)
    ax.invert_yaxis()
    ax.set_xlabel("time since first event (s)")
    ax.set_ylabel("process (host:pid)")
    ax.set_title(title)
    fig.colorbar(mesh, ax=ax, label="I/O time in window (s)")
    fig.tight_layout()
    fig.savefig(path)
    return path
