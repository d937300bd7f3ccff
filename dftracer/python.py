"""DFTracer's Python API (``from dftracer.python import dftracer, dft_fn, ai, DFTRACER_ENABLE``).

The import path used by recent DLIO benchmark releases. The implementation lives in
``dftracer._api``; ``dftracer.logger`` exports the very same objects. See docs/python_api.md.
"""

from dftracer._api import (  # noqa: F401
    DFTRACER_ENABLE,
    AIRegion,
    ai,
    dft_fn,
    dftracer,
)

# pydftracer's module-level shortcuts to the ai tree
pipeline = ai.pipeline
dataloader = ai.dataloader
compute = ai.compute
data = ai.data
checkpoint = ai.checkpoint
comm = ai.comm
device = ai.device

__all__ = ["DFTRACER_ENABLE", "dftracer", "dft_fn", "ai", "AIRegion", "pipeline", "dataloader",
           "compute", "data", "checkpoint", "comm", "device"]
