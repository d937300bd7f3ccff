"""The hand-over to the compiled core (``dftracer._dftracer``, docs/design.md).

Every configuration decision (enable, init mode, booleans, YAML, data dirs, log paths, directory
creation, signal and exit policy) is made once, by the core; this module reads it through
``_dftracer.config()``. Only when none of the variables that can switch tracing on
(``DFTRACER_ENABLE``, ``DFTRACER_CONFIGURATION``, ``DFTRACER_INIT``) is in the environment is the
compiled module left unloaded: the core's default is off.

``emit`` and ``now`` are bound into the modules that record events (``bind``): ``emit`` starts as
the lazily initialising version and is swapped for the core's ``log_event`` at the first event.
"""

from __future__ import annotations

import os
import sys
import threading
import time

#: Variables through which the configuration can enable tracing (docs/configuration.md).
_SWITCHES = ("DFTRACER_ENABLE", "DFTRACER_CONFIGURATION", "DFTRACER_INIT")


def _load():
    """(compiled module or None, the core's configuration dict or None)."""
    if not any(k in os.environ for k in _SWITCHES):
        return None, None
    try:
        from dftracer import _dftracer
    except ImportError as exc:  # the app carries on untraced
        sys.stderr.write(f"dftracer: dftracer._dftracer cannot be loaded ({exc}); tracing is off\n")
        return None, None
    cfg = _dftracer.config()
    return (_dftracer if cfg["enable"] else None), cfg


#: The compiled core when tracing is enabled for this process, else None.
core, config = _load()
#: True when tracing is on for this process (the core's ``enable`` at import time).
enabled: bool = core is not None


def _wall_us() -> int:
    return time.time_ns() // 1000


def _noop(*_args) -> None:
    return None


_warned = False


def warn_once(msg: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        try:
            sys.stderr.write(f"dftracer: {msg}\n")
        except Exception:
            pass


def safe_call(fn, *a):
    """Call a core function; never let a tracing error reach the application. (Strings that are
    not valid Unicode need no care here: the binding replaces lone surrogates itself.)"""
    try:
        fn(*a)
    except Exception as exc:
        warn_once(f"event dropped ({exc!r})")


def emit_retry(name, cat, ts, dur, args):
    """Slow path after the fast emit raised (e.g. before the core was initialised)."""
    if core is not None:
        safe_call(core.log_event, name, cat, ts, dur, args)


def _emit_first(name, cat, ts, dur, args):
    ensure_init()
    safe_call(core.log_event, name, cat, ts, dur, args)


now = core.get_time if core is not None else _wall_us
emit = _emit_first if core is not None else _noop

_bound = []  # modules whose globals `_now` and `_emit` follow ours
_init_lock = threading.Lock()
_initialized = False
_after_init = []  # callables run (under the lock) after the core is first initialised


def bind(module) -> None:
    """Keep ``module._now`` / ``module._emit`` equal to ours (module globals are read by every
    traced call; one dict lookup, no attribute chain)."""
    _bound.append(module)
    module._now = now
    module._emit = emit


def on_init(fn) -> None:
    """Run ``fn()`` after each initialisation of the core in this process."""
    _after_init.append(fn)


def ensure_init(log_file=None, data_dirs=None, process_id=None, explicit=False) -> bool:
    """Initialise the core once per process (or again when ``explicit``). Returns is_active()."""
    global _initialized, emit
    if core is None:
        return False
    with _init_lock:
        if explicit or not _initialized:
            try:
                core.initialize(log_file, data_dirs, process_id)
            except Exception as exc:
                warn_once(f"initialize failed ({exc!r}); tracing is off")
            _initialized = True
            for fn in _after_init:
                fn()
        emit = core.log_event
        for m in _bound:
            m._emit = emit
    try:
        return bool(core.is_active())
    except Exception:
        return False


def is_first_emit() -> bool:
    return emit is _emit_first


def finalize_core() -> None:
    """Flush and close this process's trace. The core holds the flush signals back meanwhile."""
    if core is not None:
        try:
            core.finalize()
        except Exception as exc:
            warn_once(f"finalize failed ({exc!r})")


def reset_after_fork() -> None:
    # A lock held by another (now vanished) thread at fork time must not deadlock the child.
    global _init_lock
    _init_lock = threading.Lock()
