"""An mpi4py MPI-IO program for tests/test_preload_mpiio.py: every rank writes and reads its own
blocks of one shared file, independently or collectively, blocking and non-blocking, and prints
its own counts as JSON to OUTDIR/rank<r>.json: {"rank", "size", "calls": {MPI call name:
[calls, bytes]}} (one file per rank: the ranks' stdout lines interleave under mpirun).

    mpirun -n N python mpiio_app.py PATH MODE BLOCKS BLOCK_ELEMS OUTDIR
MODE: "independent" (MPI_File_write_at / read_at, write / read after set_view, iwrite_at /
iread_at) or "collective" (MPI_File_write_at_all / read_at_all, write_all / read_all after
set_view, iwrite_at_all / iread_at_all).
"""

import json
import os
import sys
from collections import defaultdict

import numpy as np
from mpi4py import MPI


def main():
    path, mode, blocks, elems, outdir = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    calls = defaultdict(lambda: [0, 0])
    itemsize = np.dtype("i4").itemsize

    def note(name, nbytes):
        calls[name][0] += 1
        calls[name][1] += nbytes

    coll = mode == "collective"
    suffix = "_all" if coll else ""
    f = MPI.File.Open(comm, path, MPI.MODE_CREATE | MPI.MODE_RDWR)
    note("MPI_File_open", 0)
    block_bytes = elems * itemsize
    # blocking, explicit offsets: block b of rank r at ((b * size) + r) * block_bytes
    for b in range(blocks):
        data = np.full(elems, rank * 1000 + b, dtype="i4")
        off = (b * size + rank) * block_bytes
        (f.Write_at_all if coll else f.Write_at)(off, data)
        note("MPI_File_write_at" + suffix, block_bytes)
    f.Sync()
    note("MPI_File_sync", 0)
    comm.Barrier()
    total = 0
    for b in range(blocks):
        buf = np.empty(elems, dtype="i4")
        off = (b * size + rank) * block_bytes
        (f.Read_at_all if coll else f.Read_at)(off, buf)
        note("MPI_File_read_at" + suffix, block_bytes)
        assert (buf == rank * 1000 + b).all()
        total += int(buf.sum())
    # a strided view: the rank's blocks in order, through the individual file pointer
    ftype = MPI.INT.Create_vector(blocks, elems, elems * size)
    ftype.Commit()
    f.Set_view(rank * block_bytes, MPI.INT, ftype)
    note("MPI_File_set_view", 0)
    buf = np.empty(elems * blocks, dtype="i4")
    (f.Read_all if coll else f.Read)(buf)
    note("MPI_File_read" + suffix, buf.nbytes)
    assert (buf.reshape(blocks, elems)[:, 0] == rank * 1000 + np.arange(blocks)).all()
    f.Set_view(0, MPI.BYTE, MPI.BYTE)
    note("MPI_File_set_view", 0)
    # non-blocking, explicit offsets, after the written region
    base = blocks * size * block_bytes
    data = np.full(elems, -rank, dtype="i4")
    req = (f.Iwrite_at_all if coll else f.Iwrite_at)(base + rank * block_bytes, data)
    note("MPI_File_iwrite_at" + suffix, block_bytes)
    req.Wait()
    comm.Barrier()
    buf = np.empty(elems, dtype="i4")
    req = (f.Iread_at_all if coll else f.Iread_at)(base + rank * block_bytes, buf)
    note("MPI_File_iread_at" + suffix, block_bytes)
    req.Wait()
    assert (buf == -rank).all()
    f.Close()
    note("MPI_File_close", 0)
    ftype.Free()
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as out:
        json.dump({"rank": rank, "size": size, "total": total, "calls": calls}, out)


if __name__ == "__main__":
    main()
