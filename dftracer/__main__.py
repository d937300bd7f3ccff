"""``python -m dftracer``: small helpers around the installed tracer.

``python -m dftracer --preload-path`` prints the absolute path of libdftracer_preload.so (exit 1
with a message on stderr when it is not installed). ``python -m dftracer run ...`` is the same as
``dftracer-run ...``.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "run":
        from .run import main as run_main

        return run_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m dftracer", description=__doc__.splitlines()[0])
    parser.add_argument("--preload-path", action="store_true", help="print the path of libdftracer_preload.so")
    parser.add_argument("--version", action="store_true", help="print the package version")
    args = parser.parse_args(argv)
    if args.version:
        from . import __version__

        print(__version__)
        return 0
    if args.preload_path:
        from ._paths import preload_library

        try:
            print(preload_library())
        except FileNotFoundError as exc:
            print(f"dftracer: {exc}", file=sys.stderr)
            return 1
        return 0
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
