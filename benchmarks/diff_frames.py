"""Differential check of two source trees' pandas frames (docs/perf/i22-bind.md): every
``dfanalyzer.reader.load_batch`` result (events and metadata frames, counts, warnings; several
projections and checkpoint ranges), ``load_files`` of the set, and ``DFAnalyzer(FILES).events`` /
``metadata`` (threads, no cluster), compared exactly: ``pandas.testing.assert_frame_equal`` with
exact values, dtypes, index and column types, categoricals compared strictly (same categories in
the same order, same codes).

    IDX=/tmp/idx PYTHONPATH=TREE diff_frames.py child OUT.pkl FILES...   # one tree's outputs
    diff_frames.py cmp A.pkl B.pkl                                       # exit 1 when any differs

``IDX``: an index folder (nothing written beside the data); ``RANGE=a,b`` limits each file to
checkpoints [a, b], [a, a] and [b, b] (big files); ``NO_ANALYZER=1`` skips ``DFAnalyzer``.
Hostile inputs: ``benchmarks/diff_reader_builds.py gen DIR``.
"""

import os
import pickle
import sys


def _batch_dict(b):
    return {
        "events": b.events,
        "metadata": b.metadata,
        "blocks": [(type(x).__name__, x.dtype.name, list(x.mgr_locs.as_array)) for x in b.events._mgr.blocks],
        "fields": {k: getattr(b, k) for k in b.__dataclass_fields__ if k not in ("events", "metadata")},
    }


def child(out, files):
    from diff_reader_builds import reader_outputs  # (same folder: run as a script)

    from dfanalyzer import reader

    idx = os.environ.get("IDX")
    res = reader_outputs(reader, files, _batch_dict, lambda t: (_batch_dict(t[0]), t[1]), singles=4, tail=False)
    if not os.environ.get("NO_ANALYZER"):
        from dfanalyzer import DFAnalyzer

        for args in (None, ()):
            try:
                with DFAnalyzer(list(files), index_dir=idx, args=args, n_workers=1, progress=False) as an:
                    ev = an.events.compute()
                    res[("analyzer", repr(args))] = {"events": ev, "metadata": an.metadata, "stats": dict(an.stats)}
            except Exception as e:
                res[("analyzer", repr(args))] = ("err", type(e).__name__, str(e))
    with open(out, "wb") as fh:
        pickle.dump(res, fh)
    print(len(res), "results")


def same(x, y):
    """None when ``x`` and ``y`` are exactly the same, else the first difference (str)."""
    import pandas as pd
    from pandas.testing import assert_frame_equal

    if isinstance(x, pd.DataFrame) or isinstance(y, pd.DataFrame):
        if not (isinstance(x, pd.DataFrame) and isinstance(y, pd.DataFrame)):
            return "frame vs not a frame"
        try:
            assert_frame_equal(
                x,
                y,
                check_dtype=True,
                check_index_type=True,
                check_column_type=True,
                check_exact=True,
                check_categorical=True,
                check_flags=True,
                check_freq=True,
            )
        except AssertionError as e:
            return str(e)[:500]
        for c in x.columns:  # categories' order and dtype, codes (assert_frame_equal checks them too)
            if isinstance(x[c].dtype, pd.CategoricalDtype):
                cx, cy = x[c].cat, y[c].cat
                if not (cx.categories.equals(cy.categories) and cx.categories.dtype == cy.categories.dtype):
                    return f"{c}: categories differ"
                if not (cx.codes.to_numpy() == cy.codes.to_numpy()).all() or cx.codes.dtype != cy.codes.dtype:
                    return f"{c}: codes differ"
        return None
    if isinstance(x, dict) and isinstance(y, dict):
        if list(x) != list(y):
            return f"keys {list(x)} vs {list(y)}"
        for k in x:
            d = same(x[k], y[k])
            if d:
                return f"{k}: {d}"
        return None
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        if type(x) is not type(y) or len(x) != len(y):
            return f"{type(x).__name__}[{len(x)}] vs {type(y).__name__}[{len(y)}]"
        for i, (a, b) in enumerate(zip(x, y)):
            d = same(a, b)
            if d:
                return f"[{i}]: {d}"
        return None
    return None if (type(x) is type(y) and x == y) else f"{x!r} vs {y!r}"[:500]


def main():
    if sys.argv[1] == "child":
        child(sys.argv[2], sys.argv[3:])
        return 0
    with open(sys.argv[2], "rb") as fh:
        a = pickle.load(fh)
    with open(sys.argv[3], "rb") as fh:
        b = pickle.load(fh)
    if a.keys() != b.keys():
        print("key sets differ")
        return 1
    bad = [(k, d) for k in a for d in [same(a[k], b[k])] if d]
    for k, d in bad[:10]:
        print("DIFF", k, d)
    frames = sum(1 for v in a.values() if isinstance(v, dict) and "events" in v)
    print(f"{len(a)} results compared ({frames} with frames), {len(bad)} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
