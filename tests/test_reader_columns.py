"""Column storage of the batch loader (src/reader/parser.cpp): core and args columns are written by
row into storage grown null-filled 128 rows at a time and cut back to the row count when a parse
ends (docs/perf/i22-cols.md). The rules this must keep: rows of events without a key are null,
whatever the gap (inside one growth step or across many); a column met late is null before;
a repeated key in one record keeps the later value (null counts as absent) and the earlier one
leaves no category behind; a column widens Int -> Float -> string with the numbers before as text.
The expected values are written out here from those rules, not computed by the reader; each case
runs through the fast path (the tracer's layout) and through simdjson (the same lines with spaces),
in one batch, in batches of single checkpoints and through load_files (rows of several files)."""

import gzip
import json

import pytest

from dfanalyzer import _reader

N = 400  # events: > 3 growth steps of 128 rows


def _args_text(i):
    """Args of event i as JSON text (some with repeated keys, which json.dumps cannot write)."""
    a = []
    if i in (0, 5, 300, 301):
        a.append(f'"gap":{i}')  # gaps of 4 and 294 rows, then 98 null rows at the end
    if i >= 250 and i % 3 == 0:
        a.append(f'"late":{i}')
    if i < 100 and i % 10 == 0:
        a.append(f'"mix":{i}')
    if i == 150:
        a.append('"mix":2.5')
    if i == 390:
        a.append('"mix":"s"')
    repeated = {
        10: '"dup":1,"dup":"s"',  # Int then string in one record: only "s" becomes a category
        11: '"dup":7',
        20: '"fl":2.5',
        21: '"fl":1,"fl":2.5',
        22: '"fl":3,"fl":null',  # null is absent: 3 stays
        30: '"rep":1,"rep":2',
        31: '"rep":null,"rep":4',
        140: '"rep":"a","rep":"b"',
    }
    if i in repeated:
        a.append(repeated[i])
    a.append(f'"every":{i * 2}')
    return ",".join(a)


def _expected():
    def col(values):
        return [values.get(i) for i in range(N)]

    mix = {i: str(i) for i in range(0, 100, 10)}  # ints, then text of the Float column's values
    mix.update({150: "2.5", 390: "s"})
    return {
        "gap": ("Int64", col({i: i for i in (0, 5, 300, 301)})),
        "late": ("Int64", col({i: i for i in range(250, N) if i % 3 == 0})),
        "mix": ("string", col(mix)),
        "dup": ("string", col({10: "s", 11: "7"})),
        "fl": ("Float64", col({20: 2.5, 21: 2.5, 22: 3.0})),
        "rep": ("string", col({30: "2", 31: "4", 140: "b"})),
        "every": ("Int64", col({i: i * 2 for i in range(N)})),
    }


def _line(i, spaced):
    s = (
        f'{{"id":{i},"name":"{("read", "write", "open64")[i % 3]}","cat":"POSIX","pid":3,"tid":4,'
        f'"ts":{1700000000000000 + i},"dur":{i % 7},"ph":"X","args":{{{_args_text(i)}}}}}'
    )
    return s.replace(",", ", ").replace('":', '": ') if spaced else s


def _write(path, spaced, members):
    lines = [_line(i, spaced) for i in range(N)]
    with open(path, "wb") as f:  # several gzip members: several checkpoints
        step = -(-N // members)
        for k in range(0, N, step):
            f.write(gzip.compress(("\n".join(lines[k : k + step]) + "\n").encode()))
    json.loads(lines[1])  # (the layout is JSON)


def _args(r):
    out = {}
    for key, dtype, payload in r["args"]:
        if dtype == "string":
            codes, cats = payload
            out[key] = (dtype, [None if c < 0 else cats[c] for c in codes.tolist()])
        else:
            vals, mask = payload
            out[key] = (dtype, [None if m else x for x, m in zip(vals.tolist(), mask.tolist())])
    return out


def _categories(r, key):
    return next(p[1] for k, d, p in r["args"] if k == key)


@pytest.mark.parametrize("spaced", [False, True], ids=["fast_path", "simdjson"])
def test_columns_by_row(tmp_path, spaced):
    p = str(tmp_path / "t.pfw.gz")
    _write(p, spaced, members=7)
    want = _expected()
    info = _reader.build_index(p, str(tmp_path / "idx"))
    last = len(info["checkpoints"]) - 1
    assert last >= 1
    r = _reader.load_batch(p, 0, last, str(tmp_path / "idx"))
    assert r["rows"] == N and r["skipped_lines"] == 0
    assert _args(r) == want
    assert _categories(r, "dup") == ["s", "7"]  # the replaced 1 left no category
    assert _categories(r, "rep") == ["2", "4", "a", "b"]  # ints became text before "a" was met
    core_ts = r["core"]["ts"].tolist()
    assert core_ts == [1700000000000000 + i for i in range(N)]
    assert r["core"]["dur"].tolist() == [i % 7 for i in range(N)]
    assert r["core"]["te"].tolist() == [1700000000000000 + i + i % 7 for i in range(N)]

    # one checkpoint at a time: each batch holds its own rows, nulls included
    row = 0
    for c in range(last + 1):
        b = _reader.load_batch(p, c, c, str(tmp_path / "idx"))
        got = _args(b)
        n = b["rows"]
        for key, (_dtype, values) in want.items():
            part = values[row : row + n]
            if all(v is None for v in part):
                assert key not in got
            else:
                assert got[key][1] == [None if v is None else v for v in _convert(part, got[key][0])], key
        row += n
    assert row == N

    # rows of two files in one batch (parse() runs once per file on the same columns)
    q = str(tmp_path / "u.pfw.gz")
    _write(q, spaced, members=1)
    f = _reader.load_files([p, q])
    assert f["rows"] == 2 * N
    assert _args(f) == {k: (d, v + v) for k, (d, v) in want.items()}


def _convert(values, dtype):
    """Values of a column of one batch, whose dtype may be narrower than the whole file's."""
    if dtype == "Int64":
        return [None if v is None else int(v) for v in values]
    if dtype == "Float64":
        return [None if v is None else float(v) for v in values]
    return values
