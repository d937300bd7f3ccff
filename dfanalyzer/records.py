"""Typed records of loading: what one load task reports (:class:`BatchInfo`) and the per-file
statistics the analyzer keeps (:class:`FileStats`, the rows of ``DFAnalyzer.stats["per_file"]``).

Counts are ints (lines, rows = events, bytes); ``warnings`` are messages naming the file.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Dict, List, Optional, Tuple

__all__ = ["BatchInfo", "FileStats", "LoadError", "stats_frame"]


class LoadError(OSError):
    """A load task failed (an exception in it, memory, a killed worker): the message names the
    file and the batch (checkpoint range, or the group of small files) and the cause. Never
    turned into an empty partition: the events would be silently incomplete."""


@dataclass
class FileStats:
    """One trace file: its index (``kind``, ``lines``, sizes, ``checkpoints``) and what loading it
    gave (``events``) or could not deliver (skipped lines and checkpoints, lost bytes and lines,
    unresolved hashes, warnings)."""

    path: str
    kind: Optional[str] = None
    lines: int = 0
    events: int = 0
    compressed_bytes: int = 0
    uncompressed_bytes: int = 0
    checkpoints: int = 0
    skipped_lines: int = 0
    skipped_checkpoints: int = 0
    lost_bytes: int = 0
    lost_lines: int = 0
    unresolved_hashes: int = 0
    warnings: List[str] = field(default_factory=list)
    #: (first ts, last te) of its events in µs, None without events (input sanity,
    #: dfanalyzer.sanity); not a column of the stats frame
    span: Optional[Tuple[int, int]] = None

    @classmethod
    def from_reader(cls, f: dict) -> "FileStats":
        """From a ``dfanalyzer.reader.load_files`` per-file dict (a file that failed counts its
        compressed bytes as lost and says why)."""
        err = f.get("error")
        return cls(
            path=f["path"],
            kind=f.get("kind"),
            lines=int(f.get("lines", 0)),
            events=int(f.get("rows", 0)),
            compressed_bytes=int(f.get("compressed_bytes", 0)),
            uncompressed_bytes=int(f.get("uncompressed_bytes", 0)),
            checkpoints=int(f.get("checkpoints", 0)),
            skipped_lines=int(f.get("skipped_lines", 0)),
            lost_bytes=int(f.get("lost_bytes", 0)) + (int(f.get("compressed_bytes", 0)) if err else 0),
            lost_lines=int(f.get("lost_lines", 0)),
            unresolved_hashes=int(f.get("unresolved_hashes", 0)),
            warnings=list(f.get("warnings", [])) + ([f"{f['path']}: not loaded: {err}"] if err else []),
            span=f.get("span"),
        )

    def add(self, info: "BatchInfo") -> None:
        """Count one loaded batch of this file."""
        self.events += info.rows
        self.skipped_lines += info.skipped_lines
        self.lost_bytes += info.lost_bytes
        self.lost_lines += info.lost_lines
        self.unresolved_hashes += info.unresolved_hashes
        self.warnings.extend(info.warnings)


@dataclass
class BatchInfo:
    """What one load task (a batch of one file, or a group of small files) reports: ``rows``
    (events kept), ``schema`` (args column -> kind), what it skipped or lost, ``warnings``,
    ``error`` (None when it loaded) and, for a group of small files, ``files``."""

    rows: int = 0
    schema: Dict[str, str] = field(default_factory=dict)
    skipped_lines: int = 0
    lost_bytes: int = 0
    lost_lines: int = 0
    unresolved_hashes: int = 0
    warnings: List[str] = field(default_factory=list)
    error: Optional[str] = None
    files: Optional[List[FileStats]] = None
    #: (first ts, last te) of the batch's events in µs, before any query (input sanity)
    span: Optional[Tuple[int, int]] = None
    #: with a filter: its args columns that the loaded events have (None: no event loaded);
    #: dfanalyzer.filters.check_columns_seen
    filter_seen: Optional[Tuple[str, ...]] = None
    #: args column -> events with a value, args_extra keys included (dfanalyzer.reader.Batch)
    arg_counts: Optional[Dict[str, int]] = None
    #: the task itself failed (memory, a bug, a failing filter...): the analyzer raises
    #: LoadError. False for ``error`` caused by the input (the reader's OSError: unreadable or
    #: changed since indexed; IndexError: the file changed under the planned batch): lost lines
    fatal: bool = False

    @staticmethod
    def is_fatal(exc: BaseException) -> bool:
        """Whether ``exc`` in a load task is a task failure rather than unreadable input."""
        return not isinstance(exc, (OSError, IndexError))

    @classmethod
    def failed(cls, batch: tuple, exc: BaseException) -> "BatchInfo":
        """A batch ``(path, first, last, bytes, lines)`` that could not be loaded: its lines and
        bytes are lost (not "skipped": none was parsed), with the reason."""
        path, first, last, nbytes, nlines = batch
        msg = f"{type(exc).__name__}: {exc}"
        return cls(
            lost_lines=int(nlines),
            lost_bytes=int(nbytes),
            warnings=[f"{path}: checkpoints {first}-{last} not loaded: {msg}"],
            error=msg,
            fatal=cls.is_fatal(exc),
        )


def stats_frame(per_file: List[FileStats]):
    """The per-file statistics as a pandas DataFrame (one row per file, the FileStats fields as
    columns, in that order)."""
    import pandas as pd

    cols = [f.name for f in fields(FileStats) if f.name != "span"]
    return pd.DataFrame([asdict(f) for f in per_file], columns=cols)
