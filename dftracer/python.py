"""DFTracer's Python API (``from dftracer.python import dftracer, dft_fn, ai, DFTRACER_ENABLE``).

The import path used by recent DLIO benchmark releases. The implementation lives in
``dftracer._api``; ``dftracer.logger`` exports the very same objects. With PyPI pydftracer 2.x
installed beside us, its ``dftracer/python/`` package takes this name and drives our core through
``dftracer.dftracer`` (docs/python_api.md). See docs/python_api.md.
"""

from dftracer._public import *  # noqa: F401,F403
from dftracer._public import __all__  # noqa: F401
