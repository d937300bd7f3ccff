"""The Python tracer API: one implementation behind ``dftracer.python`` and ``dftracer.logger``.

Events are Chrome trace-event "complete" events (``ph: "X"``): a name, a category, a start
timestamp ``ts`` and a duration ``dur``, both integers in microseconds of wall time
(CLOCK_REALTIME, the core's clock), plus an ``args`` object of contextual tags. The C++ core
(``dftracer._dftracer``, see docs/design.md) decides the configuration, formats and writes the
events; this package only times Python code and hands events over.

Switch: tracing happens only when the core's configuration enables it (``DFTRACER_ENABLE``, or
``enable`` in the DFTRACER_CONFIGURATION YAML file, or ``DFTRACER_INIT=PRELOAD`` under the
preload; docs/configuration.md) when this module is imported. Otherwise decorators return the
function unchanged, context managers and ``iter`` do nothing and no file is created; without any
of those variables the compiled module is not even imported.

Processes: the first event of a process initialises the core from the environment, so children
started by ``multiprocessing`` (fork, spawn, forkserver) or ``subprocess`` trace themselves with
no code change (``dftracer._lifecycle``).

Layout: ``_native`` (hand-over to the core), ``_tags``, ``_regions`` (``dft_fn``), ``_ai`` (the
``ai`` tree), ``_handle`` (``dftracer``), ``_lifecycle`` (Python-only process hooks). The API
mirrors pydftracer as used by DLIO benchmark.
"""

from __future__ import annotations

from dftracer import _lifecycle, _native
from dftracer._ai import AIRegion, ai
from dftracer._handle import dftracer
from dftracer._regions import DFTRACER_ENABLE, dft_fn

__all__ = ["DFTRACER_ENABLE", "dftracer", "dft_fn", "ai", "AIRegion"]

#: The compiled core when tracing is on, else None (benchmarks read it).
_core = _native.core
#: Flush and close this process's trace (dftracer.dftracer's finalize calls it).
_finalize_core = _native.finalize_core

_lifecycle.install()
