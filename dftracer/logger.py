"""DFTracer's Python API under the ``dftracer.logger`` path (DLIO benchmark's PyPI releases:
``from dftracer.logger import dftracer, dft_fn, ai, DFTRACER_ENABLE``).

Same objects as ``dftracer.python`` (without pydftracer); the implementation lives in
``dftracer._api``. Imports ``dftracer._public``, never ``dftracer.python``, so that it stays ours
when PyPI pydftracer 2.x replaces ``dftracer.python``.
"""

from dftracer._public import *  # noqa: F401,F403
from dftracer._public import __all__  # noqa: F401
