"""DLIO's ai-logging checks against a DLIO-shaped workload that uses the ``ai`` API (issues 6, 11).

PyPI's dlio-benchmark 2.0.0 predates ``dftracer.python.ai`` (see test_dlio_e2e.py for that
release), and DLIO's GitHub head (which uses ``ai``) cannot be installed offline (it is not on PyPI
and needs nvidia-dali-cuda120, a stub that downloads from NVIDIA's index). Newer DLIO annotates its
training loop with ``ai``: ``@ai`` on ``run`` (ai_root), ``ai.pipeline.epoch.iter(...,
include_iter=False)`` over epochs (epoch.block), ``@ai.pipeline.train`` on ``_train``,
``ai.dataloader.fetch.iter`` over the loader inside its ``next()`` (fetch.iter), ``@ai.compute``,
and ``@ai.data.item`` / ``@ai.data.preprocess`` in the reader: in DataLoader worker processes
(pytorch) or in tf.data's threads (tensorflow, ``from_generator``). This file's ``__main__`` is
such a workload (same structure, our own code, NPZ files read with numpy), run as two ranks
(``trace-<rank>-of-2.pfw``, each reading its own ``num_data`` files, as DLIO's test with
``NUM_PROCS=2``) under ``LD_PRELOAD`` with ``DFTRACER_ENABLE=1``. The test applies the counting of
DLIO's ``tests/dlio_ai_logging_test.py::test_ai_logging_train`` (exact substrings, per-rank
equalities, global lower bounds) for both loaders, through PyPI pydftracer 2.0.6's
``dftracer.python`` (``build/dlio-venv``, made by scripts/install_dlio_deps.sh) and through our own
``dftracer.python`` with no pydftracer (the interpreter running the tests).
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from collections import Counter

import pytest

pytestmark = pytest.mark.slow
EPOCHS = 2


# ------------------------------------------------------------------------------ the workload
def _workload(data: str, out: str, batch: int, workers: int, framework: str, rank: int, size: int) -> None:
    import time

    import numpy as np

    from dftracer.python import ai, dftracer

    files = sorted(glob.glob(os.path.join(data, "*.npz")))
    per_rank = len(files) // size
    files = files[rank * per_rank : (rank + 1) * per_rank]

    class Reader:
        @ai.data.item
        def read(self, idx):
            with np.load(files[idx]) as z:
                x = z["x"]
            return self.preprocess(x)

        @ai.data.preprocess
        def preprocess(self, x):
            return x.astype(np.float32) / 255.0

    if framework == "pytorch":
        import torch
        from torch.utils.data import DataLoader, Dataset

        class NPZDataset(Dataset):
            reader = Reader()

            def __len__(self):
                return len(files)

            def __getitem__(self, idx):
                return torch.from_numpy(self.reader.read(idx))

        def make_loader():
            return DataLoader(
                NPZDataset(),
                batch_size=batch,
                shuffle=False,
                drop_last=True,
                num_workers=workers,
                persistent_workers=workers > 0,
                multiprocessing_context="fork" if workers > 0 else None,
            )
    else:
        import tensorflow as tf

        def samples():
            reader = Reader()
            for idx in range(len(files)):
                yield reader.read(idx)

        def make_loader():
            ds = tf.data.Dataset.from_generator(samples, output_signature=tf.TensorSpec((64, 64), tf.float32))
            return ds.batch(batch, drop_remainder=True)

    class Loader:
        def __init__(self):
            self.loader = make_loader()

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
            return float(np.asarray(b).sum())

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

    log = dftracer.initialize_log(
        logfile=os.path.join(out, f"trace-{rank}-of-{size}.pfw"), data_dir=data, process_id=rank
    )
    Benchmark().run()
    log.finalize()


# ---------------------------------------------------------------------------------- the test
# DLIO tests/dlio_ai_logging_test.py::check_ai_events: counter key -> (cat, name) of the event.
AI_EVENTS = {
    "root": ("ai_root", "ai_root"),
    "compute": ("compute", "compute"),
    "item": ("data", "item"),
    "preprocess": ("data", "preprocess"),
    "fetch_iter": ("dataloader", "fetch.iter"),
    "ckpt_capture": ("checkpoint", "capture"),
    "ckpt_restart": ("checkpoint", "restart"),
    "train": ("pipeline", "train"),
    "eval": ("pipeline", "evaluate"),
    "epoch": ("pipeline", "epoch.block"),
}


def _records(path: str) -> list:
    # Imported here: this file also runs as the workload script, in DLIO's venv (no pytest there).
    from conftest import read_trace

    return read_trace(path)


def check_ai_events(path: str) -> Counter:
    """DLIO tests/dlio_ai_logging_test.py::check_ai_events, reproduced on the decoded records
    (conftest.read_trace also checks the file's layout)."""
    c = Counter({key: 0 for key in AI_EVENTS})
    want = {v: k for k, v in AI_EVENTS.items()}
    for r in _records(path):
        key = want.get((r.get("cat"), r.get("name")))
        if key is not None:
            c[key] += 1
    return c


NUM_PROCS = 2
DLIO_VENV_PYTHON = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "dlio-venv", "bin", "python"
)


def _interpreter(layer: str) -> str:
    """'pydftracer': DLIO's venv (PyPI pydftracer 2.0.6 beside our package); 'ours': this one."""
    if layer == "ours":
        return sys.executable
    py = os.environ.get("DFTRACER_DLIO_PYTHON") or DLIO_VENV_PYTHON
    if not os.path.exists(py):
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        subprocess.run(
            ["bash", os.path.join(root, "scripts", "install_dlio_deps.sh")],
            check=True,
            env=dict(os.environ, PYTHON=sys.executable),
        )
    return py


def _api_origin(py: str):
    code = (
        "import dftracer.python as p, importlib.metadata as md\n"
        "try: v = md.version('pydftracer')\nexcept md.PackageNotFoundError: v = None\n"
        "print(p.__file__, v)"
    )
    res = subprocess.run(
        [py, "-c", code], capture_output=True, text=True, timeout=120, env=dict(os.environ, DFTRACER_ENABLE="0")
    )
    assert res.returncode == 0, res.stderr[-2000:]
    path, version = res.stdout.split()
    return path, (None if version == "None" else version)


# DLIO's (num_data, batch_size) grid (even and odd of each), once each, over both loaders and both
# Python layers.
CASES = [
    ("pytorch", 9, 2, "pydftracer"),
    ("tensorflow", 10, 3, "pydftracer"),
    ("pytorch", 10, 2, "ours"),
    ("tensorflow", 9, 3, "ours"),
]


@pytest.mark.parametrize("framework, num_data, batch_size, layer", CASES)
def test_ai_logging_train(tmp_path, framework, num_data, batch_size, layer):
    import numpy as np

    py = _interpreter(layer)
    api_file, pyd = _api_origin(py)
    if layer == "pydftracer":
        assert pyd == "2.0.6" and api_file.endswith(os.path.join("dftracer", "python", "__init__.py"))
    else:
        assert pyd is None and api_file.endswith(os.path.join("dftracer", "python.py"))

    data = tmp_path / "data"
    out = tmp_path / "out"
    data.mkdir()
    rng = np.random.default_rng(num_data * 10 + batch_size)
    for i in range(num_data * NUM_PROCS):
        np.savez(data / f"img_{i:02d}.npz", x=rng.integers(0, 255, (64, 64), dtype=np.uint8), y=[0])
    preload = subprocess.run(
        [py, "-m", "dftracer", "--preload-path"], check=True, capture_output=True, text=True
    ).stdout.strip()
    env = dict(
        os.environ,
        DFTRACER_ENABLE="1",
        DFTRACER_INC_METADATA="1",
        DFTRACER_DATA_DIR=str(data),
        DFTRACER_LOG_FILE=str(out / "trace"),
        LD_PRELOAD=preload,
    )
    workers = "2" if framework == "pytorch" else "0"
    procs = [
        subprocess.Popen(
            [
                py,
                os.path.abspath(__file__),
                str(data),
                str(out),
                str(batch_size),
                workers,
                framework,
                str(rank),
                str(NUM_PROCS),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(NUM_PROCS)
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]

    paths = glob.glob(str(out / "*.pfw.gz")) + glob.glob(str(out / "*.pfw"))
    assert paths, "No pfw files found"
    total = Counter()
    for p in paths:
        total.update(check_ai_events(p))
    iters = EPOCHS * (num_data // batch_size)
    for rank in range(NUM_PROCS):
        main = [p for p in paths if os.path.basename(p).startswith(f"trace-{rank}-of-{NUM_PROCS}.pfw")]
        assert len(main) == 1, paths
        c = check_ai_events(main[0])
        assert c["root"] == 1
        assert c["epoch"] == EPOCHS
        assert c["train"] == EPOCHS
        assert c["eval"] == 0
        assert c["fetch_iter"] == iters
        assert c["compute"] == iters
        assert c["ckpt_capture"] == 0 and c["ckpt_restart"] == 0
        if framework == "pytorch":
            # Items and preprocessing run in the two forked workers, not in the rank's process.
            assert c["item"] == 0 and c["preprocess"] == 0
        else:
            # tf.data runs the generator on its threads: in the rank's own trace.
            assert c["item"] > 0 and c["item"] == c["preprocess"]
    assert total["item"] >= NUM_PROCS * iters and total["preprocess"] >= NUM_PROCS * iters
    if framework == "pytorch":
        # drop_last: each epoch fetches the samples of the full batches only.
        assert total["item"] == NUM_PROCS * EPOCHS * (num_data // batch_size) * batch_size
    else:
        # from_generator runs the generator to its end to find the last full batch.
        assert total["item"] == NUM_PROCS * EPOCHS * num_data
    assert total["preprocess"] == total["item"]
    # Every process's POSIX reads of the dataset are in the trace too (hybrid mode).
    reads = sum(
        1
        for p in paths
        for r in _records(p)
        if r.get("cat") == "POSIX" and r.get("name") == "read" and str(data) in str(r.get("args"))
    )
    assert reads > 0


if __name__ == "__main__":
    _workload(
        sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6]), int(sys.argv[7])
    )
