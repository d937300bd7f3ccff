"""One traced program for tests/test_pydftracer_contract.py, run unchanged by our
``dftracer.python`` and by PyPI pydftracer 2.0.x's ``dftracer.python`` (which drives our core
through ``dftracer.dftracer``). Uses only forms on which both Python layers agree (method tags
read from ``self`` and from parameters, ``with``/``update``, the ``ai`` tree, iter, metadata).
Usage: python pydftracer_program.py TRACE_FILE [v1]   (v1: the pydftracer 1.0.x logger API)
"""

import sys


def run_v2(trace: str) -> None:
    from dftracer.python import ai, dft_fn, dftracer

    log = dftracer.initialize_log(logfile=trace, data_dir=None, process_id=0)
    read_fn = dft_fn("reader")

    class Reader:
        def __init__(self):
            self.epoch = 1
            self.step = 0

        @read_fn.log
        def read(self, image_idx):
            return image_idx * 2

    r = Reader()
    for i in range(5):
        r.step = i + 1
        r.read(i)
    with dft_fn("block", name="region", epoch=3) as b:
        b.update(step=7, image_size=4096.0, args={"label": "train", "ratio": 0.25})
    log.log_metadata_event("workload", "pydftracer_program")

    @ai.data.item
    def item(i):
        return i

    @ai.compute
    def compute(x):
        return x + 1

    for epoch in ai.pipeline.epoch.iter(range(1, 3), include_iter=False):
        ai.update(epoch=epoch)
        for step, x in enumerate(ai.dataloader.fetch.iter([item(i) for i in range(4)]), 1):
            ai.update(step=step)
            compute(x)
    with ai.checkpoint.capture:
        pass
    log.finalize()


def run_v1(trace: str) -> None:
    from dftracer.logger import dft_fn, dftracer

    log = dftracer.initialize_log(trace, None, 0)
    read_fn = dft_fn("reader")

    class Reader:
        def __init__(self):
            self.epoch = 1
            self.step = 0

        @read_fn.log
        def read(self, i):  # 1.0.x reads tags from self only
            return i * 2

    r = Reader()
    for i in range(5):
        r.step = i + 1
        r.read(i)
    with dft_fn("block", name="region", epoch=3) as b:
        b.update(step=7, args={"label": "train"})
    static_fn = dft_fn("static")

    class Util:
        @staticmethod
        @static_fn.log_static
        def helper():
            return 1

    for _ in range(3):
        Util.helper()
    log.finalize()


if __name__ == "__main__":
    (run_v1 if sys.argv[2:] == ["v1"] else run_v2)(sys.argv[1])
