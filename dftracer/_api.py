"""The Python tracer API: one implementation behind ``dftracer.python`` and ``dftracer.logger``.

Events are Chrome trace-event "complete" events (``ph: "X"``): a name, a category, a start
timestamp ``ts`` and a duration ``dur``, both integers in microseconds of wall time
(CLOCK_REALTIME, the core's clock), plus an ``args`` object of contextual tags. The C++ core
(``dftracer._dftracer``, see docs/design.md) formats and writes them; this module only times
Python code and hands events over.

Switch: tracing happens only when ``DFTRACER_ENABLE`` is true (1/true/yes/on) in the
environment when this module is imported. Otherwise decorators return the function unchanged,
context managers and ``iter`` do nothing, no file is created, and the compiled module is never
imported.

Processes: the first event of a process initialises the core from the environment
(``DFTRACER_LOG_FILE`` etc.), so children started by ``multiprocessing`` (fork, spawn,
forkserver) or ``subprocess`` trace themselves with no code change. multiprocessing children
leave through ``os._exit``; a multiprocessing finaliser flushes their trace first.

The API mirrors pydftracer as used by DLIO benchmark; the ``ai`` event names and categories
follow DLIO's ``tests/dlio_ai_logging_test.py``.
"""

from __future__ import annotations

import inspect
import itertools
import os
import signal
import sys
import threading
import time
from functools import wraps

__all__ = ["DFTRACER_ENABLE", "dftracer", "dft_fn", "ai", "AIRegion"]

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def _env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    sys.stderr.write(f"dftracer: invalid boolean {name}={raw!r}; using {int(default)}\n")
    return default


def _yaml_enable() -> bool:
    """``enable`` from the DFTRACER_CONFIGURATION YAML file (the env var wins, as in the core)."""
    path = os.environ.get("DFTRACER_CONFIGURATION")
    if not path:
        return False
    try:
        import yaml
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
        value = doc.get("enable", False) if isinstance(doc, dict) else False
    except Exception:
        return False  # the core warns about an unreadable or bad file
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in _TRUE


def _preload_init() -> bool:
    """``DFTRACER_INIT=PRELOAD`` in a process that has libdftracer_preload.so preloaded: the core
    is already tracing (see docs/configuration.md), so the Python API follows it."""
    return (os.environ.get("DFTRACER_INIT", "").strip().upper() == "PRELOAD"
            and "libdftracer_preload" in os.environ.get("LD_PRELOAD", ""))


#: True when tracing is on for this process: ``DFTRACER_ENABLE`` (or ``enable`` in the
#: DFTRACER_CONFIGURATION YAML file, or ``DFTRACER_INIT=PRELOAD`` under the preload) at import
#: time, and the compiled core loaded.
DFTRACER_ENABLE: bool = (_env_bool("DFTRACER_ENABLE") if "DFTRACER_ENABLE" in os.environ
                         else _yaml_enable() or _preload_init())

_core = None
if DFTRACER_ENABLE:
    try:
        from dftracer import _dftracer as _core  # noqa: F811
    except ImportError as exc:  # the app carries on untraced
        sys.stderr.write(
            f"dftracer: DFTRACER_ENABLE is set but dftracer._dftracer cannot be loaded ({exc}); "
            "tracing is off\n")
        DFTRACER_ENABLE = False
        _core = None


def _wall_us() -> int:
    return time.time_ns() // 1000


# ---------------------------------------------------------------------------------------------
# Hand-over to the core. `_now` and `_emit` are module globals read by every wrapper; `_emit`
# starts as the lazily initialising version and is swapped for the core's log_event.
# ---------------------------------------------------------------------------------------------

_init_lock = threading.Lock()
_initialized = False
_warned = False
_mp_hook_registered = False


def _noop(*_args) -> None:
    return None


def _warn_once(msg: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        try:
            sys.stderr.write(f"dftracer: {msg}\n")
        except Exception:
            pass


def _clean_str(s) -> str:
    """`s` as a str encodable to UTF-8: lone surrogates become U+FFFD."""
    s = s if isinstance(s, str) else str(s)
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _clean_args(args):
    if not args:
        return None
    out = {}
    for k, v in args.items():
        if isinstance(v, str):
            v = _clean_str(v)
        elif not isinstance(v, (bool, int, float)):
            v = _clean_str(v)
        out[_clean_str(k)] = v
    return out


def _safe_call(fn, *a):
    """Call a core function; never let a tracing error reach the application."""
    try:
        fn(*a)
    except UnicodeError:
        # Names or args that are not valid Unicode (lone surrogates): replace and retry once.
        try:
            fixed = [(_clean_str(x) if isinstance(x, str) else x) for x in a]
            if a and isinstance(a[-1], dict):
                fixed[-1] = _clean_args(a[-1])
            fn(*fixed)
        except Exception as exc:
            _warn_once(f"event dropped ({exc!r})")
    except Exception as exc:
        _warn_once(f"event dropped ({exc!r})")


def _emit_retry(name, cat, ts, dur, args):
    """Slow path after the core refused an event (e.g. a str with lone surrogates)."""
    if _core is not None:
        _safe_call(_core.log_event, name, cat, ts, dur, args)


def _emit_first(name, cat, ts, dur, args):
    _ensure_init()
    _safe_call(_core.log_event, name, cat, ts, dur, args)


def _ensure_init(log_file=None, data_dirs=None, process_id=None, explicit=False) -> bool:
    """Initialise the core once per process (or again when `explicit`). Returns is_active()."""
    global _initialized, _emit
    if _core is None:
        return False
    with _init_lock:
        if explicit or not _initialized:
            try:
                _core.initialize(log_file, data_dirs, process_id)
            except Exception as exc:
                _warn_once(f"initialize failed ({exc!r}); tracing is off")
            _initialized = True
            _register_mp_hooks()
        _emit = _core.log_event
    try:
        return bool(_core.is_active())
    except Exception:
        return False


_now = _core.get_time if _core is not None else _wall_us
_emit = _emit_first if _core is not None else _noop


#: Signals held back while the trace file is finalized: a pool's terminate() SIGTERMs workers
#: that may be finalizing on their way out; the signal is delivered once the file is complete.
_FINALIZE_BLOCKED = {signal.SIGTERM, signal.SIGINT}


def _finalize_core() -> None:
    if _core is not None:
        old = None
        try:
            old = signal.pthread_sigmask(signal.SIG_BLOCK, _FINALIZE_BLOCKED)
        except (OSError, ValueError):
            pass
        try:
            _core.finalize()
        except Exception as exc:
            _warn_once(f"finalize failed ({exc!r})")
        finally:
            if old is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)


class _MPHook:
    """Anchor object for multiprocessing.util.register_after_fork (needs a weakref-able object)."""


_MP_ANCHOR = _MPHook()
_finalizer_pid = None


def _register_mp_child_finalizer() -> None:
    # multiprocessing children end with os._exit(), which runs no atexit handler; its
    # _exit_function() does run the registered finalisers. Lowest priority: run last.
    # Signals (Pool.terminate() SIGTERMs its workers) are the core's business: its handler writes
    # the buffered events, then the signal takes its course (docs/format.md, crash behaviour);
    # the core's writer thread also flushes every DFTRACER_FLUSH_INTERVAL ms.
    global _finalizer_pid
    import multiprocessing.util as mpu
    if _finalizer_pid != os.getpid():
        _finalizer_pid = os.getpid()
        mpu.Finalize(None, _finalize_core, exitpriority=-(2**30))


def _after_mp_fork(_anchor) -> None:
    try:
        _register_mp_child_finalizer()
    except Exception:
        pass


def _register_mp_hooks() -> None:
    """Called under _init_lock once the core is initialised in this process."""
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
    _finalize_core()
    _real_os_exit(status)


def _flush_then(real):
    @wraps(real)
    def call(*args, **kwargs):
        if _core is not None:
            try:
                _core.flush()  # the new image starts its own trace; this one's events stay
            except Exception:
                pass
        return real(*args, **kwargs)
    return call


def _install_exit_hooks() -> None:
    """Route os._exit and os.execv/execve (which every os.exec* calls) through the tracer, so a
    process that leaves or replaces itself that way keeps its events. Installed when the core
    is loaded; calls made through references taken before (``from os import _exit``) are not
    seen, and for those the core's timed flush bounds the loss."""
    if os._exit is _real_os_exit:
        os._exit = _os_exit
    if os.execv is _real_execv:
        os.execv = _flush_then(_real_execv)
    if os.execve is _real_execve:
        os.execve = _flush_then(_real_execve)


def _after_fork_in_child() -> None:
    # The core's own atfork handler moves the child to its own file. Python-side: a lock
    # held by another (now vanished) thread at fork time must not deadlock the child.
    global _init_lock
    _init_lock = threading.Lock()


if _core is not None and hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
if _core is not None:
    _install_exit_hooks()


# ---------------------------------------------------------------------------------------------
# Tags
# ---------------------------------------------------------------------------------------------

_KNOWN_TAGS = ("epoch", "step", "image_idx", "image_size")


def _tag_value(v):
    """A tag value the core can write: bool/int/float/str kept, numpy scalars unwrapped,
    anything else str()-ed."""
    if isinstance(v, (bool, int, float, str)):
        return v
    item = getattr(v, "item", None)
    if item is not None and getattr(v, "ndim", None) == 0:
        try:
            return item()
        except Exception:
            pass
    return str(v)


def _collect_tags(epoch=None, step=None, image_idx=None, image_size=None, args=None, tags=None):
    out = {}
    if epoch is not None:
        out["epoch"] = _tag_value(epoch)
    if step is not None:
        out["step"] = _tag_value(step)
    if image_idx is not None:
        out["image_idx"] = _tag_value(image_idx)
    if image_size is not None:
        out["image_size"] = _tag_value(image_size)
    if args:
        for k, v in args.items():
            if v is not None:
                out[str(k)] = _tag_value(v)
    if tags:
        for k, v in tags.items():
            if v is not None:
                out[str(k)] = _tag_value(v)
    return out


def _code_params(f):
    """(parameter names in positional order, defaults by name) of a Python function."""
    code = getattr(f, "__code__", None)
    if code is None:
        return (), {}
    n = code.co_argcount + code.co_kwonlyargcount
    names = code.co_varnames[:n]
    defaults = {}
    pos_defaults = getattr(f, "__defaults__", None) or ()
    if pos_defaults:
        pos_names = names[:code.co_argcount]
        for name, value in zip(pos_names[len(pos_names) - len(pos_defaults):], pos_defaults):
            defaults[name] = value
    kw_defaults = getattr(f, "__kwdefaults__", None) or {}
    defaults.update(kw_defaults)
    return names, defaults


def _make_extractor(f, scan_self: bool):
    """A function (args, kwargs) -> dict of epoch/step/image_idx/image_size taken from the
    call's arguments (and from attributes of `self` for methods), or None when `f` has none."""
    names, defaults = _code_params(f)
    code = getattr(f, "__code__", None)
    n_pos = code.co_argcount if code is not None else 0
    # (position or -1 for keyword-only, name)
    wanted = [(i if i < n_pos else -1, n) for i, n in enumerate(names) if n in _KNOWN_TAGS]
    is_method = scan_self and bool(names) and names[0] == "self"
    # **kwargs functions: known tag names passed by keyword count too
    kw_only = [n for n in _KNOWN_TAGS if n not in names] \
        if code is not None and code.co_flags & inspect.CO_VARKEYWORDS else []
    if not wanted and not is_method and not kw_only:
        return None

    def extract(a, k):
        out = {}
        try:
            if is_method and a:
                obj = a[0]
                for attr in _KNOWN_TAGS:
                    v = getattr(obj, attr, None)
                    if isinstance(v, (int, float)) and not isinstance(v, bool):
                        out[attr] = v
            for i, n in wanted:
                if 0 <= i < len(a):
                    v = a[i]
                elif n in k:
                    v = k[n]
                else:
                    v = defaults.get(n)
                if v is None:
                    continue
                out[n] = _known_tag(n, v)
            for n in kw_only:
                v = k.get(n)
                if v is not None:
                    out[n] = _known_tag(n, v)
        except Exception:
            pass
        return out

    return extract


def _known_tag(n, v):
    """epoch/step/image_idx as int, image_size (bytes) as int or float."""
    if n == "image_size":
        v = _tag_value(v)
        return v if isinstance(v, (int, float)) else float(v)
    return int(v)


# ---------------------------------------------------------------------------------------------
# Regions: the shared machinery of dft_fn and the ai tree
# ---------------------------------------------------------------------------------------------


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
    def _iter(self, iterable, wait_name, body_name, count_key, include_wait=True,
              include_body=True):
        if not self._on:
            return iter(iterable)
        return self._iter_gen(iter(iterable), wait_name, body_name, count_key,
                              include_wait, include_body)

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

    def __init__(self, cat, name=None, epoch=None, step=None, image_idx=None, image_size=None,
                 enable=True):
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
            return self._wrap(f, name or getattr(f, "__qualname__", str(f)),
                              _make_extractor(f, scan_self=True) if DFTRACER_ENABLE else None)
        return deco(func) if callable(func) else deco

    def log_init(self, init=None, name=None):
        def deco(f):
            return self._wrap(f, name or getattr(f, "__qualname__", str(f)),
                              _make_extractor(f, scan_self=False) if DFTRACER_ENABLE else None)
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


# ---------------------------------------------------------------------------------------------
# The ai tree
# ---------------------------------------------------------------------------------------------

_SEP = "."

# Tags of the ai tree are inherited: a node's event args merge its own tags with its
# ancestors', the most recently set value of a key winning. update() is O(1): it stores
# (sequence number, value) pairs and bumps _tag_gen; each node recomputes its merged args at
# its next event when its cached generation is stale.
_tag_gen = 0
_tag_seq = itertools.count(1)


class AIRegion(_Region):
    """A node of the ``ai`` tree: event name ``name`` in category ``cat``.

    Usable as ``@node`` (one event per call), ``with node:``, ``node.start()``/``node.stop()``,
    ``node.iter(iterable)`` and ``node.update(...)`` (tags this node and every node below it).
    ``node(epoch=.., args={..})`` returns a copy carrying extra tags; ``node(fn, ...)``
    decorates. ``node.iter`` emits ``<name>.iter`` (wait for the item) and ``<name>.block``
    (loop body) per consumed item with ``args.count`` = item number (1-based).
    """

    def __init__(self, cat, name, tags=None, enable=True, children=None, parent=None):
        super().__init__(cat, name, None, enable)
        self._parent = parent
        self._own = {k: (next(_tag_seq), v) for k, v in tags.items()} if tags else {}
        self._cgen = -1
        self._cargs = None
        self._children = {}
        for attr, child_name in (children or {}).items():
            self._add_child(attr, AIRegion(self._cat, child_name, None, self._enable,
                                           parent=self))

    def _add_child(self, attr, child):
        setattr(self, attr, child)
        self._children[attr] = child
        return child

    # -- tags -----------------------------------------------------------------------------------
    def _refresh(self):
        gen = _tag_gen  # read first: a concurrent update makes the next event recompute
        best = {}
        node = self
        while node is not None:
            for k, sv in node._own.items():
                cur = best.get(k)
                if cur is None or sv[0] > cur[0]:
                    best[k] = sv
            node = node._parent
        args = {k: sv[1] for k, sv in best.items()} or None
        self._cargs = args
        self._cgen = gen
        return args

    def _current_args(self):
        if self._cgen != _tag_gen:
            return self._refresh()
        return self._cargs

    def update(self, epoch=None, step=None, image_idx=None, image_size=None, args=None, **tags):
        global _tag_gen
        if DFTRACER_ENABLE:
            new = _collect_tags(epoch, step, image_idx, image_size, args, tags)
            if new:
                own = dict(self._own)
                for k, v in new.items():
                    own[k] = (next(_tag_seq), v)
                self._own = own  # copy-on-write
                _tag_gen += 1
        return self

    # -- forms ----------------------------------------------------------------------------------
    def _wrap(self, f, name):
        if not DFTRACER_ENABLE:
            return f
        region = self
        cat = self._cat

        @wraps(f)
        def traced(*a, **k):
            if not region._on:
                return f(*a, **k)
            t0 = _now()
            try:
                return f(*a, **k)
            finally:
                t1 = _now()
                args = region._cargs
                if region._cgen != _tag_gen:
                    args = region._refresh()
                try:
                    _emit(name, cat, t0, t1 - t0, args)
                except Exception:
                    _emit_retry(name, cat, t0, t1 - t0, args)
        return traced

    def __call__(self, fn=None, *, enable=None, epoch=None, step=None, image_idx=None,
                 image_size=None, args=None, **tags):
        extra = _collect_tags(epoch, step, image_idx, image_size, args, tags)
        node = self
        if extra or enable is not None:
            # a copy below this node: it still sees later update() calls on the tree
            node = AIRegion(self._cat, self._name, extra,
                            self._enable if enable is None else enable, parent=self)
        if fn is not None and callable(fn):
            return node._wrap(fn, node._name)
        return node

    def start(self, metadata=False):
        """Open an event (closed by stop()); with metadata=True write ``<name>.start`` = now (µs)
        as a metadata record instead."""
        if self._on:
            if metadata:
                dftracer.get_instance().log_metadata_event(f"{self._name}{_SEP}start", str(_now()))
            else:
                self._push()

    def stop(self, metadata=False):
        if self._on:
            if metadata:
                dftracer.get_instance().log_metadata_event(f"{self._name}{_SEP}end", str(_now()))
            else:
                self._pop_emit()

    def iter(self, iterator, *, include_block=True, include_iter=True, iter_name=None,
             block_name=None):
        if not self._on:
            return iter(iterator)
        wait_name = iter_name or (self._name if self._name.endswith(_SEP + "iter")
                                  else f"{self._name}{_SEP}iter")
        body_name = block_name or (self._name if self._name.endswith(_SEP + "block")
                                   else f"{self._name}{_SEP}block")
        return self._iter(iterator, wait_name, body_name, "count", include_iter, include_block)

    def enable(self) -> None:
        self._enable = True
        self._on = DFTRACER_ENABLE
        for child in self._children.values():
            child.enable()

    def disable(self) -> None:
        self._enable = False
        self._on = False
        for child in self._children.values():
            child.disable()

    def reset(self) -> None:
        """Drop this thread's open start() calls."""
        self._tls.starts = []

    def derive(self, name) -> "AIRegion":
        """Child region ``<this name>.<name>`` in the same category (created once)."""
        full = f"{self._name}{_SEP}{name}"
        child = self._children.get(full)
        if child is None:
            child = AIRegion(self._cat, full, None, self._enable, parent=self)
            self._children[full] = child
        return child

    @property
    def init(self) -> "AIRegion":
        """Child region ``<this name>.init`` (e.g. ``checkpoint.init``)."""
        return self.derive("init")

    def get_time(self) -> int:
        return _now()


def _io(cat, parent_node):
    base = f"{parent_node.name}{_SEP}io"
    return AIRegion(cat, base, parent=parent_node,
                    children={op: f"{base}{_SEP}{op}" for op in ("open", "read", "write", "close")})


def _build_ai() -> AIRegion:
    root = AIRegion("ai_root", "ai_root")
    groups = {
        "compute": ("forward", "backward", "step"),
        "data": ("preprocess", "item"),
        "dataloader": ("fetch",),
        "comm": ("send", "receive", "barrier", "bcast", "reduce", "all_reduce", "gather",
                 "all_gather", "scatter", "reduce_scatter", "all_to_all"),
        "device": ("transfer",),
        "checkpoint": ("capture", "restart"),
        "pipeline": ("epoch", "train", "evaluate", "test"),
        "other": (),
    }
    for cat, events in groups.items():
        children = {e: e for e in events}
        if cat == "other":
            children = {"log": f"other{_SEP}log"}
        node = root._add_child(cat, AIRegion(cat, cat, children=children, parent=root))
        if cat in ("data", "checkpoint", "other"):
            node._add_child("io", _io(cat, node))
    return root


#: The AI-workload event tree (see AIRegion): ai, ai.pipeline.{epoch,train,evaluate,test},
#: ai.dataloader.fetch, ai.compute{,.forward,.backward,.step}, ai.data.{item,preprocess},
#: ai.checkpoint.{init,capture,restart}, ai.comm.*, ai.device.transfer.
ai = _build_ai()


# ---------------------------------------------------------------------------------------------
# The process-wide tracer handle
# ---------------------------------------------------------------------------------------------


class dftracer:
    """Process-wide tracer handle (a singleton), as DLIO's ``PerfTrace``."""

    _instance = None

    def __init__(self):
        self.logger = _core
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

        ``logfile``: explicit trace file name (DLIO: ``.../trace-<rank>-of-<size>.pfw``); None
        uses ``DFTRACER_LOG_FILE``. ``data_dir``: ``:``-separated traced path prefixes (None:
        ``DFTRACER_DATA_DIR``). ``process_id``: value for the ``pid`` field; negative or None
        means the OS pid. Calling it again, or after finalize(), never corrupts a file.
        """
        inst = dftracer.get_instance()
        if not DFTRACER_ENABLE:
            return inst
        logfile = logfile if logfile is not None else log_file
        if logfile:
            logfile = os.fspath(logfile)
            parent = os.path.dirname(os.path.abspath(logfile))
            try:
                os.makedirs(parent, exist_ok=True)
            except OSError:
                pass  # the core warns that it cannot write
        if data_dir is not None:
            data_dir = os.fspath(data_dir)
        pid = None
        if process_id is not None:
            try:
                pid = int(process_id)
            except (TypeError, ValueError):
                pid = None
            if pid is not None and pid < 0:
                pid = None
        _ensure_init(logfile or None, data_dir or None, pid, explicit=True)
        return inst

    def get_time(self) -> int:
        """Wall time in µs since the epoch (the core's clock when tracing)."""
        return _now()

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

    def log_event(self, name, cat, start_time, duration, args=None, int_args=None,
                  float_args=None, string_args=None) -> None:
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
            _warn_once(f"log_event: bad time values {start_time!r}, {duration!r}; event dropped")
            return
        name = name if isinstance(name, str) else str(name)
        cat = cat if isinstance(cat, str) else str(cat)
        try:
            _emit(name, cat, ts, dur, merged)
        except Exception:
            _emit_retry(name, cat, ts, dur, merged)

    def log_instant(self, name, cat, ts=None, args=None) -> None:
        """Log an instant event (``ph: "i"``) at ``ts`` µs (default: now)."""
        if not DFTRACER_ENABLE:
            return
        if _emit is _emit_first:
            _ensure_init()
        _safe_call(_core.log_instant, str(name), str(cat), int(_now() if ts is None else ts),
                   {str(k): _tag_value(v) for k, v in args.items()} if args else None)

    def log_metadata_event(self, key, value) -> None:
        """Write a metadata record (``ph: "M"``) with ``key`` and ``str(value)``."""
        if not DFTRACER_ENABLE:
            return
        if _emit is _emit_first:
            _ensure_init()
        _safe_call(_core.log_metadata, str(key), str(value))

    def trace_path(self):
        """Path of this process's trace file, or None when not tracing."""
        if _core is None:
            return None
        try:
            return _core.trace_path()
        except Exception:
            return None

    def finalize(self) -> None:
        """Flush and close this process's trace. Safe to call more than once."""
        if DFTRACER_ENABLE:
            _finalize_core()
