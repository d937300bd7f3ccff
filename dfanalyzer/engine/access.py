"""The one file-position model of the engine: where each read/write request lands in its file.

Requests (the read/write families of :mod:`.vocabulary`) of the ``pread`` family carry their
``offset``. For the others (``read``, ``write``, ``readv``, ``fread``, ``fwrite``) the position
is reconstructed per ``(hostname, pid, fd)`` stream in trace (file, line) order:

* an *open* sets it to 0 (its ``fd`` is the call's result);
* ``lseek`` sets it to its result (any ``whence``: the result is the new position);
* ``fseek``/``fseeko`` with ``SEEK_SET`` (0) sets it to ``offset``; with ``SEEK_CUR`` (1) it
  *moves* it by ``offset`` and so keeps it known when it was known (numpy's
  ``fseeko64(f, 0, SEEK_CUR)`` before its ``fread``s); with ``SEEK_END`` (2) it is unknown
  (the file's size is not in the trace); a failed seek (``ret != 0``) makes it unknown;
* ``ftell``/``ftello`` with a result >= 0 sets it to that result;
* every non-positional read/write advances it by the bytes moved.

Positions carry across partitions: each partition reports, per stream, where it leaves it
(:func:`stream_carry`), a prefix scan in partition order gives each partition its incoming
positions (:func:`stream_positions`), and :func:`place_requests` uses them. A request whose
position stays unknown is *unplaced*; callers count its bytes (insights:
``unplaced_read_bytes``). Random vs sequential is then decided per
``(hostname, pid, file, direction)`` stream in trace order: a request that starts before the
previous one ended is random. Trace order, not ``ts``: the partitions follow it, so a stream
crossing a cut joins exactly, whatever the batch size (threads sharing a stream write records
whose ``ts`` order differs from their line order).

**Steps.** One classification (:func:`step_kinds`) of a *step*, the move from one request
``[start, end)`` of a stream to the next: *random* when the next request starts before the
previous one ended, else *sequential*; *consecutive* when it starts exactly where the previous one
ended. Two orderings of the requests into streams use it:

* ``order="stream"`` (insights, ``random_reads``/``random_writes``): placed requests (the
  positions of :func:`place_requests`) per ``(hostname, pid, file, direction)`` in trace order;
* ``order="thread"`` (the files view's ``consecutive``/``sequential``/``random``,
  :func:`thread_steps`): requests that carry an ``offset`` (and a ``size``; not aggregated
  records), per ``(file, hostname, pid, tid)`` in trace (row) order, reads and writes together.

Both carry a stream's first start and last end across partitions, and the join of two consecutive
partitions adds one step per stream present in both (:func:`join_step_ends`).
"""

from __future__ import annotations

from typing import Iterable, List, Optional

import numpy as np
import pandas as pd

from .vocabulary import FSEEK_NAMES, LSEEK_NAMES, OPEN_NAMES, POSITIONAL_NAMES, READ_NAMES, TELL_NAMES, WRITE_NAMES

__all__ = [
    "SEEK_SET",
    "SEEK_CUR",
    "SEEK_END",
    "place_requests",
    "stream_carry",
    "stream_positions",
    "step_kinds",
    "thread_steps",
    "join_step_ends",
]

SEEK_SET, SEEK_CUR, SEEK_END = 0, 1, 2


def _num(io: pd.DataFrame, col: str) -> np.ndarray:
    if col not in io.columns:
        return np.full(len(io), np.nan)
    return pd.to_numeric(io[col].astype(object), errors="coerce").to_numpy(dtype=float)


def place_requests(io: pd.DataFrame, incoming: Optional[dict] = None, carry: Optional[dict] = None) -> pd.Series:
    """File offset (bytes, float with NaN = unknown) of each read/write row of ``io`` (I/O events
    of one partition in trace order; columns ``name``, ``hostname``, ``pid``, ``ts``, ``size``,
    ``offset`` and, when present, ``fd``, ``ret``, ``whence``).

    Requests before the first anchor of a stream in this partition start from
    ``incoming[(host, pid, fd)]`` (see :func:`stream_positions`), else stay unknown. When
    ``carry`` is a dict it receives, per stream of this partition, ``(anchored, value)``: the
    absolute end position (NaN if unknown) when the stream has an anchor here, else the bytes it
    moved (a delta to add to the incoming position).
    """
    name = io["name"].astype(object)
    rw = name.isin(READ_NAMES | WRITE_NAMES).to_numpy()
    pos = pd.Series(np.nan, index=io.index, dtype=float)
    is_pos = name.isin(POSITIONAL_NAMES).to_numpy()
    positional = is_pos & io["offset"].notna().to_numpy()
    pos[positional] = io["offset"][positional].astype(float)
    if "fd" not in io.columns:
        return pos
    anchor_open = name.isin(OPEN_NAMES).to_numpy()
    anchor_lseek = name.isin(LSEEK_NAMES).to_numpy()
    is_fseek = name.isin(FSEEK_NAMES).to_numpy()
    anchor_tell = name.isin(TELL_NAMES).to_numpy()
    fd = _num(io, "fd")
    ret = _num(io, "ret")
    whence = _num(io, "whence")
    off = io["offset"].to_numpy(dtype=float, na_value=np.nan)
    fd = np.where(anchor_open & np.isnan(fd), ret, fd)  # open: the new fd is the result
    # fseek(SEEK_CUR) that succeeded with a known offset moves the position; other fseeks set it
    seek_cur = is_fseek & (whence == SEEK_CUR) & (ret == 0) & ~np.isnan(off)
    anchor_fseek = is_fseek & ~seek_cur
    moving = rw & ~is_pos
    anchors = anchor_open | anchor_lseek | anchor_fseek | anchor_tell
    rel = (moving | anchors | seek_cur) & ~np.isnan(fd)
    if not (moving & rel).any() and carry is None:
        return pos
    s = io.loc[rel, ["hostname", "pid", "ts"]].copy()
    s["fd"] = fd[rel]
    s["order"] = np.arange(len(s))
    base = np.full(len(s), np.nan)
    r_ret, r_off, r_wh = ret[rel], off[rel], whence[rel]
    base[anchor_open[rel]] = 0.0
    lk = anchor_lseek[rel] | anchor_tell[rel]
    base[lk] = np.where(r_ret[lk] >= 0, r_ret[lk], np.nan)
    fk = anchor_fseek[rel]
    base[fk] = np.where((r_wh[fk] == SEEK_SET) & (r_ret[fk] == 0), r_off[fk], np.nan)
    size = io.loc[rel, "size"].to_numpy(dtype=float, na_value=0.0)
    s["move"] = np.where(moving[rel], size, np.where(seek_cur[rel], np.nan_to_num(r_off), 0.0))
    s["base"] = base
    s["anchor"] = anchors[rel]
    s["request"] = moving[rel]
    s["host"] = s["hostname"].astype(object)
    # trace order (the partition's rows are in file, line order; partitions follow it), not ts:
    # a stream shared by threads has records whose ts order differs from their line order, and a
    # ts sort within partitions would make positions depend on where the partitions are cut
    s = s.sort_values(["host", "pid", "fd", "order"], kind="stable")
    stream = (s["host"].ne(s["host"].shift()) | s["pid"].ne(s["pid"].shift()) | s["fd"].ne(s["fd"].shift())).to_numpy()
    anchor = s["anchor"].to_numpy(dtype=bool)
    seg = np.cumsum(stream | anchor)  # 1, 2, ...: a segment starts at a new stream or an anchor
    first = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])[seg - 1]  # first row of each row's segment
    sbase = s["base"].to_numpy()
    keys = list(zip(s["host"].to_numpy(), s["pid"].to_numpy(), s["fd"].to_numpy()))
    # a stream's first segment without an anchor continues from the earlier partitions
    start_in = (
        np.array([np.nan if incoming is None else incoming.get(k, np.nan) for k in keys]) if len(s) else np.zeros(0)
    )
    b = np.where(anchor[first], sbase[first], np.where(stream[first], start_in[first], np.nan))
    move = s["move"].to_numpy()
    cs = np.cumsum(move)
    before = cs - move - (cs[first] - move[first])  # moved earlier in the segment
    keep = s["request"].to_numpy(dtype=bool)
    pos.loc[s.index.to_numpy()[keep]] = (b + before)[keep]
    if carry is not None and len(s):
        for i in np.flatnonzero(np.r_[stream[1:], True]):  # last row of each stream
            moved = before[i] + move[i]  # moved in the stream's last segment
            # the last segment starts at the stream's last anchor, or at its start if it has none
            carry[keys[i]] = (True, sbase[first[i]] + moved) if anchor[first[i]] else (False, moved)
    return pos


def stream_carry(io: pd.DataFrame) -> dict:
    """Per ``(host, pid, fd)`` stream of one partition's I/O events, where it leaves the position
    (see :func:`place_requests`'s ``carry``)."""
    carry: dict = {}
    if len(io):
        place_requests(io, None, carry)
    return carry


def stream_positions(carries: Iterable[dict]) -> List[dict]:
    """Prefix scan over the partitions' stream carries (in partition order): per partition, the
    file position (bytes) each ``(host, pid, fd)`` stream has when the partition begins."""
    pos: dict = {}
    out = []
    for c in carries:
        out.append(dict(pos))
        for k, (anchored, v) in c.items():
            pos[k] = v if anchored else pos.get(k, np.nan) + v
    return out


# ----------------------------------------------------------------------------- steps
def step_kinds(start, prev_end):
    """Classify steps: ``(consecutive, sequential, random)`` bool arrays for requests starting at
    ``start`` (bytes) after a request of the same stream that ended at ``prev_end`` (bytes).
    Random when it starts before the previous one ended; consecutive ones are also sequential."""
    start = np.asarray(start)
    prev_end = np.asarray(prev_end)
    fwd = start >= prev_end
    return start == prev_end, fwd, ~fwd


def thread_steps(group, proc, proc_keys, tid, row, start, end, k: int):
    """Steps of the ``order="thread"`` streams of one partition.

    ``group`` (int codes 0..k-1, e.g. a file), ``proc`` (int codes into ``proc_keys``, the
    ``(hostname, pid)`` of each request), ``tid``, ``row`` (trace order) and ``start``/``end`` (bytes) describe the requests
    that carry an offset. Streams are ``(group, proc, tid)``, each in ``row`` order. Returns
    ``(consecutive, sequential, random)`` (int64 arrays of length ``k``: steps per group) and,
    per group, a dict ``(proc, tid) -> (first start, last end)`` for :func:`join_step_ends`.
    """
    consec = np.zeros(k, dtype=np.int64)
    seq = np.zeros(k, dtype=np.int64)
    rand = np.zeros(k, dtype=np.int64)
    ends: List[dict] = [dict() for _ in range(k)]
    group = np.asarray(group)
    if group.size == 0:
        return consec, seq, rand, ends
    proc, tid, row, start, end = (np.asarray(x) for x in (proc, tid, row, start, end))
    ao = np.lexsort((row, tid, proc, group))
    g2, p2, t2, o2, e2 = group[ao], proc[ao], tid[ao], start[ao], end[ao]
    same = (g2[1:] == g2[:-1]) & (p2[1:] == p2[:-1]) & (t2[1:] == t2[:-1])
    step_g = g2[1:][same]
    c, f, r = step_kinds(o2[1:][same], e2[:-1][same])
    consec = np.bincount(step_g[c], minlength=k).astype(np.int64)
    seq = np.bincount(step_g[f], minlength=k).astype(np.int64)
    rand = np.bincount(step_g[r], minlength=k).astype(np.int64)
    starts = np.flatnonzero(np.r_[True, ~same])
    stops = np.r_[starts[1:], g2.size] - 1
    for a, z in zip(starts.tolist(), stops.tolist()):
        ends[int(g2[a])][(proc_keys[int(p2[a])], int(t2[a]))] = (int(o2[a]), int(e2[z]))
    return consec, seq, rand, ends


def join_step_ends(acc: dict, ends: dict):
    """Append the stream boundaries ``ends`` of a later partition to ``acc`` (both
    ``stream -> (first start, last end)``, updated in place). Returns the
    ``(consecutive, sequential, random)`` step counts of the joins (a stream in both)."""
    consec = seq = rand = 0
    for t, (first, last) in ends.items():
        if t in acc:
            f0, l0 = acc[t]
            c, s, r = step_kinds(first, l0)
            consec += int(c)
            seq += int(s)
            rand += int(r)
            acc[t] = (f0, last)
        else:
            acc[t] = (first, last)
    return consec, seq, rand
