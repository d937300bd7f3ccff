"""Bounded libFuzzer runs over the parser, the indexer, forged member headers and the tracer's
line_deflate encoder (round trip through zlib) (clang + libclang-rt).

Each run is deterministic: a fixed seed and a fixed number of inputs per target (scaled by
$DFTRACER_FUZZ_SCALE, default 1), so a CI run repeats exactly what passed here. Longer
exploratory runs: DFTRACER_FUZZ_SCALE=50 DFTRACER_FUZZ_SEED=<n>."""

import glob
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src", "reader")
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import gen_traces  # noqa: E402

# Inputs per target at scale 1: about 10-20 s each on this 2-core machine.
RUNS = {"parser": 20000, "indexer": 1000, "member_headers": 3000, "line_deflate": 3000}
SCALE = float(os.environ.get("DFTRACER_FUZZ_SCALE", "1"))
SEED = int(os.environ.get("DFTRACER_FUZZ_SEED", "1"))


def _reader_sources():
    """The reader library's sources, as DFTRACER_READER_SOURCES in src/reader/CMakeLists.txt lists
    them (one list for the library, the CMake fuzz targets and these builds)."""
    import re

    text = open(os.path.join(SRC, "CMakeLists.txt")).read()
    names = re.search(r"set\(DFTRACER_READER_SOURCES\s+([^)]*)\)", text).group(1).split()
    return [os.path.join(SRC, n) for n in names]


def _build(tmp, target):
    exe = os.path.join(tmp, "fuzz_" + target)
    if target == "line_deflate":  # the tracer core's encoder alone
        core = os.path.join(ROOT, "src", "core")
        subprocess.run(
            [
                "clang++",
                "-std=c++17",
                "-g",
                "-O1",
                "-fsanitize=fuzzer,address,undefined",
                "-fno-sanitize-recover=undefined",
                "-I",
                core,
                "-I",
                os.path.join(ROOT, "include"),  # dftracer/export.h
                os.path.join(core, "fuzz_line_deflate.cpp"),
                os.path.join(core, "line_deflate.cpp"),
                "-lz",
                "-o",
                exe,
            ],
            check=True,
        )
        return exe
    cmd = (
        [
            "clang++",
            "-std=c++17",
            "-g",
            "-O1",
            "-fsanitize=fuzzer,address,undefined",
            "-fno-sanitize-recover=undefined",
            "-march=x86-64-v3",
            "-mpclmul",
            "-DSIMDJSON_EXCEPTIONS=0",
            "-I",
            SRC,
            os.path.join(SRC, "fuzz_%s.cpp" % target),
        ]
        + _reader_sources()
        + ["-lsimdjson", "-lz", "-lsqlite3", "-o", exe]
    )
    if target == "member_headers":  # built with the tracer's own member writer
        cmd[cmd.index("-I") + 2 : cmd.index("-I") + 2] = [
            "-I",
            os.path.join(ROOT, "src", "core"),
            "-I",
            os.path.join(ROOT, "include"),
            os.path.join(ROOT, "src", "core", "gzip_member.cpp"),
            os.path.join(ROOT, "src", "core", "line_deflate.cpp"),
        ]
    subprocess.run(cmd, check=True)
    return exe


@pytest.mark.slow
@pytest.mark.parametrize("target", ["parser", "indexer", "member_headers", "line_deflate"])
def test_fuzz(tmp_path, target):
    assert shutil.which("clang++"), "clang++ is required (apt-get install clang libclang-rt-14-dev)"
    exe = _build(str(tmp_path), target)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    lines = b"".join(list(gen_traces.event_lines(40, 7, "h")))
    legacy = os.path.join(ROOT, "tests", "data", "dftracer-legacy", "test.pfw")
    if target == "parser":
        (corpus / "a").write_bytes(lines)
        (corpus / "b").write_bytes(open(legacy, "rb").read()[:4000])
    elif target == "indexer":
        (corpus / "a").write_bytes(gen_traces.gzip_member(lines[:3000]) + gen_traces.gzip_member(lines[3000:]))
        (corpus / "b").write_bytes(open(legacy + ".gz", "rb").read())
    elif target == "line_deflate":  # control byte (probe mode), then trace text
        (corpus / "a").write_bytes(b"\0" + lines[:8000])
        (corpus / "b").write_bytes(b"\1" + lines[:3000] + bytes(range(256)) * 4)
    else:  # records (member, field, u32): csize over two members with a matching ISIZE, a huge usize, ...
        (corpus / "a").write_bytes(bytes([0, 0, 0, 0, 0, 3, 1, 0, 0, 0, 6, 2, 0, 0, 0]))
        (corpus / "b").write_bytes(bytes([4, 7, 0, 0, 0, 1, 0, 0, 0, 0x80]))
    # Inputs that once crashed or hung a target stay in its seed corpus as regressions.
    for seed in glob.glob(os.path.join(ROOT, "tests", "data", "fuzz", target, "*")):
        shutil.copy(seed, corpus / os.path.basename(seed))
    r = subprocess.run(
        [
            exe,
            "-seed=%d" % SEED,
            "-runs=%d" % int(RUNS[target] * SCALE),
            "-timeout=30",
            "-max_len=16384",
            "-rss_limit_mb=2048",
            str(corpus),
        ],
        capture_output=True,
        text=True,
        cwd=str(tmp_path),
        env=dict(os.environ, ASAN_OPTIONS="quarantine_size_mb=64:detect_leaks=1"),
    )
    tail = r.stderr[-3000:]
    assert r.returncode == 0, tail
    assert "ERROR: AddressSanitizer" not in r.stderr and "runtime error" not in r.stderr, tail
    assert "Done" in r.stderr, tail
