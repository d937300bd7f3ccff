"""DFTracer's Python API under the ``dftracer.logger`` path (DLIO benchmark's PyPI releases:
``from dftracer.logger import dftracer, dft_fn, ai, DFTRACER_ENABLE``).

Same objects as ``dftracer.python``; the implementation lives in ``dftracer._api``.
"""

from dftracer.python import *  # noqa: F401,F403
from dftracer.python import __all__  # noqa: F401
