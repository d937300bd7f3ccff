"""Locate the compiled libraries of the dftracer package.

``preload_library()`` returns the absolute path (str) of ``libdftracer_preload.so``, looked up in
order: ``$DFTRACER_PRELOAD_LIB`` (explicit override), the package's own ``lib/`` directory (wheel
installs and in-place development builds, ``-DDFTRACER_DEV_INPLACE=ON``; from a source checkout
without compiled parts, the installed package's, see ``dftracer.__path__``), then ``lib/`` of the
installation prefix (plain CMake installs). Raises ``FileNotFoundError`` naming every place tried.
"""

from __future__ import annotations

import os
import sys
from importlib import resources

PRELOAD_NAME = "libdftracer_preload.so"


def _candidates(name: str) -> list[str]:
    out = []
    env = os.environ.get("DFTRACER_PRELOAD_LIB") if name == PRELOAD_NAME else None
    if env:
        out.append(env)
    try:
        # importlib.resources finds the package even when it is installed as a zip or editable.
        out.append(str(resources.files("dftracer").joinpath("lib", name)))
    except (ModuleNotFoundError, TypeError):
        pass
    out.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib", name))
    import dftracer

    out += [os.path.join(d, "lib", name) for d in getattr(dftracer, "__path__", [])]
    for prefix in (sys.prefix, sys.base_prefix, "/usr/local", "/usr"):
        out.append(os.path.join(prefix, "lib", name))
    return out


def _find(name: str) -> str:
    tried = []
    for cand in _candidates(name):
        if cand not in tried:
            tried.append(cand)
        if os.path.isfile(cand):
            return os.path.realpath(cand)
    raise FileNotFoundError(f"{name} not found; tried: " + ", ".join(tried))


def preload_library() -> str:
    """Absolute path of libdftracer_preload.so (raises FileNotFoundError)."""
    return _find(PRELOAD_NAME)
