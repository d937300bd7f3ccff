"""An independent oracle for DFAnalyzer (issue 20, item 2).

Reads ``.pfw`` / ``.pfw.gz`` traces with nothing but ``gzip`` + ``json`` + pandas/numpy and
computes the numbers of ``DFAnalyzer.summary().to_dict()``, of the views (``functions``,
``file_view``, ``processes``, ``time_windows``, ``by_tag``, ``epochs``, ``layers``) and of the
insights' evidence metrics, from the definitions of docs/analyzer.md. It imports no ``dfanalyzer``
code and copies none: it is a second, slow, obviously-correct implementation, so a differential
test (tests/test_oracle_diff.py) can find what the engine gets wrong at any batch size.

Definitions where docs/analyzer.md is ambiguous (issue 20 sets them):

* an **event** is a record with ``ph`` ``X`` or ``A`` (upstream integer phases 1 / 3) whose
  ``cat`` is not ``dftracer``, weighted by its calls: ``dft_cnt`` for ``A`` (1 without a valid
  positive integer), 1 for ``X``. Every count (``count``, ``ops``, ``events``, ...) is a sum of
  these weights, in the summary and in every view and insight alike;
* a **process** is ``(hostname, pid)``; the hostname of an event is ``args.hostname``, else the
  HH-resolution of ``args.hhash``, else the file's ``hostname`` metadata record *wherever in the
  file it appears* (also after the event, in a later gzip member);
* file names: ``args.fname``, else the FH-resolution of ``args.fhash`` (hash records of the whole
  file);
* times are measures of unions of half-open ``[ts, te)`` intervals, integer µs;
* an aggregated record's interval is ``[ts, ts + dur)`` with ``dur`` = ``args.dur_sum`` (else
  ``args.dur``); its bytes are ``ret_sum`` (``× size`` for fread/fwrite when ``size_min ==
  size_max``) when ``ret_min >= 0``. Per-call values (for percentiles and histograms) are known
  exactly when all its calls are equal: ``dft_cnt == 1`` or ``*_min == *_max``; then each of the
  ``dft_cnt`` calls has ``total / dft_cnt``. Otherwise percentiles that need them are NaN, and the
  row is left out of per-call histograms (request-size buckets).

Nothing here is tuned to agree with the analyzer; ``tests/test_oracle.py`` pins it on traces whose
answers were computed by hand.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CALLS_DEF = os.path.join(ROOT, "src", "format", "calls.def")

PHASES = {1: "X", 2: "C", 3: "A", 4: "M"}  # DFTracer 2.x integer phases
TRACER_CAT = "dftracer"


# ----------------------------------------------------------------------------- call vocabulary
def _bare(name: str) -> str:
    n = name.lstrip("_")
    if len(n) > 4 and n.endswith("_chk"):
        n = n[:-4]
    return n


def _load_byte_rules() -> Dict[str, str]:
    """bare call name -> "RET" | "RET_TIMES_SIZE" | "RET_COPY" | "ARG_SIZE", read from the spec
    file src/format/calls.def (a RET_COPY call moves ``ret`` bytes from ``fname`` to ``out_fname``;
    an ARG_SIZE call, H5Dread/H5Dwrite, ``args.size`` bytes)."""
    rules = {}
    with open(CALLS_DEF) as f:
        for m in re.finditer(r"^DFT_CALL\(\s*(\w+),\s*(\w+),.*,\s*(\w+)\)\s*$", f.read(), re.M):
            if m.group(3) in ("RET", "RET_TIMES_SIZE", "RET_COPY", "ARG_SIZE"):
                rules[_bare(m.group(2))] = m.group(3)
    # spellings of other tracers (DFTracer 1.x/2.x) for calls the preload does not intercept
    rules.update({"read64": "RET", "write64": "RET", "fread_unlocked": "RET_TIMES_SIZE"})
    rules["fwrite_unlocked"] = "RET_TIMES_SIZE"
    return rules


BYTE_RULES = _load_byte_rules()


def direction(name: str) -> Optional[str]:
    """The direction ("read" or "write") of a read/write request, else None (also for a kernel
    copy: its bytes are read from one file and written to another, see :meth:`Oracle.files`)."""
    b = _bare(str(name))
    if b not in BYTE_RULES or BYTE_RULES[b] in ("RET_COPY", "ARG_SIZE"):  # ARG_SIZE: an HDF5 layer call
        return None
    return "read" if "read" in b else "write"


# ----------------------------------------------------------------------------- reading
def _int(v) -> Optional[int]:
    """An integer JSON value (not a bool), else None."""
    if isinstance(v, bool) or not isinstance(v, int):
        return None
    return v


def file_lines(path: str) -> List[bytes]:
    """The lines of one trace file (every gzip member, concatenated), without the ``[`` line."""
    with open(path, "rb") as f:
        raw = f.read()
    data = gzip.decompress(raw) if path.endswith(".gz") else raw  # gzip.decompress reads all members
    out = []
    for ln in data.split(b"\n"):
        s = ln.strip()
        if not s or s in (b"[", b"]"):
            continue
        out.append(s)
    return out


def _host(args: dict, meta: dict):
    """A record's hostname: its ``hostname`` arg, else its ``hhash`` through the HH records, else
    the file's ``hostname`` record."""
    host = args.get("hostname")
    if host is None and args.get("hhash") is not None:
        host = meta["hh"].get(str(args["hhash"]))
    return meta["hostname"] if host is None else host


def load_file(path: str) -> Tuple[List[dict], dict]:
    """(event rows, file metadata) of one trace file. Metadata: hostname, fh, hh, sh, ppid
    (pid -> ppid)."""
    recs = []
    for ln in file_lines(path):
        try:
            r = json.loads(ln)
        except ValueError:
            continue
        if isinstance(r, dict) and "name" in r:
            recs.append(r)
    meta = {"hostname": None, "fh": {}, "hh": {}, "sh": {}, "ppid": {}}
    ppids = []  # (0: our ppid record / 1: a start record, args, pid, ppid)
    body = []
    for r in recs:
        ph = r.get("ph")
        if _int(ph) is not None:
            ph = PHASES.get(ph, "?")
        r["ph"] = ph
        args = r.get("args") if isinstance(r.get("args"), dict) else {}
        r["args"] = args
        if ph == "M" or r.get("cat") == TRACER_CAT:
            name, k, v = r.get("name"), args.get("name"), args.get("value")
            if ph == "M" and k is not None and v is not None:
                if name == "FH":
                    meta["fh"][str(v)] = str(k)
                elif name == "HH":
                    meta["hh"][str(v)] = str(k)
                elif name == "SH":
                    meta["sh"][str(v)] = str(k)
                elif name == "hostname" and meta["hostname"] is None:
                    meta["hostname"] = str(v)
                elif name == "ppid" and _int(r.get("pid")) is not None:
                    ppids.append((0, args, r["pid"], int(v)))
            if name == "start" and _int(args.get("ppid")) is not None and _int(r.get("pid")) is not None:
                ppids.append((1, args, r["pid"], int(args["ppid"])))  # an upstream (1.x, 2.x) start record
            continue
        body.append(r)
    # the parent of a pid (docs/analyzer.md, processes(): matched by pid); our ppid record first
    for _, _args, pid, pp in sorted(ppids, key=lambda t: t[0]):
        meta["ppid"].setdefault(int(pid), pp)
    rows = []
    for r in body:
        args = r["args"]
        ts = _int(r.get("ts"))
        if ts is None:
            continue
        ph = r["ph"]
        name = str(r["name"])
        host = _host(args, meta)
        fname = args.get("fname")
        if fname is None and args.get("fhash") is not None:
            fname = meta["fh"].get(str(args["fhash"]))
        dur = _int(r.get("dur")) or 0
        cnt = 1
        rule = BYTE_RULES.get(_bare(name))
        size = None
        ret, asz = _int(args.get("ret")), _int(args.get("size"))
        if rule and ret is not None and ret >= 0:
            if rule in ("RET", "RET_COPY"):
                size = ret
            elif rule == "ARG_SIZE":
                size = asz if asz is not None and asz >= 0 else None
            elif asz is not None:
                size = ret * asz
        exact_size = True  # per-call sizes all equal (always for X)
        exact_dur = True
        dur_max = dur
        if ph == "A":
            c = _int(args.get("dft_cnt"))
            cnt = c if c is not None and c > 0 else 1
            if _int(args.get("dur_sum")) is not None:
                dur = args["dur_sum"]
            elif _int(args.get("dur")) is not None:
                dur = args["dur"]
            dmin, dmax = _int(args.get("dur_min")), _int(args.get("dur_max"))
            exact_dur = cnt == 1 or (dmin is not None and dmin == dmax)
            dur_max = dmax if dmax is not None else (dur if cnt == 1 else None)
            if rule and rule != "ARG_SIZE" and size is None:
                rsum, rmin, rmax = _int(args.get("ret_sum")), _int(args.get("ret_min")), _int(args.get("ret_max"))
                smin, smax = _int(args.get("size_min")), _int(args.get("size_max"))
                if rsum is not None and rmin is not None and rmin >= 0 and rsum >= 0:
                    if rule == "RET":
                        size = rsum
                    elif smin is not None and smin == smax:
                        size = rsum * smin
                if size is not None and cnt > 1:
                    if rule == "RET":
                        exact_size = rmin == rmax
                    else:
                        exact_size = rmin == rmax and smin == smax
                    lo = rmin * (smin if rule != "RET" else 1)
                    hi = (rmax if rmax is not None else rmin) * (smax if rule != "RET" else 1)
                    r["_size_bounds"] = (lo, hi)
        off = _int(args.get("offset"))
        rows.append(
            {
                "name": name,
                "cat": None if r.get("cat") is None else str(r.get("cat")),
                "ph": ph,
                "hostname": None if host is None else str(host),
                "fname": None if fname is None else str(fname),
                "pid": _int(r.get("pid")) or 0,
                "tid": _int(r.get("tid")) or 0,
                "ts": ts,
                "dur": dur,
                "te": ts + dur,
                "size": size,
                "offset": off,
                "cnt": cnt,
                "exact_size": exact_size,
                "exact_dur": exact_dur,
                "dur_max": dur_max,
                "size_bounds": r.get("_size_bounds"),
                "args": args,
                "file": path,
            }
        )
    return rows, meta


class Trace:
    """All files of a run. ``events``: one row per X/A record (not ``cat`` dftracer), in file and
    line order; ``ppid``: ``{pid: ppid}`` from the metadata (matched by pid alone, as documented)."""

    def __init__(self, paths: Iterable[str]):
        rows, self.ppid = [], {}
        self.paths = sorted(os.fspath(p) for p in paths)
        for p in self.paths:
            r, meta = load_file(p)
            rows += r
            self.ppid.update(meta["ppid"])
        cols = ["name", "cat", "ph", "hostname", "fname", "pid", "tid", "ts", "dur", "te", "size", "offset", "cnt"]
        extra = ["exact_size", "exact_dur", "dur_max", "size_bounds", "args", "file"]
        self.all = pd.DataFrame(rows, columns=cols + extra)
        ev = self.all[self.all["ph"].isin(["X", "A"])].reset_index(drop=True)
        ev["size"] = ev["size"].astype("Float64")
        ev["offset"] = ev["offset"].astype("Float64")
        self.events = ev


# ----------------------------------------------------------------------------- interval helpers
def union(a: Sequence[int], b: Sequence[int]) -> List[Tuple[int, int]]:
    """Sorted disjoint union of half-open intervals [a_i, b_i) (empty ones dropped)."""
    iv = sorted((int(x), int(y)) for x, y in zip(a, b) if y > x)
    out: List[List[int]] = []
    for s, e in iv:
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def measure(u) -> int:
    return sum(e - s for s, e in u)


def u_of(df: pd.DataFrame) -> List[Tuple[int, int]]:
    return union(df["ts"].tolist(), df["te"].tolist())


def intersect(u, v) -> List[Tuple[int, int]]:
    out, i, j = [], 0, 0
    while i < len(u) and j < len(v):
        s, e = max(u[i][0], v[j][0]), min(u[i][1], v[j][1])
        if e > s:
            out.append((s, e))
        if u[i][1] < v[j][1]:
            i += 1
        else:
            j += 1
    return out


def minus(u, v) -> List[Tuple[int, int]]:
    """u \\ v."""
    out = []
    for s, e in u:
        cur = s
        for vs, ve in v:
            if ve <= cur or vs >= e:
                continue
            if vs > cur:
                out.append((cur, vs))
            cur = max(cur, ve)
            if cur >= e:
                break
        if cur < e:
            out.append((cur, e))
    return out


def merge(*us) -> List[Tuple[int, int]]:
    a, b = [], []
    for u in us:
        for s, e in u:
            a.append(s)
            b.append(e)
    return union(a, b)


def clip(u, s: int, e: int):
    return intersect(u, [(s, e)]) if e > s else []


# ----------------------------------------------------------------------------- per-call values
def per_call_sizes(df: pd.DataFrame) -> Tuple[List[float], bool]:
    """(the per-call byte values of rows with a size, all exact?)."""
    vals, exact = [], True
    for sz, c, ex in zip(df["size"], df["cnt"], df["exact_size"]):
        if sz is pd.NA or sz is None or (isinstance(sz, float) and math.isnan(sz)):
            continue
        if c == 1 or ex:
            vals.extend([float(sz) / c] * int(c))
        else:
            exact = False
    return vals, exact


def per_call_durs(df: pd.DataFrame) -> Tuple[List[int], bool]:
    """The per-call durations of the views' ``dur`` percentiles and ``max_us`` (docs/analyzer.md,
    views): an aggregated record's ``cnt`` calls enter with its mean duration in integer µs,
    ``dur // cnt`` (its ``dur_min``/``dur_max`` are not used: the views' numbers of aggregated
    records are estimates, their counts and ``time_s``/``mean_us`` exact)."""
    vals = []
    for d, c in zip(df["dur"], df["cnt"]):
        vals.extend([int(d) // int(c)] * int(c))
    return vals, True


def _pct(vals, q, exact=True):
    if not exact or not vals:
        return float("nan")
    return float(np.percentile(np.asarray(vals, dtype=np.float64), q))


# ----------------------------------------------------------------------------- the oracle
class Oracle:
    """Every number of the summary, the views and the insights' evidence metrics of one run."""

    def __init__(self, paths, io_cats=("POSIX", "STDIO"), compute_cats=("compute",), app_io_cats=("reader",)):
        self.trace = Trace(paths)
        self.ev = self.trace.events
        self.io_cats, self.compute_cats, self.app_io_cats = tuple(io_cats), tuple(compute_cats), tuple(app_io_cats)
        e = self.ev
        self.io = e[e["cat"].isin(self.io_cats)]
        self.compute = e[e["cat"].isin(self.compute_cats)]
        self.app_io = e[e["cat"].isin(self.app_io_cats)]
        self.t0 = int(e["ts"].min()) if len(e) else 0
        self.t1 = int(e["te"].max()) if len(e) else 0

    def rel(self, t) -> float:
        return (int(t) - self.t0) * 1e-6

    # -- summary -------------------------------------------------------------------------
    def summary(self) -> dict:
        e, io, cp, ap = self.ev, self.io, self.compute, self.app_io
        u_io, u_cp, u_ap = u_of(io), u_of(cp), u_of(ap)
        funcs = {}
        for name, g in io.groupby("name", sort=True):
            vals, exact = per_call_sizes(g)
            has = g[g["size"].notna()]
            if not len(has):
                size = None
            else:
                calls = int(has["cnt"].sum())
                total = float(has["size"].astype("float64").sum())
                lo, hi = ([min(vals)] if vals else []), ([max(vals)] if vals else [])
                for b, c, ex in zip(has["size_bounds"], has["cnt"], has["exact_size"]):
                    if c > 1 and not ex and b is not None:
                        lo.append(float(b[0]))
                        hi.append(float(b[1]))
                size = {
                    "min": min(lo),
                    "p25": _pct(vals, 25, exact),
                    "mean": total / calls,
                    "median": _pct(vals, 50, exact),
                    "p75": _pct(vals, 75, exact),
                    "max": max(hi),
                }
                for k in ("p25", "median", "p75"):
                    if math.isnan(size[k]):
                        size[k] = None
            funcs[str(name)] = {"count": int(g["cnt"].sum()), "size": size}
        us = 1e-6
        return {
            "events": int(e["cnt"].sum()),
            "nodes": int(e["hostname"].dropna().nunique()),
            "processes": len(set(zip(e["hostname"], e["pid"]))),
            "threads": {
                "compute": len(set(zip(cp["hostname"], cp["pid"], cp["tid"]))),
                "io": len(set(zip(io["hostname"], io["pid"], io["tid"]))),
            },
            "files": int(io["fname"].dropna().nunique()),
            "time": {
                "total": (self.t1 - self.t0) * us,
                "app_io": measure(u_ap) * us,
                "unoverlapped_app_io": measure(minus(u_ap, u_cp)) * us,
                "unoverlapped_app_compute": measure(minus(u_cp, u_ap)) * us,
                "compute": measure(u_cp) * us,
                "io": measure(u_io) * us,
                "unoverlapped_io": measure(minus(u_io, u_cp)) * us,
                "unoverlapped_compute": measure(minus(u_cp, u_io)) * us,
            },
            "functions": funcs,
            "aggregated": {"records": int((e["ph"] == "A").sum()), "calls": int(e.loc[e["ph"] == "A", "cnt"].sum())},
        }

    # -- functions() ---------------------------------------------------------------------
    def functions(self) -> pd.DataFrame:
        io = self.io
        total_dur = float(io["dur"].sum())
        rows = {}
        for name, g in io.groupby("name", sort=True):
            durs, exact = per_call_durs(g)
            count = int(g["cnt"].sum())
            nbytes = int(g["size"].fillna(0).astype("int64").sum())
            busy = measure(u_of(g))
            rows[str(name)] = {
                "count": count,
                "bytes": nbytes,
                "time_s": float(g["dur"].sum()) * 1e-6,
                "busy_s": busy * 1e-6,
                "mean_us": float(g["dur"].sum()) / count,
                "p50_us": _pct(durs, 50, exact),
                "p90_us": _pct(durs, 90, exact),
                "p99_us": _pct(durs, 99, exact),
                "max_us": float(max(durs)) if durs else float("nan"),
                "bandwidth_mib_s": nbytes / 2**20 / (busy * 1e-6) if busy else float("nan"),
                "time_share": float(g["dur"].sum()) / total_dur if total_dur else float("nan"),
                "agg_calls": int(g.loc[g["ph"] == "A", "cnt"].sum()),
            }
        df = pd.DataFrame.from_dict(rows, orient="index")
        df.index.name = "name"
        return df

    # -- files() -------------------------------------------------------------------------
    BUCKETS = [
        ("size_0_100", 0),
        ("size_100_1K", 100),
        ("size_1K_10K", 1024),
        ("size_10K_100K", 10 * 1024),
        ("size_100K_1M", 100 * 1024),
        ("size_1M_4M", 2**20),
        ("size_4M_10M", 4 * 2**20),
        ("size_10M_100M", 10 * 2**20),
        ("size_100M_1G", 100 * 2**20),
        ("size_1G_PLUS", 2**30),
    ]

    def access_steps(self, g: pd.DataFrame) -> Tuple[int, int, int]:
        """(consecutive, sequential, random) steps of the data operations of one file, per thread
        in trace order."""
        data = g[g["size"].notna() & g["offset"].notna()]
        cons = seq = rnd = 0
        for _, t in data.groupby(["hostname", "pid", "tid"], sort=False, dropna=False):
            off = t["offset"].astype("int64").tolist()
            sz = t["size"].astype("int64").tolist()
            for i in range(1, len(off)):
                end = off[i - 1] + sz[i - 1]
                if off[i] == end:
                    cons += 1
                if off[i] >= end:
                    seq += 1
                else:
                    rnd += 1
        return cons, seq, rnd

    def copy_sides(self) -> pd.DataFrame:
        """The I/O events with, right after each kernel copy (byte rule RET_COPY) that names an
        ``args.out_fname``, its out side: the same event on ``out_fname`` at ``args.out_offset``.
        Column ``d``: the direction of the bytes on that row's file (a copy reads its ``fname``
        and writes its ``out_fname``)."""
        io = self.io.copy()
        io["d"] = io["name"].map(direction)
        copy = io["name"].map(lambda n: BYTE_RULES.get(_bare(str(n))) == "RET_COPY")
        io.loc[copy, "d"] = "read"
        outs = []
        for i, r in io[copy].iterrows():
            of = r["args"].get("out_fname")
            if of is None:
                continue
            o = r.copy()
            o["fname"], o["offset"], o["d"] = str(of), _int(r["args"].get("out_offset")), "write"
            outs.append((i, o))
        if not outs:
            return io
        rows, k = [], 0
        for i, r in io.iterrows():
            rows.append(r)
            while k < len(outs) and outs[k][0] == i:
                rows.append(outs[k][1])
                k += 1
        out = pd.DataFrame(rows).reset_index(drop=True)
        out["offset"] = out["offset"].astype("Float64")
        out["size"] = out["size"].astype("Float64")
        return out

    def files(self) -> pd.DataFrame:
        io = self.copy_sides()
        io = io[io["fname"].notna()]
        rows = {}
        for fname, g in io.groupby("fname", sort=True):
            d = g["d"]
            sizes = g["size"].fillna(0).astype("int64")
            busy = measure(u_of(g))
            durs, exact = per_call_durs(g)
            cons, seq, rnd = self.access_steps(g)
            nbytes = int(sizes.sum())
            row = {
                "ops": int(g["cnt"].sum()),
                "bytes": nbytes,
                "read_bytes": int(sizes[d == "read"].sum()),
                "write_bytes": int(sizes[d == "write"].sum()),
                "time_s": float(g["dur"].sum()) * 1e-6,
                "busy_s": busy * 1e-6,
                "bandwidth_mib_s": nbytes / 2**20 / (busy * 1e-6) if busy else float("nan"),
                "processes": len(set(zip(g["hostname"], g["pid"]))),
                "first_s": self.rel(g["ts"].min()),
                "last_s": self.rel(g["te"].max()),
                "p50_us": _pct(durs, 50, exact),
                "max_us": float(max(durs)) if durs else float("nan"),
                "consecutive": cons,
                "sequential": seq,
                "random": rnd,
                "pattern": "-" if seq + rnd == 0 else ("sequential" if seq >= rnd else "random"),
            }
            vals, _ = per_call_sizes(g)
            edges = [b for _, b in self.BUCKETS] + [float("inf")]
            for i, (col, lo) in enumerate(self.BUCKETS):
                row[col] = sum(1 for v in vals if lo <= v < edges[i + 1])
            rows[str(fname)] = row
        df = pd.DataFrame.from_dict(rows, orient="index")
        df.index.name = "fname"
        return df

    # -- processes() ---------------------------------------------------------------------
    def processes(self) -> pd.DataFrame:
        e = self.ev
        rows = {}
        for (host, pid), g in e.groupby(["hostname", "pid"], sort=True, dropna=False):
            io = g[g["cat"].isin(self.io_cats)]
            cp = g[g["cat"].isin(self.compute_cats)]
            ap = g[g["cat"].isin(self.app_io_cats)]
            u_io, u_cp = u_of(io), u_of(cp)
            rows[(host, int(pid))] = {
                "events": int(g["cnt"].sum()),
                "io_events": int(io["cnt"].sum()),
                "bytes": int(io["size"].fillna(0).astype("int64").sum()),
                "io_time_s": measure(u_io) * 1e-6,
                "app_io_time_s": measure(u_of(ap)) * 1e-6,
                "compute_time_s": measure(u_cp) * 1e-6,
                "unoverlapped_io_s": measure(minus(u_io, u_cp)) * 1e-6,
                "lifetime_s": (int(g["te"].max()) - int(g["ts"].min())) * 1e-6,
                "start_s": self.rel(g["ts"].min()),
                "end_s": self.rel(g["te"].max()),
                "threads": int(g["tid"].nunique()),
                "parent": self.trace.ppid.get(int(pid)),
            }
        keys = set(rows)
        for (host, _pid), r in rows.items():
            r["role"] = "worker" if r["parent"] is not None and (host, r["parent"]) in keys else "main"
        df = pd.DataFrame.from_dict(rows, orient="index")
        df.index = pd.MultiIndex.from_tuples(list(rows), names=["hostname", "pid"])
        with_io = df[df["io_events"] > 0]
        workers = df[df["role"] == "worker"]

        def imb(s):
            return float(s.max() / s.mean()) if len(s) and s.mean() > 0 else float("nan")

        df.attrs = {
            "io_imbalance": imb(with_io["io_time_s"]),
            "lifetime_imbalance": imb(df["lifetime_s"]),
            "workers": int(len(workers)),
            "worker_io_imbalance": imb(workers["io_time_s"]),
            "worker_app_io_imbalance": imb(workers["app_io_time_s"]),
            # the most I/O time; a tie goes to the smallest (hostname, pid) (docs/analyzer.md)
            "slowest_process": (
                min(k for k, v in df["io_time_s"].items() if v == df["io_time_s"].max())
                if len(with_io) and df["io_time_s"].max() > 0
                else None
            ),
        }
        return df

    # -- time_windows() ------------------------------------------------------------------
    def time_windows(self, bins: int = 100) -> pd.DataFrame:
        t0, t1 = self.t0, self.t1
        edges = [t0 + (t1 - t0) * i // bins for i in range(bins + 1)]
        io, u_io, u_cp = self.io, u_of(self.io), u_of(self.compute)
        ts, te = io["ts"].to_numpy(), io["te"].to_numpy()
        cnt = io["cnt"].to_numpy()
        size = io["size"].astype("float64").fillna(0).to_numpy()
        # window of each event's ts (the last window is closed at t1)
        idx = np.clip(np.searchsorted(np.asarray(edges), ts, side="right") - 1, 0, bins - 1)
        rows = []
        for i in range(bins):
            s, e = edges[i], edges[i + 1]
            part = np.clip(np.minimum(te, e) - np.maximum(ts, s), 0, None)
            dur = te - ts
            zero = dur == 0
            share = np.where(zero, (idx == i).astype(float), part / np.where(zero, 1, dur))
            iob, cpb = clip(u_io, s, e), clip(u_cp, s, e)
            w = (e - s) * 1e-6
            b = float((size * share).sum())
            iot = float(part.sum()) * 1e-6
            rows.append(
                {
                    "start_s": (s - t0) * 1e-6,
                    "end_s": (e - t0) * 1e-6,
                    "ops": int(cnt[idx == i].sum()),
                    "bytes": b,
                    "io_time_s": iot,
                    "io_busy_s": measure(iob) * 1e-6,
                    "compute_busy_s": measure(cpb) * 1e-6,
                    "overlap_s": measure(intersect(iob, cpb)) * 1e-6,
                    "bandwidth_mib_s": b / 2**20 / w if w else float("nan"),
                    "concurrency": iot / w if w else float("nan"),
                }
            )
        df = pd.DataFrame(rows)
        df.index.name = "bin"
        return df

    # -- heatmap() -----------------------------------------------------------------------
    def heatmap(self, bins: int = 100) -> pd.DataFrame:
        """Rows ``(hostname, pid)`` of the processes with I/O, one column per window of
        :meth:`time_windows`, values the seconds of I/O of that process inside the window."""
        t0, t1 = self.t0, self.t1
        edges = [t0 + (t1 - t0) * i // bins for i in range(bins + 1)]
        rows = {}
        for (host, pid), g in self.io.groupby(["hostname", "pid"], sort=True, dropna=False):
            ts, te = g["ts"].to_numpy(), g["te"].to_numpy()
            rows[(host, int(pid))] = [
                float(np.clip(np.minimum(te, edges[i + 1]) - np.maximum(ts, edges[i]), 0, None).sum()) * 1e-6
                for i in range(bins)
            ]
        df = pd.DataFrame.from_dict(rows, orient="index")
        df.index = pd.MultiIndex.from_tuples(list(rows), names=["hostname", "pid"])
        df.attrs = {"edges_s": [(e - t0) * 1e-6 for e in edges]}
        return df

    # -- by_tag() ------------------------------------------------------------------------
    def by_tag(self, key: str) -> pd.DataFrame:
        e = self.ev
        vals = [a.get(key) for a in e["args"]]  # raw JSON values (a Series would turn ints to floats)
        u_io, u_ap, u_cp = u_of(self.io), u_of(self.app_io), u_of(self.compute)
        rows = {}
        for v in sorted({x for x in vals if x is not None}, key=lambda x: (str(type(x)), x)):
            g = e[np.array([x == v and type(x) is type(v) for x in vals], dtype=bool)]
            span = u_of(g)
            io_v, cp_v = intersect(u_io, span), intersect(u_cp, span)
            rows[v] = {
                "events": int(g["cnt"].sum()),
                "time_s": float(g["dur"].sum()) * 1e-6,
                "span_s": measure(span) * 1e-6,
                "io_time_s": measure(io_v) * 1e-6,
                "app_io_time_s": measure(intersect(u_ap, span)) * 1e-6,
                "compute_time_s": measure(cp_v) * 1e-6,
                "unoverlapped_io_s": measure(minus(io_v, cp_v)) * 1e-6,
                "start_s": self.rel(g["ts"].min()),
                "end_s": self.rel(g["te"].max()),
            }
        df = pd.DataFrame.from_dict(rows, orient="index")
        df.index.name = key
        return df

    # -- epochs() ------------------------------------------------------------------------
    def epochs(self) -> pd.DataFrame:
        e = self.ev
        src = "epoch"
        ep = e[(e["cat"] == "pipeline") & e["name"].isin(["epoch.block", "epoch"])]
        if not len(ep):
            src = "train"
            ep = e[((e["cat"] == "pipeline") & (e["name"] == "train")) | (e["name"] == "DLIOBenchmark._train")]
        per = {}  # k -> list of (ts, te, process)
        for proc, g in ep.groupby(["hostname", "pid"], sort=False):
            for k, (s, t) in enumerate(sorted(zip(g["ts"], g["te"])), start=1):
                per.setdefault(k, []).append((int(s), int(t), proc))
        unions = {
            "train": u_of(
                e[((e["cat"] == "pipeline") & (e["name"] == "train")) | (e["name"] == "DLIOBenchmark._train")]
            ),
            "fetch": u_of(
                e[
                    ((e["cat"] == "dataloader") & e["name"].isin(["fetch.iter", "fetch"]))
                    | e["name"].isin(["_train.iter", "loop.iter"])
                ]
            ),
            "compute": u_of(e[e["cat"].isin(["compute", "ai_framework"])]),
            "io": u_of(self.io),
            "checkpoint": u_of(e[e["cat"] == "checkpoint"]),
            "eval": u_of(e[e["name"].isin(["evaluate", "DLIOBenchmark._eval"])]),
        }
        rows = {}
        for k in sorted(per):
            span = union([s for s, _, _ in per[k]], [t for _, t, _ in per[k]])
            x = {n: intersect(u, span) for n, u in unions.items()}
            covered = merge(x["fetch"], x["compute"], x["checkpoint"], x["eval"])
            rows[k] = {
                "processes": len({p for _, _, p in per[k]}),
                "start_s": self.rel(min(s for s, _, _ in per[k])),
                "duration_s": measure(span) * 1e-6,
                "train_s": measure(x["train"]) * 1e-6,
                "fetch_s": measure(x["fetch"]) * 1e-6,
                "compute_s": measure(x["compute"]) * 1e-6,
                "io_s": measure(x["io"]) * 1e-6,
                "checkpoint_s": measure(x["checkpoint"]) * 1e-6,
                "eval_s": measure(x["eval"]) * 1e-6,
                "fetch_unoverlapped_s": measure(minus(x["fetch"], x["compute"])) * 1e-6,
                "io_unoverlapped_s": measure(minus(x["io"], x["compute"])) * 1e-6,
                "other_s": measure(minus(span, covered)) * 1e-6,
                "source": src,
            }
        cols = ["processes", "start_s", "duration_s", "train_s", "fetch_s", "compute_s", "io_s", "checkpoint_s"]
        cols += ["eval_s", "fetch_unoverlapped_s", "io_unoverlapped_s", "other_s", "source"]
        df = pd.DataFrame.from_dict(rows, orient="index", columns=cols) if rows else pd.DataFrame(columns=cols)
        df.index.name = "epoch"
        return df

    # -- layers() ------------------------------------------------------------------------
    DEFAULT_LAYERS = {
        "POSIX": "POSIX",
        "STDIO": "STDIO",
        "reader": "app_io",
        "data_loader": "app_io",
        "data": "app_io",
        "dataloader": "app_io",
        "ai_framework": "compute",
        "compute": "compute",
        "checkpoint": "checkpoint",
        "comm": "comm",
        "device": "device",
        "dlio_benchmark": "pipeline",
        "pipeline": "pipeline",
        "ai_root": "pipeline",
    }

    def layers(self) -> pd.DataFrame:
        e = self.ev[self.ev["cat"].notna()]
        layer = e["cat"].map(lambda c: self.DEFAULT_LAYERS.get(c, c))
        us = {ly: u_of(g) for ly, g in e.groupby(layer, sort=True)}
        total = measure(merge(*us.values()))
        rows = {}
        for ly, g in e.groupby(layer, sort=True):
            others = merge(*(u for k, u in us.items() if k != ly))
            rows[ly] = {
                "categories": ",".join(sorted(g["cat"].unique())),
                "events": int(g["cnt"].sum()),
                "time_s": measure(us[ly]) * 1e-6,
                "dur_sum_s": float(g["dur"].sum()) * 1e-6,
                "unoverlapped_s": measure(minus(us[ly], others)) * 1e-6,
                "share": measure(us[ly]) / total if total else float("nan"),
            }
        df = pd.DataFrame.from_dict(rows, orient="index")
        df.index.name = "layer"
        df.attrs = {"total_s": total * 1e-6}
        return df

    #: parent layer -> child layers whose calls it makes underneath (docs/analyzer.md, nested layers)
    NESTED = {"HDF5": ("MPI-IO", "POSIX"), "MPI-IO": ("POSIX",)}

    def nested_layers(self) -> pd.DataFrame:
        """HDF5 > MPI-IO, HDF5 > POSIX, MPI-IO > POSIX: a child event is nested when its
        ``[ts, te]`` lies inside one parent event of the same (hostname, pid, tid); times are
        measures of unions per thread, summed over threads (overlapping children count once)."""
        e = self.ev

        def thread(r):
            return (r["hostname"], int(r["pid"]), int(r["tid"]))

        def events_of(cat):
            return [r for _, r in e[e["cat"] == cat].iterrows()]

        rows = {}
        for p, kids in self.NESTED.items():
            pe = events_of(p)
            if not pe:
                continue
            by_thread: Dict[tuple, list] = {}
            for r in pe:
                by_thread.setdefault(thread(r), []).append((int(r["ts"]), int(r["te"])))
            p_time = sum(measure(union([a for a, _ in v], [b for _, b in v])) for v in by_thread.values())
            p_bytes = sum(int(r["size"]) for r in pe if not pd.isna(r["size"]))
            for k in kids:
                n = nbytes = 0
                inside: Dict[tuple, list] = {}
                for r in events_of(k):
                    spans = by_thread.get(thread(r), [])
                    if any(a <= r["ts"] and r["te"] <= b for a, b in spans):
                        n += int(r["cnt"])
                        nbytes += 0 if pd.isna(r["size"]) else int(r["size"])
                        inside.setdefault(thread(r), []).append((int(r["ts"]), int(r["te"])))
                k_time = sum(measure(union([a for a, _ in v], [b for _, b in v])) for v in inside.values())
                rows[f"{p} > {k}"] = {
                    "parent": p,
                    "child": k,
                    "parent_events": int(sum(int(r["cnt"]) for r in pe)),
                    "parent_time_s": p_time * 1e-6,
                    "parent_bytes": p_bytes,
                    "child_events": n,
                    "child_time_s": k_time * 1e-6,
                    "child_bytes": nbytes,
                    "time_share": k_time / p_time if p_time else float("nan"),
                    "bytes_ratio": nbytes / p_bytes if p_bytes else float("nan"),
                }
        df = pd.DataFrame.from_dict(rows, orient="index")
        df.index.name = "nesting"
        return df

    # -- insights' evidence metrics --------------------------------------------------------
    def insight_metrics(self, small_bytes: int = 1 << 20) -> Dict[str, dict]:
        """{rule: evidence metrics} for the rules whose numbers need no offset reconstruction."""
        io = self.io
        d = io["name"].map(direction)
        data = io[d.notna() & io["size"].notna()]
        dd = data["name"].map(direction)
        out = {}
        m = {}
        for nm in ("read", "write"):
            g = data[dd == nm]
            vals, _ = per_call_sizes(g)
            small = 0
            for sz, c, ex, b in zip(g["size"], g["cnt"], g["exact_size"], g["size_bounds"]):
                per = float(sz) / c if (c == 1 or ex) else float(b[1])
                if per < small_bytes:
                    small += int(c)
            total = int(g["cnt"].sum())
            m[f"{nm}s"] = total
            m[f"small_{nm}s"] = small
            m[f"small_{nm}_share"] = round(small / total, 6) if total else 0.0
        out["small_requests"] = m
        st = int(data[data["cat"] == "STDIO"]["size"].astype("int64").sum())
        tot = int(data["size"].astype("int64").sum())
        out["stdio_share"] = {"stdio_bytes": st, "total_bytes": tot, "stdio_share": round(st / tot, 6) if tot else 0.0}
        meta_names = {"fsync", "fdatasync", "msync", "mmap", "mmap64", "munmap"}
        # a kernel copy (RET_COPY) moves data: not a metadata call
        is_meta = d.isna() & ~io["name"].map(lambda n: _bare(n) in meta_names or BYTE_RULES.get(_bare(n)) == "RET_COPY")
        io_t, meta_t = int(io["dur"].sum()), int(io[is_meta]["dur"].sum())
        out["metadata_time"] = {
            "meta_time_s": meta_t / 1e6,
            "io_time_s": io_t / 1e6,
            "meta_share": round(meta_t / io_t, 6) if io_t else 0.0,
        }
        # shared files: per (file, process) bytes and summed I/O dur
        fi = io[io["fname"].notna()].assign(
            dirn=io["name"].map(direction), sz=io["size"].astype("float64").fillna(0).astype("int64")
        )
        fp = {}
        for (fname, host, pid), g in fi.groupby(["fname", "hostname", "pid"], sort=True):
            fp.setdefault(fname, {})[(host, pid)] = (
                int(g[g["dirn"] == "read"]["sz"].sum()),
                int(g[g["dirn"] == "write"]["sz"].sum()),
                int(g["dur"].sum()),
                int(g["ts"].min()),  # the process's interval on the file: [first ts, last te]
                int(g["te"].max()),
            )
        imb_files, max_imb, timbs = 0, None, []
        for procs in fp.values():
            # a shared file: processes whose intervals overlap (each starts strictly before the
            # other ends); only those count
            procs = {
                k: p for k, p in procs.items() if any(j != k and p[3] < q[4] and q[3] < p[4] for j, q in procs.items())
            }
            if len(procs) < 2:
                continue
            imbs = []
            for j in (0, 1):  # read bytes, written bytes: (max - min) / max over its processes
                v = [p[j] for p in procs.values()]
                if max(v) > 0 and max(v) > min(v):
                    imbs.append(round((max(v) - min(v)) / max(v), 6))
            if imbs:
                imb_files += 1
                max_imb = max([max_imb or 0.0] + imbs)
            t = [p[2] for p in procs.values()]
            if sum(t) > 0 and max(t) > min(t):  # (slowest - fastest) / total I/O time
                timbs.append(round((max(t) - min(t)) / sum(t), 6))
        out["rank_imbalance"] = {"imbalanced_files": imb_files, "max_imbalance": max_imb}
        out["stragglers"] = {"straggler_files": len(timbs), "max_time_imbalance": max(timbs) if timbs else None}
        out.update(self.placement_metrics())
        out.update(self.ai_metrics())
        e = self.ev
        ck = e[(e["cat"] == "checkpoint") | (~e["cat"].isin(self.io_cats) & e["name"].str.contains("(?i)checkpoint"))]
        u_ck = u_of(ck)
        job = self.t1 - self.t0
        out["checkpoint_time"] = {
            "checkpoint_s": measure(u_ck) / 1e6,
            "job_s": job / 1e6,
            "checkpoint_share": round(measure(u_ck) / job, 6) if job else 0.0,
            "checkpoint_events": int(ck["cnt"].sum()),
        }
        return out

    # -- request placement (offsets) -------------------------------------------------------
    OPENS = {"open", "open64", "openat", "openat64", "creat", "creat64"}  # the new fd is args.ret
    FOPENS = {"fopen", "fopen64", "freopen", "freopen64"}  # the stream's fd is args.fd
    LSEEKS = {"lseek", "lseek64"}
    FSEEKS = {"fseek", "fseeko", "fseeko64"}
    CLOSES = {"close", "fclose"}

    def placed_requests(self) -> pd.DataFrame:
        """Every read/write (non-null size) of the I/O events with its file range: ``start`` is the
        ``offset`` arg of a positional call (pread*, pwrite*), else the position of its ``(hostname, pid, fd)`` stream replayed in trace
        (file, line) order (an open sets 0, lseek its result, fseek SEEK_SET its offset, SEEK_CUR adds to a known
        position, SEEK_END and close forget it; each non-positional request advances it by its
        bytes); NaN when unknown (unplaced). Columns: fname, hostname, pid, ts, dir, size, cnt, start."""
        io = self.io
        order = io  # trace order: file, line (docs/analyzer.md "Request offsets")
        pos: Dict[tuple, int] = {}
        rows = []
        for r in order.itertuples(index=False):
            n, a = _bare(r.name), r.args
            fd = _int(a.get("fd"))
            if n in self.OPENS:
                ret = _int(a.get("ret"))
                if ret is not None and ret >= 0:
                    pos[(r.hostname, r.pid, ret)] = 0
                continue
            key = (r.hostname, r.pid, fd)
            if n in self.FOPENS:
                if fd is not None:
                    pos[key] = 0
                continue
            if n in self.LSEEKS:
                ret = _int(a.get("ret"))
                if ret is not None and ret >= 0:
                    pos[key] = ret
                else:
                    pos.pop(key, None)
                continue
            if n in self.FSEEKS:
                wh, off = _int(a.get("whence")), _int(a.get("offset"))
                if wh == 0 and off is not None:
                    pos[key] = off
                elif wh == 1 and off is not None and key in pos:
                    pos[key] += off
                else:
                    pos.pop(key, None)
                continue
            if n in self.CLOSES:
                pos.pop(key, None)
                continue
            d = direction(r.name)
            if d is None or r.size is pd.NA or pd.isna(r.size):
                continue
            size = int(r.size)
            if n.startswith("p") and not pd.isna(r.offset):  # pread*, preadv*, pwrite*, pwritev*
                start = int(r.offset)
            elif fd is not None and key in pos and r.cnt == 1:
                start = pos[key]
                pos[key] += size
            else:
                start = None
            rows.append((r.fname, r.hostname, r.pid, r.ts, d, size, r.cnt, start))
        return pd.DataFrame(rows, columns=["fname", "hostname", "pid", "ts", "dir", "size", "cnt", "start"])

    def placement_metrics(self, alignment: int = 4096) -> Dict[str, dict]:
        req = self.placed_requests()
        placed = req[req["start"].notna()]
        st = placed["start"].astype("int64")
        mis = int(placed[(st % alignment) != 0]["cnt"].sum())
        n_placed = int(placed["cnt"].sum())
        out = {
            "misaligned_requests": {
                "placed_requests": n_placed,
                "misaligned_requests": mis,
                "misaligned_share": round(mis / n_placed, 6) if n_placed else 0.0,
                "alignment": alignment,
            }
        }
        m = {}
        for d in ("read", "write"):
            total = int(req[req["dir"] == d]["cnt"].sum())
            rnd = 0
            g = placed[placed["dir"] == d]
            for _, s in g.groupby(["hostname", "pid", "fname", "dir"], sort=False, dropna=False):
                prev_end = None
                for start, size in zip(s["start"].astype("int64"), s["size"]):
                    if prev_end is not None and start < prev_end:
                        rnd += 1
                    prev_end = start + size
            m[f"{d}s"] = total
            m[f"random_{d}s"] = rnd
            m[f"random_{d}_share"] = round(rnd / total, 6) if total else 0.0
        out["random_access"] = m
        reads = placed[(placed["dir"] == "read") & placed["fname"].notna()]
        total = int(reads["size"].sum())
        unique = 0
        for _, g in reads.groupby("fname", sort=False):
            s0 = g["start"].astype("int64")
            unique += measure(union(s0.tolist(), (s0 + g["size"]).tolist()))
        unplaced = int(req[(req["dir"] == "read") & req["start"].isna()]["size"].sum())
        out["redundant_reads"] = {
            "read_bytes": total,
            "unique_read_bytes": unique,
            "redundant_read_bytes": total - unique,
            "redundant_share": round((total - unique) / total, 6) if total else 0.0,
            "unplaced_read_bytes": unplaced,
        }
        return out

    # -- AI-workflow rules -----------------------------------------------------------------
    FETCH_NAMES = ("fetch.iter", "fetch", "_train.iter", "loop.iter")
    # docs/analyzer.md "Layers": regions that span other work are never app I/O
    SPANNING = ("epoch", "train", "evaluate", "test", "ai_root", "DLIOBenchmark._train", "DLIOBenchmark._eval")

    def ai_metrics(self) -> Dict[str, dict]:
        e = self.ev
        comp_cats = set(self.compute_cats) | {"compute", "ai_framework"}
        app_cats = set(self.app_io_cats) | {"reader", "data_loader", "data", "dataloader"}
        spanning = e["name"].isin(self.SPANNING) | e["name"].astype(str).str.endswith(".block")
        fetch = e[e["name"].isin(self.FETCH_NAMES)]
        comp = e[e["cat"].isin(comp_cats)]
        wait, cdur, nb = int(fetch["dur"].sum()), int(comp["dur"].sum()), int(fetch["cnt"].sum())
        out = {
            "dataloader_stall": {
                "fetch_wait_s": wait / 1e6,
                "compute_s": cdur / 1e6,
                "stall_share": round(wait / (wait + cdur), 6) if wait + cdur else 0.0,
                "batches": nb,
                "mean_wait_s": round(wait / 1e6 / nb, 6) if nb else 0.0,
            }
        }
        # epochs: epoch.block / epoch events (else DLIO's _train / train); label = the epoch arg,
        # else the event's order in its process; a window spans the label's events of all processes
        ep = e[e["name"].isin(["epoch.block", "epoch"])]
        if not len(ep):
            ep = e[e["name"].isin(["DLIOBenchmark._train", "train"])]
        wins: Dict[object, List[int]] = {}
        for _, g in ep.groupby(["hostname", "pid"], sort=False, dropna=False):
            for k, (t, te, a) in enumerate(sorted(zip(g["ts"], g["te"], g["args"]), key=lambda x: x[0]), start=1):
                lb = a.get("epoch", k)
                w = wins.setdefault(lb, [t, te])
                w[0], w[1] = min(w[0], t), max(w[1], te)
        io_u = merge(u_of(self.io), u_of(e[e["cat"].isin(app_cats) & ~spanning]), u_of(fetch))
        cp_u = u_of(comp)
        shares = []
        for s0, e0 in wins.values():
            un = measure(minus(clip(io_u, s0, e0), clip(cp_u, s0, e0)))
            shares.append(round(un / (e0 - s0), 6) if e0 > s0 else 0.0)
        bad = [x for x in shares if x > 0]
        out["io_bound_epochs"] = {
            "epochs": len(wins),
            "io_bound_epochs": len(bad),
            "max_io_share": max(bad) if bad else None,
        }
        # workers: processes with I/O, app I/O or samples but no compute and no fetch wait (when some
        # process has them); busy = summed sample dur, else summed I/O + app-I/O dur
        samples = e[e["name"].isin(self.SAMPLE_NAMES)]
        busy = []
        if len(comp) or len(fetch):
            for _, g in e.groupby(["hostname", "pid"], sort=False, dropna=False):
                if g["cat"].isin(comp_cats).any() or g["name"].isin(self.FETCH_NAMES).any():
                    continue
                smp = g[g["name"].isin(self.SAMPLE_NAMES)]
                work = g[g["cat"].isin(self.io_cats) | (g["cat"].isin(app_cats) & ~spanning.loc[g.index])]
                if len(smp):
                    busy.append(int(smp["dur"].sum()))
                elif len(work):
                    busy.append(int(work["dur"].sum()))
        if len(busy) >= 2:
            mean = sum(busy) / len(busy)
            out["worker_imbalance"] = {
                "workers": len(busy),
                "max_over_mean": round(max(busy) / mean, 6) if mean else 0.0,
                "max_busy_s": max(busy) / 1e6,
                "mean_busy_s": round(mean / 1e6, 6),
                "min_busy_s": min(busy) / 1e6,
            }
        # small files per sample: a file is small when its bytes read per open < small_file_bytes
        io = self.io
        per_file = {}
        for fname, g in io[io["fname"].notna()].groupby("fname", sort=True):
            opens = int(g[g["name"].map(lambda n: _bare(n) in self.OPENS | self.FOPENS)]["cnt"].sum())
            rd = g[g["name"].map(direction) == "read"]
            per_file[fname] = (opens, int(rd["size"].fillna(0).astype("int64").sum()))
        small = {f: v for f, v in per_file.items() if v[0] > 0 and v[1] / v[0] < (1 << 20)}
        n_samples = int(samples["cnt"].sum())
        n_opens = sum(v[0] for v in small.values())
        if n_samples and small:
            out["small_files_per_sample"] = {
                "samples": n_samples,
                "small_file_opens": n_opens,
                "small_files": len(small),
                "opens_per_sample": round(n_opens / n_samples, 6),
                "median_bytes_per_open": float(np.median([b / o for o, b in small.values()])),
            }
        # repeated epoch reads: placed reads whose ts lies in an epoch window, per file in epoch order
        if len(wins) >= 2:
            req = self.placed_requests()
            reads = req[(req["dir"] == "read") & req["start"].notna() & req["fname"].notna()]
            total = repeated = unique = files_reread = 0
            for _, g in reads.groupby("fname", sort=True):
                seen: List[Tuple[int, int]] = []
                rep_f = 0
                for s0, e0 in sorted(wins.values()):
                    x = g[(g["ts"] >= s0) & (g["ts"] < e0)]
                    st = x["start"].astype("int64")
                    u = union(st.tolist(), (st + x["size"]).tolist())
                    total += measure(u)
                    rep_f += measure(intersect(u, seen))
                    seen = merge(seen, u)
                repeated += rep_f
                unique += measure(seen)
                files_reread += rep_f > 0
            out["repeated_epoch_reads"] = {
                "epochs": len(wins),
                "bytes_read_in_epochs": total,
                "repeated_bytes": repeated,
                "repeated_share": round(repeated / total, 6) if total else 0.0,
                "unique_bytes": unique,
                "files_reread": files_reread,
            }
        return out

    SAMPLE_NAMES = ("item", "TorchDataset.__getitem__", "__getitem__")
