"""The call table src/format/calls.def is the one list of intercepted calls (issue 13).

* docs/preload.md's call table names exactly the calls of calls.def that record events.
* libdftracer_preload.so exports exactly the calls of calls.def (nothing intercepted is missing
  from the table, nothing in the table lacks a wrapper).
* The reader's byte rule is calls.def's: a traced C program built with _FILE_OFFSET_BITS=64
  calls preadv64v2/pwritev64v2 (glibc's names for preadv2/pwritev2 there), and loaded through
  the reader every byte-moving event has size == the bytes it moved.
"""

import os
import re
import shutil
import subprocess

import pandas as pd
from conftest import ROOT, read_trace
from test_preload_helpers import preload_lib, trace_files, traced_env

from dfanalyzer import reader as R

CALL = re.compile(r"^DFT_CALL\((\w+),\s*(\w+),\s*([^,]+?),\s*(\(.*\)),\s*(\w+)\)\s*$")


def calls():
    """[(interface, name, ret, params, bytes)] of src/format/calls.def, in order."""
    out = []
    with open(os.path.join(ROOT, "src", "format", "calls.def")) as f:
        for line in f:
            if line.startswith("DFT_CALL("):
                m = CALL.match(line)
                assert m, line
                out.append(m.groups())
    return out


def test_calls_def_is_well_formed():
    rows = calls()
    names = [r[1] for r in rows]
    assert len(names) == len(set(names))
    assert len([r for r in rows if r[0] in ("POSIX", "STDIO", "PROCESS")]) == 128  # libc's calls
    assert {r[0] for r in rows} == {"POSIX", "STDIO", "PROCESS", "HDF5", "MPIIO"}
    assert {r[4] for r in rows} == {"RET", "RET_TIMES_SIZE", "RET_COPY", "ARG_SIZE", "NONE", "NO_EVENT"}
    # HDF5: the data calls carry their bytes in args.size (the wrapper computes them).
    assert {r[1] for r in rows if r[4] == "ARG_SIZE" and r[0] == "HDF5"} == {
        "H5Dread",
        "H5Dwrite",
        "H5Aread",
        "H5Awrite",
    }
    assert all(r[0] == "HDF5" for r in rows if r[1].startswith("H5"))
    # MPI-IO: every data call (read/write, all forms) carries its bytes in args.size
    mpi = {r[1]: r[4] for r in rows if r[0] == "MPIIO"}
    assert {n for n, b in mpi.items() if b == "ARG_SIZE"} == {
        n for n in mpi if n.startswith("MPI_File_") and ("read" in n or "write" in n)
    }
    assert len([n for n, b in mpi.items() if b == "ARG_SIZE"]) == 22
    byte_calls = {r[1]: r[4] for r in rows if r[4] in ("RET", "RET_TIMES_SIZE")}
    assert byte_calls["preadv64v2"] == byte_calls["pwritev64v2"] == "RET"
    assert {n for n, b in byte_calls.items() if b == "RET_TIMES_SIZE"} == {"fread", "__fread_chk", "fwrite"}
    copies = {r[1] for r in rows if r[4] == "RET_COPY"}
    assert copies == {"copy_file_range", "sendfile", "sendfile64", "splice"}


def test_docs_call_table_matches_calls_def():
    text = open(os.path.join(ROOT, "docs", "preload.md")).read()
    module = {
        "POSIX": "posix.cpp",
        "STDIO": "stdio.cpp",
        "PROCESS": "process.cpp",
        "HDF5": "hdf5.cpp",
        "MPIIO": "mpiio.cpp",
    }
    for iface, src in module.items():
        row = re.search(r"^\| `%s` \| (.*) \| `%s` \|$" % (re.escape(src), iface), text, re.M)
        assert row, f"docs/preload.md has no call-table row for {src}"
        documented = set(re.findall(r"`([^`]+)`", row.group(1)))
        documented = {n for item in documented for n in item.split()}
        want = {r[1] for r in calls() if r[0] == iface and r[4] != "NO_EVENT"}
        assert documented == want, (src, sorted(documented - want), sorted(want - documented))


def test_preload_exports_exactly_calls_def():
    nm = shutil.which("nm")
    assert nm, "nm (binutils) is required: apt-get install binutils"
    out = subprocess.run([nm, "-D", "--defined-only", preload_lib()], capture_output=True, text=True, check=True).stdout
    exported = {line.split()[-1] for line in out.splitlines() if line.split()[1:2] in (["T"], ["W"])}
    assert exported == {r[1] for r in calls()}


PROG = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
int main(int argc, char** argv) {
  static char a[3000], b[5192];
  memset(a, 'a', sizeof a);
  memset(b, 'b', sizeof b);
  struct iovec w[2] = {{a, sizeof a}, {b, sizeof b}};
  int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || pwritev2(fd, w, 2, 0, 0) != 8192) return 1;     /* pwritev64v2 */
  struct iovec r[2] = {{b, 100}, {a, 2900}};
  if (preadv2(fd, r, 2, 10, 0) != 3000) return 2;                 /* preadv64v2 */
  if (preadv2(fd, r, 2, 8000, 0) != 192) return 3;                /* short read at the end */
  FILE* fp = fdopen(dup(fd), "r");
  if (fp == NULL || fread(a, 7, 3, fp) != 3) return 4;            /* 21 bytes */
  fclose(fp);
  return close(fd);
}
"""


def test_preadv64v2_bytes_reach_the_reader(tmp_path):
    src = tmp_path / "v2.c"
    src.write_text(PROG)
    exe = tmp_path / "v2"
    subprocess.run(["gcc", "-O1", "-D_FILE_OFFSET_BITS=64", "-o", str(exe), str(src)], check=True)
    nm = shutil.which("nm")
    if nm is not None:  # the program really calls the 64v2 entry points
        undef = subprocess.run([nm, "-D", "--undefined-only", str(exe)], capture_output=True, text=True).stdout
        assert "preadv64v2" in undef and "pwritev64v2" in undef
    data = tmp_path / "data"
    data.mkdir()
    prefix = str(tmp_path / "trace")
    env = traced_env(preload_lib(), prefix, str(data))
    proc = subprocess.run([str(exe), str(data / "f.bin")], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    files = trace_files(prefix)
    assert len(files) == 1
    recs = [r for r in read_trace(files[0]) if r.get("cat") in ("POSIX", "STDIO")]
    assert [r["name"] for r in recs] == [
        "open64",
        "pwritev64v2",
        "preadv64v2",
        "preadv64v2",
        "dup",
        "fdopen",
        "fread",
        "fclose",
        "close",
    ]
    e = R.load_batch(files[0], 0, 0).events
    e = e[e["cat"].astype(str).isin(["POSIX", "STDIO"])]
    sizes = {}
    for name, size in zip(e["name"].astype(str), e["size"]):
        sizes.setdefault(name, []).append(None if pd.isna(size) else int(size))
    assert sizes["pwritev64v2"] == [8192]
    assert sizes["preadv64v2"] == [3000, 192]
    assert sizes["fread"] == [21]
    assert sizes["open64"] == [None] and sizes["close"] == [None]
