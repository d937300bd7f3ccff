"""Assert that `import dftracer` resolves to OUR package and that PyPI pydftracer, if installed,
drives our core.

DLIO imports `dftracer.logger` (2.0.0) or `dftracer.python` (newer). PyPI pydftracer 2.x installs
`dftracer/python/` into our package's folder: that package then is `dftracer.python`, and it
drives our core through our native `dftracer.dftracer` (docs/python_api.md). pydftracer 1.x is
upstream's native tracer in a wheel: it overwrites files of ours (dftracer/__init__.py,
dftracer/logger.py, dftracer/lib/libdftracer_preload.so, dfanalyzer/__init__.py,
dfanalyzer/plots.py) and its uninstall deletes them, so it is reported as a problem.
Exit status 1 with a message on a problem; prints the package directory and the preload library
on success.
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

    pkg = os.path.dirname(os.path.realpath(dftracer.__file__ or dftracer.__path__[0]))
    problems = []
    try:
        pyd = md.version("pydftracer")
    except md.PackageNotFoundError:
        pyd = None
    if pyd is not None and not pyd.startswith("2."):
        problems.append(
            f"pydftracer {pyd} from PyPI is installed: it is upstream's native tracer and overwrites "
            "files of ours. pip uninstall -y pydftracer, then reinstall ours: "
            "pip install --force-reinstall --no-deps <our wheel or source tree>"
        )
    expected = {"dftracer.logger": os.path.join(pkg, "logger.py"), "dftracer.python": os.path.join(pkg, "python.py")}
    if pyd is not None and pyd.startswith("2."):
        expected["dftracer.python"] = os.path.join(pkg, "python", "__init__.py")  # pydftracer's layer
    for mod in (dftracer.logger, dftracer.python):
        if os.path.realpath(mod.__file__) != os.path.realpath(expected[mod.__name__]):
            problems.append(f"{mod.__name__} comes from {mod.__file__}, not {expected[mod.__name__]}")
    # Our package has the pybind11 core, pydftracer's native interface and the preload library.
    for native in ("dftracer._dftracer", "dftracer.dftracer"):
        if importlib.util.find_spec(native) is None:
            problems.append(f"{native} (our core binding) is missing")
    lib = os.path.join(pkg, "lib", "libdftracer_preload.so")
    if not os.path.exists(lib):
        problems.append(f"{lib} is missing")
    for name in ("dftracer", "dft_fn", "ai", "DFTRACER_ENABLE"):
        for mod in (dftracer.logger, dftracer.python):
            if not hasattr(mod, name):
                problems.append(f"{mod.__name__} has no {name} (a PyPI pydftracer 1.x logger?)")
    if len(sys.argv) > 1:
        want = os.path.realpath(sys.argv[1])
        if os.path.commonpath([pkg, want]) != want:
            problems.append(f"dftracer comes from {pkg}, expected under {want}")
    if problems:
        print("check_dftracer: FAILED\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print(f"dftracer package: {pkg}")
    print(f"dftracer.python:  {dftracer.python.__file__}" + (f" (pydftracer {pyd})" if pyd else ""))
    print(f"preload library:  {lib}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
