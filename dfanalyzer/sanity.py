"""Sanity of the inputs (issue 20): do the traces given to one analyzer come from one run?

Two checks, each one warning string (the analyzer's input-warning channel:
:meth:`DFAnalyzer.input_warnings`, the summary panel's "Warnings", ``warning:`` lines on the CLI's
stderr, and one Python :class:`InputWarning`):

- **time**: the input files' event time ranges (``min(ts)``, ``max(te)``, µs, taken from the loaded
  batches) are grouped into *runs*: sorted by start, a file starts a new run when it begins more
  than ``gap_s`` (default 3600 s) after every earlier file ended. More than one run is named, with
  its files, its UTC time range and the gap, because every time-based number (total time, time
  windows, shares of the run) then spans all of them;
- **command**: the processes' command lines from the metadata (``cmd_line`` records of our tracer;
  DFTracer 1.0.x ``start`` records' ``cmd_hash`` resolved through their ``SH`` string hashes)
  differ: each distinct command is named with how many processes ran it.
"""

from __future__ import annotations

import os
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from ._lazy import LazyModule
from ._lazy import pandas as pd  # (imported on first use: dfanalyzer._lazy)

np = LazyModule("numpy")  # (on first use: the threaded summary plans before NumPy is imported)

__all__ = ["GAP_S", "InputWarning", "span", "file_spans", "spans_from_infos", "run_groups", "check"]

#: Default gap (seconds) between two runs' time ranges above which they are named as separate runs.
GAP_S = 3600.0
_NAMED = 3  # files named per run in a warning (the others are counted)


class InputWarning(UserWarning):
    """The inputs look like more than one run (see :mod:`dfanalyzer.sanity`)."""


def span(ts, te) -> Optional[Tuple[int, int]]:
    """``(min(ts), max(te))`` in µs of two integer arrays, or None when empty."""
    ts = np.asarray(ts)
    if ts.size == 0:
        return None
    return int(ts.min()), int(np.asarray(te).max())


def file_spans(ev: Optional[pd.DataFrame], files: Sequence[dict]) -> List[Optional[Tuple[int, int]]]:
    """Per file of a group of small files loaded together (events concatenated in file order,
    ``files[i]["rows"]`` rows each): its ``(min ts, max te)`` or None."""
    out: List[Optional[Tuple[int, int]]] = []
    if ev is None or not len(ev) or "ts" not in ev.columns:
        return [None] * len(files)
    ts = ev["ts"].to_numpy(dtype=np.int64, na_value=0)
    te = ev["te"].to_numpy(dtype=np.int64, na_value=0) if "te" in ev.columns else ts
    pos = 0
    for f in files:
        n = int(f.get("rows", 0))
        out.append(span(ts[pos : pos + n], te[pos : pos + n]))
        pos += n
    return out


def _merge(a: Optional[Tuple[int, int]], b: Optional[Tuple[int, int]]) -> Optional[Tuple[int, int]]:
    if a is None:
        return b
    if b is None:
        return a
    return min(a[0], b[0]), max(a[1], b[1])


def spans_from_infos(batches: Sequence[tuple], infos: Sequence) -> Dict[str, Tuple[int, int]]:
    """``{path: (min ts, max te)}`` from the load tasks' :class:`dfanalyzer.records.BatchInfo`:
    ``info.span`` of each batch (``batches[i][0]`` is its path) and ``f.span`` of each file
    (:class:`~dfanalyzer.records.FileStats`) of a small-file group (the infos after the
    batches'). Files without events are left out."""
    out: Dict[str, Optional[Tuple[int, int]]] = {}
    for b, info in zip(batches, infos):
        out[b[0]] = _merge(out.get(b[0]), _tuple(info.span))
    for info in infos[len(batches) :]:
        for f in info.files or ():
            out[f.path] = _merge(out.get(f.path), _tuple(f.span))
    return {k: v for k, v in out.items() if v is not None}


def _tuple(s) -> Optional[Tuple[int, int]]:
    return None if s is None else (int(s[0]), int(s[1]))


def run_groups(spans: Dict[str, Tuple[int, int]], gap_s: float = GAP_S) -> List[dict]:
    """Group files into runs: ``[{"files": [paths], "start": µs, "end": µs}]`` in time order; a
    file whose start lies more than ``gap_s`` seconds after every earlier file's end starts a
    new run."""
    gap = int(gap_s * 1e6)
    runs: List[dict] = []
    for path, (s, e) in sorted(spans.items(), key=lambda kv: (kv[1][0], kv[0])):
        if runs and s <= runs[-1]["end"] + gap:
            r = runs[-1]
            r["files"].append(path)
            r["end"] = max(r["end"], e)
        else:
            runs.append({"files": [path], "start": s, "end": e})
    return runs


def _utc(us: int) -> str:
    import datetime as _dt

    return _dt.datetime.fromtimestamp(us / 1e6, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(s: float) -> str:
    if s >= 2 * 86400:
        return f"{s / 86400:,.1f} days"
    if s >= 3600:
        return f"{s / 3600:,.1f} hours"
    return f"{s / 60:,.1f} minutes"


def _names(paths: List[str]) -> str:
    shown = ", ".join(os.path.basename(p) for p in paths[:_NAMED])
    more = len(paths) - _NAMED
    return shown + (f" and {more} more" if more > 0 else "")


def time_warning(spans: Dict[str, Tuple[int, int]], gap_s: float = GAP_S) -> Optional[str]:
    """One warning naming the runs when the files' time ranges form more than one run."""
    runs = run_groups(spans, gap_s)
    if len(runs) < 2:
        return None
    parts = []
    for i, r in enumerate(runs, start=1):
        part = f"run {i}: {len(r['files'])} file(s) ({_names(r['files'])}), {_utc(r['start'])} to {_utc(r['end'])}"
        if i > 1:
            part += f", {_duration((r['start'] - runs[i - 2]['end']) / 1e6)} after run {i - 1}"
        parts.append(part)
    total = (runs[-1]["end"] - runs[0]["start"]) / 1e6
    return (
        f"the inputs look like {len(runs)} separate runs (time ranges more than {_duration(gap_s)} apart): "
        + "; ".join(parts)
        + f". Totals and time-based numbers span all of them ({_duration(total)}); analyse one run at a time"
    )


def _hash_key(h) -> str:
    """One spelling of a string hash: DFTracer 1.0.x writes integers (in the ``SH`` value and the
    ``start`` record's ``cmd_hash``, either as a number or as its decimal text), 2.x hexadecimal
    text such as ``"480079a3a781ec42"``."""
    if isinstance(h, float) and h.is_integer():
        h = int(h)
    return str(h).strip().lower()


def commands(metadata: Optional[pd.DataFrame]) -> Dict[str, int]:
    """``{command line: number of processes}`` from the metadata frame (:attr:`DFAnalyzer.metadata`).

    A process is its ``pid``; its command is the ``cmd_line`` record's value, else (DFTracer 1.0.x)
    the ``SH`` string whose hash is the ``start`` record's ``args.cmd_hash``. ``metadata`` may
    also be a list of the reader's metadata dicts of lists (``name``, ``pid``, ``value``, ``key``,
    ``args``: what the batches of a distributed summary send), in batch order: the same result as
    their frame, without pandas."""
    if isinstance(metadata, list):
        return _commands_of_records(metadata)
    # a metadata frame may lack columns no file filled (e.g. no pid on hand-written records)
    if metadata is None or not len(metadata) or not {"name", "pid", "value"} <= set(metadata.columns):
        return {}
    md = metadata
    name = md["name"].astype(object)
    cmd: Dict[object, str] = {}
    rows = md[(name == "cmd_line").to_numpy(dtype=bool)]
    for pid, value in zip(rows["pid"].tolist(), rows["value"].tolist()):
        if value is not None and not pd.isna(value):
            cmd.setdefault(pid, str(value))
    starts = md[(name == "start").to_numpy(dtype=bool)]
    if len(starts) and {"args", "key"} <= set(md.columns):
        sh = md[(name == "SH").to_numpy(dtype=bool)]
        strings = {}
        for k, v in zip(sh["key"].tolist(), sh["value"].tolist()):
            if v is not None and not pd.isna(v):
                strings[_hash_key(v)] = str(k)
        _resolve_starts(cmd, zip(starts["pid"].tolist(), starts["args"].tolist()), strings)
    return _count_commands(cmd)


def _missing(v) -> bool:
    """``pd.isna`` of one value of the reader's metadata lists (None, or a float NaN)."""
    return v is None or (isinstance(v, float) and v != v)


def _commands_of_records(parts: List[dict]) -> Dict[str, int]:
    """:func:`commands` of the reader's metadata dicts (the rows of their frame, in order)."""
    cmd: Dict[object, str] = {}
    strings = {}
    starts = []
    for m in parts:
        for i, name in enumerate(m["name"]):
            if name == "cmd_line":
                if not _missing(m["value"][i]):
                    cmd.setdefault(m["pid"][i], str(m["value"][i]))
            elif name == "SH":
                if not _missing(m["value"][i]):
                    strings[_hash_key(m["value"][i])] = str(m["key"][i])
            elif name == "start":
                starts.append((m["pid"][i], m["args"][i]))
    _resolve_starts(cmd, starts, strings)  # (after every SH string is known, as in the frame's two passes)
    return _count_commands(cmd)


def _resolve_starts(cmd: Dict[object, str], starts, strings: Dict[str, str]) -> None:
    """DFTracer 1.0.x: each ``(pid, args JSON)`` of a ``start`` record whose pid has no
    ``cmd_line`` gets the ``SH`` string (``strings``: hash key -> text) of its ``cmd_hash``."""
    import json

    for pid, args in starts:
        if pid in cmd:
            continue
        try:
            h = json.loads(args).get("cmd_hash") if isinstance(args, str) else None
        except ValueError:
            h = None
        if h is not None and _hash_key(h) in strings:
            cmd[pid] = strings[_hash_key(h)]


def _count_commands(cmd: Dict[object, str]) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for c in cmd.values():
        out[c] = out.get(c, 0) + 1
    return out


def command_warning(metadata: Optional[pd.DataFrame]) -> Optional[str]:
    """One warning naming the command lines when the processes ran more than one."""
    cmds = commands(metadata)
    if len(cmds) < 2:
        return None
    named = "; ".join(
        f"{c!r} ({n} process{'es' if n != 1 else ''})" for c, n in sorted(cmds.items(), key=lambda t: -t[1])
    )
    return f"the inputs come from {len(cmds)} different command lines (metadata cmd_line): {named}"


def check(spans: Dict[str, Tuple[int, int]], metadata: Optional[pd.DataFrame], gap_s: float = GAP_S) -> List[str]:
    """The sanity warnings of one analyzer's inputs (see the module doc); ``[]`` when they look
    like one run."""
    return [w for w in (time_warning(spans, gap_s), command_warning(metadata)) if w]


def emit(messages: Iterable[str]) -> None:
    """Each message once as a Python :class:`InputWarning` (control characters escaped: the
    messages quote the trace's command lines and host names, and Python prints them raw)."""
    import warnings

    from .safetext import escape

    for m in messages:
        warnings.warn(escape(m), InputWarning, stacklevel=3)
