"""The ``ai`` tree: AI-workload regions (``ai.pipeline.epoch``, ``ai.dataloader.fetch``,
``ai.compute.forward``, ...) whose event names and categories follow DLIO's
``tests/dlio_ai_logging_test.py``.
"""

from __future__ import annotations

import itertools
import sys
from functools import wraps

from dftracer import _native
from dftracer._handle import dftracer
from dftracer._regions import DFTRACER_ENABLE, _Region
from dftracer._tags import _collect_tags

_emit_retry = _native.emit_retry
_now = _emit = None  # bound by _native.bind below

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
            self._add_child(attr, AIRegion(self._cat, child_name, None, self._enable, parent=self))

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

    def __call__(
        self, fn=None, *, enable=None, epoch=None, step=None, image_idx=None, image_size=None, args=None, **tags
    ):
        extra = _collect_tags(epoch, step, image_idx, image_size, args, tags)
        node = self
        if extra or enable is not None:
            # a copy below this node: it still sees later update() calls on the tree
            node = AIRegion(self._cat, self._name, extra, self._enable if enable is None else enable, parent=self)
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

    def iter(self, iterator, *, include_block=True, include_iter=True, iter_name=None, block_name=None):
        if not self._on:
            return iter(iterator)
        wait_name = iter_name or (self._name if self._name.endswith(_SEP + "iter") else f"{self._name}{_SEP}iter")
        body_name = block_name or (self._name if self._name.endswith(_SEP + "block") else f"{self._name}{_SEP}block")
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
    return AIRegion(
        cat, base, parent=parent_node, children={op: f"{base}{_SEP}{op}" for op in ("open", "read", "write", "close")}
    )


def _build_ai() -> AIRegion:
    root = AIRegion("ai_root", "ai_root")
    groups = {
        "compute": ("forward", "backward", "step"),
        "data": ("preprocess", "item"),
        "dataloader": ("fetch",),
        "comm": (
            "send",
            "receive",
            "barrier",
            "bcast",
            "reduce",
            "all_reduce",
            "gather",
            "all_gather",
            "scatter",
            "reduce_scatter",
            "all_to_all",
        ),
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


_native.bind(sys.modules[__name__])

#: The AI-workload event tree (see AIRegion): ai, ai.pipeline.{epoch,train,evaluate,test},
#: ai.dataloader.fetch, ai.compute{,.forward,.backward,.step}, ai.data.{item,preprocess},
#: ai.checkpoint.{init,capture,restart}, ai.comm.*, ai.device.transfer.
ai = _build_ai()
