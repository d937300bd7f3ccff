"""The streamed summary's fast paths give exactly what the DataFrame path gives.

* a partial computed from the C++ reader's NumPy columns (``ReaderColumns``, what ``dfanalyzer
  summary`` streams) equals the one from the batch's DataFrame (``partition_partial``);
* ``PartialFolder`` (partials merged as they arrive) equals one ``combine_partials``;
* size histograms with many distinct sizes (sorted path) and few (hashed path) agree.
"""

import os
import sys

import numpy as np

from dfanalyzer import _reader, reader
from dfanalyzer import summary as S

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))
import gen_traces  # noqa: E402

IO, COMPUTE, APP = ("POSIX", "STDIO"), ("compute",), ("app",)


def _same(a: S.Partial, b: S.Partial) -> None:
    for key in ("events", "min_ts", "max_te", "hosts", "processes", "threads_compute", "threads_io", "files"):
        assert getattr(a, key) == getattr(b, key), key
    for key in ("io", "compute", "app_io"):
        assert getattr(a, key)[0].tolist() == getattr(b, key)[0].tolist(), key
        assert getattr(a, key)[1].tolist() == getattr(b, key)[1].tolist(), key
    assert sorted(a.functions) == sorted(b.functions)
    for n, (count, (vals, cnts), spread) in a.functions.items():
        bc, (bv, bn), bs = b.functions[n]
        assert (count, vals.tolist(), cnts.tolist(), spread) == (bc, bv.tolist(), bn.tolist(), bs), n


def test_reader_columns_equal_frame_path(tmp_path):
    paths = gen_traces.generate(str(tmp_path), 6000, 2, member_bytes=1 << 16, jobs=1)
    parts = []
    for p in paths:
        idx = reader.build_index(p)
        last = len(idx["checkpoints"]) - 1
        for first, stop in ((0, last // 2), (last // 2 + 1, last)):
            raw = _reader.load_batch(p, first, stop, None)
            fast = S.partial_from_columns(S.ReaderColumns(raw), IO, COMPUTE, APP)
            frame = S.partition_partial(reader.load_batch(p, first, stop).events, IO, COMPUTE, APP)
            _same(fast, frame)
            assert fast.events > 0 and fast.io[0].size > 0 and fast.compute[0].size > 0
            parts.append(fast)
    folder = S.PartialFolder(fan_in=3)
    for p in parts:
        folder.add(p)
    _same(folder.result(), S.combine_partials(parts))


def test_histograms_hashed_and_sorted_paths_agree():
    rng = np.random.default_rng(5)
    for distinct in (4, 50_000):  # few sizes: hashed pairs; many: sorted rows
        n = 20_000
        codes = rng.integers(-1, 6, n)
        sizes = rng.integers(0, distinct, n).astype(np.int64) * 512
        has = rng.random(n) < 0.9
        got = S._function_histograms(codes, [f"f{i}" for i in range(6)], sizes, has)
        for i in range(6):
            keep = (codes == i) & has
            vals, cnts = np.unique(sizes[keep], return_counts=True)
            count, (gv, gn), spread = got[f"f{i}"]
            assert count == int((codes == i).sum()) and spread is None
            assert gv.tolist() == vals.tolist() and gn.tolist() == cnts.tolist()
