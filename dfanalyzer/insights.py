"""Insights: rules over the exact trace data, each with a severity, evidence and a recommendation.

``DFAnalyzer.insights()`` / ``dfanalyzer insights PATTERN`` run two passes on the cluster:

1. a pre-pass gathers the job span (``min(ts)``, ``max(te)``) and the few *window* events
   (epochs, checkpoints) the AI rules need;
2. :func:`facts_partial` runs on every held partition and returns a small mergeable dict
   (counters, per-file / per-process / per-(file, process) tables, interval unions, byte-range
   unions, per-window histograms); :func:`combine_facts` merges them in a tree (fan-in 8, order
   kept) and :func:`finish_facts` turns the root into a :class:`Facts`. No task holds all events.

The rules (:data:`RULES`) then run on the client over those facts; thresholds come from the
shipped ``insights.yaml`` merged with a user file or dict (:func:`load_config`). Besides its
ratios every rule has absolute floors (``floors`` in the YAML: seconds, share of the run, bytes);
below any of them it raises nothing (:func:`_floor`). Every rule, its
condition, threshold key, default, evidence and recommendation are listed in
``docs/analyzer.md`` ("Insights"). The POSIX/STDIO rules follow Drishti's (hpc-io/drishti-io)
conditions and default thresholds, computed here from per-call events instead of Darshan counters.

Units: times in the evidence are seconds (``*_s``), sizes bytes, shares in [0, 1]; time windows
are ``{"start_s", "end_s"}`` seconds since the job's first event.
"""

from __future__ import annotations

import copy
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from .engine import access, timebins
from .engine.events import select_frame
from .engine.intervals import merge_unions, union_intervals, union_measure
from .engine.intervals import unions_by as _unions_by
from .engine.reduce import tree_reduce
from .engine.vocabulary import (  # noqa: F401  (READ_NAMES ... are part of this module's API)
    AI_CATEGORIES,
    DATA_NAMES,
    FSEEK_NAMES,
    LSEEK_NAMES,
    OPEN_NAMES,
    POSITIONAL_NAMES,
    READ_NAMES,
    WRITE_NAMES,
    spans_others,
)

__all__ = [
    "DEFAULT_CONFIG",
    "Insight",
    "InsightReport",
    "Facts",
    "RULES",
    "load_config",
    "facts_partial",
    "combine_facts",
    "finish_facts",
    "run_rules",
    "compute_insights",
]

DEFAULT_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "insights.yaml")
SEVERITIES = ("high", "warn", "info", "ok")

_EMPTY = np.empty(0, dtype=np.int64)


# ----------------------------------------------------------------------------- configuration
def _merge(base: dict, over: dict, path: str = "") -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        where = f"{path}.{k}" if path else str(k)
        if k not in base:
            raise ValueError(f"unknown insights config key {where!r} (see {DEFAULT_CONFIG})")
        if isinstance(base[k], dict):
            if not isinstance(v, dict):
                raise ValueError(f"insights config key {where!r} must be a mapping")
            out[k] = _merge(base[k], v, where)
        else:
            if isinstance(base[k], (int, float)) and not isinstance(base[k], bool):
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise ValueError(f"insights config key {where!r} must be a number, got {v!r}")
            elif isinstance(base[k], list) and not isinstance(v, list):
                raise ValueError(f"insights config key {where!r} must be a list")
            elif isinstance(base[k], bool) and not isinstance(v, bool):
                raise ValueError(f"insights config key {where!r} must be true or false")
            out[k] = v
    return out


def load_config(config=None) -> dict:
    """Thresholds and rule switches: the shipped ``insights.yaml`` with ``config`` merged over it.

    ``config`` is ``None``, a path to a YAML file, or a dict of the same shape (any subset).
    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for YAML that is not a
    mapping, an unknown key, a value of the wrong type or an unknown severity.
    """
    import yaml

    with open(DEFAULT_CONFIG, encoding="utf-8") as f:
        cfg = yaml.safe_load(f)
    # the AI vocabulary's defaults are the engine's (one definition with the views)
    cfg["categories"] = {**copy.deepcopy(AI_CATEGORIES), **(cfg.get("categories") or {})}
    if config is None:
        return cfg
    if isinstance(config, (str, os.PathLike)):
        with open(os.fspath(config), encoding="utf-8") as f:
            user = yaml.safe_load(f)
        if user is None:
            return cfg
        if not isinstance(user, dict):
            raise ValueError(f"{os.fspath(config)}: insights config must be a YAML mapping")
    elif isinstance(config, dict):
        user = config
    else:
        raise TypeError(f"config must be None, a path or a dict, not {type(config).__name__}")
    cfg = _merge(cfg, user)
    for name, r in cfg["rules"].items():
        if r.get("severity") not in SEVERITIES:
            raise ValueError(f"rules.{name}.severity must be one of {SEVERITIES}, got {r.get('severity')!r}")
    _check_values(cfg)
    return cfg


#: ``evidence`` counts: (smallest, largest) accepted value (docs/analyzer.md, "Insights")
EVIDENCE_RANGES = {"top": (1, 1000), "time_bins": (1, timebins.MAX_BINS)}


def _check_values(cfg: dict) -> None:
    """Raise ``ValueError`` naming the key when a merged config holds a value no rule can use:
    a threshold or floor that is NaN, infinite or negative (``alignment`` below 1), an
    ``evidence`` count that is not an integer in :data:`EVIDENCE_RANGES`, a category list that is
    not a list of strings, or a ``checkpoint_name_pattern`` that is not a valid regular
    expression. A NaN would otherwise compare false and silently switch its rule off."""

    def number(where, v, lo=0.0):
        if not math.isfinite(float(v)) or v < lo:
            raise ValueError(f"insights config key {where!r} must be a finite number >= {lo:g}, got {v!r}")

    for k, v in cfg["thresholds"].items():
        number(f"thresholds.{k}", v, 1.0 if k == "alignment" else 0.0)
    for rule, fl in cfg["floors"].items():
        for k, v in fl.items():
            number(f"floors.{rule}.{k}", v)
    for k, (lo, hi) in EVIDENCE_RANGES.items():
        v = cfg["evidence"][k]
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if not isinstance(v, int) or not lo <= v <= hi:
            raise ValueError(f"insights config key 'evidence.{k}' must be an integer in {lo}..{hi}, got {v!r}")
        cfg["evidence"][k] = v
    for k, v in cfg["categories"].items():
        where = f"categories.{k}"
        if k == "checkpoint_name_pattern":
            if not isinstance(v, str):
                raise ValueError(f"insights config key {where!r} must be a string (a regular expression), got {v!r}")
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"insights config key {where!r}: bad regular expression {v!r}: {exc}") from None
        elif not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            bad = v if not isinstance(v, list) else next(x for x in v if not isinstance(x, str))
            raise ValueError(f"insights config key {where!r} must be a list of strings, got {bad!r}")


# ----------------------------------------------------------------------------- results
@dataclass
class Insight:
    """One triggered rule.

    ``evidence`` has ``metrics`` (numbers), ``files``, ``processes`` and ``time_windows`` (lists
    of dicts, the top offenders first; a key is absent when the rule has nothing of that kind).
    """

    rule: str
    code: str
    severity: str
    title: str
    message: str
    evidence: Dict[str, Any]
    recommendations: List[str]

    def to_dict(self) -> dict:
        return {
            "rule": self.rule,
            "code": self.code,
            "severity": self.severity,
            "title": self.title,
            "message": self.message,
            "evidence": _jsonable(self.evidence),
            "recommendations": list(self.recommendations),
        }


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    if isinstance(x, np.bool_):
        return bool(x)
    if x is pd.NA or (isinstance(x, float) and np.isnan(x)):
        return None
    return x


@dataclass
class InsightReport:
    """Result of :meth:`DFAnalyzer.insights`: the triggered insights (most severe first), the rules
    checked and the thresholds used."""

    insights: List[Insight]
    checked: List[str]
    thresholds: Dict[str, Any]
    facts: "Facts" = field(repr=False, default=None)
    floors: Dict[str, Any] = field(default_factory=dict)
    #: input warnings of the analyzer (:meth:`DFAnalyzer.input_warnings`: e.g. inputs from several runs)
    warnings: List[str] = field(default_factory=list)

    def __iter__(self):
        return iter(self.insights)

    def __len__(self):
        return len(self.insights)

    def __getitem__(self, i):
        return self.insights[i]

    def rules(self) -> List[str]:
        """Ids of the triggered rules, in report order."""
        return [i.rule for i in self.insights]

    def get(self, rule: str) -> Optional[Insight]:
        return next((i for i in self.insights if i.rule == rule), None)

    def to_dict(self) -> dict:
        """``{"insights": [Insight.to_dict()...], "checked": [rule ids], "thresholds": {...},
        "floors": {rule: {"seconds", "run_share"[, "bytes"]}}, "warnings": [str]}``."""
        return {
            "insights": [i.to_dict() for i in self.insights],
            "checked": list(self.checked),
            "thresholds": _jsonable(self.thresholds),
            "floors": _jsonable(self.floors),
            "warnings": list(self.warnings),
        }

    def panel(self):
        """A rich renderable: one panel per insight (severity, message, evidence, recommendation)."""
        from rich.console import Group
        from rich.panel import Panel
        from rich.table import Table
        from rich.text import Text

        from .safetext import cell, escape

        colors = {"high": "bold red", "warn": "yellow", "info": "cyan", "ok": "green"}
        head = Table(title="I/O insights", show_lines=False, expand=False)
        for c in ("severity", "rule", "finding"):
            head.add_column(c)
        for i in self.insights:
            head.add_row(Text(i.severity.upper(), style=colors[i.severity]), f"{i.code} {i.rule}", cell(i.message))
        if not self.insights:
            head.add_row(Text("OK", style="green"), "-", f"none of the {len(self.checked)} rules triggered")
        parts = [head]
        if self.warnings:
            parts.insert(0, Panel(Group(*[cell(w) for w in self.warnings]), title="[yellow]Input warnings[/]"))
        for i in self.insights:
            body = [cell(i.message)]
            ev = i.evidence
            m = ev.get("metrics", {})
            if m:
                body.append(cell("metrics: " + ", ".join(f"{k}={_fmt(v)}" for k, v in m.items()), style="dim"))
            for kind in ("files", "processes", "time_windows"):
                rows = ev.get(kind) or []
                if rows:
                    t = Table(title=kind.replace("_", " "), title_justify="left", expand=False)
                    cols = list(rows[0].keys())
                    for c in cols:
                        t.add_column(escape(c), overflow="fold")
                    for r in rows:  # (file names, hosts, epochs: a trace's text, never markup)
                        t.add_row(*[cell(_fmt(r.get(c))) for c in cols])
                    body.append(t)
            for r in i.recommendations:
                body.append(cell("→ " + r, style="green"))
            parts.append(
                Panel(
                    Group(*body), title=f"[{colors[i.severity]}]{i.severity.upper()}[/] {i.title}", title_align="left"
                )
            )
        return Group(*parts)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return ", ".join(_fmt(x) for x in v)
    return str(v)


# ----------------------------------------------------------------------------- per-partition facts
def _isin(col: pd.Series, values) -> np.ndarray:
    return np.asarray(col.isin(list(values)), dtype=bool)


_place_requests = access.place_requests


def _io_rows(df: pd.DataFrame, ctx: dict) -> pd.DataFrame:
    x = select_frame(df)[0]
    return x[_isin(x["cat"], ctx["io_cats"])]


def _stream_carry(df: pd.DataFrame, ctx: dict) -> dict:
    return access.stream_carry(_io_rows(df, ctx))


stream_positions = access.stream_positions


def _bins_of(ts: np.ndarray, t0: int, t1: int, bins: int) -> np.ndarray:
    """Evidence bin of each ``ts`` (engine.timebins: the time view's edges)."""
    return timebins.start_bins(ts, timebins.edges(t0, t1, bins))


def _hist(b: np.ndarray, bins: int, w=None) -> np.ndarray:
    if b.size == 0:
        return np.zeros(bins, dtype=np.int64)
    return np.bincount(b, weights=w, minlength=bins).astype(np.int64)


FILE_COLS = (
    "reads",
    "writes",
    "small_reads",
    "small_writes",
    "placed",
    "misaligned",
    "random_reads",
    "random_writes",
    "bytes_read",
    "bytes_written",
    "stdio_bytes",
    "meta_time",
    "io_time",
    "opens",
    "placed_read_bytes",
    "checkpoint_bytes",
    # (floors, issue 20) time in the file's read / write calls, µs
    "read_time",
    "write_time",
)
PROC_COLS = (
    "io_time",
    "meta_time",
    "compute_time",
    "fetch_wait",
    "fetch_count",
    "samples",
    "sample_time",
    "app_io_time",
    "bytes",
)
COUNTERS = (
    "reads",
    "writes",
    "small_reads",
    "small_writes",
    "placed",
    "misaligned",
    "random_reads",
    "random_writes",
    "bytes_posix",
    "bytes_stdio",
    "io_time",
    "meta_time",
    "compute_time",
    "fetch_wait",
    "fetch_count",
    "samples",
    "opens",
    "unplaced_read_bytes",
    "placed_read_bytes",
    "checkpoint_bytes",
    "checkpoint_events",
    # (floors, issue 20) time in small / misaligned requests and in STDIO calls, µs
    "small_time",
    "misaligned_time",
    "stdio_time",
)
# per (fname, hostname, pid): bytes, I/O time and (issue 20: "shared" needs overlapping use) the
# first start / last end of the process's calls on the file, µs
FILEPROC_AGG = {"bytes_read": "sum", "bytes_written": "sum", "io_time": "sum", "first_ts": "min", "last_te": "max"}
HIST_KEYS = ("small", "misaligned", "random", "meta_time", "stdio_bytes", "fetch_wait")


def facts_partial(df: pd.DataFrame, ctx: dict) -> dict:
    """Mergeable insight facts of one partition of ``DFAnalyzer.events`` (see the module doc).

    ``ctx``: ``io_cats``, ``compute_cats``, ``app_io_cats``, ``fetch_names``, ``sample_names``,
    ``checkpoint`` (``(starts, ends)`` union of checkpoint windows, µs), ``epochs`` (list of
    ``(label, start, end)`` µs), ``small_bytes``, ``alignment``, ``t0``, ``t1``, ``bins``, ``top``.
    """
    bins = ctx["bins"]
    out = {
        "n": dict.fromkeys(COUNTERS, 0),
        "hist": {k: np.zeros(bins, dtype=np.int64) for k in HIST_KEYS},
        "files": pd.DataFrame(columns=list(FILE_COLS), dtype=np.int64),
        "fileproc": pd.DataFrame(columns=list(FILEPROC_AGG), dtype=np.int64),
        "procs": pd.DataFrame(columns=list(PROC_COLS) + ["first_ts", "last_te"], dtype=np.int64),
        "streams": pd.DataFrame(columns=["first_start", "first_bin", "last_end"], dtype=np.int64),
        "ranges": {},
        "epoch_ranges": {},
        "unions": {k: (_EMPTY, _EMPTY) for k in ("io", "compute", "fetch", "checkpoint", "app_io")},
        "top_fetch": pd.DataFrame(columns=["ts", "dur", "hostname", "pid", "step"]),
        "top_checkpoint": pd.DataFrame(columns=["ts", "dur", "hostname", "pid", "name"]),
    }
    if df.empty:
        return out
    x, xcalls = select_frame(df)
    if x.empty:
        return out
    n, h, t0, t1 = out["n"], out["hist"], ctx["t0"], ctx["t1"]
    cat_io = _isin(x["cat"], ctx["io_cats"])
    io = x[cat_io]
    w = xcalls[cat_io]  # calls per row: an aggregated record counts its dft_cnt calls
    agg = w > 1
    name = io["name"].astype(object)
    size = io["size"].to_numpy(dtype=float, na_value=np.nan)
    has_size = ~np.isnan(size)
    is_r = name.isin(READ_NAMES).to_numpy() & has_size
    is_w = name.isin(WRITE_NAMES).to_numpy() & has_size
    is_open = name.isin(OPEN_NAMES).to_numpy()
    is_meta = ~name.isin(DATA_NAMES).to_numpy()
    is_stdio = (io["cat"] == "STDIO").to_numpy(dtype=bool, na_value=False)
    ts = io["ts"].to_numpy(dtype=np.int64)
    dur = io["dur"].to_numpy(dtype=np.int64)
    b = _bins_of(ts, t0, t1, bins)
    small = (is_r | is_w) & (np.nan_to_num(size / w, nan=np.inf) < ctx["small_bytes"])  # per-call size
    pos = _place_requests(io, ctx.get("stream_start")).to_numpy(dtype=float)
    placed = (is_r | is_w) & ~np.isnan(pos) & ~agg  # a record of several calls has no single position
    misal = placed & (np.mod(np.nan_to_num(pos), ctx["alignment"]) != 0)
    start = np.nan_to_num(pos).astype(np.int64)
    end = start + np.nan_to_num(size).astype(np.int64)
    # sequential / random per (host, pid, file, direction) stream, ts order
    rand = np.zeros(len(io), dtype=bool)
    streams = None
    if placed.any():
        sdf = pd.DataFrame(
            {
                "host": io["hostname"].astype(object).to_numpy()[placed],
                "pid": io["pid"].to_numpy()[placed],
                "fname": io["fname"].astype(object).to_numpy()[placed],
                "dir": np.where(is_r[placed], "r", "w"),
                "ts": ts[placed],
                "start": start[placed],
                "end": end[placed],
                "bin": b[placed],
                "row": np.flatnonzero(placed),
            }
        )
        # engine.access's "stream" ordering of the placed requests
        sdf = sdf.sort_values(["host", "pid", "fname", "dir", "row"], kind="stable")
        key = ["host", "pid", "fname", "dir"]
        g = sdf.groupby(key, sort=False, dropna=False)
        prev_end = g["end"].shift()
        r = access.step_kinds(sdf["start"].to_numpy(), prev_end.to_numpy())[2] & prev_end.notna().to_numpy()
        rand[sdf["row"].to_numpy()[r]] = True
        streams = g.agg(first_start=("start", "first"), first_bin=("bin", "first"), last_end=("end", "last"))
    n["reads"] = int(w[is_r].sum())
    n["writes"] = int(w[is_w].sum())
    n["small_reads"] = int(w[small & is_r].sum())
    n["small_writes"] = int(w[small & is_w].sum())
    n["placed"] = int(placed.sum())
    n["misaligned"] = int(misal.sum())
    n["random_reads"] = int((rand & is_r).sum())
    n["random_writes"] = int((rand & is_w).sum())
    moved = np.nan_to_num(size).astype(np.int64) * (is_r | is_w)
    n["bytes_posix"] = int(moved[~is_stdio].sum())
    n["bytes_stdio"] = int(moved[is_stdio].sum())
    n["io_time"] = int(dur.sum())
    n["meta_time"] = int(dur[is_meta].sum())
    n["opens"] = int(w[is_open].sum())
    n["placed_read_bytes"] = int(moved[placed & is_r].sum())
    n["unplaced_read_bytes"] = int(moved[~placed & is_r].sum())
    # --- floors (issue 20): time of the requests a rule is about
    n["small_time"] = int(dur[small].sum())
    n["misaligned_time"] = int(dur[misal].sum())
    n["stdio_time"] = int(dur[is_stdio].sum())
    # ---
    h["small"] = _hist(b[small], bins, w[small])
    h["misaligned"] = _hist(b[misal], bins)
    h["random"] = _hist(b[rand], bins)
    h["meta_time"] = _hist(b[is_meta], bins, dur[is_meta])
    h["stdio_bytes"] = _hist(b[is_stdio], bins, moved[is_stdio])
    ck_u = ctx["checkpoint"]
    in_ck = np.zeros(len(io), dtype=bool)
    if ck_u[0].size and is_w.any():
        k = np.searchsorted(ck_u[0], ts, side="right") - 1
        in_ck = is_w & (k >= 0) & (ts < ck_u[1][np.maximum(k, 0)])
    n["checkpoint_bytes"] = int(moved[in_ck].sum())
    # per file
    fname = io["fname"].astype(object)
    has_f = fname.notna().to_numpy()
    if has_f.any():
        fdf = pd.DataFrame(
            {
                "fname": fname.to_numpy()[has_f],
                "reads": (w * is_r)[has_f],
                "writes": (w * is_w)[has_f],
                "small_reads": (w * (small & is_r))[has_f],
                "small_writes": (w * (small & is_w))[has_f],
                "placed": placed[has_f],
                "misaligned": misal[has_f],
                "random_reads": (rand & is_r)[has_f],
                "random_writes": (rand & is_w)[has_f],
                "bytes_read": (moved * is_r)[has_f],
                "bytes_written": (moved * is_w)[has_f],
                "stdio_bytes": (moved * is_stdio)[has_f],
                "meta_time": (dur * is_meta)[has_f],
                "io_time": dur[has_f],
                "opens": (w * is_open)[has_f],
                "placed_read_bytes": (moved * (placed & is_r))[has_f],
                "checkpoint_bytes": (moved * in_ck)[has_f],
                "read_time": (dur * is_r)[has_f],
                "write_time": (dur * is_w)[has_f],
            }
        )
        out["files"] = fdf.groupby("fname", sort=False).sum().astype(np.int64)
        fp = pd.DataFrame(
            {
                "fname": fname.to_numpy()[has_f],
                "hostname": io["hostname"].astype(object).to_numpy()[has_f],
                "pid": io["pid"].to_numpy()[has_f],
                "bytes_read": (moved * is_r)[has_f],
                "bytes_written": (moved * is_w)[has_f],
                "io_time": dur[has_f],
                "first_ts": ts[has_f],
                "last_te": (ts + dur)[has_f],
            }
        )
        out["fileproc"] = fp.groupby(["fname", "hostname", "pid"], sort=False).agg(FILEPROC_AGG).astype(np.int64)
        # byte ranges read, per file and per (file, epoch)
        pr = placed & is_r & has_f
        if pr.any():
            keys = fname[pr].reset_index(drop=True)
            out["ranges"] = _unions_by(keys, start[pr], end[pr])
            ep = ctx["epochs"]
            if ep:
                es = np.array([e[1] for e in ep], dtype=np.int64)
                ee = np.array([e[2] for e in ep], dtype=np.int64)
                k = np.searchsorted(es, ts[pr], side="right") - 1
                inside = (k >= 0) & (ts[pr] < ee[np.maximum(k, 0)])
                if inside.any():
                    ek = pd.Series(list(zip(keys[inside], k[inside])))
                    out["epoch_ranges"] = _unions_by(ek, start[pr][inside], end[pr][inside])
    if streams is not None:
        out["streams"] = streams
    # per process and the unions over all events
    cat = x["cat"]
    xname = x["name"].astype(object)
    is_compute = _isin(cat, ctx["compute_cats"])
    # app I/O as in layers(): a region that spans others (fetch.block, epoch, ...) is a container
    is_app = (
        _isin(cat, ctx["app_io_cats"]) & ~xname.isin([n for n in xname.unique() if spans_others(str(n))]).to_numpy()
    )
    is_fetch = xname.isin(ctx["fetch_names"]).to_numpy()
    is_sample = xname.isin(ctx["sample_names"]).to_numpy()
    xts = x["ts"].to_numpy(dtype=np.int64)
    xte = x["te"].to_numpy(dtype=np.int64)
    xdur = x["dur"].to_numpy(dtype=np.int64)
    n["compute_time"] = int(xdur[is_compute].sum())
    n["fetch_wait"] = int(xdur[is_fetch].sum())
    n["fetch_count"] = int(xcalls[is_fetch].sum())
    n["samples"] = int(xcalls[is_sample].sum())
    h["fetch_wait"] = _hist(_bins_of(xts[is_fetch], t0, t1, bins), bins, xdur[is_fetch])
    xsize = x["size"].to_numpy(dtype=float, na_value=0.0).astype(np.int64)
    pdf = pd.DataFrame(
        {
            "hostname": x["hostname"].astype(object).to_numpy(),
            "pid": x["pid"].to_numpy(),
            "io_time": xdur * cat_io,
            "meta_time": 0,
            "compute_time": xdur * is_compute,
            "fetch_wait": xdur * is_fetch,
            "fetch_count": xcalls * is_fetch,
            "samples": xcalls * is_sample,
            "sample_time": xdur * is_sample,
            "app_io_time": xdur * is_app,
            "bytes": xsize * cat_io,
            "first_ts": xts,
            "last_te": xte,
        }
    )
    io_rows = np.flatnonzero(cat_io)
    pdf.loc[io_rows[is_meta], "meta_time"] = dur[is_meta]
    agg = {c: "sum" for c in PROC_COLS}
    agg.update(first_ts="min", last_te="max")
    out["procs"] = pdf.groupby(["hostname", "pid"], sort=False).agg(agg).astype(np.int64)
    u = out["unions"]
    u["io"] = union_intervals(xts[cat_io], xte[cat_io])
    u["app_io"] = union_intervals(xts[is_app], xte[is_app])
    u["compute"] = union_intervals(xts[is_compute], xte[is_compute])
    u["fetch"] = union_intervals(xts[is_fetch], xte[is_fetch])
    is_ck = _isin(cat, ctx["checkpoint_cats"]) | (
        ~cat_io & xname.str.contains(ctx["checkpoint_pattern"], regex=True, na=False).to_numpy(dtype=bool)
    )
    u["checkpoint"] = union_intervals(xts[is_ck], xte[is_ck])
    n["checkpoint_events"] = int(xcalls[is_ck].sum())
    top = ctx["top"]
    if is_fetch.any():
        step = None
        for c in ("step", "count"):
            if c in x.columns:
                step = x[c][is_fetch].astype(object).to_numpy()
                break
        tf = pd.DataFrame(
            {
                "ts": xts[is_fetch],
                "dur": xdur[is_fetch],
                "hostname": x["hostname"].astype(object).to_numpy()[is_fetch],
                "pid": x["pid"].to_numpy()[is_fetch],
                "step": step if step is not None else None,
            }
        )
        out["top_fetch"] = tf.nlargest(top, "dur", keep="first")
    if is_ck.any():
        tc = pd.DataFrame(
            {
                "ts": xts[is_ck],
                "dur": xdur[is_ck],
                "hostname": x["hostname"].astype(object).to_numpy()[is_ck],
                "pid": x["pid"].to_numpy()[is_ck],
                "name": xname.to_numpy()[is_ck],
            }
        )
        out["top_checkpoint"] = tc.nlargest(top, "dur", keep="first")
    return out


def _sum_frames(frames: List[pd.DataFrame], agg=None) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    if not frames:
        return None
    if len(frames) == 1:
        return frames[0]
    cat = pd.concat(frames)
    names = list(cat.index.names)
    if agg is None:
        return cat.groupby(level=names, sort=False).sum()
    return cat.groupby(level=names, sort=False).agg(agg)


def _merge_streams(a: pd.DataFrame, b: pd.DataFrame, t: int):
    """Join the stream boundaries of two consecutive partials (``a`` first): a stream present in
    both contributes one classified transition (random when ``b``'s first request starts before
    ``a``'s last one ended). Returns the merged boundary frame and the random transitions."""
    if not len(a):
        return b, None
    if not len(b):
        return a, None
    both = a.index.intersection(b.index)
    rand = None
    if len(both):
        r = access.step_kinds(b.loc[both, "first_start"].to_numpy(), a.loc[both, "last_end"].to_numpy())[2]
        rand = pd.DataFrame({"bin": b.loc[both, "first_bin"].to_numpy()[r]}, index=both[r])
    merged = pd.concat([a, b.drop(both)])
    merged.loc[both, "last_end"] = b.loc[both, "last_end"]
    return merged, rand


def combine_facts(*parts: dict) -> dict:
    """Merge partials from consecutive partitions (in order; the order matters only for the stream
    boundaries of the sequential/random classification)."""
    parts = list(parts)
    out = copy.copy(parts[0])
    out["n"] = dict(parts[0]["n"])
    out["hist"] = {k: v.copy() for k, v in parts[0]["hist"].items()}
    files = [parts[0]["files"]]
    streams = parts[0]["streams"]
    for p in parts[1:]:
        for k, v in p["n"].items():
            out["n"][k] += v
        for k, v in p["hist"].items():
            out["hist"][k] += v
        files.append(p["files"])
        streams, rand = _merge_streams(streams, p["streams"], 0)
        if rand is not None and len(rand):
            d = rand.index.get_level_values("dir")
            out["n"]["random_reads"] += int((d == "r").sum())
            out["n"]["random_writes"] += int((d == "w").sum())
            np.add.at(out["hist"]["random"], rand["bin"].to_numpy(dtype=np.int64), 1)
            rf = pd.DataFrame(
                {
                    "fname": rand.index.get_level_values("fname"),
                    "random_reads": (d == "r").astype(np.int64),
                    "random_writes": (d == "w").astype(np.int64),
                }
            )
            rf = rf[rf["fname"].notna()].groupby("fname", sort=False).sum()
            files.append(rf.reindex(columns=list(FILE_COLS), fill_value=0).astype(np.int64))
    out["streams"] = streams
    fs = _sum_frames(files)
    out["files"] = fs if fs is not None else parts[0]["files"]
    fp = _sum_frames([p["fileproc"] for p in parts], FILEPROC_AGG)
    out["fileproc"] = fp if fp is not None else parts[0]["fileproc"]
    agg = {c: "sum" for c in PROC_COLS}
    agg.update(first_ts="min", last_te="max")
    pr = _sum_frames([p["procs"] for p in parts], agg)
    out["procs"] = pr if pr is not None else parts[0]["procs"]
    for key in ("ranges", "epoch_ranges"):
        merged: Dict[Any, list] = {}
        for p in parts:
            for k, u in p[key].items():
                merged.setdefault(k, []).append(u)
        out[key] = {k: (v[0] if len(v) == 1 else merge_unions(*v)) for k, v in merged.items()}
    out["unions"] = {k: merge_unions(*[p["unions"][k] for p in parts]) for k in parts[0]["unions"]}
    for key in ("top_fetch", "top_checkpoint"):
        frames = [p[key] for p in parts if len(p[key])]
        out[key] = (
            pd.concat(frames).nlargest(max(len(f) for f in frames), "dur", keep="first") if frames else parts[0][key]
        )
    return out


# ----------------------------------------------------------------------------- finished facts
@dataclass
class Facts:
    """The merged facts the rules read (all exact; times µs, sizes bytes).

    ``n``: counters (:data:`COUNTERS`); ``hist``: per time-window arrays (:data:`HIST_KEYS`);
    ``files``: one row per file name (:data:`FILE_COLS`, plus ``unique_read_bytes`` and
    ``redundant_read_bytes``); ``fileproc``: per ``(fname, hostname, pid)`` bytes, I/O time,
    ``first_ts`` and ``last_te`` of its calls on the file (:data:`FILEPROC_AGG`);
    ``procs``: per ``(hostname, pid)`` times (:data:`PROC_COLS`), ``first_ts``, ``last_te``;
    ``unions``: interval unions (``io``, ``app_io``, ``compute``, ``fetch``, ``checkpoint``);
    ``epochs``: ``[(label, start, end)]``; ``epoch_bytes``: per ``(fname, epoch)`` read-range
    measures; ``t0``, ``t1``: job span; ``bins``: window count.
    """

    n: Dict[str, int]
    hist: Dict[str, np.ndarray]
    files: pd.DataFrame
    fileproc: pd.DataFrame
    procs: pd.DataFrame
    unions: Dict[str, Tuple[np.ndarray, np.ndarray]]
    epochs: List[Tuple[Any, int, int]]
    epoch_ranges: Dict[Any, Tuple[np.ndarray, np.ndarray]]
    top_fetch: pd.DataFrame
    top_checkpoint: pd.DataFrame
    t0: int
    t1: int
    bins: int
    #: multi-level facts (HDF5, MPI-IO; :func:`_mlayer_partial`): ``calls``, one row per
    #: (cat, name, fname, hostname, pid) with calls, time (µs), bytes, small_calls, small_time
    mlayers: Dict[str, Any] = field(default_factory=dict)

    def window(self, i: int) -> dict:
        """Bin ``i`` as ``{"start_s", "end_s"}`` (seconds since the first event)."""
        e = timebins.edges(self.t0, self.t1, self.bins)
        return {"start_s": round((e[i] - self.t0) / 1e6, 6), "end_s": round((e[i + 1] - self.t0) / 1e6, 6)}

    def rel(self, ts_us: int) -> float:
        return round((int(ts_us) - self.t0) / 1e6, 6)


def finish_facts(p: dict, t0: int, t1: int, bins: int, epochs) -> Facts:
    """Turn the root partial into :class:`Facts` (adds the per-file unique / redundant read bytes)."""
    files = p["files"].copy()
    if len(files):
        uniq = {k: union_measure(u) for k, u in p["ranges"].items()}
        files["unique_read_bytes"] = [uniq.get(f, 0) for f in files.index]
        files["redundant_read_bytes"] = files["placed_read_bytes"] - files["unique_read_bytes"]
    else:
        files["unique_read_bytes"] = pd.Series(dtype=np.int64)
        files["redundant_read_bytes"] = pd.Series(dtype=np.int64)
    return Facts(
        n=p["n"],
        hist=p["hist"],
        files=files,
        fileproc=p["fileproc"],
        procs=p["procs"],
        unions=p["unions"],
        epochs=list(epochs),
        epoch_ranges=p["epoch_ranges"],
        top_fetch=p["top_fetch"],
        top_checkpoint=p["top_checkpoint"],
        t0=t0,
        t1=t1,
        bins=bins,
    )


# ----------------------------------------------------------------------------- rules
def _share(a, b) -> float:
    return float(a) / float(b) if b else 0.0


def _top_windows(f: Facts, arr: np.ndarray, top: int, unit: str = "count", scale: float = 1.0) -> List[dict]:
    order = np.argsort(-arr, kind="stable")[:top]
    return [
        dict(f.window(int(i)), **{unit: (arr[i] * scale if scale != 1.0 else int(arr[i]))}) for i in order if arr[i] > 0
    ]


def _file_rows(df: pd.DataFrame, cols: Sequence[str], top: int, by: str) -> List[dict]:
    if df is None or not len(df):
        return []
    d = df[df[by] > 0].sort_values(by, ascending=False, kind="stable").head(top)
    return [dict(fname=str(i), **{c: _num(r[c]) for c in cols}) for i, r in d.iterrows()]


def _num(v):
    if isinstance(v, (np.integer, int)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        return round(float(v), 6)
    return v


def _proc_rows(df: pd.DataFrame, cols: Sequence[str], top: int, by: str, scale: Dict[str, float] = None) -> List[dict]:
    if df is None or not len(df):
        return []
    scale = scale or {}
    d = df.sort_values(by, ascending=False, kind="stable").head(top)
    return [
        dict(hostname=str(k[0]), pid=int(k[1]), **{c: _num(r[c] * scale.get(c, 1)) for c in cols})
        for k, r in d.iterrows()
    ]


def _proc_time(f: Facts, procs: Optional[pd.DataFrame] = None) -> int:
    """The run's process time (µs): the sum over processes of last end - first start."""
    p = f.procs if procs is None else procs
    if p is None or not len(p):
        return 0
    return int((p["last_te"] - p["first_ts"]).clip(lower=0).sum())


def _span(f: Facts) -> int:
    """The job span (µs): first start to last end over all events."""
    return max(0, int(f.t1) - int(f.t0))


def _floor(cfg: dict, rule: str, time_us, base_us, nbytes=None) -> Optional[dict]:
    """The rule's absolute floors (``floors.<rule>`` of the config, issue 20): ``None`` when the
    effect is below one of them (``time_us`` under ``seconds``, ``time_us / base_us`` under
    ``run_share``, ``nbytes`` under ``bytes``), else the metrics that show it passed them."""
    fl = cfg["floors"][rule]
    share = _share(time_us, base_us)
    if time_us < fl["seconds"] * 1e6 or share < fl["run_share"]:
        return None
    if nbytes is not None and "bytes" in fl and nbytes < fl["bytes"]:
        return None
    return {"affected_time_s": round(int(time_us) / 1e6, 6), "run_share": round(share, 6)}


def _unplaced_requests(f: Facts) -> str:
    """Message tail: how many read/write requests had no known file offset (not counted)."""
    total = f.n["reads"] + f.n["writes"]
    un = total - f.n["placed"]
    return f"; {un:,} of {total:,} requests could not be placed (file offset unknown) and are not counted" if un else ""


def _unplaced_bytes(f: Facts) -> str:
    """Message tail: how many read bytes had no known file offset (not counted)."""
    un = f.n["unplaced_read_bytes"]
    total = un + f.n["placed_read_bytes"]
    return (
        f"; {un:,} of {total:,} bytes read could not be placed (file offset unknown) and are not counted" if un else ""
    )


RuleFn = Callable[[Facts, dict, dict], Optional[Tuple[str, str, dict, List[str]]]]


@dataclass(frozen=True)
class Rule:
    """A rule: ``id`` (the YAML key), ``code``, ``title`` and ``check(facts, thresholds, cfg)``
    returning ``None`` or ``(message, title suffix, evidence, recommendations)``."""

    id: str
    code: str
    title: str
    check: RuleFn


def _small_requests(f: Facts, th: dict, cfg: dict):
    msgs, metrics = [], {}
    for d, total, small in (("read", f.n["reads"], f.n["small_reads"]), ("write", f.n["writes"], f.n["small_writes"])):
        metrics[f"{d}s"] = total
        metrics[f"small_{d}s"] = small
        metrics[f"small_{d}_share"] = round(_share(small, total), 6)
        if total and _share(small, total) > th["small_requests"] and small > th["small_requests_absolute"]:
            msgs.append(
                f"{small:,} small {d} requests (< {th['small_bytes']:,} bytes) are "
                f"{100 * _share(small, total):.2f}% of all {d} requests"
            )
    if not msgs:
        return None
    fl = _floor(cfg, "small_requests", f.n["small_time"], _proc_time(f))
    if fl is None:
        return None
    metrics.update(fl)
    msgs[-1] += f" ({fl['affected_time_s']:.3f} s in small requests, {100 * fl['run_share']:.2f}% of the process time)"
    top = cfg["evidence"]["top"]
    files = f.files.assign(small=f.files["small_reads"] + f.files["small_writes"])
    return (
        "; ".join(msgs),
        metrics,
        {
            "files": _file_rows(files, ["small_reads", "small_writes", "reads", "writes"], top, "small"),
            "time_windows": _top_windows(f, f.hist["small"], top, "small_requests"),
        },
        [
            "Buffer the requests into larger, contiguous ones (e.g. read whole records or use a larger "
            "buffer size in the reader)",
            "For many small samples, pack them into larger container files (HDF5, TFRecord, WebDataset shards)",
        ],
    )


def _misaligned(f: Facts, th: dict, cfg: dict):
    placed, mis = f.n["placed"], f.n["misaligned"]
    if not placed or _share(mis, placed) <= th["misaligned_requests"]:
        return None
    fl = _floor(cfg, "misaligned_requests", f.n["misaligned_time"], _proc_time(f))
    if fl is None:
        return None
    top = cfg["evidence"]["top"]
    return (
        f"{mis:,} of {placed:,} requests ({100 * _share(mis, placed):.2f}%) start at a file offset that is "
        f"not a multiple of {th['alignment']:,} bytes ({fl['affected_time_s']:.3f} s in them)" + _unplaced_requests(f),
        {
            "placed_requests": placed,
            "misaligned_requests": mis,
            "misaligned_share": round(_share(mis, placed), 6),
            "alignment": th["alignment"],
            "unplaced_requests": f.n["reads"] + f.n["writes"] - placed,
            **fl,
        },
        {
            "files": _file_rows(f.files, ["misaligned", "placed"], top, "misaligned"),
            "time_windows": _top_windows(f, f.hist["misaligned"], top, "misaligned_requests"),
        },
        [
            f"Align requests to the file-system block size ({th['alignment']:,} bytes): pad records or "
            "read aligned blocks and slice in memory",
            "On Lustre, match the stripe size to the request alignment (lfs setstripe -S)",
        ],
    )


def _random_access(f: Facts, th: dict, cfg: dict):
    msgs, metrics = [], {}
    fs = f.files
    base = _proc_time(f)
    for d, total, rnd in (("read", f.n["reads"], f.n["random_reads"]), ("write", f.n["writes"], f.n["random_writes"])):
        metrics[f"{d}s"] = total
        metrics[f"random_{d}s"] = rnd
        metrics[f"random_{d}_share"] = round(_share(rnd, total), 6)
        if total and _share(rnd, total) > th["random_operations"] and rnd > th["random_operations_absolute"]:
            # floor: the read (write) time of the files with random reads (writes), an upper bound
            t = int(fs.loc[fs[f"random_{d}s"] > 0, f"{d}_time"].sum()) if len(fs) else 0
            fl = _floor(cfg, "random_access", t, base)
            if fl is None:
                continue
            metrics[f"{d}_time_on_random_files_s"] = fl["affected_time_s"]
            metrics["run_share"] = max(metrics.get("run_share", 0), fl["run_share"])
            msgs.append(
                f"{rnd:,} random {d} requests ({100 * _share(rnd, total):.2f}% of {d}s) start before "
                f"the end of the previous request of the same process on the same file ({fl['affected_time_s']:.3f} s "
                f"of {d} time on those files)"
            )
    if not msgs:
        return None
    msgs[-1] += _unplaced_requests(f)
    metrics["unplaced_requests"] = f.n["reads"] + f.n["writes"] - f.n["placed"]
    top = cfg["evidence"]["top"]
    files = f.files.assign(random=f.files["random_reads"] + f.files["random_writes"])
    return (
        "; ".join(msgs),
        metrics,
        {
            "files": _file_rows(files, ["random_reads", "random_writes", "reads", "writes"], top, "random"),
            "time_windows": _top_windows(f, f.hist["random"], top, "random_requests"),
        },
        [
            "Change the data layout or access order to read consecutively (sort the indices a process "
            "reads, or shuffle at the granularity of large chunks/shards instead of single records)",
            "Prefetch or cache the regions that are re-visited",
        ],
    )


def _redundant_reads(f: Facts, th: dict, cfg: dict):
    placed = int(f.files["placed_read_bytes"].sum()) if len(f.files) else 0
    red = int(f.files["redundant_read_bytes"].sum()) if len(f.files) else 0
    if not placed or _share(red, placed) <= th["redundant_reads"]:
        return None
    fs = f.files
    fl = _floor(
        cfg, "redundant_reads", int(fs.loc[fs["redundant_read_bytes"] > 0, "read_time"].sum()), _proc_time(f), red
    )
    if fl is None:
        return None
    top = cfg["evidence"]["top"]
    return (
        f"{red:,} of {placed:,} placed bytes read ({100 * _share(red, placed):.2f}%) re-read byte ranges the same "
        "file had already delivered" + _unplaced_bytes(f),
        {
            "read_bytes": placed,
            "unique_read_bytes": placed - red,
            "redundant_read_bytes": red,
            "redundant_share": round(_share(red, placed), 6),
            "unplaced_read_bytes": f.n["unplaced_read_bytes"],
            **fl,
        },
        {
            "files": _file_rows(
                f.files, ["redundant_read_bytes", "placed_read_bytes", "unique_read_bytes"], top, "redundant_read_bytes"
            )
        },
        [
            "Cache data that is read more than once (in memory, on node-local storage, or with a caching data loader)",
            "Check whether the reader re-reads headers or index blocks on every access",
        ],
    )


def _metadata_time(f: Facts, th: dict, cfg: dict):
    io, meta = f.n["io_time"], f.n["meta_time"]
    share = _share(meta, io)
    procs = f.procs
    slow = procs[procs["meta_time"] > th["metadata_time_rank"] * 1e6] if len(procs) else procs
    fl = _floor(cfg, "metadata_time", meta, _proc_time(f))
    over = bool(io and share > th["metadata_time_share"] and fl is not None)
    if not over and not len(slow):
        return None
    top = cfg["evidence"]["top"]
    parts = []
    if over:
        parts.append(
            f"metadata calls (open, close, stat, seek, ...) take {100 * share:.2f}% of the I/O call time "
            f"({meta / 1e6:.3f} s of {io / 1e6:.3f} s)"
        )
    if len(slow):
        parts.append(f"{len(slow)} process(es) spend more than {th['metadata_time_rank']} s in metadata calls")
    s = {"meta_time": 1e-6, "io_time": 1e-6}
    return (
        "; ".join(parts),
        {
            "meta_time_s": meta / 1e6,
            "io_time_s": io / 1e6,
            "meta_share": round(share, 6),
            "processes_over_rank_threshold": int(len(slow)),
            "run_share": round(_share(meta, _proc_time(f)), 6),
        },
        {
            "files": [
                dict(r, meta_time=round(r["meta_time"] / 1e6, 6))
                for r in _file_rows(f.files, ["meta_time", "opens"], top, "meta_time")
            ],
            "processes": _proc_rows(procs, ["meta_time", "io_time"], top, "meta_time", s),
            "time_windows": _top_windows(f, f.hist["meta_time"], top, "meta_time_s", 1e-6),
        },
        [
            "Open files once and keep them open; avoid repeated stat/open/close per sample",
            "Combine many small files into fewer larger ones, or cache metadata lookups (file lists, sizes)",
        ],
    )


def _stdio_share(f: Facts, th: dict, cfg: dict):
    total = f.n["bytes_posix"] + f.n["bytes_stdio"]
    st = f.n["bytes_stdio"]
    if not total or _share(st, total) <= th["interface_stdio"]:
        return None
    fl = _floor(cfg, "stdio_share", f.n["stdio_time"], _proc_time(f), st)
    if fl is None:
        return None
    top = cfg["evidence"]["top"]
    return (
        f"STDIO moves {100 * _share(st, total):.2f}% of the bytes ({st:,} of {total:,}; "
        f"{fl['affected_time_s']:.3f} s in STDIO calls)",
        {"stdio_bytes": st, "total_bytes": total, "stdio_share": round(_share(st, total), 6), **fl},
        {
            "files": _file_rows(f.files, ["stdio_bytes"], top, "stdio_bytes"),
            "time_windows": _top_windows(f, f.hist["stdio_bytes"], top, "stdio_bytes"),
        },
        [
            "Use POSIX read/write with large buffers (or MPI-IO/HDF5) instead of fread/fwrite for bulk data",
            "If STDIO stays, enlarge its buffer with setvbuf",
        ],
    )


def _shared(f: Facts) -> pd.DataFrame:
    """The ``fileproc`` rows of shared files: a file is shared when at least two processes use it
    in overlapping time (their ``[first_ts, last_te]`` on the file intersect); only the processes
    that overlap another are kept. Samples that DataLoader workers read one after the other (in
    different epochs) are not shared."""
    fp = f.fileproc
    if fp is None or not len(fp):
        return None
    d = fp.reset_index().sort_values(["fname", "first_ts", "last_te"], kind="stable")
    g = d.groupby("fname", sort=False)
    prev_end = g["last_te"].cummax().groupby(d["fname"], sort=False).shift()
    next_start = g["first_ts"].shift(-1)
    keep = (d["first_ts"] < prev_end) | (d["last_te"] > next_start)
    d = d[keep.to_numpy(dtype=bool)]
    if not len(d):
        return None
    n = d.groupby("fname", sort=False)["pid"].transform("size")
    d = d[(n >= 2).to_numpy()]
    if not len(d):
        return None
    return d.set_index(["fname", "hostname", "pid"])


def _rank_imbalance(f: Facts, th: dict, cfg: dict):
    fp = _shared(f)
    if fp is None:
        return None
    rows = []
    ftime = fp.groupby(level="fname", sort=False)["io_time"].sum()
    base = _proc_time(f)
    for d in ("bytes_read", "bytes_written"):
        g = fp.groupby(level="fname", sort=False)[d]
        mx, mn = g.max(), g.min()
        imb = ((mx - mn) / mx.where(mx > 0)).fillna(0)
        for fname in imb[imb > th["imbalance_size"]].index:
            # floors: the file's I/O time and the bytes the processes differ by
            if _floor(cfg, "rank_imbalance", int(ftime[fname]), base, int(mx[fname] - mn[fname])) is None:
                continue
            sub = fp.xs(fname, level="fname")[d]
            rows.append(
                {
                    "fname": str(fname),
                    "direction": d.split("_")[1],
                    "imbalance": round(float(imb[fname]), 6),
                    "max_bytes": int(mx[fname]),
                    "min_bytes": int(mn[fname]),
                    "processes": int(len(sub)),
                    "max_process": f"{sub.idxmax()[0]}:{sub.idxmax()[1]}",
                    "min_process": f"{sub.idxmin()[0]}:{sub.idxmin()[1]}",
                    "file_io_time_s": int(ftime[fname]) / 1e6,
                }
            )
    if not rows:
        return None
    rows.sort(key=lambda r: -r["imbalance"])
    top = cfg["evidence"]["top"]
    procs = fp.groupby(level=["hostname", "pid"], sort=False)[["bytes_read", "bytes_written"]].sum()
    procs = procs.assign(bytes=procs["bytes_read"] + procs["bytes_written"])
    return (
        f"{len({r['fname'] for r in rows})} shared file(s) are accessed unevenly: per-process bytes differ by "
        f"up to {100 * rows[0]['imbalance']:.1f}% of the largest ((max - min) / max)",
        {"imbalanced_files": len({r["fname"] for r in rows}), "max_imbalance": rows[0]["imbalance"]},
        {"files": rows[:top], "processes": _proc_rows(procs, ["bytes_read", "bytes_written"], top, "bytes")},
        [
            "Distribute the data evenly over the processes that share a file (equal-sized slabs, or "
            "split the file into as many parts as readers)",
            "Tune the striping of the shared file so each process's part lands on its own servers",
        ],
    )


def _stragglers(f: Facts, th: dict, cfg: dict):
    fp = _shared(f)
    if fp is None:
        return None
    g = fp.groupby(level="fname", sort=False)["io_time"]
    mx, mn, tot = g.max(), g.min(), g.sum()
    imb = ((mx - mn) / tot.where(tot > 0)).fillna(0)
    bad = imb[imb > th["imbalance_stragglers"]]
    # floors: the slowest process's extra I/O time on the file, over the job span (wall clock)
    span = _span(f)
    bad = bad[[_floor(cfg, "stragglers", int(mx[k] - mn[k]), span) is not None for k in bad.index]]
    bad = bad.sort_values(ascending=False, kind="stable")
    if not len(bad):
        return None
    top = cfg["evidence"]["top"]
    rows, slow = [], []
    for fname in bad.index[:top]:
        sub = fp.xs(fname, level="fname")["io_time"]
        k = sub.idxmax()
        slow.append(k)
        rows.append(
            {
                "fname": str(fname),
                "time_imbalance": round(float(bad[fname]), 6),
                "slowest_process": f"{k[0]}:{k[1]}",
                "slowest_io_time_s": int(mx[fname]) / 1e6,
                "fastest_io_time_s": int(mn[fname]) / 1e6,
                "total_io_time_s": int(tot[fname]) / 1e6,
                "extra_io_time_s": int(mx[fname] - mn[fname]) / 1e6,
            }
        )
    procs = f.procs.loc[[k for k in dict.fromkeys(slow) if k in f.procs.index]]
    prow = [
        dict(
            hostname=str(k[0]),
            pid=int(k[1]),
            io_time_s=int(r["io_time"]) / 1e6,
            first_s=f.rel(r["first_ts"]),
            last_s=f.rel(r["last_te"]),
        )
        for k, r in procs.iterrows()
    ]
    return (
        f"stragglers on {len(bad)} shared file(s): the slowest process spends up to "
        f"{100 * float(bad.iloc[0]):.1f}% of the file's total I/O time more than the fastest",
        {
            "straggler_files": int(len(bad)),
            "max_time_imbalance": round(float(bad.iloc[0]), 6),
            "max_extra_io_time_s": max(r["extra_io_time_s"] for r in rows),
            "run_share": round(_share(max(r["extra_io_time_s"] for r in rows) * 1e6, span), 6),
        },
        {
            "files": rows,
            "processes": prow,
            "time_windows": [
                {"start_s": p["first_s"], "end_s": p["last_s"], "process": f"{p['hostname']}:{p['pid']}"} for p in prow
            ],
        },
        [
            "Balance the I/O work (bytes and request count) per process on shared files",
            "Check the slowest processes' nodes and storage targets (contention, a slow OST/disk)",
        ],
    )


def _dataloader_stall(f: Facts, th: dict, cfg: dict):
    wait, comp = f.n["fetch_wait"], f.n["compute_time"]
    if not f.n["fetch_count"] or not (wait + comp):
        return None
    share = _share(wait, wait + comp)
    if share <= th["dataloader_stall"]:
        return None
    trainers = f.procs[f.procs["fetch_count"] > 0]
    fl = _floor(cfg, "dataloader_stall", wait, _proc_time(f, trainers))
    if fl is None:
        return None
    top = cfg["evidence"]["top"]
    tf = f.top_fetch
    windows = [
        {
            "start_s": f.rel(r.ts),
            "end_s": f.rel(r.ts + r.dur),
            "wait_s": int(r.dur) / 1e6,
            "process": f"{r.hostname}:{r.pid}",
            "step": _num(r.step) if r.step is not None and not pd.isna(r.step) else None,
        }
        for r in tf.itertuples()
    ][:top]
    return (
        f"the training loop waits for data {100 * share:.1f}% of the time it spends waiting or computing "
        f"({wait / 1e6:.3f} s fetch wait vs {comp / 1e6:.3f} s compute over {f.n['fetch_count']:,} batches)",
        {
            "fetch_wait_s": wait / 1e6,
            "compute_s": comp / 1e6,
            "stall_share": round(share, 6),
            "batches": f.n["fetch_count"],
            "mean_wait_s": round(wait / 1e6 / f.n["fetch_count"], 6),
            "run_share": fl["run_share"],
        },
        {
            "processes": _proc_rows(
                trainers,
                ["fetch_wait", "fetch_count", "compute_time"],
                top,
                "fetch_wait",
                {"fetch_wait": 1e-6, "compute_time": 1e-6},
            ),
            "time_windows": windows,
        },
        [
            "Give the data loader more workers (num_workers / read_threads) and a deeper prefetch "
            "(prefetch_factor), so batches are ready before the step needs them",
            "Make samples cheaper to load: larger files or shards, faster storage tier, caching decoded samples",
        ],
    )


def _epoch_split(f: Facts) -> List[dict]:
    """Per epoch: duration, compute, unoverlapped I/O (I/O ∪ app I/O ∪ fetch wait, minus compute), µs."""
    out = []
    io = merge_unions(f.unions["io"], f.unions["app_io"], f.unions["fetch"])
    comp = f.unions["compute"]
    for label, s, e in f.epochs:
        win = (np.array([s], dtype=np.int64), np.array([e], dtype=np.int64))
        io_e = _clip(io, s, e)
        cp_e = _clip(comp, s, e)
        unover = union_measure(merge_unions(io_e, cp_e)) - union_measure(cp_e)
        del win
        out.append(
            {
                "epoch": label,
                "start": s,
                "end": e,
                "duration": e - s,
                "compute": union_measure(cp_e),
                "io": union_measure(io_e),
                "unoverlapped_io": unover,
            }
        )
    return out


def _clip(u, s: int, e: int):
    a, b = u
    if not a.size:
        return u
    lo = np.searchsorted(b, s, side="right")
    hi = np.searchsorted(a, e, side="left")
    a2, b2 = np.maximum(a[lo:hi], s), np.minimum(b[lo:hi], e)
    keep = b2 > a2
    return a2[keep], b2[keep]


def _io_bound_epochs(f: Facts, th: dict, cfg: dict):
    if not f.epochs:
        return None
    split = _epoch_split(f)
    span = _span(f)
    bad = [
        r
        for r in split
        if r["duration"]
        and r["unoverlapped_io"] / r["duration"] > th["io_bound_epoch"]
        and _floor(cfg, "io_bound_epochs", r["unoverlapped_io"], span) is not None
    ]
    if not bad:
        return None
    rows = [
        {
            "epoch": _num(r["epoch"]),
            "start_s": f.rel(r["start"]),
            "end_s": f.rel(r["end"]),
            "duration_s": r["duration"] / 1e6,
            "unoverlapped_io_s": r["unoverlapped_io"] / 1e6,
            "compute_s": r["compute"] / 1e6,
            "io_share": round(r["unoverlapped_io"] / r["duration"], 6),
        }
        for r in split
    ]
    badset = {id(r) for r in bad}
    return (
        f"{len(bad)} of {len(split)} epoch(s) are I/O bound: unoverlapped I/O and data waiting take more than "
        f"{100 * th['io_bound_epoch']:.0f}% of the epoch",
        {
            "epochs": len(split),
            "io_bound_epochs": len(bad),
            "max_io_share": max(round(r["unoverlapped_io"] / r["duration"], 6) for r in bad),
        },
        {"time_windows": [row for row, r in zip(rows, split) if id(r) in badset], "epochs": rows},
        [
            "Overlap I/O with compute: more loader workers, prefetching, asynchronous reads",
            "If the first epoch only is I/O bound, warm a node-local cache; if all are, move the dataset "
            "to a faster tier or reduce bytes per sample",
        ],
    )


def _workers(f: Facts) -> pd.DataFrame:
    p = f.procs
    if not len(p):
        return p
    w = p[
        (p["compute_time"] == 0)
        & (p["fetch_count"] == 0)
        & ((p["samples"] > 0) | (p["app_io_time"] > 0) | (p["io_time"] > 0))
    ]
    trainers = p[(p["compute_time"] > 0) | (p["fetch_count"] > 0)]
    if not len(trainers):
        return w.iloc[0:0]
    return w.assign(busy=np.where(w["sample_time"] > 0, w["sample_time"], w["app_io_time"] + w["io_time"]))


def _worker_imbalance(f: Facts, th: dict, cfg: dict):
    w = _workers(f)
    if len(w) < 2:
        return None
    mean = float(w["busy"].mean())
    ratio = float(w["busy"].max()) / mean if mean else 0.0
    if ratio <= th["worker_imbalance"]:
        return None
    fl = _floor(cfg, "worker_imbalance", float(w["busy"].max()) - mean, _span(f))
    if fl is None:
        return None
    top = cfg["evidence"]["top"]
    rows = [
        dict(
            hostname=str(k[0]),
            pid=int(k[1]),
            busy_s=int(r["busy"]) / 1e6,
            samples=int(r["samples"]),
            bytes=int(r["bytes"]),
            first_s=f.rel(r["first_ts"]),
            last_s=f.rel(r["last_te"]),
        )
        for k, r in w.sort_values("busy", ascending=False, kind="stable").head(top).iterrows()
    ]
    return (
        f"data-loader workers are unevenly loaded: the busiest works {ratio:.2f}x the mean "
        f"({len(w)} workers, busy time {w['busy'].max() / 1e6:.3f} s vs mean {mean / 1e6:.3f} s)",
        {
            "workers": int(len(w)),
            "max_over_mean": round(ratio, 6),
            "max_busy_s": int(w["busy"].max()) / 1e6,
            "mean_busy_s": round(mean / 1e6, 6),
            "min_busy_s": int(w["busy"].min()) / 1e6,
            "run_share": fl["run_share"],
        },
        {
            "processes": rows,
            "time_windows": [
                {"start_s": r["first_s"], "end_s": r["last_s"], "process": f"{r['hostname']}:{r['pid']}"}
                for r in rows[:1]
            ],
        },
        [
            "Balance work across workers: equal-sized samples per worker, a sampler that interleaves "
            "large and small samples, or smaller batches so the slowest worker is not on the critical path"
        ],
    )


def _checkpoint_time(f: Facts, th: dict, cfg: dict):
    u = f.unions["checkpoint"]
    total = max(0, f.t1 - f.t0)
    ck = union_measure(u)
    if not ck or _share(ck, total) <= th["checkpoint_time_share"]:
        return None
    if _floor(cfg, "checkpoint_time", ck, total) is None:
        return None
    top = cfg["evidence"]["top"]
    tc = f.top_checkpoint
    windows = [
        {
            "start_s": f.rel(r.ts),
            "end_s": f.rel(r.ts + r.dur),
            "duration_s": int(r.dur) / 1e6,
            "name": str(r.name),
            "process": f"{r.hostname}:{r.pid}",
        }
        for r in tc.itertuples()
    ][:top]
    return (
        f"checkpointing takes {100 * _share(ck, total):.1f}% of the job ({ck / 1e6:.3f} s of {total / 1e6:.3f} s) "
        f"and writes {f.n['checkpoint_bytes']:,} bytes",
        {
            "checkpoint_s": ck / 1e6,
            "job_s": total / 1e6,
            "checkpoint_share": round(_share(ck, total), 6),
            "checkpoint_events": f.n["checkpoint_events"],
            "checkpoint_bytes": f.n["checkpoint_bytes"],
        },
        {"files": _file_rows(f.files, ["checkpoint_bytes"], top, "checkpoint_bytes"), "time_windows": windows},
        [
            "Checkpoint less often, or asynchronously (write from a background thread/process while "
            "training continues)",
            "Write checkpoints to a faster tier (node-local NVMe, burst buffer) and "
            "drain them later; shard them so every rank writes its part in parallel",
        ],
    )


def _small_files_per_sample(f: Facts, th: dict, cfg: dict):
    samples = f.n["samples"]
    files = f.files
    if not samples or not len(files):
        return None
    opened = files[files["opens"] > 0]
    per_open = opened["bytes_read"] / opened["opens"]
    small = opened[per_open < th["small_file_bytes"]]
    opens = int(small["opens"].sum())
    ratio = opens / samples
    if ratio < th["small_files_per_sample"] or opens <= th["small_files_absolute"]:
        return None
    fl = _floor(cfg, "small_files_per_sample", int(small["io_time"].sum()), _proc_time(f))
    if fl is None:
        return None
    top = cfg["evidence"]["top"]
    sm = small.assign(bytes_per_open=(small["bytes_read"] / small["opens"]).round(1))
    return (
        f"{opens:,} opens of small files (< {th['small_file_bytes']:,} bytes read per open) for {samples:,} samples: "
        f"{ratio:.2f} small-file opens per sample",
        {
            "samples": samples,
            "small_file_opens": opens,
            "small_files": int(len(small)),
            "opens_per_sample": round(ratio, 6),
            "median_bytes_per_open": float(np.median(small["bytes_read"] / small["opens"])),
            "io_time_on_small_files_s": fl["affected_time_s"],
            "run_share": fl["run_share"],
        },
        {"files": _file_rows(sm, ["opens", "bytes_read", "bytes_per_open"], top, "opens")},
        [
            "Pack samples into larger container files or shards (TFRecord, WebDataset tar, HDF5, LMDB) "
            "and read them sequentially",
            "Keep files open across samples instead of open/read/close per sample",
        ],
    )


def _repeated_epoch_reads(f: Facts, th: dict, cfg: dict):
    if len(f.epochs) < 2 or not f.epoch_ranges:
        return None
    by_file: Dict[Any, list] = {}
    for (fname, ep), u in f.epoch_ranges.items():
        by_file.setdefault(fname, []).append((ep, u))
    total = repeated = 0
    rows = []
    for fname, lst in by_file.items():
        lst.sort(key=lambda t: t[0])
        seen = (_EMPTY, _EMPTY)
        rep_f = tot_f = 0
        for _, u in lst:
            m = union_measure(u)
            new = union_measure(merge_unions(seen, u)) - union_measure(seen)
            tot_f += m
            rep_f += m - new
            seen = merge_unions(seen, u)
        total += tot_f
        repeated += rep_f
        if rep_f:
            rows.append(
                {
                    "fname": str(fname),
                    "repeated_bytes": rep_f,
                    "bytes_read_in_epochs": tot_f,
                    "epochs": len(lst),
                    "unique_bytes": union_measure(seen),
                }
            )
    if not total or _share(repeated, total) <= th["repeated_epoch_reads"]:
        return None
    fs = f.files
    reread = [r["fname"] for r in rows]
    t = int(fs.loc[fs.index.astype(str).isin(reread), "read_time"].sum()) if len(fs) else 0
    fl = _floor(cfg, "repeated_epoch_reads", t, _proc_time(f), repeated)
    if fl is None:
        return None
    rows.sort(key=lambda r: -r["repeated_bytes"])
    top = cfg["evidence"]["top"]
    unique = sum(union_measure(merge_unions(*[u for _, u in lst])) for lst in by_file.values())
    return (
        f"{100 * _share(repeated, total):.1f}% of the bytes read inside epochs ({repeated:,} of {total:,}) "
        f"were already read in an earlier epoch; the dataset touched is {unique:,} bytes" + _unplaced_bytes(f),
        {
            "epochs": len(f.epochs),
            "bytes_read_in_epochs": total,
            "repeated_bytes": repeated,
            "repeated_share": round(_share(repeated, total), 6),
            "unique_bytes": unique,
            "files_reread": len(rows),
            "read_time_on_reread_files_s": fl["affected_time_s"],
            "run_share": fl["run_share"],
            "unplaced_read_bytes": f.n["unplaced_read_bytes"],
        },
        {
            "files": rows[:top],
            "time_windows": [{"epoch": _num(lb), "start_s": f.rel(s), "end_s": f.rel(e)} for lb, s, e in f.epochs[1:]][
                :top
            ],
        },
        [
            f"The data re-read every epoch ({unique:,} bytes) could be cached after the first epoch: in "
            "memory, on node-local storage, or with a caching loader (e.g. DALI/tf.data cache)"
        ],
    )


# ----------------------------------------------------------------------------- multi-level rules
#: Collective MPI-IO data calls (every rank of the communicator takes part); the other data
#: calls are independent. Non-blocking forms count with their blocking twins.
MPIIO_COLLECTIVE = re.compile(r"MPI_File_i?(read|write)(_at)?_all$|MPI_File_i?(read|write)_ordered$")
MPIIO_DATA = re.compile(r"MPI_File_i?(read|write)(_at|_all|_at_all|_shared|_ordered)?$")
_ML_CATS = ("HDF5", "MPI-IO")
_ML_COLS = ["cat", "name", "fname", "hostname", "pid", "calls", "time", "bytes", "small_calls", "small_time"]


def _mlayer_partial(df: pd.DataFrame, small: int) -> pd.DataFrame:
    """Per (cat, name, fname, hostname, pid) of the HDF5 and MPI-IO events of one partition:
    calls, time (summed dur, µs), bytes (``size``, else ``args.size``), and the calls (and their
    time) that moved fewer than ``small`` bytes."""
    x, calls = select_frame(df)
    if x.empty:
        return pd.DataFrame(columns=_ML_COLS)
    keep = _isin(x["cat"], _ML_CATS)
    if not keep.any():
        return pd.DataFrame(columns=_ML_COLS)
    x = x[keep]
    size = pd.to_numeric(x["size"], errors="coerce") if "size" in x.columns else pd.Series(np.nan, index=x.index)
    if "arg_size" in x.columns:  # args.size of a call whose byte rule the reader does not know
        size = size.fillna(pd.to_numeric(x["arg_size"], errors="coerce"))
    known = size.notna().to_numpy()
    sz = size.fillna(0).to_numpy(dtype=np.int64)
    dur = x["dur"].to_numpy(dtype=np.int64)
    is_small = known & (sz < small)
    t = pd.DataFrame(
        {
            "cat": x["cat"].astype(object).to_numpy(),
            "name": x["name"].astype(object).to_numpy(),
            "fname": x["fname"].astype(object).to_numpy() if "fname" in x.columns else None,
            "hostname": x["hostname"].astype(object).to_numpy() if "hostname" in x.columns else None,
            "pid": x["pid"].to_numpy(dtype=np.int64),
            "calls": calls[keep],
            "time": dur,
            "bytes": sz,
            "small_calls": np.where(is_small, calls[keep], 0),
            "small_time": np.where(is_small, dur, 0),
        }
    )
    keys = ["cat", "name", "fname", "hostname", "pid"]
    return t.groupby(keys, dropna=False, sort=False).sum().reset_index()


def _mlayer_combine(*parts: pd.DataFrame) -> pd.DataFrame:
    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame(columns=_ML_COLS)
    t = pd.concat(parts, ignore_index=True)
    return t.groupby(["cat", "name", "fname", "hostname", "pid"], dropna=False, sort=False).sum().reset_index()


def _small_hdf5_reads(f: Facts, th: dict, cfg: dict):
    t = f.mlayers.get("calls")
    if t is None or not len(t):
        return None
    r = t[(t["cat"] == "HDF5") & (t["name"] == "H5Dread")]
    n, small = int(r["calls"].sum()), int(r["small_calls"].sum())
    if not n or _share(small, n) <= th["hdf5_small_reads"] or small <= th["hdf5_small_reads_absolute"]:
        return None
    fl = _floor(cfg, "small_hdf5_reads", int(r["small_time"].sum()), _proc_time(f))
    if fl is None:
        return None
    metrics = {"h5dreads": n, "small_h5dreads": small, "small_share": round(_share(small, n), 6), **fl}
    top = cfg["evidence"]["top"]
    files = r.groupby("fname", dropna=False)[["calls", "small_calls", "bytes", "small_time"]].sum()
    files = files.sort_values("small_calls", ascending=False, kind="stable").head(top)
    rows = [
        {"fname": str(k), "h5dreads": int(v.calls), "small_h5dreads": int(v.small_calls), "bytes": int(v.bytes)}
        for k, v in files.iterrows()
    ]
    return (
        f"{small:,} of {n:,} H5Dread calls ({100 * _share(small, n):.1f}%) read fewer than "
        f"{th['hdf5_small_bytes']:,} bytes each ({fl['affected_time_s']:.3f} s in them)",
        metrics,
        {"files": rows},
        [
            "Read larger hyperslabs per H5Dread (whole chunks or many rows at once; h5py: slice more rows "
            "per access) and keep them aligned to the dataset's chunks",
            "Raise the chunk cache (H5Pset_chunk_cache; h5py rdcc_nbytes) so small reads hit memory",
        ],
    )


def _independent_mpiio(f: Facts, th: dict, cfg: dict):
    t = f.mlayers.get("calls")
    if t is None or not len(t):
        return None
    d = t[(t["cat"] == "MPI-IO") & t["name"].map(lambda n: bool(MPIIO_DATA.match(str(n))))]
    if not len(d):
        return None
    d = d.assign(coll=d["name"].map(lambda n: bool(MPIIO_COLLECTIVE.match(str(n)))))
    procs = d.groupby("fname", dropna=False).apply(lambda g: len(set(zip(g["hostname"], g["pid"]))))
    shared = set(procs[procs >= 2].index)
    s = d[d["fname"].isin(shared)]
    ind = s[~s["coll"]]
    n_ind, n_all = int(ind["calls"].sum()), int(s["calls"].sum())
    if not n_ind or _share(n_ind, n_all) <= th["mpiio_independent_share"] or n_ind <= th["mpiio_independent_absolute"]:
        return None
    fl = _floor(cfg, "independent_mpiio", int(ind["time"].sum()), _proc_time(f))
    if fl is None:
        return None
    top = cfg["evidence"]["top"]
    by_file = ind.groupby("fname", dropna=False).agg(
        calls=("calls", "sum"), bytes=("bytes", "sum"), time=("time", "sum")
    )
    by_file = by_file.sort_values("calls", ascending=False, kind="stable").head(top)
    rows = [
        {
            "fname": str(k),
            "independent_calls": int(v.calls),
            "bytes": int(v.bytes),
            "processes": int(procs[k]),
            "time_s": int(v.time) / 1e6,
        }
        for k, v in by_file.iterrows()
    ]
    names = ind.groupby("name")["calls"].sum().sort_values(ascending=False)
    metrics = {
        "independent_calls": n_ind,
        "data_calls": n_all,
        "independent_share": round(_share(n_ind, n_all), 6),
        "shared_files": len(shared),
        **fl,
    }
    return (
        f"{n_ind:,} of {n_all:,} MPI-IO data calls on {len(shared)} shared file(s) are independent "
        f"({', '.join(f'{k} {int(v):,}' for k, v in names.head(3).items())}) instead of collective",
        metrics,
        {"files": rows},
        [
            "Use the collective forms (MPI_File_write_at_all / read_at_all, write_all / read_all; mpi4py "
            "Write_at_all ...) so MPI-IO aggregates the ranks' requests into large contiguous ones (two-phase I/O)",
            "Set a file view per rank (MPI_File_set_view) and tune the collective buffering hints "
            "(cb_nodes, cb_buffer_size) for the file system",
        ],
    )


RULES: Tuple[Rule, ...] = (
    Rule("small_requests", "P05", "Small I/O requests", _small_requests),
    Rule("misaligned_requests", "P08", "Misaligned file requests", _misaligned),
    Rule("random_access", "P11", "Random access", _random_access),
    Rule("redundant_reads", "P09", "Redundant reads", _redundant_reads),
    Rule("metadata_time", "P17", "High metadata time", _metadata_time),
    Rule("stdio_share", "S01", "High STDIO usage", _stdio_share),
    Rule("rank_imbalance", "P21", "Per-process data imbalance on shared files", _rank_imbalance),
    Rule("stragglers", "P19", "Stragglers on shared files", _stragglers),
    Rule("dataloader_stall", "A01", "Data-loader stalls", _dataloader_stall),
    Rule("io_bound_epochs", "A02", "I/O-bound epochs", _io_bound_epochs),
    Rule("worker_imbalance", "A03", "Data-loader worker imbalance", _worker_imbalance),
    Rule("checkpoint_time", "A04", "Checkpoint time share", _checkpoint_time),
    Rule("small_files_per_sample", "A05", "Many small files opened per sample", _small_files_per_sample),
    Rule("repeated_epoch_reads", "A06", "Same bytes read again in later epochs", _repeated_epoch_reads),
    Rule("small_hdf5_reads", "H01", "Many small H5Dread calls", _small_hdf5_reads),
    Rule("independent_mpiio", "M01", "Independent instead of collective MPI-IO", _independent_mpiio),
)


def run_rules(facts: Facts, cfg: dict) -> InsightReport:
    """Run every enabled rule of :data:`RULES` over ``facts`` with the thresholds of ``cfg``."""
    th = cfg["thresholds"]
    out, checked = [], []
    for rule in RULES:
        rc = cfg["rules"][rule.id]
        if not rc.get("enabled", True):
            continue
        checked.append(rule.id)
        res = rule.check(facts, th, cfg)
        if res is None:
            continue
        msg, metrics, ev, recs = res
        evidence = {"metrics": {k: _num(v) for k, v in metrics.items()}}
        evidence.update({k: v for k, v in ev.items() if v})
        out.append(Insight(rule.id, rule.code, rc["severity"], rule.title, msg, evidence, recs))
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    out.sort(key=lambda i: rank[i.severity])  # stable: rule order within a severity
    return InsightReport(out, checked, dict(th), facts, copy.deepcopy(cfg["floors"]))


# ----------------------------------------------------------------------------- driver
def _windows_partial(df: pd.DataFrame, names: Sequence[str]) -> tuple:
    """(min ts, max te, window rows) of one partition: rows whose name is in ``names``."""
    x = select_frame(df)[0]
    if x.empty:
        return None, None, None
    w = x[_isin(x["name"], names)]
    cols = ["name", "hostname", "pid", "ts", "te"] + [c for c in ("epoch",) if c in x.columns]
    w = w[cols].copy()
    for c in ("name", "hostname"):
        w[c] = w[c].astype(object)
    if "epoch" in w.columns:
        w["epoch"] = w["epoch"].astype(object)
    return int(x["ts"].min()), int(x["te"].max()), w


def _epoch_windows(w: pd.DataFrame, cats: dict) -> List[Tuple[Any, int, int]]:
    """Epoch windows ``(label, start, end)`` µs: per epoch label the span over all processes."""
    if w is None or not len(w):
        return []
    for names in (cats["epoch_names"], cats["epoch_fallback_names"]):
        e = w[w["name"].isin(names)]
        if len(e):
            break
    else:
        return []
    e = e.sort_values(["hostname", "pid", "ts"], kind="stable")
    if "epoch" in e.columns and e["epoch"].notna().all():
        label = e["epoch"].map(
            lambda v: (
                int(v) if isinstance(v, (int, float, np.integer, np.floating)) and float(v).is_integer() else str(v)
            )
        )
    else:
        label = e.groupby(["hostname", "pid"], sort=False).cumcount() + 1
    g = pd.DataFrame({"label": label.to_numpy(), "ts": e["ts"].to_numpy(), "te": e["te"].to_numpy()}).groupby(
        "label", sort=False
    )
    spans = g.agg(start=("ts", "min"), end=("te", "max")).sort_values("start", kind="stable")
    return [(_num(k), int(r.start), int(r.end)) for k, r in spans.iterrows()]


def compute_insights(analyzer, config=None) -> InsightReport:
    """Compute the facts of ``analyzer.events`` on its cluster and run the rules (see module doc)."""
    cfg = load_config(config)
    c = analyzer.client
    cats = cfg["categories"]
    names = list(cats["epoch_names"]) + list(cats["epoch_fallback_names"])
    parts = analyzer.partitions()
    pre = c.gather([c.submit(_windows_partial, p, names, pure=False) for p in parts])
    t0s = [a for a, _, _ in pre if a is not None]
    if not t0s:
        raise timebins.NoEventsError("no events to analyse")
    t0, t1 = min(t0s), max(b for _, b, _ in pre if b is not None)
    frames = [w for _, _, w in pre if w is not None and len(w)]
    w = pd.concat(frames, ignore_index=True) if frames else None
    epochs = _epoch_windows(w, cats)
    bins = int(cfg["evidence"]["time_bins"])
    ctx = {
        "io_cats": list(analyzer.io_cats),
        "compute_cats": sorted(set(cats["compute"]) | set(analyzer.compute_cats)),
        "app_io_cats": sorted(set(cats["app_io"]) | set(analyzer.app_io_cats)),
        "fetch_names": list(cats["fetch_wait_names"]),
        "sample_names": list(cats["sample_names"]),
        "checkpoint_cats": list(cats["checkpoint_cats"]),
        "checkpoint_pattern": cats["checkpoint_name_pattern"],
        "small_bytes": int(cfg["thresholds"]["small_bytes"]),
        "alignment": max(1, int(cfg["thresholds"]["alignment"])),
        "t0": t0,
        "t1": t1,
        "bins": bins,
        "top": int(cfg["evidence"]["top"]),
        "epochs": epochs,
        "checkpoint": (_EMPTY, _EMPTY),
    }
    re.compile(ctx["checkpoint_pattern"])  # a bad pattern fails here, on the client
    # checkpoint windows first (the write bytes inside them are counted in the main pass)
    ck = c.gather([c.submit(_checkpoint_union, p, ctx, pure=False) for p in parts])
    ctx["checkpoint"] = merge_unions(*ck)
    # file positions carried across partitions (a prefix scan), so no read is left unplaced
    # because its open or lseek fell in an earlier partition
    starts = stream_positions(c.gather([c.submit(_stream_carry, p, ctx, pure=False) for p in parts]))
    leaves = [c.submit(facts_partial, p, dict(ctx, stream_start=st), pure=False) for p, st in zip(parts, starts)]
    root = tree_reduce(leaves, combine_facts, submit=lambda fn, *a: c.submit(fn, *a, pure=False)).result()
    facts = finish_facts(root, t0, t1, bins, epochs)
    small = int(cfg["thresholds"]["hdf5_small_bytes"])
    ml = [c.submit(_mlayer_partial, p, small, pure=False) for p in parts]
    facts.mlayers = {
        "calls": tree_reduce(ml, _mlayer_combine, submit=lambda fn, *a: c.submit(fn, *a, pure=False)).result()
    }
    return run_rules(facts, cfg)


def _checkpoint_union(df: pd.DataFrame, ctx: dict):
    x = select_frame(df)[0]
    if x.empty:
        return _EMPTY, _EMPTY
    cat_io = _isin(x["cat"], ctx["io_cats"])
    is_ck = _isin(x["cat"], ctx["checkpoint_cats"]) | (
        ~cat_io
        & x["name"].astype(object).str.contains(ctx["checkpoint_pattern"], regex=True, na=False).to_numpy(dtype=bool)
    )
    return union_intervals(x["ts"].to_numpy(dtype=np.int64)[is_ck], x["te"].to_numpy(dtype=np.int64)[is_ck])
