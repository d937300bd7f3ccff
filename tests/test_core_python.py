"""Python tracer API (dftracer.python / dftracer.logger) against the real core.

Every tracing scenario runs in its own Python subprocess with its own environment and its own
pytest tmp_path, then the trace files are read back with gzip/json: every line except the
opening ``[`` must be valid JSON.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter

import pytest
from conftest import pythonpath_env, read_trace

# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def make_env(tmp_path, enable=True, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_") and k != "LD_PRELOAD"}
    env = pythonpath_env(env)
    if enable:
        env["DFTRACER_ENABLE"] = "1"
        env["DFTRACER_LOG_FILE"] = str(tmp_path / "trace")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_app(tmp_path, code, enable=True, **extra_env):
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(code))
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=make_env(tmp_path, enable, **extra_env),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def trace_files(tmp_path):
    return sorted(p for p in tmp_path.iterdir() if ".pfw" in p.name)


def events(records, cat=None):
    return [r for r in records if r.get("ph") == "X" and (cat is None or r.get("cat") == cat)]


def all_events(tmp_path, cat=None):
    files = trace_files(tmp_path)
    assert files, f"no trace file in {tmp_path}: {os.listdir(tmp_path)}"
    return {f: events(read_trace(f), cat) for f in files}


# ---------------------------------------------------------------------------------------------
# import surface
# ---------------------------------------------------------------------------------------------


def test_both_import_paths_export_the_same_objects(tmp_path):
    proc = run_app(
        tmp_path,
        """
        import dftracer.python as P, dftracer.logger as L
        from dftracer.logger import dftracer, dft_fn, ai, DFTRACER_ENABLE
        for n in ("dftracer", "dft_fn", "ai", "DFTRACER_ENABLE"):
            assert getattr(P, n) is getattr(L, n), n
        assert DFTRACER_ENABLE is True
        assert ai.compute.name == "compute" and ai.compute.cat == "compute"
        assert ai.data.item.name == "item" and ai.data.item.cat == "data"
        assert ai.checkpoint.init.name == "checkpoint.init"
        assert ai.checkpoint.init.cat == "checkpoint"
        assert (ai.name, ai.cat) == ("ai_root", "ai_root")
        print("ok")
    """,
    )
    assert proc.stdout.strip() == "ok"


# ---------------------------------------------------------------------------------------------
# disabled mode
# ---------------------------------------------------------------------------------------------

DISABLED_APP = """
    import sys
    from dftracer.python import dftracer, dft_fn, ai, DFTRACER_ENABLE
    assert DFTRACER_ENABLE is False
    log = dftracer.initialize_log(logfile="{tmp}/explicit.pfw", data_dir="{tmp}", process_id=0)
    d = dft_fn("c")
    @d.log
    def f(x, step=1):
        d.update(step=x)
        return x + 1
    assert f.__name__ == "f" and f(1) == 2
    with d:
        pass
    assert list(d.iter(range(3))) == [0, 1, 2]
    assert list(ai.dataloader.fetch.iter([4, 5])) == [4, 5]
    @ai.compute
    def g():
        return 7
    assert g() == 7
    with ai.data.item:
        ai.update(epoch=1)
    ai.compute.step.start(); ai.compute.step.stop()
    log.log_event("x", "y", 0, 1, {{"a": 1}})
    log.log_metadata_event("k", "v")
    log.finalize(); log.finalize()
    with open("{tmp}/data.bin", "wb") as fh:
        fh.write(b"abc")
    # The core decides (one parser); with no switch variable set it is not even loaded.
    import os
    loaded = "dftracer._dftracer" in sys.modules
    assert loaded == ("DFTRACER_ENABLE" in os.environ), loaded
    print("done")
"""


@pytest.mark.parametrize("value", [None, "0", "off", ""])
def test_disabled_mode_creates_no_files(tmp_path, value):
    extra = {} if value is None else {"DFTRACER_ENABLE": value}
    proc = run_app(
        tmp_path,
        DISABLED_APP.format(tmp=tmp_path),
        enable=False,
        DFTRACER_LOG_FILE=tmp_path / "trace",
        DFTRACER_DATA_DIR=tmp_path,
        **extra,
    )
    assert sorted(os.listdir(tmp_path)) == ["app.py", "data.bin"]
    # An empty DFTRACER_ENABLE= is the core's call for every API: warned about, tracing off.
    warned = "invalid value '' for DFTRACER_ENABLE" in proc.stderr
    assert warned == (value == ""), proc.stderr


def test_disabled_decorator_returns_the_function_itself(tmp_path):
    proc = run_app(
        tmp_path,
        """
        from dftracer.python import dft_fn, ai
        def f(): pass
        assert dft_fn("c").log(f) is f
        assert dft_fn("c").log_init(f) is f
        assert ai.compute(f) is f
        print("ok")
    """,
        enable=False,
    )
    assert proc.stdout.strip() == "ok"


# ---------------------------------------------------------------------------------------------
# counts and threads
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("compression", ["1", "0"])
def test_10000_calls_in_4_threads(tmp_path, compression):
    run_app(
        tmp_path,
        """
        import threading
        from dftracer.python import dft_fn
        d = dft_fn("threads")
        @d.log
        def work(i):
            return i * 2
        barrier = threading.Barrier(4)
        def run():
            barrier.wait()  # all four threads alive at once: four distinct tids
            for i in range(2500):
                work(i)
        ts = [threading.Thread(target=run) for _ in range(4)]
        [t.start() for t in ts]
        [t.join() for t in ts]
    """,
        DFTRACER_TRACE_COMPRESSION=compression,
    )
    files = trace_files(tmp_path)
    assert len(files) == 1
    assert files[0].name.endswith(".pfw.gz" if compression == "1" else ".pfw")
    evs = events(read_trace(files[0]), "threads")
    assert len(evs) == 10_000
    assert {e["name"] for e in evs} == {"work"}
    assert len({e["tid"] for e in evs}) == 4
    assert all(isinstance(e["ts"], int) and isinstance(e["dur"], int) and e["dur"] >= 0 for e in evs)


# ---------------------------------------------------------------------------------------------
# contextual tags
# ---------------------------------------------------------------------------------------------


def test_contextual_tags_appear_in_args(tmp_path):
    run_app(
        tmp_path,
        """
        import numpy as np
        from dftracer.python import dft_fn, ai
        d = dft_fn("tags", name="region", epoch=1)
        d.update(step=5, custom="x", ratio=0.5, big=np.int64(7), args={"extra": 3})
        with d:
            pass

        dl = dft_fn("tags")
        @dl.log
        def read_index(image_idx, step):          # call arguments become tags
            dl.update(image_size=4096)            # tag set while the call runs
            return image_idx
        read_index(11, step=2)

        @dl.log
        def varargs(x, *rest, epoch=None, **kw):  # keyword-only and **kwargs tags
            return x
        varargs(1, 2, 3, epoch=5, step=6, other=1)

        class Reader:
            def __init__(self):
                self.epoch = 3
            @dl.log
            def load(self):
                return 1
        Reader().load()

        ai.update(epoch=9, step=4)                # propagates through the whole tree
        with ai.compute.forward:
            pass
        for _ in ai.dataloader.fetch.iter([0]):
            pass

        # the most recent update of a key wins, wherever in the tree it was set
        ai.data.item.update(step=1, image_idx=8)
        with ai.data.item:
            pass                                   # step 1
        ai.update(step=2)
        with ai.data.item:
            pass                                   # step 2 (root update is newer)
        copy = ai.data.item(args={"extra": "c"})
        ai.data.update(step=3)
        with copy:
            pass                                   # a copy still follows the tree: step 3
    """,
    )
    (evs,) = all_events(tmp_path, None).values()
    by_name = {e["name"]: e for e in evs}
    assert by_name["region"]["cat"] == "tags"
    assert by_name["region"]["args"] == {"epoch": 1, "step": 5, "custom": "x", "ratio": 0.5, "big": 7, "extra": 3}
    assert by_name["read_index"]["args"] == {"image_idx": 11, "step": 2, "image_size": 4096}
    assert by_name["varargs"]["args"] == {"epoch": 5, "step": 6, "image_size": 4096}
    assert by_name["Reader.load"]["args"] == {"epoch": 3, "image_size": 4096}
    assert by_name["forward"]["cat"] == "compute"
    assert by_name["forward"]["args"] == {"epoch": 9, "step": 4}
    assert by_name["fetch.iter"]["args"] == {"epoch": 9, "step": 4, "count": 1}
    assert by_name["fetch.block"]["args"] == {"epoch": 9, "step": 4, "count": 1}
    items = [e["args"] for e in evs if e["name"] == "item"]
    assert items == [
        {"epoch": 9, "step": 1, "image_idx": 8},
        {"epoch": 9, "step": 2, "image_idx": 8},
        {"epoch": 9, "step": 3, "image_idx": 8, "extra": "c"},
    ]


# ---------------------------------------------------------------------------------------------
# API surface: decorators, context managers, start/stop, iter, metadata
# ---------------------------------------------------------------------------------------------


def test_api_forms_give_exact_events(tmp_path):
    run_app(
        tmp_path,
        """
        from dftracer.python import dftracer, dft_fn, ai
        log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)
        d = dft_fn("api")

        class C:
            @d.log_init
            def __init__(self, epoch):
                self.x = epoch
            @staticmethod
            @d.log_static
            def s(a):
                return a
            @d.log_static
            @staticmethod
            def s2(a):
                return a
            @d.log(name="renamed")
            def m(self):
                return self.x

        c = C(epoch=2)
        assert C.s(1) == 1 and C.s2(2) == 2 and c.m() == 2
        with dft_fn("api", name="ctx"):
            pass
        d2 = dft_fn("api", name="manual")
        d2.start(); d2.stop(); d2.stop()          # the second stop has nothing to close
        def loop():
            return [v for v in d.iter(range(3))]
        assert loop() == [0, 1, 2]
        assert [v for v in d.iter([7], name="named")] == [7]
        ai.compute.step.start(); ai.compute.step.stop()
        with ai.checkpoint.init:
            pass
        with ai.data.preprocess.derive("collate"):
            pass
        @ai.checkpoint.capture
        def save():
            return "saved"
        assert save() == "saved"
        tagged = ai.comm.all_reduce(epoch=5)
        with tagged:
            pass
        try:
            with ai.device.transfer:
                raise KeyError("boom")
        except KeyError:
            pass
        @ai.pipeline.evaluate
        def fails():
            raise ValueError("x")
        try:
            fails()
        except ValueError:
            pass
        t0 = log.get_time()
        log.log_event("manual_event", "api", t0, 5, {"k": "v", "n": 1})
        log.enter_event(); assert log.depth() == 1; log.exit_event(); log.exit_event()
        assert log.depth() == 0
        d.log_metadata("answer", 42)
        log.finalize()
    """,
    )
    (evs,) = all_events(tmp_path).values()
    got = Counter((e["name"], e["cat"]) for e in evs)
    assert got == Counter(
        {
            ("C.__init__", "api"): 1,
            ("C.s", "api"): 1,
            ("C.s2", "api"): 1,
            ("renamed", "api"): 1,
            ("ctx", "api"): 1,
            ("manual", "api"): 1,
            ("loop.iter", "api"): 3,
            ("loop.block", "api"): 3,
            ("named.iter", "api"): 1,
            ("named.block", "api"): 1,
            ("step", "compute"): 1,
            ("checkpoint.init", "checkpoint"): 1,
            ("preprocess.collate", "data"): 1,
            ("capture", "checkpoint"): 1,
            ("all_reduce", "comm"): 1,
            ("transfer", "device"): 1,
            ("evaluate", "pipeline"): 1,
            ("manual_event", "api"): 1,
        }
    )
    by_name = {e["name"]: e for e in evs}
    assert by_name["C.__init__"]["args"] == {"epoch": 2}
    assert by_name["all_reduce"]["args"] == {"epoch": 5}
    assert by_name["manual_event"]["args"] == {"k": "v", "n": 1}
    assert by_name["manual_event"]["dur"] == 5
    assert sorted(e["args"]["step"] for e in evs if e["name"] == "loop.iter") == [1, 2, 3]
    # the loop body event starts where the wait event ends
    waits = sorted((e for e in evs if e["name"] == "loop.iter"), key=lambda e: e["args"]["step"])
    bodies = sorted((e for e in evs if e["name"] == "loop.block"), key=lambda e: e["args"]["step"])
    for w, b in zip(waits, bodies):
        assert w["ts"] + w["dur"] == b["ts"]
    text = "\n".join(json.dumps(r) for r in read_trace(trace_files(tmp_path)[0]))
    assert "answer" in text and "42" in text  # the metadata record


# ---------------------------------------------------------------------------------------------
# DLIO benchmark's expectations (tests/dlio_ai_logging_test.py in dlio_benchmark)
# ---------------------------------------------------------------------------------------------

DLIO_APP = """
    from dftracer.{module} import dftracer as PerfTrace, dft_fn as Profile, ai as dft_ai, DFTRACER_ENABLE
    dlp = Profile("dlio_benchmark")
    NUM_EPOCHS, NUM_DATA, BATCH, TOTAL_STEPS = 2, {num_data}, {batch}, {total_steps}

    class Reader:
        @dft_ai.data.item
        def read_index(self, image_idx, step):
            with dft_ai.data.preprocess:
                dlp.update(image_size=10)
            return image_idx

    class Loader:
        def __init__(self):
            self.reader = Reader()
        @dlp.log
        def next(self):
            step = 1
            batches = [[self.reader.read_index(i * BATCH + j, i) for j in range(BATCH)]
                       for i in range(NUM_DATA // BATCH)]  # drop_last
            for batch in dft_ai.dataloader.fetch.iter(batches):
                dlp.update(step=step)
                dft_ai.update(step=step)
                step += 1
                yield batch

    class Framework:
        @dft_ai.compute
        def compute(self, batch, epoch, step, t):
            return len(batch)

    class Benchmark:
        def __init__(self):
            self.loader, self.fw = Loader(), Framework()
        @dft_ai.pipeline.train
        def _train(self, epoch):
            overall_step = 1
            max_steps = NUM_DATA // BATCH
            for batch in self.loader.next():
                if overall_step > max_steps or (TOTAL_STEPS > 0 and overall_step > TOTAL_STEPS):
                    break
                self.fw.compute(batch, epoch, overall_step, 0.0)
                overall_step += 1
            return overall_step
        @dft_ai
        def run(self):
            for epoch in dft_ai.pipeline.epoch.iter(range(1, NUM_EPOCHS + 1), include_iter=False):
                self._train(epoch)

    if __name__ == "__main__":
        assert DFTRACER_ENABLE
        log = PerfTrace.initialize_log(logfile="{tmp}/trace-0-of-1.pfw",
                                       data_dir="{tmp}/data:./data", process_id=0)
        Benchmark().run()
        log.finalize()
"""


def dlio_counts(path):
    """check_ai_events() of dlio_benchmark/tests/dlio_ai_logging_test.py: exact substrings."""
    c = Counter()
    with open(path) as f:
        for line in f:
            if "[" in line or "]" in line:
                continue
            for key, cat, name in (
                ("root", "ai_root", "ai_root"),
                ("compute", "compute", "compute"),
                ("item", "data", "item"),
                ("preprocess", "data", "preprocess"),
                ("fetch_iter", "dataloader", "fetch.iter"),
                ("ckpt_capture", "checkpoint", "capture"),
                ("ckpt_restart", "checkpoint", "restart"),
                ("train", "pipeline", "train"),
                ("eval", "pipeline", "evaluate"),
                ("epoch", "pipeline", "epoch.block"),
            ):
                if f'"cat":"{cat}"' in line and f'"name":"{name}"' in line:
                    c[key] += 1
    return c


@pytest.mark.parametrize(
    "module,num_data,batch,total_steps",
    [
        ("python", 9, 2, 0),
        ("python", 10, 3, 0),
        ("logger", 8, 2, 3),
        ("logger", 9, 3, 2),
    ],
)
def test_dlio_ai_event_counts(tmp_path, module, num_data, batch, total_steps):
    run_app(
        tmp_path,
        DLIO_APP.format(module=module, tmp=tmp_path, num_data=num_data, batch=batch, total_steps=total_steps),
        DFTRACER_TRACE_COMPRESSION="0",
    )
    paths = sorted(tmp_path.glob("*.pfw"))
    assert [p.name for p in paths] == ["trace-0-of-1.pfw"]
    read_trace(paths[0])  # layout + valid JSON
    c = dlio_counts(paths[0])
    epochs = 2
    steps = num_data // batch if total_steps == 0 else min(total_steps, num_data // batch)
    assert c["root"] == 1
    assert c["epoch"] == epochs
    assert c["train"] == epochs
    assert c["eval"] == 0
    assert c["fetch_iter"] == epochs * steps
    assert c["compute"] == epochs * steps
    assert c["ckpt_capture"] == 0 and c["ckpt_restart"] == 0
    # every item is read (and preprocessed) up front in this stand-in loader
    assert c["item"] == epochs * (num_data // batch) * batch
    assert c["preprocess"] == c["item"]


# ---------------------------------------------------------------------------------------------
# processes
# ---------------------------------------------------------------------------------------------

PROC_APP = """
    import multiprocessing as mp, os, subprocess, sys
    from dftracer.python import dft_fn
    d = dft_fn("proc")

    @d.log
    def parent_ev(i):
        return i

    @d.log
    def child_ev(i):
        return i

    def child_main(n):
        for i in range(n):
            child_ev(i)

    CHILD_CODE = "\\n".join([
        "from dftracer.python import dft_fn",
        "d = dft_fn('proc')",
        "@d.log",
        "def child_ev(i):",
        "    return i",
        "for i in range(50):",
        "    child_ev(i)",
    ])

    if __name__ == "__main__":
        for i in range(100):
            parent_ev(i)
        pids = []
        if "{method}" == "subprocess":
            for _ in range(2):
                p = subprocess.Popen([sys.executable, "-c", CHILD_CODE])
                pids.append(p.pid)
                assert p.wait() == 0
        else:
            ctx = mp.get_context("{method}")
            ps = [ctx.Process(target=child_main, args=(50,)) for _ in range(2)]
            for p in ps:
                p.start()
                pids.append(p.pid)
            for p in ps:
                p.join()
                assert p.exitcode == 0
        for i in range(100, 200):
            parent_ev(i)
        print(os.getpid(), *pids)
"""


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver", "subprocess"])
def test_children_trace_into_their_own_files(tmp_path, method):
    proc = run_app(tmp_path, PROC_APP.format(method=method))
    parent, *children = map(int, proc.stdout.split())
    per_file = all_events(tmp_path, "proc")
    per_file = {f: evs for f, evs in per_file.items() if evs}
    assert len(per_file) == 3, {f.name: len(e) for f, e in per_file.items()}
    owner = {}
    for f, evs in per_file.items():
        pids = {e["pid"] for e in evs}
        assert len(pids) == 1, f"{f.name} holds events of pids {pids}"
        (pid,) = pids
        assert str(pid) in f.name
        owner[pid] = evs
    assert set(owner) == {parent, *children}
    # the parent's file: all 200 of its events, once each, and nothing from a child
    assert Counter(e["name"] for e in owner[parent]) == Counter({"parent_ev": 200})
    for c in children:
        assert Counter(e["name"] for e in owner[c]) == Counter({"child_ev": 50})


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_idle_daemonic_worker_is_flushed_before_it_is_terminated(tmp_path, method):
    # Persistent DataLoader-style worker: daemonic, idle after its work, SIGTERMed by
    # multiprocessing when the parent exits (no finaliser runs). The idle flush must have put
    # its events on disk; the parent waits for that, then exits without joining.
    proc = run_app(
        tmp_path,
        """
        import glob, multiprocessing as mp, os, time
        from dftracer.python import dft_fn
        d = dft_fn("daemon")

        @d.log
        def work(step):
            return step

        def worker(ev):
            for i in range(20):
                work(i)
            ev.wait()  # idle forever

        def count(pid):
            n = 0
            for f in glob.glob("{tmp}/*%d*.pfw" % pid):
                with open(f) as fh:
                    n += sum('"name":"work"' in line for line in fh)
            return n

        if __name__ == "__main__":
            work(-1)
            ctx = mp.get_context("{method}")
            ev = ctx.Event()
            p = ctx.Process(target=worker, args=(ev,), daemon=True)
            p.start()
            deadline = time.monotonic() + 60
            while count(p.pid) < 20 and time.monotonic() < deadline:
                time.sleep(0.05)
            print(os.getpid(), p.pid)
    """.format(tmp=tmp_path, method=method),
        DFTRACER_TRACE_COMPRESSION="0",
    )
    parent, child = map(int, proc.stdout.split())
    per_pid = {}
    for evs in all_events(tmp_path, "daemon").values():
        for e in evs:
            per_pid.setdefault(e["pid"], []).append(e["args"]["step"])
    assert per_pid == {parent: [-1], child: list(range(20))}


def test_events_before_initialize_log_move_to_the_explicit_file(tmp_path):
    # DLIO logs its framework's __init__ before calling initialize_log(logfile=...): the lazily
    # started trace is renamed to the explicit name, nothing is lost or left behind.
    run_app(
        tmp_path,
        """
        from dftracer.python import dftracer, dft_fn
        d = dft_fn("early")
        @d.log_init
        def setup(epoch):
            return epoch
        for i in range(3):
            setup(i)
        log = dftracer.initialize_log(logfile="{tmp}/out/trace-0-of-1.pfw", data_dir=None,
                                      process_id=0)
        for i in range(3, 5):
            setup(i)
        log.finalize()
    """.format(tmp=tmp_path),
        DFTRACER_TRACE_COMPRESSION="0",
    )
    assert trace_files(tmp_path) == []
    files = trace_files(tmp_path / "out")
    assert [f.name for f in files] == ["trace-0-of-1.pfw"]
    evs = events(read_trace(files[0]), "early")
    assert [e["args"]["epoch"] for e in evs] == [0, 1, 2, 3, 4]


def test_fork_after_explicit_initialize_log(tmp_path):
    proc = run_app(
        tmp_path,
        """
        import os
        from dftracer.python import dftracer, dft_fn
        log = dftracer.initialize_log(logfile="{tmp}/main.pfw", data_dir=None, process_id=-1)
        d = dft_fn("fork")
        @d.log
        def ev(step):
            return step
        for i in range(10):
            ev(i)
        pid = os.fork()
        if pid == 0:
            for i in range(5):
                ev(100 + i)
            log.finalize()
            os._exit(0)
        assert os.waitpid(pid, 0)[1] == 0
        for i in range(10, 20):
            ev(i)
        log.finalize()
        print(os.getpid(), pid)
    """.format(tmp=tmp_path),
    )
    parent, child = map(int, proc.stdout.split())
    per_file = {f: evs for f, evs in all_events(tmp_path, "fork").items() if evs}
    assert len(per_file) == 2
    by_pid = {}
    for f, evs in per_file.items():
        (pid,) = {e["pid"] for e in evs}
        by_pid[pid] = (f, sorted(e["args"]["step"] for e in evs))
    assert by_pid[parent][1] == list(range(20))
    assert by_pid[child][1] == list(range(100, 105))
    assert by_pid[parent][0].name.startswith("main")
    assert str(child) in by_pid[child][0].name


# ---------------------------------------------------------------------------------------------
# faults
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("compression", ["1", "0"])
def test_sigkill_leaves_a_readable_prefix(tmp_path, compression):
    script = tmp_path / "app.py"
    script.write_text(
        textwrap.dedent("""
        import sys, time
        from dftracer.python import dft_fn
        d = dft_fn("kill")
        @d.log
        def ev(step):
            return step
        for i in range(20000):
            ev(i)
        print("ready", flush=True)
        while True:
            time.sleep(1)
    """)
    )
    env = make_env(tmp_path, DFTRACER_WRITE_BUFFER_SIZE="4096", DFTRACER_TRACE_COMPRESSION=compression)
    proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    (path,) = trace_files(tmp_path)
    evs = events(read_trace(path, allow_truncated=True), "kill")
    steps = [e["args"]["step"] for e in evs]
    # a prefix: 0, 1, 2, ... in order, with no gap; with 4 KiB buffers most of it is on disk
    assert steps == list(range(len(steps)))
    assert len(steps) >= 1000


def test_initialize_twice_finalize_twice_event_after_finalize(tmp_path):
    proc = run_app(
        tmp_path,
        """
        from dftracer.python import dftracer, dft_fn, ai
        log = dftracer.initialize_log(logfile="{tmp}/twice.pfw", data_dir=None, process_id=-1)
        log2 = dftracer.initialize_log(logfile="{tmp}/twice.pfw", data_dir=None, process_id=-1)
        assert log is log2 is dftracer.get_instance()
        d = dft_fn("life")
        @d.log
        def before(i):
            return i
        @d.log
        def after(i):
            return i
        for i in range(30):
            before(i)
        log.finalize()
        log.finalize()
        for i in range(30):
            after(i)
        with ai.compute:
            pass
        log.log_event("after_manual", "life", 0, 1, None)
        log.log_metadata_event("k", "v")
        print("survived")
    """.format(tmp=tmp_path),
        DFTRACER_TRACE_COMPRESSION="0",
    )
    assert proc.stdout.strip() == "survived"
    per_file = all_events(tmp_path)
    assert [f.name for f in per_file] == ["twice.pfw"]
    (evs,) = per_file.values()
    assert Counter(e["name"] for e in evs) == Counter({"before": 30})


def test_awkward_names_still_give_valid_json(tmp_path):
    run_app(
        tmp_path,
        r"""
        from dftracer.python import dftracer, dft_fn
        log = dftracer.get_instance()
        names = ['q"uote', 'back\\slash', 'new\nline', 'tab\there', 'nul\x00byte', 'ctl\x01\x1f',
                 'surrogate\udcff', 'emoji\U0001F600', 'é']
        for n in names:
            d = dft_fn(n, name=n)
            d.update(args={n: n, "k": n})
            with d:
                pass
            log.log_event(n, "weird", 1, 2, {"v": n})
    """,
    )
    (evs,) = all_events(tmp_path).values()
    # A lone surrogate cannot be encoded to UTF-8; it is written as one replacement character
    # ("?" from the binding's codec, or U+FFFD).
    repl = {e["name"][len("surrogate") :] for e in evs if e["name"].startswith("surrogate")}
    assert len(repl) == 1 and repl <= {"?", "\ufffd"}, repl
    (r,) = repl
    expect = [
        'q"uote',
        "back\\slash",
        "new\nline",
        "tab\there",
        "nul\x00byte",
        "ctl\x01\x1f",
        "surrogate" + r,
        "emoji\U0001f600",
        "\u00e9",
    ]
    assert len(evs) == 2 * len(expect)
    ctx = [e for e in evs if e["cat"] != "weird"]
    manual = [e for e in evs if e["cat"] == "weird"]
    assert [e["name"] for e in ctx] == expect
    assert [e["cat"] for e in ctx] == expect
    assert [e["args"] for e in ctx] == [{n: n, "k": n} for n in expect]
    assert [(e["name"], e["args"]["v"]) for e in manual] == [(n, n) for n in expect]


def test_yaml_configuration_enables_python_api(tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(f"enable: true\nlog_file: {tmp_path}/trace\ncompression: false\n")
    run_app(
        tmp_path,
        """
        from dftracer.python import dft_fn, DFTRACER_ENABLE
        assert DFTRACER_ENABLE
        d = dft_fn("yaml")
        @d.log
        def f():
            pass
        for _ in range(3):
            f()
    """,
        enable=False,
        DFTRACER_CONFIGURATION=cfg,
    )
    per_file = all_events(tmp_path, "yaml")
    assert [f.name.endswith(".pfw") for f in per_file] == [True]
    assert [len(e) for e in per_file.values()] == [3]


# ---------------------------------------------------------------------------------------------
# `with Pool()` terminates its workers with SIGTERM while they may be finalizing on their way out
# ---------------------------------------------------------------------------------------------

POOL_APP = """
    import multiprocessing as mp, os
    from dftracer.python import dft_fn
    @dft_fn("pool").log
    def work(n):
        return os.getpid()
    if __name__ == "__main__":
        work(-1)
        for _ in range(3):  # three pools: three chances for the terminate() race
            with mp.get_context("fork").Pool(2) as pool:
                pool.map(work, range(200), chunksize=1)
"""


@pytest.mark.parametrize("hybrid", [False, True], ids=["python", "hybrid"])
def test_pool_terminate_keeps_every_worker_event(tmp_path, hybrid):
    extra = {}
    if hybrid:
        from dftracer._paths import preload_library

        extra = {"LD_PRELOAD": preload_library(), "DFTRACER_DATA_DIR": str(tmp_path / "none")}
    run_app(tmp_path, POOL_APP, **extra)
    per_file = all_events(tmp_path, cat="pool")
    assert sum(len(evs) for evs in per_file.values()) == 1 + 3 * 200
    pids = {e["pid"] for evs in per_file.values() for e in evs}
    assert len(pids) >= 2  # the parent and at least one worker
