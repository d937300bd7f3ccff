"""Regions: timed, named, categorised spans of Python code with contextual tags, the shared
machinery of ``dft_fn`` (here) and the ``ai`` tree (``dftracer._ai``). Each closed region is one
complete event (``ph: "X"``) with ``ts`` and ``dur`` in µs of wall time (the core's clock).
"""

from __future__ import annotations

import sys
import threading
from functools import wraps

from dftracer import _native
from dftracer._handle import dftracer
from dftracer._tags import _collect_tags, _make_extractor

DFTRACER_ENABLE: bool = _native.enabled
_emit_retry = _native.emit_retry
_now = _emit = None  # bound by _native.bind below


class _Region:
    """A named, categorised region with contextual tags; base of dft_fn and AIRegion."""

    def __init__(self, cat, name, tags=None, enable=True):
        self._cat = str(cat)
        self._name = str(name)
        self._args = tags or None  # dict of tags or None; replaced (never mutated) on update
        self._enable = bool(enable)
        self._on = DFTRACER_ENABLE and self._enable
        self._tls = threading.local()

    # -- properties -------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def cat(self) -> str:
        return self._cat

    @property
    def tags(self) -> dict:
        """The contextual tags put in the ``args`` of this region's events (a copy)."""
        args = self._current_args()
        return dict(args) if args else {}

    def _current_args(self):
        return self._args

    # -- enter/exit (context manager, start/stop) -------------------------------------------
    def _push(self) -> None:
        tls = self._tls
        try:
            tls.starts.append(_now())
        except AttributeError:
            tls.starts = [_now()]

    def _pop_emit(self) -> None:
        try:
            t0 = self._tls.starts.pop()
        except (AttributeError, IndexError):
            return  # stop() without a start(): nothing to close
        dur = _now() - t0
        args = self._current_args()
        try:
            _emit(self._name, self._cat, t0, dur, args)
        except Exception:
            _emit_retry(self._name, self._cat, t0, dur, args)

    def __enter__(self):
        if self._on:
            self._push()
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._on:
            self._pop_emit()
        return False

    # -- loops ----------------------------------------------------------------------------------
    def _iter(self, iterable, wait_name, body_name, count_key, include_wait=True, include_body=True):
        if not self._on:
            return iter(iterable)
        return self._iter_gen(iter(iterable), wait_name, body_name, count_key, include_wait, include_body)

    def _iter_gen(self, it, wait_name, body_name, count_key, include_wait, include_body):
        cat = self._cat
        n = 0
        while True:
            t0 = _now()
            try:
                item = next(it)
            except StopIteration:
                return
            t1 = _now()
            # An item whose body is abandoned (break, exception) gets no events: DLIO counts
            # one fetch.iter per consumed batch.
            yield item
            t2 = _now()
            n += 1
            base = self._current_args()
            if base:
                args = dict(base)
                args[count_key] = n
            else:
                args = {count_key: n}
            if include_wait:
                try:
                    _emit(wait_name, cat, t0, t1 - t0, args)
                except Exception:
                    _emit_retry(wait_name, cat, t0, t1 - t0, args)
            if include_body:
                try:
                    _emit(body_name, cat, t1, t2 - t1, args)
                except Exception:
                    _emit_retry(body_name, cat, t1, t2 - t1, args)

    # -- misc -----------------------------------------------------------------------------------
    def log_metadata(self, key, value) -> None:
        """Write a process metadata record (``ph: "M"``) ``key`` = ``str(value)``."""
        if self._on:
            dftracer.get_instance().log_metadata_event(key, value)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self._name!r} cat={self._cat!r}>"


class dft_fn(_Region):
    """A category (and default name) for Python events, used as decorator, context manager,
    loop wrapper or start/stop pair.

    ``dft_fn(cat, name=None, epoch=None, step=None, image_idx=None, image_size=None,
    enable=True)``: ``name`` defaults to the calling function's name; the four keywords are
    initial contextual tags (``image_size`` in bytes). ``enable=False`` silences this object.

    - ``@f.log`` / ``@f.log(name=..)``: one event per call, named ``func.__qualname__``; the
      call's ``epoch``/``step``/``image_idx``/``image_size`` arguments (and, for methods,
      those attributes of ``self``) are added to ``args``.
    - ``@f.log_init``: the same for ``__init__`` (no ``self`` scan); ``@f.log_static`` for
      static methods (no argument scan).
    - ``with f:`` or ``f.start()`` ... ``f.stop()``: one event named ``f.name``.
    - ``f.iter(iterable, name=None, iter_name="step")``: per consumed item, a wait event
      ``<name>.iter`` (time to produce the item) and a body event ``<name>.block`` (time until
      the next item is asked for); ``args[iter_name]`` is the 1-based item number.
    - ``f.update(epoch=.., step=.., image_idx=.., image_size=.., args={..}, **tags)``: set
      contextual tags; they appear in ``args`` of all later events of this object (and of a
      decorated call still running).
    """

    def __init__(self, cat, name=None, epoch=None, step=None, image_idx=None, image_size=None, enable=True):
        if not name:
            try:
                name = sys._getframe(1).f_code.co_name
            except Exception:
                name = str(cat)
        super().__init__(cat, name, _collect_tags(epoch, step, image_idx, image_size), enable)
        self._t1 = _now() if self._on else 0

    def _wrap(self, f, name, extractor=None):
        """Wrap `f` so that each call is one event named `name` (tags read at the call's end)."""
        if not DFTRACER_ENABLE or not self._enable:
            return f
        region = self
        cat = self._cat

        if extractor is None:

            @wraps(f)
            def traced(*a, **k):
                t0 = _now()
                try:
                    return f(*a, **k)
                finally:
                    t1 = _now()
                    try:
                        _emit(name, cat, t0, t1 - t0, region._args)
                    except Exception:
                        _emit_retry(name, cat, t0, t1 - t0, region._args)
        else:

            @wraps(f)
            def traced(*a, **k):
                extra = extractor(a, k)
                t0 = _now()
                try:
                    return f(*a, **k)
                finally:
                    t1 = _now()
                    base = region._args
                    if extra:
                        args = dict(base) if base else {}
                        args.update(extra)
                    else:
                        args = base
                    try:
                        _emit(name, cat, t0, t1 - t0, args)
                    except Exception:
                        _emit_retry(name, cat, t0, t1 - t0, args)

        return traced

    # decorators
    def log(self, func=None, name=None):
        def deco(f):
            return self._wrap(
                f,
                name or getattr(f, "__qualname__", str(f)),
                _make_extractor(f, scan_self=True) if DFTRACER_ENABLE else None,
            )

        return deco(func) if callable(func) else deco

    def log_init(self, init=None, name=None):
        def deco(f):
            return self._wrap(
                f,
                name or getattr(f, "__qualname__", str(f)),
                _make_extractor(f, scan_self=False) if DFTRACER_ENABLE else None,
            )

        return deco(init) if callable(init) else deco

    def log_static(self, func=None, name=None):
        def deco(f):
            if isinstance(f, staticmethod):
                inner = f.__func__
                return staticmethod(self._wrap(inner, name or inner.__qualname__))
            return self._wrap(f, name or getattr(f, "__qualname__", str(f)))

        return deco(func) if (callable(func) or isinstance(func, staticmethod)) else deco

    # loops
    def iter(self, func, name=None, iter_name="step"):
        if not self._on:
            return iter(func)
        if not name:
            try:
                name = sys._getframe(1).f_code.co_name
            except Exception:
                name = self._name
        return self._iter(func, f"{name}.iter", f"{name}.block", iter_name)

    # tags
    def update(self, epoch=None, step=None, image_idx=None, image_size=None, args=None, **tags):
        if self._on:
            new = _collect_tags(epoch, step, image_idx, image_size, args, tags)
            if new:
                merged = dict(self._args) if self._args else {}
                merged.update(new)
                self._args = merged  # copy-on-write: events in flight keep their dict
        return self

    # start/stop and the pydftracer flush/reset pair
    def start(self):
        if self._on:
            self._push()
        return self

    def stop(self):
        if self._on:
            self._pop_emit()
        return self

    def reset(self):
        """Restart the clock used by flush()."""
        if self._on:
            self._t1 = _now()
        return self

    def flush(self):
        """Log one event from construction or the last reset() until now."""
        if self._on:
            t0 = self._t1
            t1 = _now()
            try:
                _emit(self._name, self._cat, t0, t1 - t0, self._args)
            except Exception:
                _emit_retry(self._name, self._cat, t0, t1 - t0, self._args)
        return self


_native.bind(sys.modules[__name__])
