"""Small example workload traced by the quick start.

It writes a few files, then reads them back in 2 epochs, once in this process and once in two
forked worker processes, with application-level events from ``dftracer.python``. Run it under
``dftracer-run`` so that POSIX/STDIO calls land in the same per-process trace files.

Usage: python scripts/example_app.py DATA_DIR [--files N] [--file-size BYTES]
"""

import argparse
import multiprocessing as mp
import os

from dftracer.python import ai, dft_fn, dftracer

app = dft_fn("app")


@dft_fn("reader").log
def read_file(path, block=4096):
    total = 0
    with open(path, "rb") as f:
        while True:
            chunk = f.read(block)
            if not chunk:
                break
            total += len(chunk)
    return total


@ai.compute
def compute(nbytes):
    # A little CPU work proportional to the data read.
    acc = 0
    for i in range(nbytes // 64):
        acc += i & 7
    return acc


def worker(paths):
    return sum(read_file(p) for p in paths)


@app.log
def generate(data_dir, n_files, file_size):
    os.makedirs(data_dir, exist_ok=True)
    paths = []
    for i in range(n_files):
        path = os.path.join(data_dir, f"sample_{i:03d}.bin")
        with open(path, "wb") as f:
            f.write(os.urandom(file_size))
        paths.append(path)
    return paths


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir")
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--file-size", type=int, default=256 * 1024)
    args = parser.parse_args()

    data_dir = os.path.abspath(args.data_dir)
    paths = generate(data_dir, args.files, args.file_size)
    for _epoch in ai.pipeline.epoch.iter(range(2)):
        with ai.data.item:
            nbytes = sum(read_file(p) for p in paths)
        compute(nbytes)
        ctx = mp.get_context("fork")
        with ctx.Pool(2) as pool:
            nbytes = sum(pool.map(worker, [paths[0::2], paths[1::2]]))
        compute(nbytes)
    dftracer.get_instance().finalize()
    print(f"example_app: read {2 * 2 * args.files * args.file_size} bytes from {data_dir}")


if __name__ == "__main__":
    main()
