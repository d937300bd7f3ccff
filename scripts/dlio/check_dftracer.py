"""Assert that `import dftracer` resolves to OUR package, not PyPI's pydftracer/dftracer.

DLIO imports `dftracer.logger` (2.0.0) or `dftracer.python` (newer). pydftracer's wheel also ships a
`dftracer/` package; if it were installed it could shadow or overwrite ours. Exit status 1 with a
message when that happens. Prints the package directory and the preload library on success.
Usage: python scripts/dlio/check_dftracer.py [EXPECTED_DIR]
"""
import importlib.metadata as md
import importlib.util
import os
import sys


def main() -> int:
    import dftracer
    import dftracer.logger
    import dftracer.python

    pkg = os.path.dirname(os.path.realpath(dftracer.__file__))
    problems = []
    for mod in (dftracer.logger, dftracer.python):
        if os.path.dirname(os.path.realpath(mod.__file__)) != pkg:
            problems.append(f"{mod.__name__} comes from {mod.__file__}, not {pkg}")
    # Our package has the pybind11 core and the preload library; pydftracer has neither.
    if importlib.util.find_spec("dftracer._dftracer") is None:
        problems.append("dftracer._dftracer (our core binding) is missing")
    lib = os.path.join(pkg, "lib", "libdftracer_preload.so")
    if not os.path.exists(lib):
        problems.append(f"{lib} is missing")
    for name in ("dftracer", "dft_fn", "ai", "DFTRACER_ENABLE"):
        for mod in (dftracer.logger, dftracer.python):
            if not hasattr(mod, name):
                problems.append(f"{mod.__name__} has no {name} (a PyPI pydftracer logger?)")
    try:
        md.distribution("pydftracer")
        problems.append("pydftracer from PyPI is installed (its wheel ships a dftracer/ package too): "
                        "pip uninstall -y pydftracer, then reinstall ours: pip install --force-reinstall .")
    except md.PackageNotFoundError:
        pass
    if len(sys.argv) > 1:
        want = os.path.realpath(sys.argv[1])
        if os.path.commonpath([pkg, want]) != want:
            problems.append(f"dftracer comes from {pkg}, expected under {want}")
    if problems:
        print("check_dftracer: FAILED\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print(f"dftracer package: {pkg}")
    print(f"preload library:  {lib}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
