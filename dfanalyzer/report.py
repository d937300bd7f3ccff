"""One self-contained HTML report of a trace: summary, insights, layers, views and plots.

``dfanalyzer report PATTERN -o report.html`` / ``DFAnalyzer.report(path)`` /
:func:`write_report`. The page has no script and no external reference: styles are inline in a
``<style>`` element, plots are PNGs (matplotlib, Agg canvas) embedded as ``data:image/png;base64``
URIs, every text from the trace (file names, event names, messages) is HTML-escaped with the
standard library's :func:`html.escape`, so it opens offline and fetches nothing.

Sections (ids in the page): ``summary`` (the Figure 6 numbers: events, nodes, processes,
files, the time split and the per-function table), ``insights`` (every triggered rule with its
evidence and recommendation), ``layers``, ``functions``, ``files``, ``processes``, ``epochs``
(when the trace has epochs), ``plots`` (I/O bandwidth / time over time, transfer size,
process x time heat map).
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import math
from typing import List, Optional

import numpy as np
import pandas as pd

from .safetext import PLAIN_TEXT, escape
from .views import nested_frame

__all__ = ["write_report", "render_report"]

_CSS = """
body{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;margin:0;background:#f4f6f9;color:#1b1f24}
header{background:#1f4e79;color:#fff;padding:14px 24px}
header h1{margin:0;font-size:22px} header p{margin:4px 0 0;font-size:13px;opacity:.85}
main{padding:16px 24px}
section{background:#fff;border:1px solid #d5dbe3;border-radius:6px;margin:0 0 16px;padding:12px 16px}
section h2{margin:0 0 10px;font-size:18px;color:#1f4e79}
#summary{background:#e8f1fb;border:2px solid #1f4e79}
.grid{display:flex;flex-wrap:wrap;gap:10px;margin-bottom:10px}
.stat{background:#1f4e79;color:#fff;border-radius:6px;padding:8px 14px;min-width:110px}
.stat b{display:block;font-size:20px} .stat span{font-size:12px;opacity:.9}
table{border-collapse:collapse;font-size:12px;margin:6px 0}
th,td{border:1px solid #d5dbe3;padding:3px 7px;text-align:right}
th{background:#eef2f7} td.l,th.l{text-align:left}
.ins{border-left:6px solid #999;padding:6px 12px;margin:8px 0;background:#fafbfc}
.ins.high{border-color:#c62828} .ins.warn{border-color:#ef8f00} .ins.info{border-color:#0277bd} .ins.ok{border-color:#2e7d32}
.sev{font-weight:bold;text-transform:uppercase;margin-right:8px}
.high .sev{color:#c62828} .warn .sev{color:#ef8f00} .info .sev{color:#0277bd}
.rec{color:#2e7d32;margin:2px 0}
img{max-width:100%;border:1px solid #d5dbe3;margin:6px 0}
.muted{color:#667;font-size:12px}
"""


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _num(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
        return ""
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.6g}"
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    return str(v)


def _table(df: pd.DataFrame, top: Optional[int] = None, index: bool = True) -> str:
    """An escaped HTML table of ``df`` (first ``top`` rows)."""
    if df is None or len(df) == 0:
        return '<p class="muted">no rows</p>'
    d = df.head(top) if top else df
    cols = list(d.columns)
    names = [n if n is not None else "" for n in (d.index.names or [d.index.name])] if index else []
    out = ["<table><thead><tr>"]
    out += [f'<th class="l">{_e(n)}</th>' for n in names]
    out += [f"<th>{_e(c)}</th>" for c in cols]
    out.append("</tr></thead><tbody>")
    for k, row in d.iterrows():
        out.append("<tr>")
        if index:
            keys = k if isinstance(k, tuple) else (k,)
            out += [f'<td class="l">{_e(_num(x))}</td>' for x in keys]
        for c in cols:
            v = row[c]
            cls = ' class="l"' if isinstance(v, str) else ""
            out.append(f"<td{cls}>{_e(_num(v))}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    if top and len(df) > top:
        out.append(f'<p class="muted">first {top} of {len(df):,} rows</p>')
    return "".join(out)


def _rows_table(rows: List[dict]) -> str:
    if not rows:
        return ""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    return _table(pd.DataFrame(rows, columns=cols), index=False)


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _img(uri: str, alt: str) -> str:
    return f'<img alt="{_e(alt)}" src="{uri}">'


def _figure(w=9, h=3.6):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=90)
    FigureCanvasAgg(fig)
    return fig


def _time_plot(tv: pd.DataFrame) -> str:
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    x = (tv["start_s"] + tv["end_s"]) / 2
    ax.plot(x, tv["bandwidth_mib_s"], color="tab:blue")
    ax.set_xlabel("time since first event (s)")
    ax.set_ylabel("I/O bandwidth (MiB/s)", color="tab:blue")
    ax2 = ax.twinx()
    ax2.bar(x, tv["io_time_s"], width=(tv["end_s"] - tv["start_s"]), color="tab:orange", alpha=0.35)
    ax2.set_ylabel("I/O time per window (s, all processes)", color="tab:orange")
    ax.set_title("I/O bandwidth and I/O time per time window")
    fig.tight_layout()
    return _png(fig)


def _size_plot(tv: pd.DataFrame, fv: pd.DataFrame) -> Optional[str]:
    cols = [c for c in fv.columns if c.startswith("size_")]
    if not cols:
        return None
    counts = fv[cols].sum()
    fig = _figure(9, 3.2)
    ax = fig.add_subplot(1, 1, 1)
    ax.bar([c[5:] for c in cols], counts.to_numpy(), color="tab:green")
    ax.set_ylabel("requests")
    ax.set_xlabel("request size (bytes; K = 1024, M = 2**20)")
    ax.set_title("Request-size histogram (all files)")
    fig.tight_layout()
    return _png(fig)


def _heat_plot(hm: pd.DataFrame, top: int) -> Optional[str]:
    if hm is None or hm.empty:
        return None
    hm = hm.loc[hm.sum(axis=1).sort_values(ascending=False).index[:top]]
    edges = hm.attrs.get("edges_s") or list(range(hm.shape[1] + 1))
    fig = _figure(9, max(2.4, 0.28 * len(hm) + 1.4))
    ax = fig.add_subplot(1, 1, 1)
    im = ax.imshow(
        hm.to_numpy(),
        aspect="auto",
        interpolation="nearest",
        cmap="viridis",
        extent=(edges[0], edges[-1], len(hm) - 0.5, -0.5),
    )
    ax.set_yticks(range(len(hm)))
    # host names are the traced application's text: plain, never mathtext ("$\\frac{A$" raises)
    ax.set_yticklabels([escape(f"{h}:{p}") for h, p in hm.index], fontsize=7, **PLAIN_TEXT)
    ax.set_xlabel("time since first event (s)")
    ax.set_title(f"I/O time per process and window (s; top {len(hm)} processes)")
    fig.colorbar(im, ax=ax, fraction=0.03)
    fig.tight_layout()
    return _png(fig)


def _summary_html(s: dict, stats: dict) -> str:
    t = s["time"]
    cells = [
        ("events", s["events"]),
        ("nodes", s["nodes"]),
        ("processes", s["processes"]),
        ("files", s["files"]),
        ("trace files", stats.get("files", 0)),
        ("total time (s)", t["total"]),
        ("I/O time (s)", t["io"]),
        ("compute time (s)", t["compute"]),
        ("unoverlapped I/O (s)", t["unoverlapped_io"]),
        ("app I/O (s)", t["app_io"]),
    ]
    grid = "".join(f'<div class="stat"><b>{_e(_num(v))}</b><span>{_e(k)}</span></div>' for k, v in cells)
    times = pd.DataFrame({"seconds": {k: v for k, v in t.items()}})
    funcs = pd.DataFrame(
        {
            n: {"count": f["count"], **({("size_" + k): v for k, v in f["size"].items()} if f["size"] else {})}
            for n, f in s["functions"].items()
        }
    ).T
    funcs.index.name = "function"
    skipped = ""
    if stats.get("skipped_lines") or stats.get("lost_bytes"):
        skipped = f'<p class="muted">skipped input: {stats["skipped_lines"]:,} lines, {stats["lost_bytes"]:,} bytes</p>'
    agg = s.get("aggregated") or {}
    if agg.get("calls"):  # which numbers rest on aggregated records (docs/aggregation.md)
        skipped += (
            f'<p class="muted">{agg["calls"]:,} of the events come from {agg["records"]:,} aggregated records: '
            "counts, bytes and time sums are exact; per-call percentiles, access order and timelines within "
            "a bucket are estimated (column agg_calls of the function view)</p>"
        )
    return (
        f'<section id="summary"><h2>Summary</h2><div class="grid">{grid}</div>'
        f"<h3>Split of time</h3>{_table(times)}<h3>Metrics by function</h3>{_table(funcs)}{skipped}</section>"
    )


def _insights_html(rep) -> str:
    if rep is None:
        return ""
    parts = ['<section id="insights"><h2>Insights</h2>']
    if not rep.insights:
        parts.append(f"<p>None of the {len(rep.checked)} rules triggered.</p>")
    for i in rep.insights:
        ev = i.evidence
        parts.append(
            f'<div class="ins {_e(i.severity)}"><p><span class="sev">{_e(i.severity)}</span>'
            f'<b>{_e(i.code)} {_e(i.title)}</b> <span class="muted">({_e(i.rule)})</span></p>'
            f"<p>{_e(i.message)}</p>"
        )
        m = ev.get("metrics") or {}
        if m:
            parts.append(_rows_table([m]))
        for kind in ("files", "processes", "time_windows", "epochs"):
            if ev.get(kind):
                parts.append(f'<p class="muted">{_e(kind.replace("_", " "))}</p>{_rows_table(ev[kind])}')
        parts += [f'<p class="rec">&#8594; {_e(r)}</p>' for r in i.recommendations]
        parts.append("</div>")
    parts.append(f'<p class="muted">rules checked: {_e(", ".join(rep.checked))}</p></section>')
    return "".join(parts)


def _nested_html(nested: pd.DataFrame) -> str:
    """The multi-level layers section (HDF5 > MPI-IO > POSIX, views.nested_layer_view); empty when
    the trace has no HDF5 nor MPI-IO events."""
    if not len(nested):
        return ""
    return (
        f'<section id="nested-layers"><h2>Nested layers</h2>{_table(nested)}'
        '<p class="muted">child calls made inside the parent layer\'s calls (same thread, time containment); '
        "time_share: share of the parent layer's time spent in the child layer; bytes_ratio: child bytes / "
        "parent bytes</p></section>"
    )


def render_report(analyzer, config=None, top: int = 20, bins: int = 50, title: Optional[str] = None) -> str:
    """The report of ``analyzer`` as one HTML string (see the module doc).

    ``config``: insights thresholds (as :meth:`DFAnalyzer.insights`); ``top``: rows per view
    table and processes in the heat map (1..1000); ``bins``: time windows of the plots
    (1..``engine.timebins.MAX_BINS``). Raises ``ValueError`` for either out of range and
    ``engine.timebins.NoEventsError`` when there is no event.
    """
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or not 1 <= top <= 1000:
        raise ValueError(f"top must be an integer in 1..1000, got {top!r}")
    summ = analyzer.summary(show=False)
    rep = analyzer.insights(config=config, show=False)
    layers = analyzer.layers()
    funcs = analyzer.functions()
    files = analyzer.file_view()
    procs = analyzer.processes()
    tv = analyzer.time_windows(bins=bins)
    hm = analyzer.heatmap(bins=bins)
    try:
        epochs = analyzer.epochs()
    except ValueError:
        epochs = None
    head = title or "DFTracer trace report"
    when = _dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    plots = [_img(_time_plot(tv), "I/O bandwidth and I/O time per time window")]
    sp = _size_plot(tv, files)
    if sp:
        plots.append(_img(sp, "request-size histogram"))
    hp = _heat_plot(hm, top)
    if hp:
        plots.append(_img(hp, "process x time I/O heat map"))
    pattrs = ", ".join(f"{k} = {_num(v)}" for k, v in procs.attrs.items()) if len(procs) else ""
    body = [
        f"<header><h1>{_e(head)}</h1><p>{_e(len(analyzer.files))} trace file(s), "
        f"{_e(_num(analyzer.stats['events']))} records; generated {_e(when)} by dfanalyzer</p></header><main>",
        _summary_html(summ.to_dict(), analyzer.stats),
        _insights_html(rep),
        f'<section id="layers"><h2>Layers</h2>{_table(layers)}'
        f'<p class="muted">time_s: union of the layer\'s intervals; unoverlapped_s: while no other layer runs</p></section>',
        _nested_html(nested_frame(layers.attrs.get("nested") or {})),
        f'<section id="functions"><h2>Functions</h2>{_table(funcs, top)}</section>',
        f'<section id="files"><h2>Files</h2>{_table(files, top)}</section>',
        f'<section id="processes"><h2>Processes</h2>{_table(procs, top)}<p class="muted">{_e(pattrs)}</p></section>',
    ]
    if epochs is not None and len(epochs):
        body.append(f'<section id="epochs"><h2>Epochs</h2>{_table(epochs, top)}</section>')
    body.append(
        f'<section id="timewindows"><h2>Time windows</h2>{_table(tv[tv["ops"] > 0] if "ops" in tv else tv, top)}</section>'
    )
    body.append(f'<section id="plots"><h2>Plots</h2>{"".join(plots)}</section></main>')
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(head)}</title><style>{_CSS}</style></head><body>" + "".join(body) + "</body></html>"
    )


def write_report(analyzer, path: str, config=None, top: int = 20, bins: int = 50, title: Optional[str] = None) -> str:
    """Write :func:`render_report` to ``path`` (UTF-8); returns ``path``."""
    text = render_report(analyzer, config=config, top=top, bins=bins, title=title)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path
