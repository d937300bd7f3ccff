"""The engine's vocabulary: which calls and categories mean what, in one place.

* The **call families** are derived from the call table ``src/format/calls.def`` through the
  reader binding (``dfanalyzer._reader.call_table()``, built from the same X-macro as the reader's
  byte rule), so a call added there flows into every analysis. Derivation rules:

  - a *byte call* moves bytes (``bytes`` is ``RET`` or ``RET_TIMES_SIZE``);
  - its *direction* is in its name: ``read`` (read, pread64, readv, preadv64v2, fread, ...) or
    ``write``;
  - a *copy* (``bytes`` is ``RET_COPY``: copy_file_range, sendfile, sendfile64, splice) moves
    ``args.ret`` bytes in the kernel: read from its ``fname`` and written to its ``out_fname``
    (per-file metrics count it on both sides, :func:`dfanalyzer.engine.events.copy_sides`);
  - a byte call is *positional* when one of its parameters is an ``off_t``/``off64_t`` (it
    carries its own ``offset`` and does not move the file position);
  - *open* calls create a position at 0 (open, openat, creat, fopen, freopen and their ``64``
    forms); *seek* calls set it (POSIX ``lseek``: the result is the new position; STDIO
    ``fseek``/``fseeko``: by ``whence``); *tell* calls report it (STDIO ``ftell``/``ftello``);
  - *sync/map* calls (``fsync``, ``fdatasync``, ``msync``, ``mmap``, ``munmap``) move or commit
    data without a byte count; every other POSIX/STDIO event is a *metadata* call.

  Names are the names the preload records (``event``: ``__read_chk`` records ``read``).
* The **tracer category** (``TRACER_CATEGORY``, from ``src/format/event.h`` through the binding).
* The **category defaults** of ``DFAnalyzer``/the CLI and the **layer map**.
* The **AI vocabulary**: the ``ai`` API's and DLIO 2.0.0's event names for epochs, training,
  evaluation, the trainer's wait for the next batch (*fetch wait*) and the regions that *span*
  others (``*.block`` loops, ``epoch``, ``train``, ...): a spanning region is a container, never
  time spent in its own layer (``layers()``).
"""

from __future__ import annotations

import re
from typing import Dict, FrozenSet, Tuple

from .. import _reader

__all__ = [
    "AGGREGATE_COLUMNS",
    "Call",
    "CALLS",
    "TRACER_CATEGORY",
    "BYTE_NAMES",
    "READ_NAMES",
    "WRITE_NAMES",
    "POSITIONAL_NAMES",
    "OPEN_NAMES",
    "LSEEK_NAMES",
    "FSEEK_NAMES",
    "TELL_NAMES",
    "SYNC_NAMES",
    "COPY_NAMES",
    "DATA_NAMES",
    "IO_CATS",
    "COMPUTE_CATS",
    "APP_IO_CATS",
    "DEFAULT_LAYERS",
    "EPOCH_EVENTS",
    "TRAIN_EVENTS",
    "EVAL_EVENTS",
    "FETCH_EVENTS",
    "FETCH_WAIT_NAMES",
    "APP_IO_LAYER_CATS",
    "SAMPLE_NAMES",
    "AI_CATEGORIES",
    "COMPUTE_EVENTS_CATS",
    "CHECKPOINT_CATS",
    "spans_others",
]


class Call:
    """One row of ``src/format/calls.def``: interface (POSIX, STDIO, PROCESS, HDF5), symbol, the
    event name the preload records, return type, parameter types and byte rule (RET,
    RET_TIMES_SIZE, RET_COPY, ARG_SIZE, NONE, NO_EVENT). The byte families below hold libc's
    calls only (RET, RET_TIMES_SIZE): an ARG_SIZE call (H5Dread) is a layer above POSIX.
    Immutable, compared and hashed by value, like the frozen dataclass it was (written out: the
    import of ``dataclasses`` with ``inspect`` was ~10 ms of the threaded summary's start-up,
    docs/perf/i28-boot.md)."""

    __slots__ = _CALL_FIELDS = ("interface", "symbol", "event", "ret", "params", "bytes")

    def __init__(self, interface: str, symbol: str, event: str, ret: str, params: str, bytes: str):
        for name, value in zip(self._CALL_FIELDS, (interface, symbol, event, ret, params, bytes)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name):
        raise AttributeError(f"cannot delete field {name!r}")

    def _key(self) -> tuple:
        return tuple(getattr(self, n) for n in self._CALL_FIELDS)

    def __eq__(self, other):
        return self._key() == other._key() if other.__class__ is self.__class__ else NotImplemented

    def __hash__(self):
        return hash(self._key())

    def __reduce__(self):  # (the default would set the slots through __setattr__)
        return Call, self._key()

    def __repr__(self):
        return "Call(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self._CALL_FIELDS) + ")"


CALLS: Tuple[Call, ...] = tuple(Call(**row) for row in _reader.call_table())
TRACER_CATEGORY: str = _reader.TRACER_CATEGORY
#: Args columns of aggregated records the engine reads (kept even when the analyzer drops args
#: columns): calls per record and the per-call extremes of ``ret`` and ``size``. (Here, not in
#: ``engine.events``, which re-exports it: the threaded summary starts its loads before NumPy is
#: imported.)
AGGREGATE_COLUMNS = ("dft_cnt", "ret_min", "ret_max", "size_min", "size_max")

_EVENTS = [c for c in CALLS if c.bytes != "NO_EVENT"]
_OFFSET_PARAM = re.compile(r"\boff(64)?_t\b")
_OPEN = re.compile(r"(open|openat|creat|fopen|freopen)(64)?")


def _names(pred) -> FrozenSet[str]:
    return frozenset(c.event for c in _EVENTS if pred(c))


BYTE_NAMES = _names(lambda c: c.bytes in ("RET", "RET_TIMES_SIZE"))
READ_NAMES = frozenset(n for n in BYTE_NAMES if "read" in n)
WRITE_NAMES = frozenset(n for n in BYTE_NAMES if "write" in n)
POSITIONAL_NAMES = _names(lambda c: c.event in BYTE_NAMES and bool(_OFFSET_PARAM.search(c.params)))
OPEN_NAMES = _names(lambda c: c.interface in ("POSIX", "STDIO") and bool(_OPEN.fullmatch(c.event)))
LSEEK_NAMES = _names(lambda c: c.interface == "POSIX" and "seek" in c.event)
FSEEK_NAMES = _names(lambda c: c.interface == "STDIO" and "seek" in c.event)
TELL_NAMES = _names(lambda c: c.interface == "STDIO" and "tell" in c.event)
SYNC_NAMES = _names(
    lambda c: c.interface == "POSIX" and ("sync" in c.event or "mmap" in c.event or "munmap" == c.event)
)
#: Kernel-side copies: bytes read from ``fname`` and written to ``out_fname``.
COPY_NAMES = _names(lambda c: c.bytes == "RET_COPY")
#: Calls that move or commit data; every other POSIX/STDIO event is a metadata call.
DATA_NAMES = BYTE_NAMES | COPY_NAMES | SYNC_NAMES

# ----------------------------------------------------------------------------- categories
#: Defaults of DFAnalyzer(io_cats=, compute_cats=, app_io_cats=) and the CLI's --*-cats.
IO_CATS: Tuple[str, ...] = ("POSIX", "STDIO")
COMPUTE_CATS: Tuple[str, ...] = ("compute",)
APP_IO_CATS: Tuple[str, ...] = ("reader",)

#: Built-in category -> layer mapping: DLIO 2.0.0's categories, the ``ai`` API's categories
#: (dftracer/_ai.py) and the tracer's POSIX/STDIO. A category not listed is its own layer.
DEFAULT_LAYERS: Dict[str, str] = {
    "POSIX": "POSIX",
    "STDIO": "STDIO",
    # application (Python) I/O: DLIO readers and data loader, ai.data / ai.dataloader
    "reader": "app_io",
    "data_loader": "app_io",
    "data": "app_io",
    "dataloader": "app_io",
    # compute: DLIO's framework compute, ai.compute, the summary's compute category
    "ai_framework": "compute",
    "compute": "compute",
    # checkpointing, communication, device transfers (ai API)
    "checkpoint": "checkpoint",
    "comm": "comm",
    "device": "device",
    # the training loop itself: DLIO's benchmark driver, ai.pipeline, ai root
    "dlio_benchmark": "pipeline",
    "pipeline": "pipeline",
    "ai_root": "pipeline",
}

# ----------------------------------------------------------------------------- AI events
# (category, name) pairs as the ai API (dftracer/_ai.py, _regions.py) and DLIO 2.0.0 write them.
EPOCH_EVENTS = (("pipeline", "epoch.block"), ("pipeline", "epoch"))
TRAIN_EVENTS = (("pipeline", "train"), ("dlio_benchmark", "DLIOBenchmark._train"))
EVAL_EVENTS = (("pipeline", "evaluate"), ("dlio_benchmark", "DLIOBenchmark._eval"))
#: The trainer waiting for the next batch: one event per iteration of the data loader's loop.
FETCH_EVENTS = (
    ("dataloader", "fetch.iter"),
    ("dataloader", "fetch"),
    ("dlio_benchmark", "_train.iter"),
    ("dlio_benchmark", "loop.iter"),
)
COMPUTE_EVENTS_CATS = ("compute", "ai_framework")
CHECKPOINT_CATS = ("checkpoint",)
#: Names of the fetch-wait events (insights match fetch waits by name).
FETCH_WAIT_NAMES: Tuple[str, ...] = tuple(dict.fromkeys(n for _, n in FETCH_EVENTS))
#: Categories of the ``app_io`` layer: application (Python) I/O everywhere (layers, insights).
APP_IO_LAYER_CATS: Tuple[str, ...] = tuple(c for c, layer in DEFAULT_LAYERS.items() if layer == "app_io")
#: One event per sample read (ai.data.item, DLIO's and PyTorch's __getitem__).
SAMPLE_NAMES = ("item", "TorchDataset.__getitem__", "__getitem__")

#: Defaults of ``insights.yaml``'s ``categories`` (a user config may override any key there):
#: the one AI vocabulary the epochs and layers views and the insights share.
AI_CATEGORIES: Dict[str, object] = {
    "compute": list(COMPUTE_EVENTS_CATS),
    "app_io": list(APP_IO_LAYER_CATS),
    "fetch_wait_names": list(FETCH_WAIT_NAMES),
    "epoch_names": list(dict.fromkeys(n for _, n in EPOCH_EVENTS)),
    "epoch_fallback_names": [n for _, n in reversed(TRAIN_EVENTS)],
    "sample_names": list(SAMPLE_NAMES),
    "checkpoint_cats": list(CHECKPOINT_CATS),
    "checkpoint_name_pattern": "(?i)checkpoint",
}

#: ai regions that contain other work (a whole loop, an epoch, a training or evaluation run):
#: ``<region>.block`` of the ai API's loops, and the pipeline stages.
_SPANNING = frozenset(n for _, n in EPOCH_EVENTS + TRAIN_EVENTS + EVAL_EVENTS) | {"test", "ai_root"}


def spans_others(name: str) -> bool:
    """True for a region that spans other work (``*.block``, ``epoch``, ``train``, ...): its
    interval is a container, not time spent in its category's layer."""
    return name.endswith(".block") or name in _SPANNING
