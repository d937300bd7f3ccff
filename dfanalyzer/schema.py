"""The events schema, defined once: core columns, the dtype vocabulary and the union rule.

Used by :mod:`dfanalyzer.reader` (building frames from the C++ reader's columns) and
:mod:`dfanalyzer.analyzer` (aligning batches into partitions, Dask ``meta``).

Dtype vocabulary (a *kind* per column):

============  =====================================================================
kind          pandas dtype
============  =====================================================================
``category``  ``CategoricalDtype`` over ``str`` categories (text: names, paths, args
              strings); the C++ reader calls this kind ``"string"``
``Int64``     nullable 64-bit integer (``pd.Int64Dtype``)
``Float64``   nullable 64-bit float (``pd.Float64Dtype``)
``int64``     non-null 64-bit integer (numpy)
============  =====================================================================

Core columns (``CORE_COLUMNS``, frame order; meanings and units in ``dfanalyzer.reader`` and
``docs/analyzer.md``): ``name cat ph hostname fname`` category; ``pid tid`` int64; ``ts dur te``
int64 µs; ``size offset`` Int64 bytes. Every other column is an args key with kind ``Int64``,
``Float64`` or ``category``.

Union rule (:func:`union_schema`), for one args key seen with different kinds in different
batches: equal kinds stay; ``Int64`` ∪ ``Float64`` → ``Float64``; anything ∪ ``category`` →
``category`` (numbers are then written as text, e.g. ``"3"``).
"""

from __future__ import annotations

import functools
from typing import Dict, List, Mapping, Sequence, Tuple

from ._lazy import LazyModule
from ._lazy import pandas as pd  # (imported on first use: dfanalyzer._lazy)

np = LazyModule("numpy")  # (on first use: the threaded summary plans before NumPy is imported)

__all__ = [
    "CATEGORY",
    "CORE_COLUMNS",
    "CORE_NAMES",
    "CATEGORICAL_CORE",
    "NULLABLE_CORE",
    "kind_of_reader",
    "categorical",
    "frame_of_columns",
    "frame_nbytes",
    "kind_of",
    "pandas_dtype",
    "frame_schema",
    "union_schema",
    "empty_column",
    "make_meta",
    "cast_column",
    "align_frame",
    "unify_categories",
]

CATEGORY = "category"
#: Core event columns and their kinds, in frame order.
CORE_COLUMNS: Tuple[Tuple[str, str], ...] = (
    ("name", CATEGORY),
    ("cat", CATEGORY),
    ("ph", CATEGORY),
    ("hostname", CATEGORY),
    ("fname", CATEGORY),
    ("pid", "int64"),
    ("tid", "int64"),
    ("ts", "int64"),
    ("dur", "int64"),
    ("te", "int64"),
    ("size", "Int64"),
    ("offset", "Int64"),
)
CORE_NAMES: Tuple[str, ...] = tuple(c for c, _ in CORE_COLUMNS)
CORE_KINDS: Dict[str, str] = dict(CORE_COLUMNS)
CATEGORICAL_CORE = frozenset(c for c, k in CORE_COLUMNS if k == CATEGORY)
NULLABLE_CORE = frozenset(c for c, k in CORE_COLUMNS if k in ("Int64", "Float64"))


@functools.lru_cache(maxsize=None)
def _str_dtype():
    """The one dtype of every categorical's categories (a function: pandas is imported on first
    use, dfanalyzer._lazy)."""
    return pd.Index([], dtype=str).dtype


_READER_KINDS = {"string": CATEGORY, "Int64": "Int64", "Float64": "Float64"}


def kind_of_reader(dtype: str) -> str:
    """Kind of an args column as the C++ reader names it (``"string"``, ``"Int64"``,
    ``"Float64"``). Raises ``ValueError`` for any other name."""
    try:
        return _READER_KINDS[dtype]
    except KeyError:
        raise ValueError(f"unknown reader dtype {dtype!r}") from None


def kind_of(dtype) -> str:
    """Kind of a pandas/numpy dtype: text and categoricals → ``category``, booleans and
    integers → ``Int64``, floats → ``Float64``, anything else → ``category``."""
    if isinstance(dtype, pd.CategoricalDtype):  # (the reader's kinds first: no dtype inspection)
        return CATEGORY
    if isinstance(dtype, pd.Int64Dtype):
        return "Int64"
    if isinstance(dtype, pd.Float64Dtype):
        return "Float64"
    if pd.api.types.is_string_dtype(dtype) or dtype == object:
        return CATEGORY
    if pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_integer_dtype(dtype):
        return "Int64"
    if pd.api.types.is_float_dtype(dtype):
        return "Float64"
    return CATEGORY


def pandas_dtype(kind: str):
    """The pandas dtype of a kind (categories of unknown values for ``category``)."""
    if kind == CATEGORY:
        return pd.CategoricalDtype(pd.Index([], dtype=_str_dtype()))
    if kind == "Int64":
        return pd.Int64Dtype()
    if kind == "Float64":
        return pd.Float64Dtype()
    return np.dtype(kind)


def frame_schema(df: pd.DataFrame) -> Dict[str, str]:
    """Args column → kind for the non-core columns of ``df``, in column order."""
    return {c: kind_of_cached(t) for c, t in zip(df.columns, frame_dtypes(df)) if c not in CORE_KINDS}


def frame_dtypes(df: pd.DataFrame) -> list:
    """``list(df.dtypes)`` (column order) without building the ``dtypes`` Series: pandas' block
    manager gives them as an array in ~1 µs, ``df.dtypes`` takes ~50 µs and ``kind_of`` per
    column ~2-10 µs more (once per load task and again for :func:`dfanalyzer.analyzer._is_aligned`;
    ~0.5-1 ms per batch of a cold worker)."""
    try:
        got = df._mgr.get_dtypes()
    except AttributeError:  # (a pandas without it)
        return list(df.dtypes)
    if len(got) != len(df.columns):  # (not expected: a manager whose layout is not one per column)
        return list(df.dtypes)
    return list(got)


#: dtype → ``kind_of(dtype)`` for the hashable, non-categorical dtypes met so far (a handful:
#: int64, Int64, Float64, ...); bounded like the categorical dtype cache.
_kind_cache: Dict[object, str] = {}


def kind_of_cached(dtype) -> str:
    """:func:`kind_of` (same result), remembered per dtype (categoricals are answered first,
    without hashing their categories)."""
    if isinstance(dtype, pd.CategoricalDtype):
        return CATEGORY
    try:
        return _kind_cache[dtype]
    except KeyError:
        pass
    except TypeError:  # (an unhashable dtype)
        return kind_of(dtype)
    k = kind_of(dtype)
    if len(_kind_cache) >= _DTYPE_CACHE_SIZE:
        _kind_cache.clear()
    _kind_cache[dtype] = k
    return k


def union_schema(schemas: Sequence[Mapping[str, str]]) -> Dict[str, str]:
    """Merge args schemas by the union rule (module docstring); column order is the order of
    first appearance."""
    out: Dict[str, str] = {}
    for s in schemas:
        for c, k in s.items():
            have = out.get(c)
            if have is None or have == k:
                out[c] = k
            elif CATEGORY in (have, k):
                out[c] = CATEGORY
            else:
                out[c] = "Float64"
    return out


def empty_column(kind: str, n: int):
    """All-null column of ``n`` rows of ``kind`` (zeros for the non-null ``int64``)."""
    if kind == CATEGORY:
        return pd.Categorical.from_codes(np.full(n, -1, dtype=np.int8), categories=pd.Index([], dtype=_str_dtype()))
    if kind == "Int64":
        return pd.arrays.IntegerArray(np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool))
    if kind == "Float64":
        return pd.arrays.FloatingArray(np.zeros(n, dtype=np.float64), np.ones(n, dtype=bool))
    return np.zeros(n, dtype=kind)


_unknown_category_dtype: list = []


def _unknown_category_column():
    """Empty categorical column whose categories Dask reads as unknown: exactly what
    ``dask.dataframe.utils.clear_known_categories`` makes of :func:`empty_column` (its dtype is
    made that way once per process; ``set_categories`` per column costs ~1.5 ms each call)."""
    if not _unknown_category_dtype:
        from dask.dataframe.utils import clear_known_categories

        one = clear_known_categories(pd.DataFrame({"c": empty_column(CATEGORY, 0)}))
        _unknown_category_dtype.append(one["c"].dtype)
    return pd.Categorical.from_codes(np.empty(0, dtype=np.int8), dtype=_unknown_category_dtype[0])


def make_meta(schema: Mapping[str, str]) -> pd.DataFrame:
    """Empty frame with the exact dtypes of ``DFAnalyzer.events`` (core columns, then the args
    columns of ``schema``), categories marked unknown for Dask (as ``clear_known_categories``
    marks them)."""
    cols = {
        c: _unknown_category_column() if k == CATEGORY else empty_column(k, 0)
        for c, k in list(CORE_COLUMNS) + list(schema.items())
    }
    return pd.DataFrame(cols)


#: Category lists of at most this many names have their dtype cached (:func:`categorical`).
_DTYPE_CACHE_MAX_CATEGORIES = 256
#: Cached category dtypes, at most this many (the cache is emptied when full).
_DTYPE_CACHE_SIZE = 1024
_dtype_cache: Dict[tuple, "pd.CategoricalDtype"] = {}


def _categorical_dtype(categories) -> pd.CategoricalDtype:
    """The unordered ``CategoricalDtype`` of ``categories`` (distinct str, the C++ reader's
    dictionary), built without re-checking that they are distinct; short lists are cached (the
    same few names, categories and hosts recur in every batch), so batches share one dtype."""
    if len(categories) > _DTYPE_CACHE_MAX_CATEGORIES:
        return pd.CategoricalDtype._from_fastpath(pd.Index(categories, dtype=_str_dtype()), ordered=False)
    key = tuple(categories)
    dt = _dtype_cache.get(key)
    if dt is None:
        dt = pd.CategoricalDtype._from_fastpath(pd.Index(categories, dtype=_str_dtype()), ordered=False)
        if len(_dtype_cache) >= _DTYPE_CACHE_SIZE:
            _dtype_cache.clear()
        _dtype_cache[key] = dt
    return dt


def categorical(codes: np.ndarray, categories) -> pd.Categorical:
    """A ``category`` column from integer ``codes`` (-1 = null) into ``categories`` (distinct str),
    no copy of the codes (when they already have pandas' code width for that many categories, as
    the C++ reader gives them) and no validation (the C++ reader's codes are in range)."""
    if not hasattr(pd.CategoricalDtype, "_from_fastpath"):  # (a pandas without the fast path)
        return _from_codes(codes, categories=pd.Index(categories, dtype=_str_dtype()))
    return _from_codes(codes, dtype=_categorical_dtype(categories))


def _from_codes(codes: np.ndarray, **kw) -> pd.Categorical:
    """``pd.Categorical.from_codes(codes, validate=False, **kw)``; pandas 2.0 has no ``validate``
    and checks the codes' range (one more pass over them)."""
    try:
        return pd.Categorical.from_codes(codes, validate=False, **kw)
    except TypeError as exc:
        if "validate" not in str(exc):
            raise
        return pd.Categorical.from_codes(codes, **kw)


@functools.lru_cache(maxsize=None)
def _blocks_api():
    """pandas' ``create_dataframe_from_blocks`` (pandas >= 3.0), or None."""
    try:
        from pandas.api.internals import create_dataframe_from_blocks
    except ImportError:
        return None
    return create_dataframe_from_blocks


def frame_of_columns(names: Sequence[str], columns: Sequence, n: int, consolidate: bool = False) -> pd.DataFrame:
    """``pd.DataFrame(dict(zip(names, columns)), index=pd.RangeIndex(n), copy=False)`` for
    columns that are 1-D NumPy arrays or pandas extension arrays of ``n`` rows each: the same
    frame, built from pandas blocks without the constructor's per-column inference and checks
    (pandas >= 3.0; the constructor otherwise, and for equal names). Arrays are taken as they are:
    an object array stays ``object`` (where the constructor of pandas >= 3 would infer ``str``
    from one holding strings, as ``pd.Series(values, dtype=object)`` does not). Without
    ``consolidate`` every column is its own block, a view of its array (as that constructor gives
    it); with it the NumPy columns of one dtype are copied into one block (as ``pd.DataFrame`` of
    a dict of Series does)."""
    make = _blocks_api()
    if make is None or len(set(names)) != len(names):  # (a dict keeps the last of equal names)
        return pd.DataFrame(dict(zip(names, columns)), index=pd.RangeIndex(n), copy=False)
    blocks = []
    ext = []
    by_dtype: Dict[np.dtype, List[int]] = {}
    for i, a in enumerate(columns):
        if isinstance(a, np.ndarray):
            if consolidate:
                by_dtype.setdefault(a.dtype, []).append(i)
            else:
                blocks.append((a.reshape(1, n), np.array([i], dtype=np.intp)))
        else:
            (ext if consolidate else blocks).append((a, np.array([i], dtype=np.intp)))
    for dt, where in by_dtype.items():
        values = np.empty((len(where), n), dtype=dt)
        for j, i in enumerate(where):
            values[j] = columns[i]
        blocks.append((values, np.array(where, dtype=np.intp)))
    return make(blocks + ext, index=pd.RangeIndex(n), columns=_columns_index(tuple(names)))


def frame_nbytes(df: pd.DataFrame, fallback=None) -> int:
    """Bytes of ``df``'s columns (the NumPy and extension arrays' ``nbytes``: a categorical's
    codes and categories, a nullable column's values and mask) and of its index unless a
    ``RangeIndex``, plus 1,000 for the frame, its index and column names. Where a column or the
    index holds Python objects (object dtype, strings stored as Python objects: their sizes are
    sampled there) ``fallback(df)``, by default Dask's ``sizeof`` estimate of the frame."""
    n = 1000
    try:
        idx = df.index
        if not isinstance(idx, pd.RangeIndex):  # (a RangeIndex holds no array)
            if _python_objects(idx.dtype):
                raise TypeError("object index")
            n += int(idx.nbytes)
        for b in df._mgr.blocks:
            v = b.values
            if _python_objects(v.dtype) and v.size:
                raise TypeError("object column")
            n += int(v.nbytes)
    except (AttributeError, TypeError):
        if fallback is None:
            from dask.sizeof import sizeof as fallback
        return int(fallback(df))
    return n


def _python_objects(dt) -> bool:
    """Whether arrays of dtype ``dt`` hold pointers to Python objects (``nbytes`` counts the
    pointers only)."""
    return dt == object or (isinstance(dt, pd.StringDtype) and dt.storage == "python")


_columns_cache: Dict[tuple, "pd.Index"] = {}


def _columns_index(names: tuple) -> pd.Index:
    """``pd.Index(list(names))`` (the columns the DataFrame constructor makes of a dict's keys:
    dtype ``str`` in pandas >= 3), cached: every batch of a trace has the same few column lists."""
    cols = _columns_cache.get(names)
    if cols is None:
        cols = pd.Index(list(names))
        if len(_columns_cache) >= _DTYPE_CACHE_SIZE:
            _columns_cache.clear()
        _columns_cache[names] = cols
    return cols


def _str_index(values) -> pd.Index:
    return pd.Index([str(v) for v in values], dtype=_str_dtype())


def cast_column(col: pd.Series, kind: str):
    """``col`` as ``kind``; a categorical keeps its codes and gets ``str`` categories."""
    dt = col.dtype
    if kind == CATEGORY:
        if isinstance(dt, pd.CategoricalDtype):
            if dt.categories.dtype == _str_dtype():
                return col
            return pd.Categorical.from_codes(col.cat.codes.to_numpy(), categories=_str_index(dt.categories))
        vals = col.astype(object).where(col.notna(), None)
        vals = vals.map(lambda v: v if v is None or isinstance(v, str) else str(v)).to_numpy(dtype=object)
        codes, uniq = pd.factorize(vals)
        return pd.Categorical.from_codes(codes, categories=_str_index(uniq))
    return col if str(dt) == kind else col.astype(kind)


def align_frame(df: pd.DataFrame, schema: Mapping[str, str]) -> pd.DataFrame:
    """Columns of ``df`` in ``events`` order with the kinds of ``schema``; missing columns are
    null; the index becomes a ``RangeIndex`` from 0."""
    n = len(df)
    if not isinstance(df.index, pd.RangeIndex) or df.index.start != 0 or df.index.step != 1:
        df = df.reset_index(drop=True)
    cols = {}
    for c, kind in list(CORE_COLUMNS) + list(schema.items()):
        cols[c] = cast_column(df[c], kind) if c in df.columns else empty_column(kind, n)
    return pd.DataFrame(cols, index=pd.RangeIndex(n), copy=False)


def unify_categories(frames: List[pd.DataFrame]) -> List[pd.DataFrame]:
    """Give every categorical column the same categories in all ``frames`` (aligned frames,
    same columns), so that they concatenate without falling back to object; in place."""
    if len(frames) < 2:
        return frames
    cat_cols = [c for c, t in frames[0].dtypes.items() if isinstance(t, pd.CategoricalDtype)]
    for c in cat_cols:
        cats = [f[c].cat.categories for f in frames]
        if all(cats[0].equals(x) and cats[0].dtype == x.dtype for x in cats[1:]):
            continue
        union = pd.Index(pd.unique(np.concatenate([np.asarray(x, dtype=object) for x in cats])), dtype=_str_dtype())
        for f in frames:
            f[c] = f[c].cat.set_categories(union)
    return frames
