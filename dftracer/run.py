"""``dftracer-run``: run a command with every process of it traced through LD_PRELOAD.

Usage::

    dftracer-run [--log-file PREFIX] [--data-dir DIRS] [--metadata] [--no-compression] -- CMD ARGS...

Sets ``DFTRACER_ENABLE=1``, ``DFTRACER_INIT=PRELOAD``, ``DFTRACER_LOG_FILE`` (default
``./dftracer`` made absolute, or the value already in the environment), ``DFTRACER_DATA_DIR``
(default ``all``, or the environment's), ``DFTRACER_INC_METADATA=1`` with ``--metadata``,
``DFTRACER_TRACE_COMPRESSION=0`` with ``--no-compression``, and puts libdftracer_preload.so first
in ``LD_PRELOAD``; then runs CMD, waits, prints where the traces went (stderr) and exits with
CMD's status (128 + N when CMD died of signal N, as shells report it). Each process writes
``<PREFIX>-<hostname>-<pid>.pfw[.gz]`` (docs/preload.md). Exit status 127 if CMD cannot be
started, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import glob
import os
import signal
import subprocess
import sys
import time

from ._paths import preload_library


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dftracer-run",
        description="Trace every process of CMD (POSIX and STDIO I/O, fork/spawn/exec) with DFTracer.",
        usage="dftracer-run [--log-file PREFIX] [--data-dir DIRS] [--metadata] [--no-compression] -- CMD [ARGS...]",
    )
    p.add_argument("--log-file", help="trace file prefix (DFTRACER_LOG_FILE); default ./dftracer")
    p.add_argument("--data-dir", help="':'-separated directories to trace, or 'all' (DFTRACER_DATA_DIR)")
    p.add_argument("--metadata", action="store_true", help="record call arguments (DFTRACER_INC_METADATA=1)")
    p.add_argument("--no-compression", action="store_true", help="write plain .pfw (DFTRACER_TRACE_COMPRESSION=0)")
    p.add_argument("--quiet", action="store_true", help="do not print where the traces went")
    return p


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    # No "--": options up to the first word that is not an option (or an option's value).
    takes_value = {"--log-file", "--data-dir"}
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in takes_value else 1
    return argv[:i], argv[i:]


def build_env(args: argparse.Namespace, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for the traced command (a copy of ``base``, default ``os.environ``)."""
    env = dict(os.environ if base is None else base)
    env["DFTRACER_ENABLE"] = "1"
    env["DFTRACER_INIT"] = "PRELOAD"
    log_file = args.log_file or env.get("DFTRACER_LOG_FILE") or "dftracer"
    env["DFTRACER_LOG_FILE"] = os.path.abspath(log_file)
    if args.data_dir:
        env["DFTRACER_DATA_DIR"] = ":".join(
            d if d == "all" else os.path.abspath(d) for d in args.data_dir.split(":") if d
        )
    elif not env.get("DFTRACER_DATA_DIR"):
        env["DFTRACER_DATA_DIR"] = "all"
    if args.metadata:
        env["DFTRACER_INC_METADATA"] = "1"
    if args.no_compression:
        env["DFTRACER_TRACE_COMPRESSION"] = "0"
    lib = preload_library()
    others = [
        p
        for p in env.get("LD_PRELOAD", "").replace(" ", ":").split(":")
        if p and not p.endswith("libdftracer_preload.so")
    ]
    env["LD_PRELOAD"] = ":".join([lib] + others)
    return env


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    opts, cmd = _split(argv)
    parser = _parser()
    args = parser.parse_args(opts)
    if not cmd:
        parser.print_usage(sys.stderr)
        print("dftracer-run: error: no command given", file=sys.stderr)
        return 2
    try:
        env = build_env(args)
    except FileNotFoundError as exc:
        print(f"dftracer-run: {exc}", file=sys.stderr)
        return 127
    prefix = env["DFTRACER_LOG_FILE"]
    outdir = os.path.dirname(prefix) or "."
    os.makedirs(outdir, exist_ok=True)
    start = time.time()
    try:
        proc = subprocess.Popen(cmd, env=env)
    except OSError as exc:
        print(f"dftracer-run: cannot run {cmd[0]!r}: {exc.strerror}", file=sys.stderr)
        return 127

    # The command gets terminal signals itself (same process group); we only wait for it and
    # forward SIGTERM/SIGHUP sent to us.
    def forward(signum, _frame):
        try:
            proc.send_signal(signum)
        except ProcessLookupError:
            pass

    old = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGHUP)}
    old[signal.SIGINT] = signal.signal(signal.SIGINT, lambda *_: None)
    try:
        rc = proc.wait()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if not args.quiet:
        files = sorted(
            f
            for f in glob.glob(glob.escape(prefix) + "*.pfw*")
            if not f.endswith(".zindex") and os.path.getmtime(f) >= start - 1
        )
        total = sum(os.path.getsize(f) for f in files)
        print(
            f"dftracer-run: {len(files)} trace file(s), {total} bytes, in {outdir} (prefix {os.path.basename(prefix)})",
            file=sys.stderr,
        )
        for f in files:
            print(f"  {f}", file=sys.stderr)
    return 128 - rc if rc < 0 else rc


if __name__ == "__main__":
    sys.exit(main())
