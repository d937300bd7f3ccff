"""DFAnalyzer: analysis of DFTracer traces with Dask (paper Section IV).

``DFAnalyzer(pattern).summary()`` loads traces through the indexed C++ reader into a Dask
DataFrame and prints the paper's Figure 6 summary. ``setup_dask_cluster`` picks the cluster.
"""

import os as _os
import sys as _sys

__all__ = ["DFAnalyzer", "Summary", "setup_dask_cluster"]


def _installed_compiled_parts() -> None:
    """Run from a source checkout without compiled modules (e.g. ``python`` started in the
    repository root, whose ``dfanalyzer/`` shadows the installed package): the compiled reader is
    then taken from the installed package of the same name further on ``sys.path``, here and in
    the Dask workers (which import this package the same way)."""
    from importlib.machinery import EXTENSION_SUFFIXES

    def has_reader(d):
        return any(_os.path.isfile(_os.path.join(d, "_reader" + s)) for s in EXTENSION_SUFFIXES)

    here = _os.path.dirname(_os.path.abspath(__file__))
    if has_reader(here):
        return
    for entry in _sys.path:
        d = _os.path.join(_os.path.abspath(entry or _os.curdir), __name__)
        if d != here and d not in __path__ and has_reader(d) and _os.path.isfile(_os.path.join(d, "__init__.py")):
            __path__.append(d)
            return


_installed_compiled_parts()
_WHERE = {"DFAnalyzer": "analyzer", "Summary": "summary", "setup_dask_cluster": "cluster"}


def __getattr__(name: str):
    # imported on first use: the command-line tools (dftracer-index) need neither pandas nor Dask
    if name in _WHERE:
        import importlib

        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
