"""DFTracer: an analysis-friendly data-flow tracer for AI-driven workflows (SC24).

Importing this package does no work and does not load the compiled core. The tracer APIs are
``dftracer.python`` (also importable as ``dftracer.logger``): ``dftracer``, ``dft_fn``, ``ai``,
``DFTRACER_ENABLE``. See docs/python_api.md.
"""

from ._version import __version__

__all__ = ["__version__"]
