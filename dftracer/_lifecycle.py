"""Process lifecycle hooks that only Python can install (the core owns the rest: fork handlers,
finalize at exit, the flush-signal handler, the timed flush in its writer thread, and holding the
flush signals back while finalize completes the file; docs/python_api.md).

- multiprocessing children end with ``os._exit()``, which runs no atexit handler; their
  ``_exit_function()`` runs the registered finalisers, so one finaliser per child writes its trace.
- ``os._exit`` and ``os.execv``/``os.execve`` (which every ``os.exec*`` calls) are routed through
  the tracer, so a process that leaves or replaces itself that way keeps its events. Calls through
  references taken before (``from os import _exit``) are not seen; for those the core's timed
  flush (``DFTRACER_FLUSH_INTERVAL``) bounds the loss.
"""

from __future__ import annotations

import os
from functools import wraps

from dftracer import _native


class _MPHook:
    """Anchor object for multiprocessing.util.register_after_fork (needs a weakref-able object)."""


_MP_ANCHOR = _MPHook()
_finalizer_pid = None
_mp_hook_registered = False


def _register_mp_child_finalizer() -> None:
    # Lowest priority: run last. Signals (Pool.terminate() SIGTERMs its workers) are the core's
    # business (docs/format.md, crash behaviour).
    global _finalizer_pid
    import multiprocessing.util as mpu

    if _finalizer_pid != os.getpid():
        _finalizer_pid = os.getpid()
        mpu.Finalize(None, _native.finalize_core, exitpriority=-(2**30))


def _after_mp_fork(_anchor) -> None:
    try:
        _register_mp_child_finalizer()
    except Exception:
        pass


def register_mp_hooks() -> None:
    """Called (under the init lock) once the core is initialised in this process."""
    global _mp_hook_registered
    try:
        import multiprocessing
        import multiprocessing.util as mpu

        if multiprocessing.parent_process() is not None:
            _register_mp_child_finalizer()
        if not _mp_hook_registered:
            # fork/forkserver children inherit this registry; multiprocessing runs it after it
            # clears the finaliser registry in the child.
            mpu.register_after_fork(_MP_ANCHOR, _after_mp_fork)
            _mp_hook_registered = True
    except Exception:
        pass


_real_os_exit = os._exit
_real_execv = os.execv
_real_execve = os.execve


def _os_exit(status):
    """os._exit that first writes this process's trace (a forked child leaving with os._exit)."""
    _native.finalize_core()
    _real_os_exit(status)


def _flush_then(real):
    @wraps(real)
    def call(*args, **kwargs):
        if _native.core is not None:
            try:
                _native.core.flush()  # the new image starts its own trace; this one's events stay
            except Exception:
                pass
        return real(*args, **kwargs)

    return call


def install() -> None:
    """Install the hooks (when the core is loaded and enabled)."""
    if _native.core is None:
        return
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_native.reset_after_fork)
    if os._exit is _real_os_exit:
        os._exit = _os_exit
    if os.execv is _real_execv:
        os.execv = _flush_then(_real_execv)
    if os.execve is _real_execve:
        os.execve = _flush_then(_real_execve)
    _native.on_init(register_mp_hooks)
