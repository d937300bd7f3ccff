"""The one file-position model of the engine: where each read/write request lands in its file.

Requests (the read/write families of :mod:`.vocabulary`) of the ``pread`` family carry their
``offset``. For the others (``read``, ``write``, ``readv``, ``fread``, ``fwrite``) the position
is reconstructed per ``(hostname, pid, fd)`` stream in ``ts`` order:

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
``(hostname, pid, file, direction)`` stream in ``ts`` order: a request that starts before the
previous one ended is random.
"""

from __future__ import annotations

from typing import Iterable, List, Optional

import numpy as np
import pandas as pd

from .vocabulary import FSEEK_NAMES, LSEEK_NAMES, OPEN_NAMES, POSITIONAL_NAMES, READ_NAMES, TELL_NAMES, WRITE_NAMES

__all__ = ["SEEK_SET", "SEEK_CUR", "SEEK_END", "place_requests", "stream_carry", "stream_positions"]

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
    s = s.sort_values(["host", "pid", "fd", "ts", "order"], kind="stable")
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
