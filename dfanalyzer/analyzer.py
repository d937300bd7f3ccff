"""DFAnalyzer: load DFTracer traces into a Dask DataFrame and summarise them (paper §IV, Fig. 2).

Pipeline (``docs/analyzer.md`` has the details):

0. files of at most ``small_file_mb`` are grouped, several hundred per task, read whole;
1. every other trace file is indexed, one task per file (``dfanalyzer.reader.build_index``);
2. per-checkpoint stats (lines, uncompressed bytes) come from the indexes;
3. batches ``(file, first checkpoint, last checkpoint)`` of about ``batch_size_mb``
   uncompressed are planned (balanced within each file), aligned to checkpoints so nothing is
   inflated twice.

Steps 0-3 run in the constructor. Then, on demand:

* :meth:`DFAnalyzer.summary` before the events are loaded streams: each batch is loaded with the
  core columns only, reduced to a summary partial and dropped, so no frame is ever held;
* the first use of :attr:`DFAnalyzer.events` (views, insights, plots) loads every batch through
  the C++ reader into a pandas DataFrame (one task per batch, its frame kept on the workers),
  merges the batches' args schemas (``dfanalyzer.schema.union_schema``) and repartitions by the
  exact row counts: the balanced batches themselves become the partitions (small neighbours
  packed, oversized ones sliced), each aligned to the union schema (exact ``meta``) on the worker
  that holds it, without copying events, or taken as loaded when it already is; the collection's
  graph is the held partitions themselves (``dfanalyzer._held``: no alias task per partition).
  Per-batch infos and metadata stay beside their frames and come back by one task per worker, so
  no loaded batch moves between workers.

Where it runs: on the given ``client`` / scheduler / active default client; otherwise indexing
and the streamed summary run in a thread pool of this process (the C++ reader releases the GIL),
and an embedded ``LocalCluster`` of worker processes is started only when the events must be
held. The schema comes from the loaded batches, one parse per event; a schema computed up front
(``reader.scan``, one more parse of every file) would make ``dd.from_map`` possible but double
the parse work of a cold run.
"""

from __future__ import annotations

import contextlib
import math
import os
import weakref
from bisect import bisect_left
from itertools import accumulate
from operator import itemgetter
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from . import schema as _schema  # (its NumPy is imported on first use)
from ._lazy import LazyModule
from ._lazy import pandas as pd  # (imported on first use: dfanalyzer._lazy)
from ._loaded import held as _held
from ._loaded import loaded as _loaded
from ._paths import expand_patterns  # (re-exported; NumPy-free for the --scheduler client)
from .engine.reduce import tree_reduce
from .engine.vocabulary import AGGREGATE_COLUMNS, APP_IO_CATS, COMPUTE_CATS, IO_CATS
from .schema import CORE_COLUMNS, align_frame, frame_schema, make_meta, union_schema

# (imported on first use: its dataclasses, with inspect, are not the threaded summary's start-up)
_records = LazyModule("dfanalyzer.records")
if TYPE_CHECKING:
    from .records import BatchInfo, FileStats


def __getattr__(name: str):
    """``BatchInfo``, ``FileStats``, ``LoadError`` and ``stats_frame`` of
    :mod:`dfanalyzer.records` (imported here before; now on first use)."""
    if name in ("BatchInfo", "FileStats", "LoadError", "stats_frame"):
        return getattr(_records, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# NumPy and the modules that import it are imported on first use: planning needs none of them,
# and the threaded summary starts its first loads in native threads before they are imported
# (DFAnalyzer._start_loads, docs/perf/i27-start.md).
np = LazyModule("numpy")
_sanity = LazyModule(f"{__package__}.sanity")
_summary = LazyModule(f"{__package__}.summary")

# Clients an analyzer started itself (embedded LocalCluster or --scheduler): they are the process's
# default client while that analyzer lives (so ``a.events.compute()`` works), but they close with it,
# so another analyzer made meanwhile without ``client=`` must not take them.
_OWNED_CLIENTS: "weakref.WeakSet" = weakref.WeakSet()

__all__ = [
    "CORE_COLUMNS",  # re-exported from .schema (its one definition)
    "DFAnalyzer",
    "plan_batches",
    "plan_file_groups",
    "plan_partitions",
    "union_schema",
    "align_frame",
    "expand_patterns",
]

_CORE = _schema.CORE_KINDS


@contextlib.contextmanager
def _progress_bar(what: str, total: int):
    """A transient rich progress bar on stderr (stdout carries the panel or the --json output);
    yields the function that advances it by one."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, transient=True, console=Console(stderr=True)) as bar:
        task = bar.add_task(what, total=total)
        yield lambda: bar.advance(task)


def plan_file_groups(paths: Sequence[str], sizes: Sequence[int], group_bytes: int) -> List[List[str]]:
    """Consecutive groups of small files, each closed once its files reach ``group_bytes``
    (compressed bytes, ``sizes[i]`` for ``paths[i]``); every path is in exactly one group."""
    groups: List[List[str]] = []
    cur: List[str] = []
    acc = 0
    for p, n in zip(paths, sizes):
        cur.append(p)
        acc += int(n)
        if acc >= group_bytes:
            groups.append(cur)
            cur, acc = [], 0
    if cur:
        groups.append(cur)
    return groups


def plan_index_groups(sizes: Sequence[int], n: int) -> List[List[int]]:
    """Indices of files (``sizes[i]`` compressed bytes of file ``i``) in at most ``n`` non-empty
    groups of about equal bytes (largest first into the smallest group), each in index order;
    every index is in exactly one group."""
    n = max(1, min(int(n), len(sizes)))
    groups: List[List[int]] = [[] for _ in range(n)]
    load = [0] * n
    for k in sorted(range(len(sizes)), key=lambda i: (-max(0, int(sizes[i])), i)):
        j = min(range(n), key=lambda g: (load[g], g))
        groups[j].append(k)
        load[j] += max(1, int(sizes[k]))
    return [sorted(g) for g in groups if g]


# ----------------------------------------------------------------------------- planning
BATCH_MB = 16.0
"""Default uncompressed MiB (of trace text) per load batch in the thread pool, and the floor on a
cluster and of the threaded streamed summary (:func:`summary_batch_bytes`)."""
SUMMARY_BATCH_MAX_MB = 64.0
"""Cap of the threaded streamed summary's batches when ``batch_size_mb`` is not given (MiB of text;
:func:`summary_batch_bytes`)."""
SUMMARY_MIN_THREADS = 8
"""The threaded streamed summary plans bigger batches (:func:`summary_batch_bytes`) only with at
least this many pool threads: they buy GIL headroom, which matters only when the threads' GIL
demand ``threads × f`` nears 1 (f ≈ 0.11 at 16 MiB on preload output: GIL-server speed-up 6.86
vs 7.70 at 8 threads, 1.98 vs 1.99 at 2), and until the reduction's temporaries stop being
faulted in afresh per batch they cost 2-20 % more CPU (docs/perf/i28-batch.md, section 4).
1: at any thread count."""
SUMMARY_BATCHES_PER_THREAD = 8
"""The threaded streamed summary's batches grow only while every pool thread still gets at least
this many (the last round of batches, where threads run out of work, stays ≤ 1/8 of a thread's)."""
PREFETCH_PER_THREAD = 8
"""At most this many batches (or groups of small files) per thread are loaded in native threads
while the threaded streamed summary imports NumPy and its modules (:meth:`DFAnalyzer._start_loads`):
they load until the pool's first task takes one (~0.2 s of imports: ~5 loads of a 16 MiB batch
here), each then waiting in memory (~5 MB with the summary's columns) for its pool thread. 0: none.
Also bounded in bytes: :data:`PREFETCH_MB_PER_THREAD`."""
PREFETCH_MB_PER_THREAD = 128.0
"""At most this many MiB of trace text per thread (all threads' items together: ``threads ×`` this)
are started early by :meth:`DFAnalyzer._start_loads`, so that bigger batches
(:func:`summary_batch_bytes`) do not multiply the memory held while NumPy is imported; the first
item of each thread is always allowed (a pool thread would hold that batch anyway). 128 MiB is
8 batches of 16 MiB (the bound before it was in bytes), 2 of 64 MiB."""
GROUP_TEXT_PER_COMPRESSED_BYTE = 8
"""Text bytes counted per compressed byte of a group of small files by :meth:`DFAnalyzer._start_loads`
(its text is not known before it is read; groups are planned at ``batch_bytes / 8`` compressed
bytes, i.e. about a batch of text)."""
CLUSTER_BATCH_MAX_MB = 64.0
"""Cap of the bigger batches planned on a cluster when ``batch_size_mb`` is not given (MiB of text)."""
CLUSTER_BATCHES_PER_THREAD = 4
"""On a cluster, batches grow only while every worker thread still gets at least this many."""
_MEM_BYTES_PER_EVENT_MIN = 100 + 9 * 12  # partition_size_mb's estimate with the 12 core columns only


def cluster_batch_bytes(total_bytes: int, lines: int, threads: int, partition_size_mb: float) -> int:
    """Uncompressed bytes per load batch on a cluster when the user gave no ``batch_size_mb``.

    A Dask task costs ~2-5 ms of scheduler, comms and worker CPU whatever its size, so fewer,
    bigger batches cost less per event (32 instead of 16 MiB: -0.08 µs/event outside the C++
    load, ``docs/perf/i22-fbatch.md``). The size is ``total_bytes / (CLUSTER_BATCHES_PER_THREAD ×
    threads)`` (so each worker thread keeps that many batches to balance), at most
    :data:`CLUSTER_BATCH_MAX_MB` MiB and at most the text of ``partition_size_mb`` MiB of events in
    memory (estimated at the core columns' 208 bytes per event, ``lines`` events in
    ``total_bytes``), and never below :data:`BATCH_MB` MiB (the thread pool's size, also when
    a cap is lower)
    """
    floor = int(BATCH_MB * 2**20)
    size = total_bytes // max(1, CLUSTER_BATCHES_PER_THREAD * int(threads))
    cap = CLUSTER_BATCH_MAX_MB * 2**20
    if lines > 0:  # text bytes of partition_size_mb MiB of events held in memory
        cap = min(cap, partition_size_mb * 2**20 * (total_bytes / lines) / _MEM_BYTES_PER_EVENT_MIN)
    return max(floor, min(int(size), int(cap)))


def summary_batch_bytes(total_bytes: int, threads: int) -> int:
    """Uncompressed bytes per load batch of the threaded streamed summary (``summary()`` without a
    cluster) when the user gave no ``batch_size_mb``.

    ``total_bytes / (SUMMARY_BATCHES_PER_THREAD × threads)`` within :data:`BATCH_MB` (16) and
    :data:`SUMMARY_BATCH_MAX_MB` (64) MiB, as an int. Why: much of the GIL-held CPU of a batch is
    per batch, not per event (≈ 1.5 ms + 18 ns per event, ``docs/perf/i26-gil.md`` section 4), so
    bigger batches lower the GIL-held share ``f`` that bounds the threads' speed-up (100M events of
    preload output: 0.112 at 16 MiB, 0.062 at 64 MiB, i.e. at most 8.9 vs 16 threads' worth of
    work); at least 8 batches per thread keep the tail short, and 64 MiB bounds a thread's batch
    in memory (≈ 80 MiB per thread held; ``docs/perf/i28-batch.md``). The planner also caps it at an
    equal share per thread. ``total_bytes``: uncompressed bytes of the indexed files; ``threads``
    ≥ 1 (less counts as 1).
    """
    floor = int(BATCH_MB * 2**20)
    cap = int(SUMMARY_BATCH_MAX_MB * 2**20)
    size = int(total_bytes) // max(1, SUMMARY_BATCHES_PER_THREAD * int(threads))
    return max(floor, min(size, cap))


def plan_batches(files: Sequence[dict], batch_bytes: int) -> List[Tuple[str, int, int, int, int]]:
    """Batches ``(path, first_ckpt, last_ckpt, uncompressed_bytes, lines)``, last inclusive.

    ``files`` are index stats: dicts with ``path`` and ``checkpoints``, a list of
    ``(uncompressed_size, num_lines)``. A file of ``B`` uncompressed bytes is cut into
    ``k = max(1, round(B / batch_bytes))`` batches of nearly equal bytes (cut where the running
    total first reaches ``j * B / k``; one batch per checkpoint when ``k`` reaches the number of
    checkpoints), so the batches of a file are balanced; a checkpoint is never split.
    """
    batch_bytes = max(1, int(batch_bytes))
    out = []
    for f in files:
        ckpts = f["checkpoints"]
        n = len(ckpts)
        if not n:
            continue
        # The loop this replaces cut after checkpoint i when the running total first reached
        # j * total / k (j = 1 .. k-1), and after the last: the same cuts, found by bisection
        # on the running totals (C-level sums: the plan of 4,093 checkpoints is start-up,
        # docs/perf/i28-boot.md).
        sizes, nlines = zip(*ckpts)
        ends = list(accumulate(map(int, sizes)))
        lends = list(accumulate(map(int, nlines)))
        total = ends[-1]
        k = max(1, min(n, (2 * total + batch_bytes) // (2 * batch_bytes)))
        if k == n:
            cuts = range(n)
        else:
            cuts = sorted({bisect_left(ends, -(-total * j // k)) for j in range(1, k)} | {n - 1})
        path, first, done, ldone = f["path"], 0, 0, 0
        for i in cuts:
            out.append((path, first, i, ends[i] - done, lends[i] - ldone))
            first, done, ldone = i + 1, ends[i], lends[i]
    return out


def plan_partitions(rows: Sequence[int], target_rows: int) -> List[List[Tuple[int, int, int]]]:
    """Group the row stream of batches (in order) into partitions of at most ``target_rows`` rows.

    ``rows[i]`` is the number of events of batch ``i``. Returns, per partition, a list of
    ``(batch index, start row, stop row)`` slices. Consecutive batches are packed together while
    the sum stays within ``target_rows`` (they are concatenated); a batch larger than
    ``target_rows`` is cut into ``ceil(rows / target_rows)`` equal row slices (views, no copy);
    empty batches are dropped. A batch that fits is never split, so when ``target_rows`` is the
    largest batch every partition is one whole batch or a pack of small ones and no event is
    copied. At least one (possibly empty) partition is returned.
    """
    target = max(1, int(target_rows))
    parts: List[List[Tuple[int, int, int]]] = []
    cur: List[Tuple[int, int, int]] = []
    cur_n = 0
    for b, r in enumerate(rows):
        r = int(r)
        if r == 0:
            continue
        if cur and cur_n + r > target:
            parts.append(cur)
            cur, cur_n = [], 0
        if r > target:
            m = -(-r // target)
            parts.extend([[(b, r * j // m, r * (j + 1) // m)] for j in range(m)])
            continue
        cur.append((b, 0, r))
        cur_n += r
    if cur:
        parts.append(cur)
    return parts or [[]]


def _plan_kept_batches(files: Sequence[dict], batch_bytes: int) -> List[Tuple[str, int, int, int, int]]:
    """:func:`plan_batches` over the checkpoints a filter keeps (``keep`` of the index task;
    None keeps all): each run of consecutive kept checkpoints is planned as its own file."""
    runs = []
    for f in files:
        keep = f.get("keep")
        if keep is None:
            runs.append((f, 0))
            continue
        i, n = 0, len(f["checkpoints"])
        while i < n:
            if not keep[i]:
                i += 1
                continue
            j = i
            while j + 1 < n and keep[j + 1]:
                j += 1
            runs.append(({"path": f["path"], "checkpoints": f["checkpoints"][i : j + 1]}, i))
            i = j + 1
    out = []
    for f, base in runs:
        out.extend((p, a + base, z + base, nb, nl) for p, a, z, nb, nl in plan_batches([f], batch_bytes))
    return out


# ----------------------------------------------------------------------------- tasks (workers)
def _index_task(path: str, index_dir: Optional[str], force: bool, pushdown: tuple = ()) -> dict:
    """Index one file; never raises (errors are returned and counted as lost bytes).

    With ``pushdown`` predicates (``dfanalyzer.filters``) the result has ``keep``: per checkpoint,
    whether any of its events may match them (from the index's per-checkpoint stats).
    """
    from . import reader

    try:
        idx = reader.build_index(path, index_dir=index_dir, force=force)
        cs = idx["checkpoints"]  # (C-level maps: 4,093 checkpoints per 100M events, docs/perf/i28-boot.md)
        ckpts = list(
            zip(map(int, map(itemgetter("uncompressed_size"), cs)), map(int, map(itemgetter("num_lines"), cs)))
        )
        keep = None
        if pushdown:
            from .filters import checkpoint_may_match

            keep = [checkpoint_may_match(st, pushdown) for st in reader.checkpoint_stats(path, index_dir)]
        # lost regions a filter skips are still reported (lines, compressed bytes)
        skipped_lost = [
            (int(c.get("lost_lines", 0)), int(c["compressed_size"]))
            for c, kept in zip(idx["checkpoints"], keep or ())
            if not kept and c.get("lost")
        ]
        return {
            "keep": keep,
            "skipped_lost": skipped_lost,
            "path": path,
            "error": None,
            "kind": idx.get("kind"),
            "checkpoints": ckpts,
            "lines": int(idx["lines"] if "lines" in idx else sum(n for _, n in ckpts)),
            "compressed_bytes": int(idx.get("compressed_bytes", idx.get("size", 0))),
            "uncompressed_bytes": int(
                idx["uncompressed_bytes"] if "uncompressed_bytes" in idx else sum(s for s, _ in ckpts)
            ),
            "warnings": list(idx.get("warnings", [])),
        }
    except Exception as exc:  # a file we cannot index is reported, the others still load
        try:
            size = os.path.getsize(path)
        except OSError:
            size = 0
        return {
            "path": path,
            "error": f"{type(exc).__name__}: {exc}",
            "keep": None,
            "kind": None,
            "checkpoints": [],
            "lines": 0,
            "compressed_bytes": size,
            "uncompressed_bytes": 0,
            "warnings": [],
        }


def _index_files_task(paths: List[str], index_dir: Optional[str], force: bool, pushdown: tuple = ()) -> List[dict]:
    """:func:`_index_task` of each of ``paths``, in order (one Dask task for several files)."""
    return [_index_task(p, index_dir, force, pushdown) for p in paths]


def _args_projection(keep_args: Optional[frozenset], query: Optional[str]) -> Optional[List[str]]:
    """The args columns a load must build (``columns=`` of :func:`dfanalyzer.reader.load_batch`):
    ``keep_args``, the summary's :data:`~dfanalyzer.summary.AGGREGATE_COLUMNS` and the names
    ``query`` reads; None (all) when every args column is kept. The frame is then the same as
    loading everything and dropping the other columns."""
    if keep_args is None:
        return None
    cols = set(keep_args) | set(AGGREGATE_COLUMNS)
    if query:
        from .filters import referenced_columns

        cols |= referenced_columns(query)
    return sorted(cols)


def _filter_seen(ev: pd.DataFrame, query: str):
    """The args columns of ``query`` that the loaded frame ``ev`` has (None when it has no event):
    :func:`dfanalyzer.filters.check_columns_seen` tells an unknown column from an absent one."""
    from .filters import parse_filter

    return tuple(sorted(c for c in parse_filter(query).args_columns if c in ev.columns)) if len(ev) else None


def _load_task(
    batch: tuple,
    index_dir: Optional[str],
    keep_args: Optional[frozenset] = None,
    query: Optional[str] = None,
    arg_columns: Optional[List[str]] = None,
):
    """Load one batch: ``(events, metadata, info)``; never raises but ``FilterError`` (a filter
    that does not fit the data is the user's error, raised naming the file); any other failure is
    ``info.error``, raised by the analyzer as :class:`~dfanalyzer.records.LoadError`.

    With ``query`` only the events it selects are kept (``dfanalyzer.filters.apply_query``); with
    ``keep_args`` (a set of args keys) the other args columns are not built (projection); with
    ``arg_columns`` (the analyzer's global choice of args columns, :func:`_choose_arg_columns`)
    exactly those are built and every other args key goes to ``args_extra``.
    """
    from . import reader
    from .filters import FilterError

    path, first, last = batch[:3]
    seen = None
    try:
        if arg_columns is not None:
            b = reader.load_batch(path, first, last, index_dir=index_dir, columns=arg_columns, extra=True)
        else:
            b = reader.load_batch(path, first, last, index_dir=index_dir, columns=_args_projection(keep_args, query))
        ev = b.events
        span = getattr(b, "span", None)  # (min ts, max te) before any query: input sanity (dfanalyzer.sanity)
        if span is None and len(ev):  # (a Batch made without it)
            span = _sanity.span(ev["ts"], ev["te"])
        if query:
            from .filters import apply_query

            seen = _filter_seen(ev, query)
            try:
                ev = apply_query(ev, query)
            except FilterError as exc:
                raise FilterError(f"{path}: {exc.reason}") from None
        if keep_args is not None:  # the summary's aggregated-record columns are always kept
            ev = ev[[c for c in ev.columns if c in _CORE or c in keep_args or c in _summary.AGGREGATE_COLUMNS]]
        info = _records.BatchInfo(
            rows=int(len(ev)),
            schema=frame_schema(ev),
            skipped_lines=int(b.skipped_lines),
            lost_bytes=int(b.lost_bytes),
            lost_lines=int(getattr(b, "lost_lines", 0)),
            unresolved_hashes=int(getattr(b, "unresolved_hashes", 0)),
            warnings=[str(w) for w in b.warnings],
            span=span,
            filter_seen=seen,
            arg_counts=getattr(b, "arg_counts", None),
        )
        md = b.metadata if b.metadata is not None else pd.DataFrame()
        return _loaded(ev, md, info)  # (a tuple with a cheap dask.sizeof: dfanalyzer._loaded)
    except FilterError:
        raise
    except Exception as exc:
        return None, pd.DataFrame(), _records.BatchInfo.failed(batch, exc)


def _load_files_task(
    paths: List[str],
    keep_args: Optional[frozenset] = None,
    query: Optional[str] = None,
    arg_columns: Optional[List[str]] = None,
):
    """Load a group of small files in one task: ``(events, metadata, info)``; never raises but
    ``FilterError``.

    ``info.files`` has the per-file rows and counts of :func:`dfanalyzer.reader.load_files`
    (``rows`` after ``query``, as in :func:`_load_task`; a ``FilterError`` is raised, as there);
    ``arg_columns`` as in :func:`_load_task`.
    """
    from . import reader
    from .filters import FilterError

    seen = None
    try:
        if arg_columns is not None:
            b, files = reader.load_files(paths, columns=arg_columns, extra=True)
        else:
            b, files = reader.load_files(paths, columns=_args_projection(keep_args, query))
        for f in files:
            if f["error"] and not f["compressed_bytes"]:
                try:
                    f["compressed_bytes"] = os.path.getsize(f["path"])
                except OSError:
                    pass
        ev = b.events
        for f, sp in zip(files, _sanity.file_spans(ev, files)):  # input sanity (dfanalyzer.sanity)
            f["span"] = sp
        if query:
            from .filters import filter_mask

            seen = _filter_seen(ev, query)
            try:
                keep = filter_mask(ev, query)
            except FilterError as exc:
                raise FilterError(f"{', '.join(f['path'] for f in files)}: {exc.reason}") from None
            # per-file rows after the query: the file number of each row, masked
            tag = np.repeat(np.arange(len(files)), [f["rows"] for f in files])
            for f, n in zip(files, np.bincount(tag[keep], minlength=len(files))):
                f["rows"] = int(n)
            ev = ev[keep].reset_index(drop=True)
        if keep_args is not None:  # as in _load_task
            ev = ev[[c for c in ev.columns if c in _CORE or c in keep_args or c in _summary.AGGREGATE_COLUMNS]]
        info = _records.BatchInfo(
            rows=int(len(ev)),
            schema=frame_schema(ev),
            skipped_lines=int(b.skipped_lines),
            lost_bytes=int(b.lost_bytes),
            files=[_records.FileStats.from_reader(f) for f in files],
            filter_seen=seen,
            arg_counts=getattr(b, "arg_counts", None),
        )
        return _loaded(ev, b.metadata, info)
    except FilterError:
        raise
    except Exception as exc:
        return None, pd.DataFrame(), _failed_files(paths, exc)


def _failed_files(paths: List[str], exc: BaseException) -> BatchInfo:
    """The info of a group of small files whose load task failed (each file says why)."""
    msg = f"{type(exc).__name__}: {exc}"
    files = [_records.FileStats(path=p, warnings=[f"{p}: not loaded: {msg}"]) for p in paths]
    return _records.BatchInfo(error=msg, files=files, fatal=_records.BatchInfo.is_fatal(exc))


def _task_name(item) -> str:
    """The file and batch of a load task: a batch ``(path, first, last, ...)`` or a group of
    small files (a list of paths)."""
    if isinstance(item, tuple):
        return f"{item[0]}: batch of checkpoints {item[1]}-{item[2]}"
    paths = list(item)
    more = f" and {len(paths) - 1} more small files" if len(paths) > 1 else ""
    return f"{paths[0] if paths else '?'}{more}: group of small files read whole"


def _raise_failed(items: Sequence, infos: Sequence[BatchInfo]) -> None:
    """Raise :class:`LoadError` naming the first load task of ``items`` whose ``info`` reports
    a task failure (``info.fatal``: memory, a bug, a failing filter...); its events would otherwise
    be an empty partition. Input the reader could not read (a file changed since it was indexed)
    stays counted lost lines with the reason."""
    bad = [(it, i) for it, i in zip(items, infos) if i.error is not None and i.fatal]
    if bad:
        it, i = bad[0]
        more = f" (and {len(bad) - 1} more load tasks failed)" if len(bad) > 1 else ""
        raise _records.LoadError(f"{_task_name(it)}: load failed: {i.error}{more}")


class TaskReleased(Exception):
    """Raised by a Dask task of this module (a summary chunk, :meth:`DFAnalyzer._wait` in a task
    that waits for others) once the scheduler has released it: nobody wants its result any more
    (its client cancelled it, closed, was killed or lost its connection), so it stops instead of
    finishing work that would be thrown away. Never seen by a client that still waits: the worker
    discards what a released task returns or raises (and logs nothing for it)."""


#: seconds between two checks, by a task that waits for its own tasks (the ``--scheduler``
#: summary's task, :func:`dfanalyzer.cli._summary_on_worker`), of whether it was released
RELEASE_POLL_S = 0.25


def _task_released_check():
    """In a task that a Dask worker runs: a function of no arguments telling (in ~0.1-0.15 us, a dict
    look-up, docs/perf/i29-cancel.md) whether the scheduler has released this task, so that its
    result will be discarded; None elsewhere (no worker, a client's own thread). It reads the
    task's state in the worker's state machine (``distributed.get_worker().state.tasks[key]``,
    ``key`` from ``get_worker().get_current_task()``): ``"cancelled"`` from the scheduler's
    ``free-keys`` while the task runs, or the task already forgotten. (``"resumed"`` is not
    released: the result of the running call is then still used.)"""
    try:
        from distributed import get_worker

        worker = get_worker()
        key = worker.get_current_task()
        tasks = worker.state.tasks
    except (ImportError, ValueError, KeyError, AttributeError):  # (ValueError: not in a task)
        return None

    def released() -> bool:
        ts = tasks.get(key)
        return ts is None or ts.state in ("cancelled", "released", "forgotten")

    return released


def _wait_unless_released(futures: list, released, client, what: str) -> None:
    """Wait until the distributed ``futures`` are done, or else, once ``released()`` (checked
    every :data:`RELEASE_POLL_S`), cancel them with ``client`` and raise :class:`TaskReleased`.
    (Done callbacks and an event, not ``distributed.wait(timeout=)``: each of its timeouts leaves
    an exception whose traceback holds ``futures`` in a reference cycle, so their results would
    stay on the workers until the worker's next full garbage collection.)"""
    import threading

    left, lock, done = [len(futures)], threading.Lock(), threading.Event()

    def one(_):
        with lock:
            left[0] -= 1
            if left[0] == 0:
                done.set()

    for f in futures:
        f.add_done_callback(one)
    while not done.wait(RELEASE_POLL_S):
        if released():
            client.cancel(futures)
            raise TaskReleased(f"{what}: this task was released; its {len(futures)} tasks cancelled")


def _check_futures(futures: list, items: Sequence) -> None:
    """Raise :class:`LoadError` for the first of the (waited for) distributed ``futures`` that did
    not finish: its task raised or its worker died (``KilledWorker``, killed for memory); the
    message names its file and batch (``items[k]`` for ``futures[k]``). Nothing is gathered."""
    for f, it in zip(futures, items):
        if f.status == "finished":
            continue
        exc = None
        with contextlib.suppress(Exception):
            exc = f.exception(timeout=5) if f.status == "error" else None
        if type(exc).__name__ == "FilterError":  # the user's filter, not a failed load (exit 2)
            raise exc
        why = f"{type(exc).__name__}: {exc}" if exc is not None else f"task {f.status}"
        raise _records.LoadError(f"{_task_name(it)}: load failed: {why}")


#: With more args keys than MAX_ARG_COLUMNS, a key gets a column only when at least one event in
#: this many has it (:func:`_choose_arg_columns`); the others are in ``args_extra``.
RARE_KEY_EVENTS = 1000


def _choose_arg_columns(infos: Sequence[BatchInfo]) -> Optional[List[str]]:
    """The args columns every partition gets when some batch had more args keys than
    ``MAX_ARG_COLUMNS`` (so put some in ``args_extra``) or the batches' columns together are more:
    the ``MAX_ARG_COLUMNS`` keys with the most events over all batches (ties by name), and of those
    only the keys that at least one event in :data:`RARE_KEY_EVENTS` has (a dense column of a key
    that nearly no event has costs 9 bytes a row for nothing: 100,000 one-event keys would
    otherwise make 256 nearly empty columns). None when every batch kept all its keys as columns
    and they fit (the common case: nothing to redo)."""
    from ._reader import MAX_ARG_COLUMNS  # (= dfanalyzer.reader.MAX_ARG_COLUMNS)

    names = set()
    overflow = False
    for i in infos:
        counts = i.arg_counts or {}
        names.update(counts)
        overflow = overflow or "args_extra" in i.schema
    if not overflow and len(names) <= MAX_ARG_COLUMNS:
        return None
    total: Dict[str, int] = {}
    for i in infos:
        for k, n in (i.arg_counts or {}).items():
            total[k] = total.get(k, 0) + n
    least = max(1, sum(i.rows for i in infos) // RARE_KEY_EVENTS)
    top = sorted(total, key=lambda k: (-total[k], k))[:MAX_ARG_COLUMNS]
    return sorted(k for k in top if total[k] >= least)


def _needs_reload(info: BatchInfo, chosen: List[str]) -> bool:
    """Whether a loaded batch's args columns differ from the global choice (see
    :func:`_choose_arg_columns`): it put a chosen key into ``args_extra`` or has a column not
    chosen."""
    keep = set(chosen)
    built = set(info.schema) - {"args_extra"}
    return any(c not in keep for c in built) or any(k in keep and k not in built for k in info.arg_counts or {})


def _prefetch_count(text_bytes: Sequence[int], threads: int) -> int:
    """How many of the first items (``text_bytes[k]``: item k's bytes of text, in load order)
    :meth:`DFAnalyzer._start_loads` starts early: the longest prefix of at most
    ``PREFETCH_PER_THREAD × threads`` items whose bytes sum to at most ``threads ×
    PREFETCH_MB_PER_THREAD`` MiB, but never fewer than ``min(threads, len(text_bytes))`` (one
    item per thread is held by the pool anyway); 0 when ``PREFETCH_PER_THREAD`` is 0."""
    threads = max(1, int(threads))
    most = min(len(text_bytes), max(0, PREFETCH_PER_THREAD) * threads)
    budget = PREFETCH_MB_PER_THREAD * 2**20 * threads
    n, acc = 0, 0
    while n < most:
        acc += int(text_bytes[n])
        if n >= threads and acc > budget:
            break
        n += 1
    return n


def _taper_tail(batches: list, files: Sequence[dict], threads: int, small_bytes: int) -> list:
    """``batches`` (a :func:`plan_batches` plan of ``files``' index stats) with the last
    ``threads`` batches of the pool's order (:func:`_round_robin_by_file`: the last round, where
    threads run out of work) re-planned at ``small_bytes``, each into consecutive pieces of
    itself: the threads then end within a small batch of each other instead of a big one
    (docs/perf/i28-batch.md, the tail). Same checkpoints, same order within each file."""
    order = _round_robin_by_file(batches)
    last = set(order[-max(1, int(threads)) :])
    ckpts = {f["path"]: f["checkpoints"] for f in files}
    out = []
    for k, b in enumerate(batches):
        path, first, stop = b[0], b[1], b[2]
        if k not in last or stop == first:
            out.append(b)
            continue
        sub = {"path": path, "checkpoints": ckpts[path][first : stop + 1]}
        out.extend((p, a + first, z + first, nb, nl) for p, a, z, nb, nl in plan_batches([sub], small_bytes))
    return out


def _round_robin_by_file(batches: Sequence[tuple]) -> List[int]:
    """Indices of ``batches`` (``(path, ...)`` tuples, each file's in order) taking the files in
    turns: the first batch of every file, then every second batch, and so on."""
    per_file: Dict[str, List[int]] = {}
    for i, b in enumerate(batches):
        per_file.setdefault(b[0], []).append(i)
    runs = list(per_file.values())
    return [run[k] for k in range(max(map(len, runs), default=0)) for run in runs if k < len(run)]


#: Per worker process: ``(name, k)`` of a held load result → ``(metadata, info, aligned, token)``
#: of the events frame that :func:`_load_frame_task` returned under the task key ``(name, k)``. An
#: entry lives as long as its frame (``weakref.finalize``): a frame released, spilled or lost with
#: its worker takes its entry along, and :func:`_loaded_each` then loads the batch again.
_LOADED: Dict[Tuple[str, int], tuple] = {}


def _unstash(sk: Tuple[str, int], token: object) -> None:
    if _LOADED.get(sk, (None, None, None, None))[3] is token:  # not a later load of the same key
        del _LOADED[sk]


def _is_aligned(ev: pd.DataFrame, schema: Optional[Dict[str, str]] = None) -> bool:
    """Whether ``ev`` is already what :func:`align_frame` would make of it for its own schema
    (``frame_schema(ev)``, or ``schema`` when the caller has it already): the core columns first,
    in order, every column of its kind's exact dtype (categories of ``str``), a ``RangeIndex``
    from 0. Such a batch, when its schema is the union schema, is a partition as it is."""
    idx = ev.index
    if not isinstance(idx, pd.RangeIndex) or idx.start != 0 or idx.step != 1:
        return False
    names = list(ev.columns)
    if tuple(names[: len(CORE_COLUMNS)]) != _schema.CORE_NAMES or len(set(names)) != len(names):
        return False
    dtypes = _schema.frame_dtypes(ev)
    if schema is None:
        schema = {c: _schema.kind_of_cached(t) for c, t in zip(names, dtypes) if c not in _CORE}
    kinds = {**_CORE, **schema}
    str_dtype = _schema._str_dtype()
    for c, dt in zip(names, dtypes):
        k = kinds.get(c)
        if k == _schema.CATEGORY:
            if not isinstance(dt, pd.CategoricalDtype) or dt.categories.dtype != str_dtype:
                return False
        elif k is None or str(dt) != k:
            return False
    return True


def _load_any(item, index_dir, keep_args, query, arg_columns):
    """:func:`_load_task` of a batch (a tuple) or :func:`_load_files_task` of a group of small
    files (a list of paths)."""
    if isinstance(item, tuple):
        return _load_task(item, index_dir, keep_args=keep_args, query=query, arg_columns=arg_columns)
    return _load_files_task(item, keep_args=keep_args, query=query, arg_columns=arg_columns)


def _load_frame_task(item, name: str, k: int, index_dir, keep_args=None, query=None, arg_columns=None):
    """Load batch or group ``item`` (:func:`_load_any`) and return its events frame alone (an
    empty frame when the load failed: ``info.error``), submitted under the key ``(name, k)``; its
    metadata, info and :func:`_is_aligned` stay on this worker (:data:`_LOADED`) for
    :func:`_loaded_each`. The frame is then the partition itself when the plan allows it: no
    partition task, and Dask measures (``sizeof``) one DataFrame, not a tuple of two, by its
    arrays' bytes (:func:`dfanalyzer._loaded.held`)."""
    import weakref

    ev, md, info = _load_any(item, index_dir, keep_args, query, arg_columns)
    if ev is None:
        ev = pd.DataFrame()
    token = object()
    schema = info.schema if info.error is None else None  # (frame_schema of this very ev)
    _LOADED[(name, k)] = (md, info, _is_aligned(ev, schema), token)
    weakref.finalize(ev, _unstash, (name, k), token)
    return _held(ev)  # (dask.sizeof of it: its arrays' bytes, dfanalyzer._loaded)


def _loaded_each(i: int, load: dict, which: list, *frames) -> list:
    """Item ``i`` (1 metadata, 2 ``(info, aligned)``) of the loads ``which`` = ``[(name, k,
    item)]`` that this worker holds (``frames``, their results: dependencies, so the task runs
    after them): one task per worker. A load whose entry is not here (its frame moved to this
    worker, or was recomputed after a spill) is loaded again (``load``: the keywords of
    :func:`_load_any`): same file, same result. A metadata frame without rows is None (what
    :func:`_concat_metadata` reads as such; Dask's ``sizeof`` of an empty frame with object
    columns costs ~1-3 ms, twice per result)."""
    out = []
    for name, k, item in which:
        got = _LOADED.get((name, k))
        if got is None:
            ev, md, info = _load_any(item, **load)
            got = (md, info, _is_aligned(pd.DataFrame() if ev is None else ev))
        if i == 2:
            out.append((got[1], got[2]))
            continue
        md = got[0]
        out.append(None if isinstance(md, pd.DataFrame) and len(md.columns) and not len(md) else md)
    return out


def _stashed(name: str) -> bytes:
    """On a worker (``client.run``, in its event loop): ``{k: (info, aligned, metadata)}`` of the
    loads ``(name, k)`` whose frames this worker holds (their :data:`_LOADED` entries; the
    metadata is the few ``ph: "M"`` records of the batch), pickled (:func:`_unpickle_stashed`).

    Pickled here because Dask measures every message it sends (``safe_sizeof``, to choose
    whether to serialise off the event loop) by walking it: the dicts and lists of the infos and
    a pandas ``sizeof`` per metadata frame, ~10-20 ms per worker per load, then again on the
    scheduler that relays the reply; the size of ``bytes`` is its length. The pickling itself
    is what Dask would do to these objects anyway."""
    import pickle

    return pickle.dumps(
        {k: (v[1], v[2], v[0]) for (n, k), v in list(_LOADED.items()) if n == name}, protocol=pickle.HIGHEST_PROTOCOL
    )


def _unpickle_stashed(res) -> Optional[Dict[int, tuple]]:
    """A worker's :func:`_stashed` reply as its dict; None for a failed call (``on_error="return"``
    gives the exception) or a reply that is not one."""
    import pickle

    if not isinstance(res, bytes):
        return None
    try:
        got = pickle.loads(res)
    except Exception:
        return None
    return got if isinstance(got, dict) else None


def _infos_of_loads(client, futures: list, items: Sequence, name: str, load: dict):
    """``(held, infos, aligned, metadata)`` of the finished loads ``futures`` (keys ``(name, k)``,
    results of :func:`_load_frame_task` of ``items``): ``held`` as :func:`_holders` gives it, and
    each load's ``(info, aligned)`` and metadata (``None`` for the whole list when some load was
    not answered for: the caller then picks the metadata by :func:`_gather_each`). One
    ``client.run`` asks every worker for the entries it holds (no task, no ``who_has``: ~1 round
    trip instead of 3 and 2 tasks); a load no worker answered for (its worker lost, its frame
    moved or spilled, so its entry is gone) gets its info from :func:`_gather_each`'s per-worker
    picks, which load it again where needed."""
    n = len(futures)
    infos: list = [None] * n
    aligned: list = [None] * n
    mds: list = [None] * n
    where: Dict[int, str] = {}
    try:
        got = client.run(_stashed, name, on_error="return")
    except Exception:  # a worker lost during the call: every load takes the picks' path
        got = {}
    for w in sorted(got):
        res = _unpickle_stashed(got[w])
        if res is None:
            continue  # this worker failed to answer: its loads are missing
        for k, (info, al, md) in res.items():
            if 0 <= k < n and infos[k] is None and futures[k].key == (name, k):
                infos[k], aligned[k], mds[k], where[k] = info, al, md, w
    held: Dict[Optional[str], List[int]] = {}
    for k in sorted(where):
        held.setdefault(where[k], []).append(k)
    missing = [k for k in range(n) if infos[k] is None]
    if missing:
        sub = [futures[k] for k in missing]
        sub_held = _holders(client, sub)
        picked = _gather_each(client, sub, [items[k] for k in missing], 2, load, sub_held)
        for k, (info, al) in zip(missing, picked):
            infos[k], aligned[k] = info, al
        for w, ks in sub_held.items():
            held.setdefault(w, []).extend(missing[j] for j in ks)
        for ks in held.values():
            ks.sort()
        mds = None
    return held, infos, aligned, mds


def _holders(client, futures: list) -> Dict[Optional[str], List[int]]:
    """Worker address → indices of ``futures`` (finished) that it holds, in order; one scheduler
    round trip. A future no worker holds (its worker just died) goes under None."""
    if not futures:
        return {}
    who = client.who_has(futures)
    out: Dict[Optional[str], List[int]] = {}
    for k, f in enumerate(futures):
        addrs = who.get(f.key) or [None]
        out.setdefault(sorted(addrs)[0] if addrs[0] is not None else None, []).append(k)
    return out


def _on(w: Optional[str]) -> dict:
    """``submit`` keywords that run a task on worker ``w`` (elsewhere only if ``w`` is gone)."""
    return {} if w is None else {"workers": [w], "allow_other_workers": True}


def _gather_each(client, futures: list, items: Sequence, i: int, load: dict, held=None, gather: bool = True):
    """Item ``i`` (1 metadata, 2 ``(info, aligned)``) of every load of ``futures`` (results of
    :func:`_load_frame_task` of ``items``, keyword arguments ``load``), by one
    :func:`_loaded_each` task per worker run where the frames are (nothing moves between workers).
    With ``gather`` the values in the order of ``futures``; else ``[(indices, future of their
    values)]`` (gathered later)."""
    held = _holders(client, futures) if held is None else held
    parts = [
        (
            ks,
            client.submit(
                _loaded_each,
                i,
                load,
                [(*futures[k].key, items[k]) for k in ks],
                *[futures[k] for k in ks],
                pure=False,
                **_on(w),
            ),
        )
        for w, ks in held.items()
    ]
    return _values_in_order(client, parts, len(futures)) if gather else parts


def _values_in_order(client, parts: list, n: int) -> list:
    """The values of :func:`_gather_each`'s ``[(indices, future)]`` in index order."""
    out: list = [None] * n
    for (ks, _), vals in zip(parts, client.gather([f for _, f in parts])):
        for k, v in zip(ks, vals):
            out[k] = v
    return out


def _most_rows_on(part: List[Tuple[int, int, int]], where: Dict[int, Optional[str]]) -> Optional[str]:
    """The worker holding most of the rows of a planned partition ``[(batch, start, stop)]``
    (``where``: batch → worker), so that assembling it moves the least."""
    rows: Dict[Optional[str], int] = {}
    for b, a, z in part:
        w = where.get(b)
        rows[w] = rows.get(w, 0) + z - a
    return max(rows, key=lambda w: (rows[w], w is not None), default=None)


def _held_frame(client, futures: list, meta: pd.DataFrame, name: str, lengths: Optional[List[int]] = None):
    """The events collection of the held partition ``futures`` (keys ``(name, i)``): a
    :class:`dfanalyzer._held.HeldFrame` (``lengths``: each partition's exact row count, so that
    ``len`` runs no task); with a Dask whose expression classes differ from those it is written
    for (before 2025.1), ``from_delayed`` persisted on ``client`` (one alias task per partition
    in every computation, as before)."""
    try:
        from ._held import held_frame

        return held_frame(futures, meta, name, lengths)
    except ImportError:
        import dask.dataframe as dd

        return client.persist(dd.from_delayed(futures, meta=meta, verify_meta=False))


def _assemble(slices: List[tuple], schema: Dict[str, str]) -> pd.DataFrame:
    """One output partition: slices ``(events frame, start, stop)`` of loaded batches (the results
    of :func:`_load_frame_task`) aligned to ``schema`` and concatenated."""
    frames = [align_frame(ev if a == 0 and z == len(ev) else ev.iloc[a:z], schema) for ev, a, z in slices]
    if not frames:
        return _held(align_frame(pd.DataFrame(), schema))
    frames = _schema.unify_categories(frames)
    if len(frames) == 1:
        return _held(frames[0])
    return _held(pd.concat(frames, ignore_index=True))  # (cheap dask.sizeof, as _load_frame_task's)


def _concat_metadata(frames: List[Optional[pd.DataFrame]]) -> pd.DataFrame:
    """One metadata frame of the batches'. None stands for a batch without metadata records (the
    summary tasks skip building its empty frame, ~1 ms of pandas each)."""
    none = any(f is None for f in frames)
    frames = [f for f in frames if f is not None and len(f.columns)]
    if not frames and none:  # the empty frame those batches stand for
        from .reader import metadata_frame

        keys = ("name", "cat", "ph", "pid", "tid", "ts", "dur", "key", "value", "args")
        return metadata_frame({k: [] for k in keys})
    if not frames:
        return pd.DataFrame()
    rows = [f for f in frames if len(f)]  # (concatenating many empty frames costs more than the rows)
    frames = rows or frames[:1]
    frames = [f.astype({c: object for c, t in f.dtypes.items() if isinstance(t, pd.CategoricalDtype)}) for f in frames]
    return pd.concat(frames, ignore_index=True)


def _summary_batch_task(
    batch: tuple, index_dir, query, io_cats, compute_cats, app_io_cats, raw_metadata=False, load=None
):
    """Load one batch (core columns and the summary's aggregate columns only) and reduce it to a
    summary partial: ``(partial, metadata, info)``; never raises (see :func:`_load_task`).
    ``raw_metadata``: the metadata as the reader's dict of lists (:func:`reader.metadata_frame`
    makes the frame), not a DataFrame: what a distributed summary sends, so that its client
    needs no pandas to receive it. ``load``: returns the batch as ``_reader.load_batch`` would
    (or raises what it would raise), or None, then it is loaded here: a load started earlier
    (:meth:`DFAnalyzer._start_loads`); without a filter only."""
    if query:
        ev, md, info = _load_task(batch, index_dir, keep_args=frozenset(), query=query)
        part = _summary.Partial() if ev is None else _summary.partition_partial(ev, io_cats, compute_cats, app_io_cats)
        return part, md, info
    # no filter: the partial straight from the reader's NumPy columns, no DataFrame built
    from . import _reader, reader

    path, first, last, nbytes, nlines = batch
    try:
        r = None if load is None else load()  # (None: not started early, loaded here)
        if r is None:
            r = _reader.load_batch(os.fspath(path), int(first), int(last), index_dir, list(AGGREGATE_COLUMNS))
        cols = _summary.ReaderColumns(r)
        warnings, lost_bytes, lost_lines = reader.batch_problems(r, path)
        info = _records.BatchInfo(
            rows=cols.rows,
            schema={k: _schema.kind_of_reader(d) for k, d, _ in r["args"] if k in _summary.AGGREGATE_COLUMNS},
            skipped_lines=int(r["skipped_lines"]),
            lost_bytes=lost_bytes,
            lost_lines=lost_lines,
            unresolved_hashes=int(r["unresolved_hashes"]),
            warnings=[str(w) for w in warnings],
        )
        md = (
            None
            if not len(r["metadata"]["name"])
            else r["metadata"]
            if raw_metadata
            else reader.metadata_frame(r["metadata"])
        )
    except Exception as exc:  # reported exactly as _load_task reports it, without loading it again
        return _summary.Partial(), pd.DataFrame(), _records.BatchInfo.failed(batch, exc)
    part = _summary.partial_from_columns(cols, io_cats, compute_cats, app_io_cats)
    info.span = None if part.min_ts is None else (part.min_ts, part.max_te)  # input sanity (dfanalyzer.sanity)
    return part, md, info


def _summary_files_task(paths: List[str], index_dir, query, io_cats, compute_cats, app_io_cats, load=None):
    """:func:`_summary_batch_task` for a group of small files (:func:`_load_files_task`). Without
    a filter the partial comes straight from the reader's NumPy columns and the metadata is the
    reader's dict of lists (None for none), as for a batch: no pandas. ``load``: as for a batch
    (``_reader.load_files``' result)."""
    if query:
        ev, md, info = _load_files_task(paths, keep_args=frozenset(), query=query)
        part = _summary.Partial() if ev is None else _summary.partition_partial(ev, io_cats, compute_cats, app_io_cats)
        return part, md, info
    from . import _reader, reader

    try:
        r = None if load is None else load()  # (None: not started early, loaded here)
        if r is None:
            r = _reader.load_files([os.fspath(p) for p in paths], _args_projection(frozenset(), None))
        files = list(r["files"])
        for f in files:  # (as reader.load_files and _load_files_task complete them)
            if f["skipped_lines"]:
                f["warnings"].append(reader._skipped_warning(f["path"], f))
            if f["unresolved_hashes"]:
                f["warnings"].append(
                    "%s: %d file/host hashes without a FH/HH record" % (f["path"], f["unresolved_hashes"])
                )
            if f["error"] and not f["compressed_bytes"]:
                try:
                    f["compressed_bytes"] = os.path.getsize(f["path"])
                except OSError:
                    pass
        cols = _summary.ReaderColumns(r)
        ts, te = cols.ints("ts"), cols.ints("te")
        pos = 0
        for f in files:  # input sanity (dfanalyzer.sanity.file_spans)
            n = int(f.get("rows", 0))
            f["span"] = _sanity.span(ts[pos : pos + n], te[pos : pos + n]) if cols.rows else None
            pos += n
        info = _records.BatchInfo(
            rows=cols.rows,
            schema={k: _schema.kind_of_reader(d) for k, d, _ in r["args"] if k in _summary.AGGREGATE_COLUMNS},
            skipped_lines=int(r["skipped_lines"]),
            lost_bytes=reader.batch_problems(r, None)[1],
            files=[_records.FileStats.from_reader(f) for f in files],
            arg_counts=reader.arg_counts(r),
        )
        md = r["metadata"] if len(r["metadata"]["name"]) else None
    except Exception as exc:  # reported exactly as _load_files_task reports it
        return _summary.Partial(), pd.DataFrame(), _failed_files(paths, exc)
    return _summary.partial_from_columns(cols, io_cats, compute_cats, app_io_cats), md, info


def _summary_chunk_task(items: List[tuple], index_dir, query, io_cats, compute_cats, app_io_cats):
    """Several summary tasks in one (the distributed streamed summary): ``items`` are
    ``("batch", batch)`` or ``("files", paths)``; their partials are folded here as they are made
    (:class:`~dfanalyzer.summary.PartialFolder`), so one partial leaves the worker instead of one
    per batch. Returns ``(partial, metadata, infos)``, the lists in ``items`` order (metadata as
    the reader's dict of lists, None for none, a frame with a filter: see
    :func:`_summary_batch_task`). Raises only :class:`TaskReleased`, before an item, once the
    scheduler has released this task (its summary interrupted): what it has folded is dropped."""
    kw = dict(index_dir=index_dir, query=query, io_cats=io_cats, compute_cats=compute_cats, app_io_cats=app_io_cats)
    fold = _summary.PartialFolder()
    mds, infos = [], []
    released = _task_released_check()
    for kind, x in items:
        if released is not None and released():
            raise TaskReleased(f"summary chunk released after {len(infos)} of {len(items)} items")
        if kind == "batch":
            p, md, info = _summary_batch_task(x, raw_metadata=True, **kw)
        else:
            p, md, info = _summary_files_task(x, **kw)
        fold.add(p)
        mds.append(md)
        infos.append(info)
    return (fold.result() if items else _summary.Partial()), mds, infos


def plan_chunks(n_items: int, order: Sequence[int], threads: int, per_thread: int = 2) -> List[List[int]]:
    """Cut the items ``order`` (a permutation of ``range(n_items)``) into at most
    ``threads * per_thread`` contiguous chunks of nearly equal counts (none empty)."""
    k = max(1, min(n_items, max(1, threads) * max(1, per_thread)))
    order = list(order)
    return [
        order[n_items * j // k : n_items * (j + 1) // k] for j in range(k) if n_items * (j + 1) // k > n_items * j // k
    ]


def _submitter(client):
    """engine.reduce.tree_reduce's ``submit`` on a distributed client (impure: results kept)."""
    return lambda fn, *args: client.submit(fn, *args, pure=False)


def _summary_partial(df, io_cats, compute_cats, app_io_cats):
    return _summary.partition_partial(df, io_cats, compute_cats, app_io_cats)


def _summary_combine(*parts):
    return _summary.combine_partials(parts)


def _summary_finish(part, skipped):
    return _summary.finish(part, skipped)


# ----------------------------------------------------------------------------- the analyzer
class DFAnalyzer:
    """Load DFTracer traces matching ``file_pattern`` and analyse them with Dask.

    Parameters
    ----------
    file_pattern : str | list[str]
        Glob pattern(s) or directories of ``.pfw`` / ``.pfw.gz`` traces. A pattern that matches no
        file raises ``FileNotFoundError`` naming it.
    index_dir : str, optional
        Where the reader keeps ``.zindex`` files when a trace's directory is read-only.
    batch_size_mb : float, optional
        Target MiB of uncompressed trace text per load batch (batches are aligned to index
        checkpoints and balanced within each file; at most an equal share per worker thread).
        Honoured as given. ``None`` (default): 16 MiB (:data:`BATCH_MB`) in the thread pool, but
        a streamed :meth:`summary` in a pool of 8 threads or more loads 16-64 MiB, 8 or more per
        thread (:func:`summary_batch_bytes`: fewer GIL-held calls per event with many threads);
        on a cluster (``client``, scheduler, default client or the embedded one) the batches that :attr:`events`
        loads are bigger, as a Dask task costs more: ``total / (4 × worker threads)``, within
        16-64 MiB and the text of ``partition_size_mb`` in memory (:func:`cluster_batch_bytes`);
        a streamed :meth:`summary` on a cluster keeps 16 MiB. The size of :attr:`events`' batches is
        :attr:`batch_bytes`.
    partition_size_mb : float
        Upper bound of in-memory MiB per partition of ``events`` (default 128). Partitions are
        the loaded batches themselves (small consecutive ones packed together), cut further
        only to respect this bound or to give every worker thread a partition.
    args : sequence of str, optional
        Keep only these args keys as columns (``()`` keeps none, the 12 core columns only, plus
        the summary's ``dft_cnt``/``ret_min``/``ret_max``/``size_min``/``size_max`` of aggregated
        records when a trace has them); ``None`` (default) keeps every args key. Keys that no
        event has are not added.
    io_cats, compute_cats, app_io_cats : sequence of str
        Categories of I/O, compute and application-level I/O events for :meth:`summary`.
    client : distributed.Client, optional
        Cluster to use. Otherwise ``setup_dask_cluster(scheduler_address, scheduler_file)`` when
        a scheduler is given, else the active default client, else none: indexing and a
        streamed :meth:`summary` run in a pool of ``n_workers`` threads (default: usable cores)
        in this process, and ``setup_dask_cluster(n_workers=n_workers)`` starts on first use of
        :attr:`client` (events, views, insights, plots); :meth:`close` closes it.
    progress : bool
        Show a rich progress bar on stderr while indexing and loading.
    query : str, optional
        Keep only the events this filter selects (``"cat == 'POSIX' and ts >= 1.7e15"``,
        ``"name startswith 'read' and dur > 10ms"``): the filter grammar of
        ``dfanalyzer.filters`` (data, never code: it is parsed here, before anything is read).
        Its ``ts``/``te``/``cat``/``name`` terms skip whole checkpoints using the index's
        per-checkpoint stats; the filter is then applied to every loaded batch, so ``events``
        holds exactly the selected rows. ``dfanalyzer.filters.FilterError`` (a ``ValueError``)
        naming the position for a filter outside the grammar (here) and, when the events are
        loaded or summarised, for an args column no event read has or one whose data does not
        fit its use (text compared with a number).
    small_file_mb : float
        Files of at most this many compressed MiB (default 1) are not indexed one by one: they
        are read whole, several hundred per task, with an in-memory index
        (:func:`dfanalyzer.reader.load_files`), so that tens of thousands of per-process traces
        cost a few tasks instead of two per file. ``0`` indexes every file on its own.

    Attributes
    ----------
    events : dask.dataframe.DataFrame
        Loaded and persisted on first access. One row per non-metadata record (``docs/analyzer.md``: columns, dtypes, units µs/bytes).
    metadata : pandas.DataFrame
        The ``ph: "M"`` records (lazy; gathered on first access).
    stats : dict
        ``files``, ``events``, ``lines``, ``compressed_bytes``, ``uncompressed_bytes``,
        ``batches``, ``partitions``, ``skipped_lines``, ``lost_bytes``, ``small_files`` (files
        loaded in groups), ``duplicates`` (paths dropped as the same file as another) and
        ``per_file`` (a pandas DataFrame with one row per file).
    batch_bytes : int
        Target uncompressed bytes per batch that :attr:`events` loads (``batch_size_mb``, at
        most an equal share per worker thread).
    notes : list of str
        Messages for the user: duplicate paths dropped, indexes rejected and rebuilt or kept in
        memory (the CLI prints them on stderr).
    """

    def __init__(
        self,
        file_pattern,
        index_dir: Optional[str] = None,
        batch_size_mb: Optional[float] = None,
        io_cats: Sequence[str] = IO_CATS,
        compute_cats: Sequence[str] = COMPUTE_CATS,
        app_io_cats: Sequence[str] = APP_IO_CATS,
        partition_size_mb: float = 128,
        args: Optional[Sequence[str]] = None,
        client=None,
        n_workers: Optional[int] = None,
        scheduler_address: Optional[str] = None,
        scheduler_file: Optional[str] = None,
        force_index: bool = False,
        progress: bool = False,
        query: Optional[str] = None,
        small_file_mb: float = 1,
    ):
        self.duplicates: List[Tuple[str, str]] = []
        self.files = expand_patterns(file_pattern, self.duplicates)
        self.small_file_mb = float(small_file_mb)
        self.index_dir = os.fspath(index_dir) if index_dir is not None else None
        self.batch_size_mb = None if batch_size_mb is None else float(batch_size_mb)
        self.batch_bytes = 0  # the plan's target batch size (bytes), set by _index_and_plan
        self.partition_size_mb = float(partition_size_mb)
        self.io_cats = tuple(io_cats)
        self.compute_cats = tuple(compute_cats)
        self.app_io_cats = tuple(app_io_cats)
        self.progress = bool(progress)
        self.query = query if query != "" else None
        if self.query is not None:
            from .filters import pushdown_predicates

            self._pushdown = tuple(pushdown_predicates(self.query))  # FilterError for a bad filter
        else:
            self._pushdown = ()
        if isinstance(args, str):
            args = [args]
        self.args = None if args is None else frozenset(args)
        self._own_client = False
        self._n_workers = n_workers
        self._client = self._get_client(client, n_workers, scheduler_address, scheduler_file)
        self._pool = None  # in-process threads when no cluster is given (see _use_threads)
        self._closed = False
        self._events = None
        self._final_parts: list = []
        self._stats: Optional[dict] = None
        self._notes: List[str] = []
        self._schema: Optional[Dict[str, str]] = None
        self._metadata_futures = []
        self._metadata = None
        self._metadata_parts = None  # per batch: reader metadata dicts, frames or None (not concatenated yet)
        self._per_file: List[FileStats] = []
        self._index_and_plan(force_index)

    # -- cluster ------------------------------------------------------------------------------
    def _get_client(self, client, n_workers, scheduler_address, scheduler_file):
        """The given client, a client of the given scheduler, the active default client unless
        another analyzer started it (:data:`_OWNED_CLIENTS`), or None: then nothing is started now
        (an embedded cluster starts on first use of :attr:`client`)."""
        if client is not None:
            return client
        if scheduler_address is None and scheduler_file is None:
            import sys

            if "distributed" not in sys.modules:
                return None  # no client can exist
            from distributed import default_client

            try:
                found = default_client()
            except ValueError:
                return None
            # another analyzer's own client closes with that analyzer: taking it would break later
            return None if found in _OWNED_CLIENTS else found
        from .cluster import setup_dask_cluster

        self._own_client = True
        made = setup_dask_cluster(scheduler_address=scheduler_address, scheduler_file=scheduler_file)
        _OWNED_CLIENTS.add(made)
        return made

    @property
    def client(self):
        """The ``distributed.Client`` of the analysis. Without a given client, scheduler or
        default client, an embedded ``LocalCluster`` (``n_workers`` worker processes) is started
        on first access, i.e. only when the events are held in memory (:attr:`events`, views,
        insights, plots); :meth:`summary` alone never starts it. None after :meth:`close`."""
        if self._client is None and not self._closed:
            from .cluster import setup_dask_cluster

            self._own_client = True
            self._client = setup_dask_cluster(n_workers=self._n_workers)
            _OWNED_CLIENTS.add(self._client)
        return self._client

    @property
    def _use_threads(self) -> bool:
        """Work runs in this process's thread pool (no cluster) until a cluster exists: the C++
        reader releases the GIL while it inflates and parses, so threads use every core without
        the start-up (about 1 s) and pickling of worker processes."""
        return self._client is None

    def _thread_pool(self):
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            from .cluster import usable_cores

            self._pool = ThreadPoolExecutor(max_workers=self._n_workers or usable_cores())
        return self._pool

    def _home_ways(self) -> int:
        """Threads of :meth:`_thread_pool` (on a cluster: this node's cores, or ``n_workers``)."""
        from .cluster import usable_cores

        return self._n_workers or usable_cores()

    def close(self) -> None:
        """Release the events held on the workers; close the cluster if this analyzer started it."""
        self._closed = True
        self._stop_loads()
        self._final_parts = []
        self._events = None
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        if self._own_client and self._client is not None:
            self._client.close()
        self._client = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _wait(self, futures, what: str):
        """Wait for Dask or ``concurrent.futures`` futures, with a rich progress bar on stderr when
        ``progress``. In a Dask task (the ``--scheduler`` summary's): raises :class:`TaskReleased`,
        the futures cancelled, once the scheduler has released that task (checked every
        :data:`RELEASE_POLL_S`)."""
        if self._use_threads or not futures:
            from concurrent.futures import as_completed, wait
        else:
            from distributed import as_completed, wait

        import contextlib

        # a given client need not be the default one (distributed.wait asks default_client())
        with self._client.as_current() if not self._use_threads and futures else contextlib.nullcontext():
            if not self.progress or not futures:
                # in a task that waits for its own (the --scheduler summary): stop them and
                # itself once it is released (its client interrupted, gone or cut off)
                released = None if self._use_threads or not futures else _task_released_check()
                if released is not None:
                    _wait_unless_released(futures, released, self._client, what)
                wait(futures)
                return
            with _progress_bar(what, len(futures)) as advance:
                for _ in as_completed(futures):
                    advance()

    def _as_completed(self, futures: list, what: str):
        """Yield ``concurrent.futures`` futures as they finish, with the progress bar of
        :meth:`_wait` when ``progress``."""
        from concurrent.futures import as_completed

        if not self.progress or not futures:
            yield from as_completed(futures)
            return
        with _progress_bar(what, len(futures)) as advance:
            for f in as_completed(futures):
                yield f
                advance()

    def _map(self, fn, items: Sequence, what: str, **kwargs) -> list:
        """``[fn(item, **kwargs) for item in items]`` in parallel: on the cluster when there is
        one, else in the thread pool; results in order."""
        if not items:
            return []
        if self._use_threads and len(items) == 1 and not self.progress:
            # one item (indexing one file) here: a pool thread would add its start and the import
            # of concurrent.futures (with logging) to the start-up (docs/perf/i28-boot.md)
            return [fn(items[0], **kwargs)]
        if self._use_threads:
            pool = self._thread_pool()
            futures = [pool.submit(fn, x, **kwargs) for x in items]
            self._wait(futures, what)
            return [f.result() for f in futures]
        c = self._client
        futures = c.map(fn, items, pure=False, **kwargs)
        self._wait(futures, what)
        return c.gather(futures)

    def _threads(self) -> int:
        if self._use_threads:
            from .cluster import usable_cores

            return self._n_workers or usable_cores()
        try:
            return max(1, sum(self._client.nthreads().values()))
        except Exception:
            return 1

    # -- pipeline -----------------------------------------------------------------------------
    def _index_and_plan(self, force_index: bool) -> None:
        """Steps (0)-(3): group the small files, index the others, plan the load batches."""
        threads = self._threads()
        batch_bytes = (self.batch_size_mb if self.batch_size_mb is not None else BATCH_MB) * 2**20
        # (0) small files (at most small_file_mb compressed) are read whole in groups, one task per
        # group and no index file: per-file tasks and SQLite files would cost more than the data
        sizes = {}
        for f in self.files:
            try:
                sizes[f] = os.stat(f).st_size
            except OSError:
                sizes[f] = -1  # indexed on its own: the error is reported there
        limit = self.small_file_mb * 2**20
        small = [f for f in self.files if 0 <= sizes[f] <= limit]
        big = [f for f in self.files if not 0 <= sizes[f] <= limit]
        small_total = sum(sizes[f] for f in small)
        group_bytes = max(1, min(batch_bytes // 8, math.ceil(small_total / threads)))
        self._groups = plan_file_groups(small, [sizes[f] for f in small], group_bytes)
        self._group_bytes = [sum(sizes[f] for f in g) for g in self._groups]  # compressed (_start_loads)
        # (1) index every other file: one task per file in the thread pool; on a cluster one task
        # per worker thread (files balanced by size), as a Dask task costs more (~2-5 ms of
        # scheduler, comms and worker CPU) than indexing a file of member headers (~2 ms)
        kw = dict(index_dir=self.index_dir, force=force_index, pushdown=self._pushdown)
        if self._use_threads or len(big) <= 1:
            self._indexes = self._map(_index_task, big, "indexing", **kw)
        else:
            groups = plan_index_groups([sizes[f] for f in big], threads)
            done = self._map(_index_files_task, [[big[k] for k in g] for g in groups], "indexing", **kw)
            self._indexes = [None] * len(big)
            for g, res in zip(groups, done):
                for k, r in zip(g, res):
                    self._indexes[k] = r
        # (2)+(3) stats and checkpoint-aligned batches; no bigger than an equal share per thread
        good = [i for i in self._indexes if i["error"] is None]
        total = sum(i["uncompressed_bytes"] for i in good)
        share = max(1, math.ceil(total / threads))
        self._batches = _plan_kept_batches(good, min(batch_bytes, share))
        self.batch_bytes = int(min(batch_bytes, share))
        self._frame_batches = None  # the events' own plan when it differs (cluster, no batch_size_mb)
        if not self._use_threads:
            self._plan_frame_batches(threads)
        self._n_small = len(small)

    def _summary_batches(self) -> List[Tuple[str, int, int, int, int]]:
        """The batches of the threaded streamed summary: :attr:`_batches` when ``batch_size_mb``
        was given or with fewer than :data:`SUMMARY_MIN_THREADS` threads, else the bigger batches of :func:`summary_batch_bytes` (at most an equal share
        per thread; the same as :attr:`_batches` below 8 × 16 MiB of text per thread), the last
        round of them cut to :attr:`batch_bytes` (:func:`_taper_tail`). The events and the
        cluster keep their own plans (:attr:`batch_bytes`)."""
        threads = self._threads()
        if self.batch_size_mb is not None or threads < SUMMARY_MIN_THREADS:
            return self._batches
        good = [i for i in self._indexes if i["error"] is None]
        total = sum(i["uncompressed_bytes"] for i in good)
        size = min(summary_batch_bytes(total, threads), max(1, math.ceil(total / threads)))
        if size <= self.batch_bytes:
            return self._batches
        return _taper_tail(_plan_kept_batches(good, size), good, threads, self.batch_bytes)

    def _plan_frame_batches(self, threads: int) -> None:
        """The bigger batches that held events load on a cluster when ``batch_size_mb`` was not
        given (:func:`cluster_batch_bytes`): a task costs more than a pool thread's, so fewer,
        bigger batches. The streamed summary keeps BATCH_MB: its chunk tasks already fold many
        batches, and time slices of every file (batch k of each) collapse its partials, whole-file
        batches do not (docs/perf/i22-fbatch.md). Called at planning on a cluster, or by
        :meth:`_load` once the embedded cluster started on first use of :attr:`events`."""
        if self.batch_size_mb is not None:
            return
        good = [i for i in self._indexes if i["error"] is None]
        total = sum(i["uncompressed_bytes"] for i in good)
        share = max(1, math.ceil(total / threads))
        lines = sum(i["lines"] for i in good)
        big_bytes = min(cluster_batch_bytes(total, lines, threads, self.partition_size_mb), share)
        if big_bytes > self.batch_bytes:
            self._frame_batches = _plan_kept_batches(good, big_bytes)
            self.batch_bytes = int(big_bytes)

    def _load(self) -> None:
        """Steps (4)-(5): load every batch on the cluster and hold the partitions of
        :attr:`events` there (called on first use of the events)."""
        import uuid  # (here: platform's regexes are not the threaded summary's start-up)

        started_here = self._client is None  # the embedded cluster starts now (planned for threads)
        c = self.client
        threads = self._threads()
        if started_here and self._frame_batches is None:
            self._plan_frame_batches(threads)
        if self._frame_batches is not None:  # the bigger batches of a cluster (stats follow them)
            self._batches = self._frame_batches
        batches, groups = self._batches, self._groups
        # (4) load every batch and every group of small files on the workers; each task returns
        # its events frame under the key (name, k), its metadata and info stay on its worker
        items = list(batches) + list(groups)
        name = f"dfanalyzer-events-{uuid.uuid4().hex}"
        load = dict(index_dir=self.index_dir, keep_args=self.args, query=self.query, arg_columns=None)
        load_f = c.map(
            _load_frame_task,
            items,
            [name] * len(items),
            range(len(items)),
            key=[(name, k) for k in range(len(items))],
            pure=False,
            **load,
        )
        self._wait(load_f, "loading")
        _check_futures(load_f, items)
        held, infos, aligned, mds = _infos_of_loads(c, load_f, items, name, load) if items else ({}, [], [], [])
        _raise_failed(items, infos)
        # bounded args columns: when some batch had too many args keys, every batch gets the same
        # global choice of columns (the others in args_extra); only the batches that differ reload
        chosen = _choose_arg_columns(infos)
        if chosen is not None:
            load["arg_columns"] = chosen
            redo = [k for k, i in enumerate(infos) if _needs_reload(i, chosen)]
            rname = f"dfanalyzer-reload-{uuid.uuid4().hex}"
            new_f = [c.submit(_load_frame_task, items[k], rname, k, key=(rname, k), pure=False, **load) for k in redo]
            self._wait(new_f, "reloading")
            _check_futures(new_f, [items[k] for k in redo])
            new_infos = _gather_each(c, new_f, [items[k] for k in redo], 2, load)
            _raise_failed([items[k] for k in redo], [i for i, _ in new_infos])
            for k, f, (i, al) in zip(redo, new_f, new_infos):
                load_f[k], infos[k], aligned[k] = f, i, al
            del new_f
            held = _holders(c, load_f)
            mds = None  # (the reloaded batches' metadata is picked with the others)
        schema = union_schema([i.schema for i in infos])
        meta = make_meta(schema)
        # (5) partitions = the loaded batches (small neighbours packed, oversized ones sliced),
        # aligned to the union schema on the worker that holds them (no partition moves), held
        rows = [i.rows for i in infos]
        total = sum(rows)
        row_cap = max(1, int(self.partition_size_mb * 2**20 // (100 + 9 * len(schema))))
        target = min(max(rows, default=1), math.ceil(total / threads) if total else 1, row_cap)
        plan = plan_partitions(rows, target)
        # the partitions' keys are those the collection's graph names (_HeldFrame): no alias task
        union = list(schema.items())
        final = None
        if len(plan) == len(load_f) and all(
            f.key == (name, k) and part == [(k, 0, rows[k])] and aligned[k] and list(infos[k].schema.items()) == union
            for k, (f, part) in enumerate(zip(load_f, plan))
        ):
            final = load_f  # every batch is a partition as it was loaded: no partition task
        if mds is not None:
            # the metadata came with the infos (one client.run, no pick task); the frame is made
            # on first use of .metadata, which keeps working after close()
            self._metadata_parts = mds
        else:
            # metadata frames: one future per worker, gathered on first use of .metadata; picked
            # now, as the loads are released once assembled into partitions or reloaded
            self._metadata_futures = _gather_each(c, load_f, items, 1, load, held, gather=False)
        if final is None:
            where = {k: w for w, ks in held.items() for k in ks}
            name = f"dfanalyzer-events-{uuid.uuid4().hex}"
            final = []
            for j, part in enumerate(plan):
                w = _most_rows_on(part, where)
                slices = [(load_f[b], a, z) for b, a, z in part]
                final.append(c.submit(_assemble, slices, schema, key=(name, j), pure=False, **_on(w)))
            self._wait(final, "partitioning")
        del load_f
        self._schema = schema
        self._final_parts = final  # held partitions, in order
        lengths = [sum(z - a for _, a, z in part) for part in plan]  # exact: len() runs no task
        self._events = _held_frame(c, final, meta, name, lengths)
        self._metadata = None
        self._build_stats(infos, partitions=len(final))

    def _ensure_loaded(self) -> None:
        if self._events is None and not self._closed:
            self._load()

    @property
    def events(self):
        """The events as a persisted Dask DataFrame (loaded on first access; see the class
        docstring). None after :meth:`close`."""
        self._ensure_loaded()
        return self._events

    def partitions(self) -> list:
        """The distributed futures of the held partitions of :attr:`events`, in order (each a
        pandas DataFrame on the cluster of :attr:`client`): what an engine metric
        (``dfanalyzer.engine.reduce``) runs its partials on without building a collection graph.
        Loads the events on first use; empty after :meth:`close`."""
        self._ensure_loaded()
        return self._final_parts

    @property
    def schema(self) -> Dict[str, str]:
        """Args column → kind of :attr:`events` (``dfanalyzer.schema``)."""
        self._ensure_loaded()
        return self._schema

    @property
    def stats(self) -> dict:
        """Load statistics (class docstring); computed by the first load or streamed summary."""
        stats = self.totals
        if stats is not None and "per_file" not in stats:
            stats["per_file"] = _records.stats_frame(self._per_file)
        return stats

    @property
    def totals(self) -> dict:
        """:attr:`stats` without ``per_file`` (made without pandas: what the command line needs)."""
        if self._stats is None:
            self._ensure_loaded()
        return self._stats

    @property
    def notes(self) -> List[str]:
        """Messages for the user (class docstring)."""
        if self._stats is None:
            self._ensure_loaded()
        return self._notes

    def _build_stats(self, infos, partitions: int, batches=None) -> None:
        """:attr:`stats`, :attr:`notes` and the per-file spans from the loads' ``infos`` (one per
        batch of ``batches``, default :attr:`_batches`, then one per group of small files)."""
        if self.query is not None:  # an args column that no batch has: an error, not 0 rows
            from .filters import check_columns_seen

            check_columns_seen(self.query, [i.filter_seen for i in infos])
        indexes = self._indexes
        batches = self._batches if batches is None else batches
        per: Dict[str, FileStats] = {}
        for i in indexes:
            err = i["error"]
            keep = i.get("keep")
            fs = per[i["path"]] = _records.FileStats(
                path=i["path"],
                kind=i["kind"],
                lines=i["lines"],
                compressed_bytes=i["compressed_bytes"],
                uncompressed_bytes=i["uncompressed_bytes"],
                checkpoints=len(i["checkpoints"]),
                skipped_checkpoints=0 if keep is None else len(keep) - sum(keep),
                lost_bytes=i["compressed_bytes"] if err else 0,
                warnings=[f"{i['path']}: not indexed: {err}"] if err else [],
            )
            for lines, nbytes in i.get("skipped_lost", ()):  # lost regions a filter skipped
                fs.lost_lines += lines
                fs.lost_bytes += nbytes
            fs.warnings.extend(i.get("warnings", []))
        for b, info in zip(batches, infos):
            per[b[0]].add(info)
        for info in infos[len(batches) :]:  # groups of small files
            for f in info.files:
                per[f.path] = f
        per = {f: per[f] for f in self.files if f in per}  # in file order
        self._notes = [f"{d}: the same file as {k} (device and inode); loaded once" for d, k in self.duplicates]
        self._spans = _sanity.spans_from_infos(batches, infos)  # per-file time ranges (dfanalyzer.sanity)
        self._sanity = None
        self._notes += [w for i in indexes for w in i.get("warnings", [])]
        # per_file, the DataFrame of these, is made on first use of .stats (no pandas before)
        self._per_file = files = list(per.values())

        def total(key: str) -> int:
            return int(sum(getattr(f, key) for f in files))

        self._stats = {
            "files": len(self.files),
            "events": total("events"),
            "lines": total("lines"),
            "compressed_bytes": total("compressed_bytes"),
            "uncompressed_bytes": total("uncompressed_bytes"),
            "batches": len(batches),
            "partitions": partitions,
            "small_files": self._n_small,
            "skipped_lines": total("skipped_lines"),
            "lost_bytes": total("lost_bytes"),
            "skipped_checkpoints": total("skipped_checkpoints"),
            "lost_lines": total("lost_lines"),
            "duplicates": len(self.duplicates),
            "unresolved_hashes": total("unresolved_hashes"),
        }

    # -- accessors ----------------------------------------------------------------------------
    @property
    def metadata(self) -> pd.DataFrame:
        """The ``ph: "M"`` records of all files (pandas DataFrame, gathered once; loads the events
        first when they are not loaded yet)."""
        if self._metadata is None and self._metadata_parts is None and not self._metadata_futures:
            self._ensure_loaded()
        if self._metadata is None and self._metadata_parts is not None and not self._metadata_futures:
            parts = self._metadata_parts
            if any(isinstance(m, dict) for m in parts):  # the reader's lists (no pandas on the way)
                from .reader import metadata_frame

                parts = [metadata_frame(m) if isinstance(m, dict) else m for m in parts]
            self._metadata = _concat_metadata(parts)
            self._metadata_parts = None
        if self._metadata is None:
            parts = self._metadata_futures  # [(batch indices, future of their frames)], per worker
            n = sum(len(ks) for ks, _ in parts)
            self._metadata = _concat_metadata(_values_in_order(self.client, parts, n))
            self._metadata_futures = []
        return self._metadata

    def _metadata_for_sanity(self):
        """:attr:`metadata`, or the batches' metadata dicts while no frame is needed (a streamed
        distributed summary: :func:`dfanalyzer.sanity.commands` reads both alike)."""
        parts = self._metadata_parts
        if self._metadata is None and parts is not None and not self._metadata_futures:
            if not any(m is not None and not isinstance(m, dict) for m in parts):
                return [m for m in parts if m is not None]
        return self.metadata

    def ranks(self) -> pd.Series:
        """The MPI rank of each traced process: int64 Series named ``rank``, indexed by ``pid``,
        from the ``process_id`` metadata records (the preload records MPI_COMM_WORLD's rank there
        after ``MPI_Init``; ``dftracer.initialize_log(process_id=...)`` too). Empty when no
        process recorded one; a value that is not an integer is left out."""
        m = self.metadata
        if not len(m) or not {"name", "pid", "value"} <= set(m.columns):
            return pd.Series([], dtype="int64", name="rank", index=pd.Index([], dtype="int64", name="pid"))
        r = m[m["name"].astype(str) == "process_id"]
        v = pd.to_numeric(r["value"].astype(str), errors="coerce")
        ok = v.notna() & (v == v.round())
        out = pd.Series(v[ok].astype("int64").to_numpy(), index=pd.Index(r["pid"][ok].astype("int64"), name="pid"))
        out = out[~out.index.duplicated(keep="first")].sort_index()
        out.name = "rank"
        return out

    def skipped_files(self) -> List[dict]:
        """Files with skipped lines, lost lines/bytes or warnings: ``path``, ``skipped_lines``,
        ``lost_lines``, ``lost_bytes``, ``warnings``."""
        _ = self.totals  # (the per-file statistics, made by the first load or streamed summary)
        return [
            {
                "path": r.path,
                "skipped_lines": int(r.skipped_lines),
                "lost_bytes": int(r.lost_bytes),
                "lost_lines": int(r.lost_lines),
                "warnings": list(r.warnings),
            }
            for r in self._per_file
            if r.skipped_lines > 0 or r.lost_bytes > 0 or r.lost_lines > 0 or len(r.warnings) > 0
        ]

    def input_warnings(self) -> List[str]:
        """Warnings about the input that change what the summary can show: per file, file/host
        hashes (``fhash``/``hhash``) without a FH/HH record (their events have a null
        ``fname``/``hostname``); then the input sanity checks of :mod:`dfanalyzer.sanity` (files
        whose time ranges lie more than an hour apart, processes with different command lines),
        which are also issued once as a Python :class:`dfanalyzer.sanity.InputWarning`."""
        _ = self.totals  # (the per-file statistics, made by the first load or streamed summary)
        out = [
            f"{r.path}: {int(r.unresolved_hashes):,} file/host hashes without a FH/HH record "
            "(fname/hostname null for those events)"
            for r in self._per_file
            if r.unresolved_hashes > 0
        ]
        if getattr(self, "_sanity", None) is None:
            self._sanity = _sanity.check(getattr(self, "_spans", {}), self._metadata_for_sanity())
            _sanity.emit(self._sanity)
        return out + list(self._sanity)

    def summary(self, show: bool = True, console=None) -> _summary.Summary:
        """Compute the paper's Figure 6 summary (exact; per-batch partials merged by a tree reduction).

        When :attr:`events` is not loaded yet, the summary is streamed: every batch is loaded,
        reduced to its partial and dropped (no frame is held, no cluster is started when none
        was given); otherwise it runs over the held partitions.

        Prints the rich panel when ``show`` (to ``console`` or a new ``rich.console.Console``)
        and returns a :class:`~dfanalyzer.summary.Summary`; semantics in ``docs/analyzer.md``.
        """
        io, cp, app = self.io_cats, self.compute_cats, self.app_io_cats
        if self._events is None and not self._closed:
            part = self._streamed_partial(io, cp, app)
            try:
                # (big unions measured window by window on the pool, not in this thread; on a
                # cluster, the chunks' unions held unmerged, on this node's cores)
                if self._use_threads:
                    pool = dict(pool=self._pool, ways=self._threads())
                else:
                    pool = dict(pool=self._thread_pool(), ways=self._home_ways())
                result = _summary.finish(part, self.skipped_files(), **pool)
            finally:
                for sp in part.spilled:  # unions the fold moved to disk (PartialFolder)
                    sp.cleanup()
        else:
            c = self.client
            # futures straight on the held partitions: no collection graph to build or optimise
            leaves = [c.submit(_summary_partial, f, io, cp, app, pure=False) for f in self.partitions()]
            root = tree_reduce(leaves, _summary_combine, submit=_submitter(c)) if leaves else _summary.Partial()
            result = c.submit(_summary_finish, root, self.skipped_files(), pure=False).result()
        result.warnings = self.input_warnings()
        if show:
            if console is None:
                from rich.console import Console

                console = Console()
            console.print(result.panel())
        return result

    def _streamed_partial(self, io, cp, app) -> _summary.Partial:
        """The summary's partial state without holding the events: one task per batch (and per
        group of small files) loads it, keeps the core columns, reduces it to a
        :class:`~dfanalyzer.summary.Partial` and drops it; the partials are merged by a tree
        reduction. Also fills :attr:`stats` and :attr:`metadata`. Peak memory: one batch per
        thread plus the partials (histograms; interval unions up to ``SPILL_INTERVALS`` in
        threads, the rest spilled to a temporary file, :class:`~dfanalyzer.summary.PartialFolder`),
        and at the start the batches loaded early (:meth:`_start_loads`)."""
        kw = dict(index_dir=self.index_dir, query=self.query, io_cats=io, compute_cats=cp, app_io_cats=app)
        if self._use_threads:
            # every pool thread folds the partials of the batches it runs (as the cluster's chunk
            # tasks do), so this thread only combines one partial per pool thread at the end; the
            # batches are taken in turns per file (batch 0 of every file, then batch 1, ...):
            # processes of one job overlap in time, so partials folded together collapse
            # (bigger batches than the events' when batch_size_mb is not given: a lower GIL-held
            # share per event, docs/perf/i28-batch.md)
            batches = self._summary_batches()
            items = list(batches) + list(self._groups)
            order = _round_robin_by_file(batches) + list(range(len(batches), len(items)))
            nb = len(batches)
            # the first loads start now, in native threads, while NumPy and the summary's modules
            # are imported below (serial work that would otherwise delay the first batch)
            started = self._start_loads(items, order, nb) if self.query is None else {}

            def run(i):
                load = started.get(i)
                if i < nb:  # (metadata as the reader's lists: no pandas, the frame on first use)
                    return _summary_batch_task(items[i], raw_metadata=True, load=load, **kw)
                return _summary_files_task(items[i], load=load, **kw)

            try:
                # memory bound: interval unions past SPILL_INTERVALS (all threads together) go to disk
                stream = _summary.fold_in_threads(
                    self._thread_pool(), self._threads(), order, run, spill_intervals=_summary.SPILL_INTERVALS
                )
            except BaseException:  # (Ctrl-C during the imports: the native loads stop too)
                self._stop_loads()
                raise
            metadata, infos = [None] * len(items), [None] * len(items)
            with _progress_bar("loading", len(items)) if self.progress and items else contextlib.nullcontext() as adv:
                try:
                    while True:
                        i, (metadata[i], infos[i]) = next(stream)
                        _raise_failed([items[i]], [infos[i]])
                        if adv is not None:
                            adv()
                except StopIteration as end:
                    part = end.value
                except _summary.ItemFailed as failed:
                    exc = failed.exc
                    if isinstance(exc, ValueError) or not isinstance(exc, Exception):  # a FilterError (the
                        raise exc from None  # user's filter, not a failed load), KeyboardInterrupt...
                    msg = f"{_task_name(items[failed.item])}: load failed: {type(exc).__name__}: {exc}"
                    raise _records.LoadError(msg) from exc
                finally:
                    stream.close()
                    self._stop_loads()
            # the frame is made on first use of .metadata (the summary needs no pandas)
            self._metadata, self._metadata_parts = None, metadata
        else:
            c = self._client
            # a few tasks per worker thread, each folding its batches' partials itself: per-batch
            # tasks cost the scheduler ~4 tasks per batch and ship every batch's partial (interval
            # unions of ~1 MB per 16 MiB batch) to another worker. Batches are taken in turns per
            # file (as for the threads), so a chunk is one time slice of every process and its
            # unions collapse before they travel.
            batches = self._batches
            items = [("batch", b) for b in batches] + [("files", g) for g in self._groups]
            order = _round_robin_by_file(self._batches) + list(range(len(self._batches), len(items)))
            chunks = plan_chunks(len(items), order, self._threads())
            futs = [c.submit(_summary_chunk_task, [items[i] for i in ch], pure=False, **kw) for ch in chunks]
            # (waited for before the gather: Ctrl-C in a gather leaves asyncio's "Task exception
            # was never retrieved" on stderr when the client closes; in a wait it does not)
            self._wait(futs, "loading")
            raw = [x for _, x in items]  # the batch tuple or the group's paths (LoadError names it)
            _check_futures(futs, [raw[ch[0]] for ch in chunks])
            # The chunks' results (a few collapsed partials, their infos and metadata) are
            # gathered at once: no pick or combine tasks, no second gather. Their unions are
            # not merged here (one thread, after the gather: a serial step that grows with the
            # events, docs/perf/i29-fold.md) but held as they came, and finish() merges and
            # measures them window by window on this node's cores (no merged copy is made)
            results = c.gather(futs)
            del futs
            infos, mds, parts = [None] * len(items), [None] * len(items), []
            for ch, (p, md, inf) in zip(chunks, results):
                for i, x, m in zip(ch, inf, md):  # back to batch order
                    infos[i], mds[i] = x, m
                parts.append(p)
            del results
            _raise_failed(raw, infos)
            # the frame is made on first use of .metadata (the client needs no pandas before)
            self._metadata, self._metadata_parts = None, mds
            part = _summary.hold_unions(parts)
        self._build_stats(infos, partitions=0, batches=batches)
        return part

    def _start_loads(self, items: list, order: List[int], nb: int) -> dict:
        """Start loading the first items of ``order`` (``items``: the streamed summary's
        batches, then its groups of small files, ``nb`` batches) in native threads
        (``_reader.Prefetch``: no GIL, no NumPy), one per pool thread, so that they load while
        this thread imports NumPy and the summary's modules; they stop at the pool's first
        task (the hand-over) or after ``PREFETCH_PER_THREAD`` items per thread; the items started
        are the first of ``order`` whose text (a batch's uncompressed bytes; a group's compressed
        bytes × :data:`GROUP_TEXT_PER_COMPRESSED_BYTE`) sums to at most ``threads ×``
        :data:`PREFETCH_MB_PER_THREAD` MiB, the first ``threads`` items always (:func:`_prefetch_count`). Returns
        ``{item: load}``, ``load()`` giving what ``_reader.load_batch`` / ``load_files`` would
        give (once), or None for an item no native thread started (the pool thread loads it)."""
        from . import _reader

        threads = self._threads()
        text = [
            int(items[i][3]) if i < nb else GROUP_TEXT_PER_COMPRESSED_BYTE * self._group_bytes[i - nb] for i in order
        ]
        first = list(order[: _prefetch_count(text, threads)])
        if not first:
            return {}
        batch_cols, files_cols = list(AGGREGATE_COLUMNS), _args_projection(frozenset(), None)
        work = [
            ("batch", os.fspath(items[i][0]), int(items[i][1]), int(items[i][2]), self.index_dir, batch_cols)
            if i < nb
            else ("files", [os.fspath(p) for p in items[i]], files_cols)
            for i in first
        ]
        self._prefetch = _reader.Prefetch(work, threads)
        take = self._prefetch.take
        return {i: (lambda k=k: take(k)) for k, i in enumerate(first)}

    def _stop_loads(self) -> None:
        """Stop the native loads of :meth:`_start_loads` and free what was not taken."""
        pf, self._prefetch = getattr(self, "_prefetch", None), None
        if pf is not None:
            pf.close()

    def plot_timeline(self, outdir: str, bins: int = 100) -> List[str]:
        """Save the paper's Figure 8a/8b timelines as PNGs in ``outdir``; returns their paths.

        See :func:`dfanalyzer.plots.plot_timeline`.
        """
        from . import plots

        return plots.plot_timeline(self, outdir, bins=bins)

    # -- views (dfanalyzer.views; definitions in docs/analyzer.md "Views") -------------------
    def functions(self) -> pd.DataFrame:
        """Per I/O function metrics (:func:`dfanalyzer.views.function_metrics`)."""
        from . import views

        return views.function_metrics(self.events, self.io_cats, client=self.client)

    @property
    def files(self) -> "TraceFiles":
        """The trace paths (a list); calling it, ``analyzer.files()``, gives the per file view
        (:func:`dfanalyzer.views.file_view`)."""
        return self._files

    @files.setter
    def files(self, paths) -> None:
        import weakref

        self._files = TraceFiles(paths, weakref.ref(self))

    def file_view(self) -> pd.DataFrame:
        """Per file metrics (:func:`dfanalyzer.views.file_view`); same as ``analyzer.files()``."""
        from . import views

        return views.file_view(self.events, self.io_cats, client=self.client)

    def processes(self) -> pd.DataFrame:
        """Per process metrics with parents from the metadata (:func:`dfanalyzer.views.process_view`)."""
        from . import views

        return views.process_view(
            self.events,
            self.io_cats,
            self.compute_cats,
            self.app_io_cats,
            parents=views.parents_from_metadata(self.metadata),
            client=self.client,
        )

    def time_windows(self, bins: Optional[int] = None, window=None) -> pd.DataFrame:
        """Per time window metrics (:func:`dfanalyzer.views.time_view`); ``window`` in seconds
        (a number) or a string like ``"1s"``, ``"250ms"``, ``"500us"``."""
        from . import views

        return views.time_view(
            self.events,
            bins=bins,
            window_us=_window_us(window),
            io_cats=self.io_cats,
            compute_cats=self.compute_cats,
            client=self.client,
        )

    def heatmap(self, bins: Optional[int] = None, window=None) -> pd.DataFrame:
        """Process x time I/O heat map (:func:`dfanalyzer.views.heatmap`)."""
        from . import views

        return views.heatmap(
            self.events, bins=bins, window_us=_window_us(window), io_cats=self.io_cats, client=self.client
        )

    def by_tag(self, key: str) -> pd.DataFrame:
        """Metrics per value of an args key such as ``epoch`` or ``step`` (:func:`dfanalyzer.views.tag_view`)."""
        from . import views

        return views.tag_view(self.events, key, self.io_cats, self.compute_cats, self.app_io_cats, client=self.client)

    def epochs(self) -> pd.DataFrame:
        """Per epoch time split from the tracer's epoch/train/fetch events (:func:`dfanalyzer.views.epoch_view`)."""
        from . import views

        return views.epoch_view(self.events, self.io_cats, client=self.client)

    def layers(self, mapping: Optional[Dict[str, Optional[str]]] = None) -> pd.DataFrame:
        """Time split per layer (:func:`dfanalyzer.views.layer_view`)."""
        from . import views

        return views.layer_view(self.events, mapping, client=self.client)

    def nested_layers(self) -> pd.DataFrame:
        """HDF5 > MPI-IO > POSIX time and bytes (:func:`dfanalyzer.views.nested_layer_view`)."""
        from . import views

        return views.nested_layer_view(self.events, client=self.client)

    def compare(self, other, threshold: Optional[float] = None) -> pd.DataFrame:
        """Signed deltas and ratios of every summary and per-function metric, ``other`` vs this
        run as the baseline (:func:`dfanalyzer.views.compare`)."""
        from . import views

        return views.compare(self, other, threshold=threshold)

    # -- insights and report (dfanalyzer.insights, dfanalyzer.report) --------------------------
    def insights(self, config=None, show: bool = True, console=None):
        """Run the insight rules (Drishti's POSIX/STDIO set and the AI-workflow rules) on the cluster.

        ``config``: ``None`` (the shipped ``dfanalyzer/insights.yaml``), a YAML path or a dict
        merged over it (unknown keys raise ``ValueError``). Prints the rich panels when ``show``
        and returns a :class:`~dfanalyzer.insights.InsightReport`; rules in ``docs/analyzer.md``.
        """
        from . import insights as _insights

        result = _insights.compute_insights(self, config)
        result.warnings = self.input_warnings()  # input sanity (dfanalyzer.sanity), shown in the panel
        if show:
            if console is None:
                from rich.console import Console

                console = Console()
            console.print(result.panel())
        return result

    def report(self, path: str, config=None, top: int = 20, bins: int = 50, title: Optional[str] = None) -> str:
        """Write one self-contained HTML report (summary, insights, layers, views, plots as
        embedded PNGs; no script, no external URL) to ``path``; returns ``path``.

        See :func:`dfanalyzer.report.write_report`.
        """
        from . import report as _report

        return _report.write_report(self, path, config=config, top=top, bins=bins, title=title)

    def __repr__(self) -> str:
        s = self._stats
        if not s:
            return f"DFAnalyzer(files={len(self.files)})"
        return (
            f"DFAnalyzer(files={s['files']}, events={s['events']:,}, partitions={s['partitions']}, "
            f"skipped_lines={s['skipped_lines']}, lost_bytes={s['lost_bytes']})"
        )


class TraceFiles(list):
    """``DFAnalyzer.files``: the absolute trace paths, in load order (a plain list), which can
    also be called: ``analyzer.files()`` is ``analyzer.file_view()``, the per file view."""

    def __init__(self, paths=(), owner=None):
        super().__init__(paths)
        self._owner = owner

    def __call__(self) -> pd.DataFrame:
        an = self._owner() if self._owner is not None else None
        if an is None:
            raise TypeError("this file list belongs to no analyzer")
        return an.file_view()

    def __reduce__(self):  # pickled (e.g. sent to Dask workers) as the plain list of paths
        return (list, (list(self),))


_WINDOW_UNITS = {"us": 1, "µs": 1, "ms": 1_000, "s": 1_000_000, "m": 60_000_000, "min": 60_000_000, "h": 3_600_000_000}


def _window_us(window) -> Optional[int]:
    """A time window as whole µs: a number is seconds; a string is ``<number><unit>`` with unit
    ``us``, ``ms``, ``s``, ``min`` or ``h`` (``"1s"``, ``"250ms"``). Raises ``ValueError``."""
    if window is None:
        return None
    if isinstance(window, (int, float)):
        us = float(window) * 1e6
    else:
        import re

        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?\d+)?)\s*(us|µs|ms|s|min|m|h)?\s*", str(window))
        if not m:
            raise ValueError(f"bad time window {window!r}: use e.g. '1s', '250ms', '500us'")
        us = float(m.group(1)) * _WINDOW_UNITS[m.group(2) or "s"]
    if not us >= 1:
        raise ValueError(f"time window {window!r} is shorter than 1 µs")
    return int(round(us))
