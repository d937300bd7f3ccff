"""Differential tests: every number of DFAnalyzer against the independent oracle (issue 20, item 2).

Traces (tests/oracle_traces.py): a real preload + Python API run (4 KiB gzip members, a reader
thread, a forked worker), a copy of the parent as another node (same pid, clock skew, hostname
record in a later member), and the real upstream 2.2.0 aggregated records over many members with
their hash records in the first one. Each set is analysed at several batch sizes and partition
sizes (``small_file_mb=0`` so that every file is indexed and cut into batches); the summary, each
view and the insights' evidence metrics must equal the oracle's numbers (tests/oracle.py, pinned
by tests/test_oracle.py). A failure lists every differing number: view, row, column, oracle value,
analyzer value.
"""

import math
import os

import oracle_traces
import pandas as pd
import pytest
from oracle import Oracle

# (batch_size_mb, partition_size_mb): many tiny batches; mid batches cut into row-slice
# partitions; the default batch size (lowered to a share per worker thread on small input).
CONFIGS = [(0.01, 128), (1, 0.02), (16, 128)]
SETS = ["hosts", "agg"]


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    return oracle_traces.build(str(tmp_path_factory.mktemp("oracle")))


@pytest.fixture(scope="module")
def oracles(traces):
    return {k: Oracle(v) for k, v in traces.items()}


_analyzers = {}


@pytest.fixture(scope="module")
def analyzer(traces, dask_client):
    from dfanalyzer import DFAnalyzer

    def get(name, batch, part):
        key = (name, batch, part)
        if key not in _analyzers:
            _analyzers[key] = DFAnalyzer(
                traces[name], batch_size_mb=batch, partition_size_mb=part, small_file_mb=0, client=dask_client
            )
        return _analyzers[key]

    yield get
    for a in _analyzers.values():
        a.close()  # releases its persisted partitions; the session's cluster stays
    _analyzers.clear()


# ----------------------------------------------------------------------------- comparison
def _same(a, b) -> bool:
    na = a is None or a is pd.NA or (isinstance(a, float) and math.isnan(a))
    nb = b is None or b is pd.NA or (isinstance(b, float) and math.isnan(b))
    if na or nb:
        return na and nb
    if isinstance(a, str) or isinstance(b, str):
        return str(a) == str(b)
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return float(a) == pytest.approx(float(b), rel=1e-9, abs=1e-12)


def _py(v):
    return v.item() if hasattr(v, "item") else v


def diff_dict(where: str, o, a, out: list):
    """Every leaf of the oracle's dict ``o`` against ``a``."""
    if isinstance(o, dict):
        if not isinstance(a, dict):
            out.append(f"{where}: oracle {o!r} vs analyzer {a!r}")
            return
        for k in sorted(set(o) | set(a), key=str):
            if k not in a:
                out.append(f"{where}.{k}: oracle {o[k]!r} vs analyzer (missing)")
            elif k not in o:
                out.append(f"{where}.{k}: oracle (missing) vs analyzer {a[k]!r}")
            else:
                diff_dict(f"{where}.{k}", o[k], a[k], out)
    elif not _same(o, _py(a)):
        out.append(f"{where}: oracle {o!r} vs analyzer {_py(a)!r}")


def diff_frame(view: str, o: pd.DataFrame, a: pd.DataFrame, out: list, cols=None):
    cols = [c for c in (cols or o.columns)]
    for c in cols:
        if c not in a.columns:
            out.append(f"{view}: column {c!r} missing in the analyzer's frame")
    for c in a.columns:
        if c not in o.columns:  # every number must be checked: the oracle has to learn new columns
            out.append(f"{view}: column {c!r} of the analyzer is not computed by the oracle")
    a_idx = {(tuple(_py(x) for x in k) if isinstance(k, tuple) else _py(k)): k for k in a.index}
    o_idx = {(tuple(_py(x) for x in k) if isinstance(k, tuple) else _py(k)): k for k in o.index}
    for k in sorted(set(o_idx) - set(a_idx), key=str):
        out.append(f"{view}[{k!r}]: row in the oracle ({o.loc[o_idx[k]].to_dict()}) missing in the analyzer")
    for k in sorted(set(a_idx) - set(o_idx), key=str):
        out.append(f"{view}[{k!r}]: row in the analyzer ({a.loc[a_idx[k]].to_dict()}) not in the oracle")
    for k in sorted(set(o_idx) & set(a_idx), key=str):
        ro, ra = o.loc[o_idx[k]], a.loc[a_idx[k]]
        for c in cols:
            if c in a.columns and not _same(_py(ro[c]), _py(ra[c])):
                out.append(f"{view}[{k!r}].{c}: oracle {_py(ro[c])!r} vs analyzer {_py(ra[c])!r}")


def check(diffs: list, what: str):
    if diffs:
        head = "\n  ".join(diffs[:40])
        more = f"\n  ... and {len(diffs) - 40} more" if len(diffs) > 40 else ""
        pytest.fail(f"{what}: {len(diffs)} number(s) differ from the oracle:\n  {head}{more}", pytrace=False)


def run(what: str, fn):
    """``fn()``, or a one-line failure naming what raised (the analyzer's own traceback can be deep
    enough to break pytest's report)."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - any crash of the analyzer is a failure to report
        msg = f"{what}: the analyzer raised {type(exc).__name__}: {str(exc)[:500]}"
    pytest.fail(msg, pytrace=False)  # outside `except`: no chained traceback


# hosts at every configuration, agg at the smallest and the default batch size, the synthetic
# control set at the smallest (the whole file stays within ~3 minutes on 2 busy cores)
CASES = [("hosts", b, p) for b, p in CONFIGS] + [("agg", *CONFIGS[0]), ("agg", *CONFIGS[2]), ("synth", *CONFIGS[0])]
cases = pytest.mark.parametrize("name,batch,part", CASES, ids=[f"{n}-batch{b}-part{p}" for n, b, p in CASES])


# ----------------------------------------------------------------------------- the tests
@cases
def test_summary(name, batch, part, oracles, analyzer):
    a = analyzer(name, batch, part)
    out = []
    got = run(f"summary of {name} at batch {batch}", lambda: a.summary(show=False).to_dict())
    diff_dict(f"summary[{name}]", oracles[name].summary(), got, out)
    check(out, f"{name} at batch_size_mb={batch}, partition_size_mb={part}")


VIEWS = {
    "functions": lambda o: o.functions(),
    "files": lambda o: o.files(),
    "processes": lambda o: o.processes(),
    "time_windows": lambda o: o.time_windows(),
    "by_tag_epoch": lambda o: o.by_tag("epoch"),
    "epochs": lambda o: o.epochs(),
    "layers": lambda o: o.layers(),
    "heatmap": lambda o: o.heatmap(),
}
AN_VIEWS = {
    "functions": lambda a: a.functions(),
    "files": lambda a: a.file_view(),
    "processes": lambda a: a.processes(),
    "time_windows": lambda a: a.time_windows(),
    "by_tag_epoch": lambda a: a.by_tag("epoch"),
    "epochs": lambda a: a.epochs(),
    "layers": lambda a: a.layers(),
    "heatmap": lambda a: a.heatmap(),
}


@cases
@pytest.mark.parametrize("view", list(VIEWS))
def test_view(name, batch, part, view, oracles, analyzer):
    a = analyzer(name, batch, part)
    o = VIEWS[view](oracles[name])
    got = run(f"{view} of {name} at batch {batch}", lambda: AN_VIEWS[view](a))
    out = []
    diff_frame(f"{view}[{name}]", o, got, out)
    for k, v in o.attrs.items():
        if k not in got.attrs:
            out.append(f"{view}[{name}].attrs[{k!r}]: oracle {v!r} vs analyzer (missing)")
        elif not _same(v, got.attrs[k]):
            out.append(f"{view}[{name}].attrs[{k!r}]: oracle {v!r} vs analyzer {got.attrs[k]!r}")
    check(out, f"{view} of {name} at batch_size_mb={batch}, partition_size_mb={part}")


def _fire_all(a):
    """A config that makes every rule fire whenever its numbers are non-zero: every threshold that
    is a share, a ratio or a floor set to 0 (sizes and alignment kept)."""
    import yaml

    import dfanalyzer

    with open(os.path.join(os.path.dirname(dfanalyzer.__file__), "insights.yaml")) as f:
        cfg = yaml.safe_load(f)
    base = cfg["thresholds"]
    keep = {"small_bytes", "alignment", "small_file_bytes"}
    # the absolute floors (seconds, run share, bytes) of every rule go to 0 as well
    floors = {rule: {k: 0 for k in fl} for rule, fl in (cfg.get("floors") or {}).items()}
    return {
        "thresholds": {k: 0 for k, v in base.items() if k not in keep and isinstance(v, (int, float))},
        "floors": floors,
    }


# the number that, when non-zero, makes a rule fire with every threshold at 0
FIRES = {
    "small_requests": ("small_reads", "small_writes"),
    "stdio_share": "stdio_bytes",
    "metadata_time": "meta_time_s",
    "rank_imbalance": "imbalanced_files",
    "stragglers": "straggler_files",
    "misaligned_requests": "misaligned_requests",
    "random_access": ("random_reads", "random_writes"),
    "redundant_reads": "redundant_read_bytes",
    "dataloader_stall": "batches",
    "io_bound_epochs": "io_bound_epochs",
    "checkpoint_time": "checkpoint_s",
    "worker_imbalance": "workers",
    "small_files_per_sample": "small_file_opens",
    "repeated_epoch_reads": "repeated_bytes",
}


@cases
def test_insight_evidence(name, batch, part, oracles, analyzer):
    a = analyzer(name, batch, part)
    rep = run(f"insights of {name} at batch {batch}", lambda: a.insights(config=_fire_all(a), show=False).to_dict())
    got = {i["rule"]: i["evidence"]["metrics"] for i in rep["insights"]}
    out = []
    for rule, m in oracles[name].insight_metrics().items():
        keys = FIRES[rule] if isinstance(FIRES[rule], tuple) else (FIRES[rule],)
        fires = any(m[k] for k in keys) and (rule != "dataloader_stall" or m["stall_share"] > 0)
        if rule not in got:
            if fires:
                out.append(f"insights[{name}].{rule}: the oracle's numbers {m} are non-zero but the rule did not fire")
            continue
        for k, v in m.items():
            if k not in got[rule]:
                out.append(f"insights[{name}].{rule}.{k}: oracle {v!r} vs analyzer (missing)")
            elif not _same(v, got[rule][k]):
                out.append(f"insights[{name}].{rule}.{k}: oracle {v!r} vs analyzer {got[rule][k]!r}")
    check(out, f"insight evidence of {name} at batch_size_mb={batch}, partition_size_mb={part}")


@pytest.mark.parametrize("name", SETS + ["synth"])
def test_batches_really_split(name, traces, analyzer):
    """The small batch size cuts the traces into many batches (else the test proves nothing)."""
    a = analyzer(name, *CONFIGS[0])
    run("summary", lambda: a.summary(show=False))
    assert a.stats["batches"] >= 3 * len(traces[name]), a.stats["batches"]
