"""Every process is traced: multiprocessing fork/spawn/forkserver, concurrent.futures, PyTorch
DataLoader workers, under ``dftracer-run``; hybrid preload + dftracer.python; the launcher."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from test_preload_helpers import events_by_file, events_by_pid, preload_lib, trace_files, traced_env

TRAIN = textwrap.dedent(
    """
    import concurrent.futures as cf
    import json
    import multiprocessing as mp
    import os
    import sys


    def work(path):
        with open(path, "rb") as f:
            data = f.read()
        return os.getpid(), path, len(data)


    if __name__ == "__main__":
        files = sorted(os.path.join(sys.argv[1], n) for n in os.listdir(sys.argv[1]))
        out = []
        groups = [files[i::4] for i in range(4)]
        for method, group in zip(("fork", "spawn", "forkserver"), groups):
            pool = mp.get_context(method).Pool(2)
            out += [[method, *r] for r in pool.map(work, group, chunksize=1)]
            if method == "spawn":
                pool.close()  # workers exit on their own (see docs/preload.md, SIGTERM)
                pool.join()
            else:
                pool.terminate()  # forked workers are stopped with SIGTERM, as `with Pool()` does
                pool.join()
        with cf.ProcessPoolExecutor(2) as ex:
            out += [["futures", *r] for r in ex.map(work, groups[3])]
        json.dump({"parent": os.getpid(), "results": out}, sys.stdout)
    """
)

TORCH = textwrap.dedent(
    """
    import json
    import os
    import sys

    import torch
    from torch.utils.data import DataLoader, Dataset


    class Files(Dataset):
        def __init__(self, root):
            self.files = sorted(os.path.join(root, n) for n in os.listdir(root))

        def __len__(self):
            return len(self.files)

        def __getitem__(self, i):
            with open(self.files[i], "rb") as f:
                n = len(f.read())
            return torch.tensor([os.getpid(), i, n])


    if __name__ == "__main__":
        ds = Files(sys.argv[1])
        out = []
        for batch in DataLoader(ds, batch_size=2, num_workers=2):
            out += batch.tolist()
        json.dump({"parent": os.getpid(), "files": ds.files, "results": out}, sys.stdout)
    """
)


@pytest.fixture(scope="module")
def lib():
    return preload_lib()


def make_dataset(root, n):
    root.mkdir()
    for i in range(n):
        (root / f"sample_{i:03d}.bin").write_bytes(bytes([i % 251]) * (1000 + 37 * i))
    return root


def dftracer_run(args, cwd, timeout=240):
    cmd = [sys.executable, "-m", "dftracer", "run", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def reads_of(events, path):
    return [e for e in events if e["name"] in ("read", "pread64") and e["args"].get("fname") == path]


def check_workers(prefix, results, parent):
    """Each worker's reads of its file are in a file of the worker's own pid, with the right
    byte count; no worker read lands in the parent's file."""
    by_pid = events_by_pid(prefix)
    worker_pids = {pid for pid, _, _ in results}
    assert parent not in worker_pids
    for pid, path, nbytes in results:
        assert pid in by_pid, f"no trace for worker {pid}"
        reads = reads_of(by_pid[pid], path)
        assert sum(e["args"]["ret"] for e in reads) == nbytes, (pid, path)
        for other, evs in by_pid.items():  # noqa: B007
            if other != pid:
                assert not reads_of(evs, path), f"{path} read traced in pid {other}"
    return by_pid


def test_multiprocessing_every_worker_traced(lib, tmp_path):
    data = make_dataset(tmp_path / "data", 16)
    (tmp_path / "train.py").write_text(TRAIN)
    r = dftracer_run(
        ["--log-file", "out/train", "--data-dir", str(data), "--metadata", "--", sys.executable, "train.py", str(data)],
        cwd=str(tmp_path),
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    res = out["results"]
    assert len(res) == 16
    assert {m for m, *_ in res} == {"fork", "spawn", "forkserver", "futures"}
    prefix = str(tmp_path / "out" / "train")
    check_workers(prefix, [(pid, path, n) for _, pid, path, n in res], out["parent"])
    # every file written by the run is a complete, parseable trace
    assert all(evs is not None for evs in events_by_file(prefix).values())
    assert "trace file(s)" in r.stderr and prefix in r.stderr


def test_torch_dataloader_workers_traced(lib, tmp_path):
    pytest.importorskip("torch")
    data = make_dataset(tmp_path / "data", 12)
    (tmp_path / "train_torch.py").write_text(TORCH)
    r = dftracer_run(
        [
            "--log-file",
            "out/torch",
            "--data-dir",
            str(data),
            "--metadata",
            "--",
            sys.executable,
            "train_torch.py",
            str(data),
        ],
        cwd=str(tmp_path),
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    files = out["files"]
    res = [(pid, files[i], n) for pid, i, n in out["results"]]
    assert len(res) == 12 and len({pid for pid, _, _ in res}) == 2
    check_workers(str(tmp_path / "out" / "torch"), res, out["parent"])


def test_hybrid_python_and_posix_one_file(lib, tmp_path):
    data = make_dataset(tmp_path / "data", 1)
    path = str(next(data.iterdir()))
    prog = textwrap.dedent(
        f"""
        from dftracer.python import dftracer, dft_fn
        log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=0)

        @dft_fn("APP").log
        def load(p):
            with open(p, "rb") as f:
                return len(f.read())

        print(load({path!r}))
        log.finalize()
        """
    )
    prefix = str(tmp_path / "out" / "hy")
    os.makedirs(os.path.dirname(prefix))
    env = traced_env(lib, prefix, str(data))
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    r = subprocess.run([sys.executable, "-c", prog], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1000"
    files = events_by_file(prefix)
    assert len(files) == 1, list(files)
    evs = next(iter(files.values()))
    app = [e for e in evs if e["cat"] == "APP"]
    posix = reads_of(evs, path)
    assert len(app) == 1 and app[0]["name"] == "load"
    assert sum(e["args"]["ret"] for e in posix) == 1000
    # one timeline: the reads happen inside the application's region, same pid and tid
    a = app[0]
    for e in posix:
        assert a["ts"] <= e["ts"] and e["ts"] + e["dur"] <= a["ts"] + a["dur"]
        assert (e["pid"], e["tid"]) == (a["pid"], a["tid"])


def test_run_passes_exit_status_and_output(lib, tmp_path):
    r = dftracer_run(["--log-file", "out/sh", "--", "sh", "-c", "echo hello; echo err >&2; exit 42"], cwd=str(tmp_path))
    assert r.returncode == 42
    assert r.stdout == "hello\n"
    assert r.stderr.startswith("err\n")
    assert str(tmp_path / "out") in r.stderr
    r = dftracer_run(["--quiet", "--", "sh", "-c", "kill -TERM $$"], cwd=str(tmp_path))
    assert r.returncode == 128 + 15 and r.stderr == ""
    r = dftracer_run(["--", "/nonexistent/cmd"], cwd=str(tmp_path))
    assert r.returncode == 127 and "cannot run" in r.stderr
    r = dftracer_run([], cwd=str(tmp_path))
    assert r.returncode == 2


def test_run_no_compression_and_data_dir(lib, tmp_path):
    data = make_dataset(tmp_path / "data", 2)
    r = dftracer_run(
        [
            "--log-file",
            "out/p",
            "--no-compression",
            "--data-dir",
            "data",
            "--metadata",
            "--",
            "cat",
            *sorted(str(p) for p in data.iterdir()),
        ],
        cwd=str(tmp_path),
    )
    assert r.returncode == 0
    files = trace_files(str(tmp_path / "out" / "p"))
    assert len(files) == 1 and files[0].endswith(".pfw")
    evs = events_by_file(str(tmp_path / "out" / "p"))[files[0]]
    assert sum(e["args"]["ret"] for e in evs if e["name"] == "read") == 1000 + 1037


def test_preload_path_cli(lib):
    r = subprocess.run([sys.executable, "-m", "dftracer", "--preload-path"], capture_output=True, text=True)
    assert r.returncode == 0
    path = r.stdout.strip()
    assert os.path.isabs(path) and path.endswith("libdftracer_preload.so") and os.path.isfile(path)


@pytest.mark.parametrize("close_fds", [True, False])  # vfork+execve path, posix_spawn path
def test_subprocess_with_reduced_env_stays_traced(lib, tmp_path, close_fds):
    data = make_dataset(tmp_path / "data", 1)
    path = str(next(data.iterdir()))
    prog = textwrap.dedent(
        f"""
        import subprocess, sys
        out = subprocess.run(["/usr/bin/env"], env={{"ONLY": "1"}}, close_fds={close_fds},
                             capture_output=True, text=True).stdout
        print(out, end="")
        subprocess.run(["cat", {path!r}], env={{}}, close_fds={close_fds}, stdout=subprocess.DEVNULL, check=True)
        """
    )
    prefix = str(tmp_path / "out" / "sp")
    os.makedirs(os.path.dirname(prefix))
    r = subprocess.run(
        [sys.executable, "-c", prog],
        env=traced_env(lib, prefix, str(data)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    child = dict(line.split("=", 1) for line in r.stdout.splitlines())
    assert child["ONLY"] == "1" and child["LD_PRELOAD"] == lib
    assert child["DFTRACER_ENABLE"] == "1" and child["DFTRACER_DATA_DIR"] == str(data)
    # the cat started with an empty environment traced its read of the file
    by_pid = events_by_pid(prefix)
    cats = [evs for evs in by_pid.values() if reads_of(evs, path)]
    assert len(cats) == 1 and sum(e["args"]["ret"] for e in reads_of(cats[0], path)) == 1000
    starters = [evs for evs in by_pid.values() if any(e["name"] in ("fork", "vfork", "posix_spawn") for e in evs)]
    assert len(starters) == 1  # only the Python parent starts processes
    spawned = [e["name"] for e in starters[0] if e["cat"] == "PROCESS" and e["name"] != "exit"]
    assert spawned == (["vfork", "vfork"] if close_fds else ["posix_spawn", "vfork"]), spawned
