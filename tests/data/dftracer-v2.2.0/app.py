# Small Python program traced with upstream DFTracer 2.2.0's Python API (pydftracer 2.0.6 over the
# native dftracer 2.2.0 module): decorated functions, a region, and file I/O under the preload.
import os
import sys

from dftracer.python import dftracer, dft_fn

log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)
dlp = dft_fn("app")


@dlp.log
def read_file(path):
    with open(path, "rb") as f:
        return len(f.read())


@dlp.log
def compute(n):
    return sum(range(n))


def main(d):
    for i in range(3):
        with open(os.path.join(d, f"py{i}.bin"), "wb") as f:
            f.write(b"y" * (2048 + i))
    total = 0
    for i in range(3):
        total += read_file(os.path.join(d, f"py{i}.bin"))
        compute(1000)
    with dft_fn("app", "region_block"):
        compute(10)
    log.finalize()
    print(total)


main(sys.argv[1])
