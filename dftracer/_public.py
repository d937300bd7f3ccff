"""The public names of DFTracer's Python API, shared by ``dftracer.python`` and ``dftracer.logger``.

Both modules re-export exactly this list. ``dftracer.logger`` imports it from here rather than from
``dftracer.python`` because PyPI pydftracer 2.x, when installed beside us, replaces
``dftracer.python`` by its own package (see docs/python_api.md); ``dftracer.logger`` stays ours.
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

__all__ = [
    "DFTRACER_ENABLE",
    "dftracer",
    "dft_fn",
    "ai",
    "AIRegion",
    "pipeline",
    "dataloader",
    "compute",
    "data",
    "checkpoint",
    "comm",
    "device",
]
