"""Trace file patterns: :func:`expand_patterns` (re-exported by :mod:`dfanalyzer.analyzer`).

Standard library only: the ``--scheduler`` summary's client checks its patterns with it without
importing NumPy or the analysis modules (they run on a worker there, docs/perf/i27-import.md).
"""

from __future__ import annotations

import glob
import os
import stat
from typing import Dict, List, Optional, Sequence, Tuple, Union

#: index sidecars that a directory or a glob may match next to the traces: never traces
_INDEX_SUFFIXES = (".zindex", ".zindex-wal", ".zindex-shm", ".zindex-journal")


def expand_patterns(
    patterns: Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]],
    duplicates: Optional[List[Tuple[str, str]]] = None,
) -> List[str]:
    """Absolute, sorted, de-duplicated trace paths matching glob ``patterns``.

    A directory stands for ``*.pfw`` and ``*.pfw.gz`` inside it. Index sidecars (``.zindex``)
    are never returned. Files are de-duplicated by identity (``st_dev``, ``st_ino``), not by path
    string: of two symbolic links to one trace, or a link and its target, only the first path is
    kept; each dropped path is appended to ``duplicates`` (when given) as ``(dropped, kept)``.
    Raises ``FileNotFoundError`` naming the first pattern that matches no trace file, and
    ``ValueError`` for an empty pattern list.
    """
    if isinstance(patterns, (str, os.PathLike)):
        patterns = [patterns]
    patterns = [os.fspath(p) for p in patterns]
    if not patterns:
        raise ValueError("no file pattern given")
    out: List[str] = []
    seen: Dict[Tuple[int, int], str] = {}
    dropped = set()
    for pat in patterns:
        expanded = os.path.expanduser(pat)
        if os.path.isdir(expanded):
            hits = glob.glob(os.path.join(expanded, "*.pfw")) + glob.glob(os.path.join(expanded, "*.pfw.gz"))
        else:
            hits = glob.glob(expanded, recursive=True)
        found = 0
        for h in sorted(os.path.abspath(h) for h in hits if not h.endswith(_INDEX_SUFFIXES)):
            try:
                st = os.stat(h)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            found += 1
            key = (st.st_dev, st.st_ino)
            if key not in seen:
                seen[key] = h
                out.append(h)
            elif seen[key] != h and h not in dropped:
                dropped.add(h)
                if duplicates is not None:
                    duplicates.append((h, seen[key]))
        if not found:
            raise FileNotFoundError(f"no trace files match pattern {pat!r}")
    return out
