"""The process-wide tracer handle ``dftracer`` (DLIO's ``PerfTrace``): explicit initialisation,
manual events and metadata records, finalize."""

from __future__ import annotations

import threading

from dftracer import _native
from dftracer._tags import _tag_value

DFTRACER_ENABLE: bool = _native.enabled


class dftracer:
    """Process-wide tracer handle (a singleton), as DLIO's ``PerfTrace``."""

    _instance = None

    def __init__(self):
        self.logger = _native.core
        self._depth = threading.local()
        dftracer._instance = self

    @classmethod
    def get_instance(cls) -> "dftracer":
        inst = dftracer._instance
        if inst is None:
            inst = dftracer()
        return inst

    @staticmethod
    def initialize_log(logfile=None, data_dir=None, process_id=-1, log_file=None) -> "dftracer":
        """Start tracing this process and return the handle.

        ``logfile``: explicit trace file name, str or path-like (DLIO:
        ``.../trace-<rank>-of-<size>.pfw``); None uses ``DFTRACER_LOG_FILE``. The core creates
        its directory (or warns and stays off). ``data_dir``: ``:``-separated traced path
        prefixes (None: ``DFTRACER_DATA_DIR``). ``process_id``: an integer recorded once as the
        metadata record ``process_id`` (e.g. the rank); negative, None or not an integer: none.
        Events always carry the OS pid. Calling it again, or after finalize(), never corrupts a
        file.
        """
        inst = dftracer.get_instance()
        if not DFTRACER_ENABLE:
            return inst
        try:
            pid = None if process_id is None else int(process_id)
        except (TypeError, ValueError):
            pid = None
        _native.ensure_init(logfile if logfile is not None else log_file, data_dir, pid, explicit=True)
        return inst

    def get_time(self) -> int:
        """Wall time in µs since the epoch (the core's clock when tracing)."""
        return _native.now()

    def enter_event(self) -> None:
        """Note entry into a nested region on this thread (bookkeeping for manual logging)."""
        d = self._depth
        d.level = getattr(d, "level", 0) + 1

    def exit_event(self) -> None:
        d = self._depth
        level = getattr(d, "level", 0)
        if level > 0:
            d.level = level - 1

    def depth(self) -> int:
        """Current enter_event() nesting depth of this thread."""
        return getattr(self._depth, "level", 0)

    def log_event(
        self, name, cat, start_time, duration, args=None, int_args=None, float_args=None, string_args=None
    ) -> None:
        """Log one complete event: ``start_time`` and ``duration`` in µs, ``args`` a dict of
        int/float/bool/str values (pydftracer's int_args/float_args/string_args are merged)."""
        if not DFTRACER_ENABLE:
            return
        merged = None
        for part in (args, int_args, float_args, string_args):
            if part:
                if merged is None:
                    merged = {}
                for k, v in part.items():
                    merged[str(k)] = _tag_value(v)
        try:
            ts = int(start_time)
            dur = int(duration)
        except (TypeError, ValueError):
            _native.warn_once(f"log_event: bad time values {start_time!r}, {duration!r}; event dropped")
            return
        name = name if isinstance(name, str) else str(name)
        cat = cat if isinstance(cat, str) else str(cat)
        try:
            _native.emit(name, cat, ts, dur, merged)
        except Exception:
            _native.emit_retry(name, cat, ts, dur, merged)

    def log_instant(self, name, cat, ts=None, args=None) -> None:
        """Log an instant event (``ph: "i"``) at ``ts`` µs (default: now)."""
        if not DFTRACER_ENABLE:
            return
        if _native.is_first_emit():
            _native.ensure_init()
        _native.safe_call(
            _native.core.log_instant,
            str(name),
            str(cat),
            int(_native.now() if ts is None else ts),
            {str(k): _tag_value(v) for k, v in args.items()} if args else None,
        )

    def log_metadata_event(self, key, value) -> None:
        """Write a metadata record (``ph: "M"``) with ``key`` and ``str(value)``."""
        if not DFTRACER_ENABLE:
            return
        if _native.is_first_emit():
            _native.ensure_init()
        _native.safe_call(_native.core.log_metadata, str(key), str(value))

    def trace_path(self):
        """Path of this process's trace file, or None when not tracing."""
        if _native.core is None:
            return None
        try:
            return _native.core.trace_path()
        except Exception:
            return None

    def finalize(self) -> None:
        """Flush and close this process's trace. Safe to call more than once."""
        if DFTRACER_ENABLE:
            _native.finalize_core()
