"""DLIO's ai-logging checks against a DLIO-shaped workload that uses the ``ai`` API (issue 6).

PyPI's dlio-benchmark 2.0.0 predates ``dftracer.python.ai`` (see test_dlio_e2e.py for that
release). Newer DLIO annotates its training loop with ``ai``: ``@ai`` on ``run`` (ai_root),
``ai.pipeline.epoch.iter(..., include_iter=False)`` over epochs (epoch.block),
``@ai.pipeline.train`` on ``_train``, ``ai.dataloader.fetch.iter`` over the PyTorch DataLoader
inside the loader's ``next()`` (fetch.iter), ``@ai.compute``, and ``@ai.data.item`` /
``@ai.data.preprocess`` in the dataset, which run in the DataLoader worker processes. This file's
``__main__`` is such a workload (same structure, our own code, NPZ files read with numpy); the test
runs it under ``LD_PRELOAD`` with ``DFTRACER_ENABLE=1`` and applies the counting of DLIO's
``tests/dlio_ai_logging_test.py`` (exact substrings, per-rank equalities, global lower bounds)
with its expected values for ``test_ai_logging_train``.
"""

from __future__ import annotations

import glob
import gzip
import os
import subprocess
import sys
from collections import Counter

import pytest

pytestmark = pytest.mark.slow
EPOCHS = 2


# ------------------------------------------------------------------------------ the workload
def _workload(data: str, out: str, batch: int, workers: int) -> None:
    import time

    import numpy as np
    import torch
    from torch.utils.data import DataLoader, Dataset

    from dftracer.python import ai, dftracer

    files = sorted(glob.glob(os.path.join(data, "*.npz")))

    class NPZDataset(Dataset):
        def __len__(self):
            return len(files)

        @ai.data.item
        def __getitem__(self, idx):
            with np.load(files[idx]) as z:
                x = z["x"]
            return self.preprocess(x)

        @ai.data.preprocess
        def preprocess(self, x):
            return torch.from_numpy(x.astype(np.float32) / 255.0)

    class Loader:
        def __init__(self):
            self.loader = DataLoader(NPZDataset(), batch_size=batch, shuffle=False, drop_last=True,
                                     num_workers=workers, persistent_workers=workers > 0,
                                     multiprocessing_context="fork" if workers > 0 else None)

        def next(self):
            for b in ai.dataloader.fetch.iter(self.loader):
                yield b

    class Benchmark:
        def __init__(self):
            self.loader = Loader()
            self.max_steps = len(files) // batch

        @ai.compute
        def compute(self, b):
            time.sleep(0.002)
            return float(b.sum())

        @ai.pipeline.train
        def _train(self, epoch):
            step = 1
            for b in self.loader.next():
                if step > self.max_steps:  # as newer DLIO: checked at the loop's top
                    break
                ai.update(epoch=epoch, step=step)
                self.compute(b)
                step += 1
            return step - 1

        @ai
        def run(self):
            for epoch in ai.pipeline.epoch.iter(range(1, EPOCHS + 1), include_iter=False):
                self._train(epoch)

    log = dftracer.initialize_log(logfile=os.path.join(out, "trace-0-of-1.pfw"), data_dir=data,
                                  process_id=0)
    Benchmark().run()
    log.finalize()


# ---------------------------------------------------------------------------------- the test
def _lines(path: str):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            yield line


def check_ai_events(path: str) -> Counter:
    """DLIO tests/dlio_ai_logging_test.py::check_ai_events, reproduced (gzip-aware)."""
    c = Counter(root=0, compute=0, item=0, preprocess=0, fetch_iter=0, train=0, eval=0, epoch=0,
                ckpt_capture=0, ckpt_restart=0)
    for line in _lines(path):
        if "[" in line or "]" in line:
            continue
        if '"cat":"ai_root"' in line and '"name":"ai_root"' in line:
            c["root"] += 1
        if '"cat":"compute"' in line and '"name":"compute"' in line:
            c["compute"] += 1
        if '"cat":"data"' in line and '"name":"item"' in line:
            c["item"] += 1
        if '"cat":"data"' in line and '"name":"preprocess"' in line:
            c["preprocess"] += 1
        if '"cat":"dataloader"' in line and '"name":"fetch.iter"' in line:
            c["fetch_iter"] += 1
        if '"cat":"checkpoint"' in line and '"name":"capture"' in line:
            c["ckpt_capture"] += 1
        if '"cat":"checkpoint"' in line and '"name":"restart"' in line:
            c["ckpt_restart"] += 1
        if '"cat":"pipeline"' in line and '"name":"train"' in line:
            c["train"] += 1
        if '"cat":"pipeline"' in line and '"name":"evaluate"' in line:
            c["eval"] += 1
        if '"cat":"pipeline"' in line and '"name":"epoch.block"' in line:
            c["epoch"] += 1
    return c


@pytest.mark.parametrize("num_data, batch_size", [(9, 2), (9, 3), (10, 2), (10, 3)])
def test_ai_logging_train(tmp_path, num_data, batch_size):
    import numpy as np

    data = tmp_path / "data"
    out = tmp_path / "out"
    data.mkdir()
    rng = np.random.default_rng(num_data * 10 + batch_size)
    for i in range(num_data):
        np.savez(data / f"img_{i:02d}.npz", x=rng.integers(0, 255, (64, 64), dtype=np.uint8), y=[0])
    preload = subprocess.run([sys.executable, "-m", "dftracer", "--preload-path"], check=True,
                             capture_output=True, text=True).stdout.strip()
    env = dict(os.environ, DFTRACER_ENABLE="1", DFTRACER_INC_METADATA="1",
               DFTRACER_DATA_DIR=str(data), DFTRACER_LOG_FILE=str(out / "trace"), LD_PRELOAD=preload)
    res = subprocess.run([sys.executable, os.path.abspath(__file__), str(data), str(out),
                          str(batch_size), "2"], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]

    paths = glob.glob(str(out / "*.pfw.gz")) + glob.glob(str(out / "*.pfw"))
    assert paths, "No pfw files found"
    total = Counter()
    for p in paths:
        total.update(check_ai_events(p))
    main = [p for p in paths if os.path.basename(p).startswith("trace-0-of-1.pfw")]
    assert len(main) == 1, paths
    c = check_ai_events(main[0])
    iters = EPOCHS * (num_data // batch_size)
    assert c["root"] == 1
    assert c["epoch"] == EPOCHS
    assert c["train"] == EPOCHS
    assert c["eval"] == 0
    assert c["fetch_iter"] == iters
    assert c["compute"] == iters
    assert c["ckpt_capture"] == 0 and c["ckpt_restart"] == 0
    assert total["item"] >= iters and total["preprocess"] >= iters
    # Items and preprocessing run in the two forked workers, not in the main process.
    assert c["item"] == 0 and c["preprocess"] == 0
    # drop_last: each epoch fetches the samples of the full batches only.
    assert total["item"] == EPOCHS * (num_data // batch_size) * batch_size
    assert total["preprocess"] == total["item"]
    # Every worker's POSIX reads of the dataset are in the trace too (hybrid mode).
    reads = sum(1 for p in paths for line in _lines(p)
                if '"cat":"POSIX"' in line and '"name":"read"' in line and str(data) in line)
    assert reads > 0


if __name__ == "__main__":
    _workload(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
