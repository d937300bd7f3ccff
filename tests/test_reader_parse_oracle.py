"""The reader's columns against plain gzip + json (docs/perf/i22-parse.md): a trace in the
tracer's layout whose integers have every digit count from 1 to 19, and some of 2^63 to 2^64 - 1
(the fast scanner reads 16 digits at a time and takes up to 18; more go to simdjson), negative values, keys of 1 to 20 bytes (16 is the in-place
match limit), sparse args columns with gaps of 1 to 40 rows (short gaps are padded inline, long
ones by resize), strings with and without escapes, floats; written as many gzip members so that
batches cross member and 4 MiB chunk boundaries. Every value of every column must equal what
``json.loads`` of the same lines gives."""

import gzip
import json
import random

from dfanalyzer import _reader

N_EVENTS = 24000  # ~6 MiB of text: more than one 4 MiB parse chunk
NAMES = ["read", "write", "open64", "compute", "x" * 17]


def _int(rng, digits):
    """A JSON integer of `digits` digits (no leading zero), sometimes negative."""
    v = rng.randrange(10 ** (digits - 1), 10**digits) if digits > 1 else rng.randrange(10)
    return -v if rng.random() < 0.2 and v else v


def _events(rng):
    keys = ["k", "ab", "key16_exactly_16"[:16], "key_of_seventeen1"[:17], "a_twenty_byte_key_20"]
    gaps = {k: g for k, g in zip(keys, (1, 2, 3, 9, 40))}
    for i in range(N_EVENTS):
        args = {}
        for k in keys:  # sparse: key k appears every gaps[k] rows
            if i % gaps[k] == 0:
                args[k] = _int(rng, rng.randint(1, 18))
        # 17-18 digits: the fast path's limit; 19 digits (< 2^63): simdjson reads them
        args["big"] = _int(rng, rng.randint(17, 19)) % 2**63
        if i % 7 == 0:  # 2^63 and beyond (< 2^64): the column becomes Float64
            args["huge"] = rng.choice([rng.randrange(2**63), rng.randrange(2**63, 2**64)])
        args["s"] = rng.choice(["plain", 'q"uote', "back\\slash", "é", "12x", ""])
        if i % 5 == 0:
            args["f"] = rng.choice([0.5, -1.25e-7, 3e300, 123456.789])
        yield {
            "id": i,
            "name": NAMES[i % len(NAMES)],
            "cat": "POSIX",
            "pid": _int(rng, rng.randint(1, 9)) & 0xFFFF,
            "tid": rng.randint(0, 10 ** rng.randint(1, 18)),
            "ts": 10**15 + i * 7 + rng.randint(0, 5),
            "dur": rng.randint(0, 10 ** rng.randint(1, 12)),
            "ph": "X",
            "args": args,
        }


def _write(path, lines, per_member):
    with open(path, "wb") as f:
        for k in range(0, len(lines), per_member):
            f.write(gzip.compress(("\n".join(lines[k : k + per_member]) + "\n").encode()))


def _expected(events):
    """Columns as json.loads gives them: args ints within int64 stay ints, others are floats."""
    cols = {}
    for row, e in enumerate(events):
        for k, v in e["args"].items():
            cols.setdefault(k, {})[row] = v
    return cols


def _column(batch, key):
    for k, dtype, payload in batch["args"]:
        if k == key:
            if dtype == "string":
                codes, cats = payload
                return dtype, [None if c < 0 else cats[c] for c in codes.tolist()]
            vals, mask = payload
            return dtype, [None if m else v for v, m in zip(vals.tolist(), mask.tolist())]
    raise KeyError(key)


def test_columns_equal_json_loads(tmp_path):
    rng = random.Random(2211)
    events = list(_events(rng))
    lines = [json.dumps(e, separators=(",", ":"), ensure_ascii=False) for e in events]
    path = str(tmp_path / "t.pfw.gz")
    _write(path, lines, 997)
    idx = _reader.build_index(path, str(tmp_path))
    n_cp = len(idx["checkpoints"])
    assert n_cp > 20
    # one batch of the whole file (crosses the 4 MiB chunk), and batches of a few members each
    ranges = [(0, n_cp - 1)] + [(a, min(a + 4, n_cp - 1)) for a in range(0, n_cp, 5)]
    got_rows = {}
    for a, b in ranges:
        first_line = idx["checkpoints"][a]["first_line"]
        lo = first_line
        batch = _reader.load_batch(path, a, b, str(tmp_path))
        part = events[lo : lo + batch["rows"]]
        assert batch["rows"] == sum(c["num_lines"] for c in idx["checkpoints"][a : b + 1])
        assert batch["skipped_lines"] == 0 and batch["warnings"] == []
        core = batch["core"]
        for k in ("pid", "tid", "ts", "dur"):
            assert core[k].tolist() == [e[k] for e in part], k
        codes, cats = core["name"]
        assert [cats[c] for c in codes.tolist()] == [e["name"] for e in part]
        exp = _expected(part)
        assert {k for k, _, _ in batch["args"]} == set(exp)
        for key, vals in exp.items():
            dtype, col = _column(batch, key)
            want = [vals.get(r) for r in range(len(part))]
            if key == "s":
                assert dtype == "string" and col == want, key
                continue
            present = [v for v in want if v is not None]
            if all(isinstance(v, int) and -(2**63) <= v < 2**63 for v in present):
                assert dtype == "Int64", key
                assert col == want, key
            else:  # a 2^63+ integer or a float: the whole column is Float64 (values as doubles)
                assert dtype == "Float64", key
                assert col == [None if v is None else float(v) for v in want], key
        got_rows[(a, b)] = batch["rows"]
    assert got_rows[(0, n_cp - 1)] == N_EVENTS
