"""DFTracer: an analysis-friendly data-flow tracer for AI-driven workflows (SC24).

Importing this package does no work and does not load the compiled core. The tracer APIs are
``dftracer.python`` (also importable as ``dftracer.logger``): ``dftracer``, ``dft_fn``, ``ai``,
``DFTRACER_ENABLE``. See docs/python_api.md.
"""

import os as _os
import sys as _sys

from ._version import __version__

__all__ = ["__version__"]


def _installed_compiled_parts() -> None:
    """Run from a source checkout without compiled modules (e.g. ``python`` started in the
    repository root, whose ``dftracer/`` shadows the installed package): the compiled core,
    ``lib/`` and the native module are then taken from the installed package of the same name
    further on ``sys.path`` (``dftracer._paths`` looks in every directory of ``__path__``)."""

    def has_lib(d):
        return _os.path.isfile(_os.path.join(d, "lib", "libdftracer_preload.so"))

    here = _os.path.dirname(_os.path.abspath(__file__))
    if has_lib(here):
        return
    for entry in _sys.path:
        d = _os.path.join(_os.path.abspath(entry or _os.curdir), __name__)
        if d != here and d not in __path__ and has_lib(d) and _os.path.isfile(_os.path.join(d, "__init__.py")):
            __path__.append(d)
            return


_installed_compiled_parts()
