"""Differential check of two builds of the reader (docs/perf/i22-parse.md): every output of
``_reader.load_batch`` (all projections, several checkpoint ranges) and ``load_files`` of a build,
compared exactly with another build's on the same files.

    diff_reader_builds.py gen DIR                      # hostile inputs into DIR
    IDX=/tmp/idx diff_reader_builds.py child SO_DIR OUT.pkl FILES...   # one build's outputs
    diff_reader_builds.py cmp A.pkl B.pkl              # exit 1 when any output differs

``SO_DIR`` holds a ``_reader*.so``; ``IDX`` an index folder (nothing written beside the data);
``RANGE=a,b`` limits each file to checkpoints [a, b], [a, a] and [b, b] (big files).
"""

import gzip
import hashlib
import importlib.util
import json
import os
import pickle
import random
import sys


def canon(x):
    import numpy as np

    if isinstance(x, np.ndarray):
        return ("nd", str(x.dtype), x.shape, hashlib.sha1(np.ascontiguousarray(x).tobytes()).hexdigest())
    if isinstance(x, dict):
        return ("d", tuple((k, canon(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(canon(v) for v in x))
    return ("v", repr(x))


def reader_outputs(r, files, convert, convert_files, singles=6, tail=True):
    """Every output of reader module ``r`` on ``files`` (shared with ``diff_frames.py``):
    ``load_batch`` of each projection/extra choice over the whole file, the first ``singles``
    checkpoints alone, ``[1, n-1]`` (when ``tail``) and ``[n/2, n-1]``, each passed through
    ``convert``; ``load_files`` of the set (both projections) through ``convert_files``.
    Exceptions are kept as ``("err", type, message)``. ``IDX``/``RANGE``: see the module doc."""
    idx = os.environ.get("IDX")
    res = {}
    for f in files:
        try:
            info = r.build_index(f, idx)
        except Exception as e:
            res[(f, "index")] = ("err", type(e).__name__, str(e))
            continue
        n = len(info["checkpoints"])
        ranges = [(0, n - 1)] if n else [(0, 0)]
        if n > 1:
            ranges += [(i, i) for i in range(min(n, singles))] + ([(1, n - 1)] if tail else []) + [(n // 2, n - 1)]
        lim = os.environ.get("RANGE")
        if lim:
            a, b = map(int, lim.split(","))
            ranges = [(a, b), (a, a), (b, b)]
        for cols in (None, (), ("fname", "ret", "size", "epoch"), ("hostname",)):
            for extra in (False, True):
                if cols is None and extra:
                    continue
                for a, b in ranges:
                    key = (f, a, b, repr(cols), extra)
                    try:
                        res[key] = convert(r.load_batch(f, a, b, idx, cols, extra))
                    except Exception as e:
                        res[key] = ("err", type(e).__name__, str(e))
    if not os.environ.get("RANGE"):
        for cols in (None, ()):
            try:
                res[("files", repr(cols))] = convert_files(r.load_files(list(files), cols))
            except Exception as e:
                res[("files", repr(cols))] = ("err", type(e).__name__, str(e))
    return res


def child(so, out, files):
    for f in sorted(os.listdir(so)):
        if f.startswith("_reader") and f.endswith(".so"):
            spec = importlib.util.spec_from_file_location("_reader", os.path.join(so, f))
            r = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(r)
    res = reader_outputs(r, files, canon, canon)
    pickle.dump(res, open(out, "wb"))
    print(len(res), "results")


def gen(d):
    random.seed(22)

    def ev(i, name="read", args=None, **kw):
        e = {"id": i, "name": name, "cat": "POSIX", "pid": 7, "tid": 8, "ts": 1700000000000000 + i, "dur": 3, "ph": "X"}
        e.update(kw)
        if args is not None:
            e["args"] = args
        return e

    def line(e, sep=(",", ":")):
        return json.dumps(e, separators=sep, ensure_ascii=False)

    lines = [
        "[",
        line(
            {
                "id": 0,
                "name": "hostname",
                "cat": "dftracer",
                "pid": 7,
                "tid": 7,
                "ts": 1,
                "ph": "M",
                "args": {"name": "hostname", "value": "h1"},
            }
        ),
    ]
    ints = [
        0,
        1,
        -1,
        7,
        10**17,
        10**17 - 1,
        10**18 - 1,
        10**18,
        10**19,
        2**63 - 1,
        2**63,
        2**64 - 1,
        -(2**63),
        12345678,
        123456789,
        1234567890123456,
        12345678901234567,
    ]
    for i in range(1, 3000):
        a = {"fname": f"/p/f{i % 13}", "ret": random.choice(ints), "size": random.choice([4096, 0, -5, 1.5, "12", "x"])}
        if i % 3 == 0:
            a["epoch"] = i % 7
        if i % 97 == 0:
            a["rare"] = i
        if i % 11 == 0:
            a["flops"] = random.random() * 10 ** random.randint(-5, 25)
        if i % 13 == 0:
            a["val"] = random.choice([1, 2.5, "s", None, True, False, {"a": [1, 2]}, [1, {"b": 2}]])
        if i % 17 == 0:
            a["k_exactly_16_byte"[:16]] = i
        if i % 19 == 0:
            a["a_key_longer_than_16_bytes"] = i
        if i % 23 == 0:
            a['esc"key'] = 'v\\al"ue\n\t'
        if i % 29 == 0:
            a["uni"] = "héllo ✓ \U0001f600"
        if i % 31 == 0:
            a["ret"] = None
        if i % 37 == 0:
            a["hhash"] = "abc"
        if i % 41 == 0:
            a["offset"] = random.choice([5, "7", 2.5, None])
        if i % 43 == 0:
            a["dur"] = 5
            a["dur_sum"] = 99
        if i % 47 == 0:
            a["hostname"] = random.choice(["h2", 5, "node\u00e9"])
        e = ev(i, random.choice(["read", "write", "fread", "_read_chk", "open64", "pread64", "compute"]), a)
        if i % 53 == 0:
            e["ph"] = random.choice(["A", 3, "M", 1, 4])
        if i % 59 == 0:
            e["ts"] = random.choice([-1, 2**62, "123", 1.5, 10**18])
        if i % 61 == 0:
            e["dur"] = random.choice([-3, 0, 2**62, 7.9])
        if i % 67 == 0:
            e["cat"] = random.choice(["dftracer", "STDIO", 'x\\"y'])
        if i % 71 == 0:
            del e["args"]
        if i % 73 == 0:
            e["args"] = {}
        if i % 79 == 0:
            e["pid"] = random.choice([-0, 0, "5", 5.0])
        s = line(e, sep=random.choice([(",", ":"), (", ", ": ")]) if i % 5 == 0 else (",", ":"))
        if i % 83 == 0:
            s = "  " + s + " ,\r"
        if i % 89 == 0:
            s = s[: len(s) // 2]  # cut line
        if i % 101 == 0:
            s = s.replace('"read"', '"re\\u0061d"')
        if i % 103 == 0:
            s = s + "}"
        if i % 107 == 0:
            s = s.replace(":7,", ":007,", 1)
        if i % 109 == 0:
            s = s.replace('"ts":', '"ts": -0, "x":', 1)
        if i % 113 == 0:
            s = s.encode("utf-8").replace(b"POSIX", b"PO\xffIX").decode("latin-1")
        if i % 127 == 0:
            s = s.replace(',"args":{', ',"args":{"big":"' + "y" * 70000 + '",', 1)
        if i % 131 == 0:
            s = ""
        lines.append(s)
    many = {f"key{k}": k for k in range(300)}
    lines.append(line(ev(5000, "read", many)))
    lines.append(line(ev(5001, "read", {"args_extra": 1, "key5": 2})))
    body = "\n".join(lines) + "\n"

    # latin-1 round-trip keeps the \xff byte of the PO\xffIX lines
    raw = body.encode("utf-8", "surrogatepass")
    raw = raw.replace("PO\u00ffIX".encode("utf-8"), b"PO\xffIX")
    open(os.path.join(d, "plain.pfw"), "wb").write(raw)

    def gz(name, data, members, cut=0):
        ls = data.split(b"\n")
        per = max(1, len(ls) // members)
        out = b""
        for k in range(0, len(ls), per):
            chunk = b"\n".join(ls[k : k + per]) + (b"\n" if k + per < len(ls) else b"")
            if chunk:
                out += gzip.compress(chunk, mtime=0)
        if cut:
            out = out[:-cut]
        open(os.path.join(d, name), "wb").write(out)

    gz("one.pfw.gz", raw, 1)
    gz("members.pfw.gz", raw, 40)
    gz("truncated.pfw.gz", raw, 40, cut=100)
    # big: crosses 4 MiB chunks; garbage in the middle member
    big = raw * 4
    gz("big.pfw.gz", big, 200)
    data = open(os.path.join(d, "big.pfw.gz"), "rb").read()
    p = len(data) // 2
    data = data[:p] + bytes(b ^ 0x55 for b in data[p : p + 50]) + data[p + 50 :]
    open(os.path.join(d, "corrupt.pfw.gz"), "wb").write(data)
    print(len(raw), "bytes of text")


def main():
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    elif sys.argv[1] == "child":
        child(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        a = pickle.load(open(sys.argv[2], "rb"))
        b = pickle.load(open(sys.argv[3], "rb"))
        assert a.keys() == b.keys(), "key sets differ"
        bad = [k for k in a if a[k] != b[k]]
        for k in bad[:10]:
            print("DIFF", k)
        print(f"{len(a)} results compared, {len(bad)} differ")
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
