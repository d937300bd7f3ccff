"""What an event is, and the one columns protocol every analysis reads it through.

An **event** is a record with ``ph`` ``"X"`` (one complete call) or ``"A"`` (an aggregated
record of DFTracer 2.x: ``dft_cnt`` calls of one function by one thread in one interval, its
``dur`` the calls' summed µs) whose category is not the tracer's own (``TRACER_CATEGORY``: the
process/host/file metadata records). Every count of calls weighs an event by :func:`calls`:
``dft_cnt`` for an aggregated record (1 when absent or < 1), else 1. Metadata (``ph`` ``"M"``)
and instant (``"i"``) records are not events.

Columns come from a pandas partition (:class:`FrameColumns`) or straight from a reader batch
(:class:`ReaderColumns`, NumPy views of the C++ buffers, no DataFrame built); both answer
``codes``, ``ints``, ``sizes`` and ``numeric``.
"""

from __future__ import annotations

from typing import Iterable, Optional, Tuple

import numpy as np

from .._lazy import pandas as pd  # (imported on first use: dfanalyzer._lazy)
from .vocabulary import AGGREGATE_COLUMNS, COPY_NAMES, TRACER_CATEGORY  # (AGGREGATE_COLUMNS re-exported)

__all__ = [
    "EVENT_PHASES",
    "AGGREGATE_COLUMNS",
    "codes",
    "lut",
    "event_mask",
    "calls",
    "FrameColumns",
    "ReaderColumns",
    "copy_sides",
]

EVENT_PHASES = ("X", "A")  # complete events and aggregated records


def codes(col: pd.Series) -> Tuple[np.ndarray, list]:
    """Integer codes (int64, -1 = null) and their values as str, for a categorical or text column."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        return col.cat.codes.to_numpy().astype(np.int64), [str(x) for x in col.cat.categories]
    codes, uniq = pd.factorize(col.to_numpy(dtype=object))
    return codes.astype(np.int64), [str(x) for x in uniq]


def lut(cats: list, values: Iterable[str]) -> np.ndarray:
    """Boolean lookup table indexed by code + 1 (index 0 is the null code -1): category in ``values``."""
    want = set(values)
    return np.array([False] + [c in want for c in cats], dtype=bool)


class FrameColumns:
    """The columns :func:`partial_from_columns` reads, taken from a pandas DataFrame of events."""

    def __init__(self, df: pd.DataFrame):
        self.df = df
        self.rows = len(df)

    def codes(self, key: str) -> Tuple[np.ndarray, list]:
        """Integer codes (int64, -1 = null) and their str values of a categorical/text column."""
        return codes(self.df[key])

    def ints(self, key: str) -> np.ndarray:
        """A non-null integer column as int64."""
        return self.df[key].to_numpy(dtype=np.int64)

    def sizes(self) -> Tuple[np.ndarray, np.ndarray]:
        """``size`` as int64 (0 where null) and its validity mask (bool)."""
        size = self.df["size"]
        has = size.notna().to_numpy(dtype=bool)
        if size.dtype.kind == "f":
            return size.to_numpy(dtype=np.float64, na_value=0).astype(np.int64), has
        return size.to_numpy(dtype=np.int64, na_value=0), has

    def numeric(self, key: str, fill: int) -> Optional[np.ndarray]:
        """Args column ``key`` as float64 (``fill`` where null or not a number), None if absent."""
        if key not in self.df.columns:
            return None
        col = pd.to_numeric(self.df[key], errors="coerce")
        return col.fillna(fill).to_numpy(dtype=np.float64)


class ReaderColumns:
    """The same columns straight from a ``dfanalyzer._reader.load_batch`` result (NumPy views of
    the C++ buffers: no DataFrame is built). Args columns other than :data:`AGGREGATE_COLUMNS`
    are never touched (the streamed summary asks the reader not to build them: ``columns=``)."""

    def __init__(self, r: dict):
        self.core = r["core"]
        self.args = {key: (dtype, payload) for key, dtype, payload in r["args"] if key in AGGREGATE_COLUMNS}
        self.rows = int(r["rows"])

    def codes(self, key: str) -> Tuple[np.ndarray, list]:
        codes, cats = self.core[key]
        return codes.astype(np.int64), list(cats)

    def ints(self, key: str) -> np.ndarray:
        return np.asarray(self.core[key], dtype=np.int64)

    def sizes(self) -> Tuple[np.ndarray, np.ndarray]:
        values, null = self.core["size"]
        return np.asarray(values, dtype=np.int64), ~np.asarray(null, dtype=bool)

    def numeric(self, key: str, fill: int) -> Optional[np.ndarray]:
        got = self.args.get(key)
        if got is None:
            return None
        dtype, payload = got
        if dtype == "string":  # numbers written as text: pandas' coercion, as FrameColumns
            from ..schema import categorical

            col = pd.to_numeric(pd.Series(categorical(*payload)), errors="coerce")
            return col.fillna(fill).to_numpy(dtype=np.float64)
        values, null = payload
        return np.where(null, np.float64(fill), values.astype(np.float64))


def event_mask(ph: np.ndarray, ph_cats: list, cat: np.ndarray, cat_cats: list) -> np.ndarray:
    """Rows that are events, from the ``ph`` and ``cat`` codes (-1 = null) and their values."""
    return lut(ph_cats, EVENT_PHASES)[ph + 1] & ~lut(cat_cats, (TRACER_CATEGORY,))[cat + 1]


def aggregated(ph: np.ndarray, ph_cats: list) -> np.ndarray:
    """Rows that are aggregated records (``ph == "A"``)."""
    return lut(ph_cats, ("A",))[ph + 1]


def calls(dft_cnt: Optional[np.ndarray], agg: np.ndarray) -> np.ndarray:
    """Calls per row (int64): ``dft_cnt`` of an aggregated row (1 when null or < 1), else 1.
    ``dft_cnt`` is a float64 column with null as 1 (``numeric("dft_cnt", 1)``), or None."""
    if dft_cnt is None or not agg.any():
        return np.ones(agg.size, dtype=np.int64)
    n = dft_cnt.astype(np.int64)
    return np.where(agg & (n >= 1), n, 1)


def select_frame(df: pd.DataFrame) -> Tuple[pd.DataFrame, np.ndarray]:
    """The events of a pandas partition and their calls: ``(rows, calls)``, ``rows`` the
    DataFrame of the event rows (order kept) and ``calls`` int64 aligned with it."""
    if len(df) == 0:
        return df, np.zeros(0, dtype=np.int64)
    ph, ph_cats = codes(df["ph"])
    cat, cat_cats = codes(df["cat"])
    keep = event_mask(ph, ph_cats, cat, cat_cats)
    agg = aggregated(ph, ph_cats)[keep]
    x = df if keep.all() else df[keep]
    cnt = None
    if agg.any() and "dft_cnt" in df.columns:
        cnt = pd.to_numeric(x["dft_cnt"], errors="coerce").fillna(1).to_numpy(dtype=np.float64)
    return x, calls(cnt, agg)


def copy_sides(df: pd.DataFrame) -> Tuple[pd.DataFrame, np.ndarray]:
    """Both files of each kernel copy (``vocabulary.COPY_NAMES``) of a partition, for per-file
    metrics: every copy row with an ``out_fname`` is followed by its *out side*, a copy of the row
    with ``fname`` = ``out_fname`` and ``offset`` = ``out_offset`` (null when the caller passed
    none). Returns the frame (fresh RangeIndex; ``df`` itself when it has no copy to split) and a
    bool array over its rows, True on the out sides: the copy's bytes are read bytes of the row's
    ``fname`` and written bytes of the out side's."""
    none = np.zeros(len(df), dtype=bool)
    if not len(df) or "out_fname" not in df.columns:
        return df, none
    out = (df["name"].astype(object).isin(COPY_NAMES) & df["out_fname"].notna()).to_numpy(dtype=bool)
    if not out.any():
        return df, none
    dup = df.iloc[np.flatnonzero(out)].copy()
    dup["fname"] = dup["out_fname"].astype(object)
    dup["offset"] = dup["out_offset"] if "out_offset" in dup.columns else np.nan
    both = pd.concat([df.astype({"fname": object}), dup.astype({"fname": object})], ignore_index=True)
    if "offset" in both.columns:
        both["offset"] = pd.to_numeric(both["offset"].astype(object), errors="coerce")
    # each out side right after its copy: trace order is the row order
    key = np.r_[np.arange(len(df)) * 2, np.flatnonzero(out) * 2 + 1]
    order = np.argsort(key, kind="stable")
    side = np.r_[none, np.ones(int(out.sum()), dtype=bool)][order]
    return both.iloc[order].reset_index(drop=True), side
