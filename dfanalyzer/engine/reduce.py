"""The one reduction of the engine: mergeable partials combined in a tree of fan-in 8.

A metric is three functions: ``partial(partition, *args)`` -> a small mergeable value,
``combine(*partials)`` -> one partial (associative; partials come in partition order) and
``finish(partial)`` -> the result. :func:`tree_reduce` runs the combine tree over leaves that are
plain values, Dask ``delayed`` objects or distributed futures (``submit``); :class:`Folder` does
the same as partials arrive one by one (a streamed summary); :func:`run_metric` runs a metric
over the partitions of a Dask or pandas DataFrame.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence

from .._lazy import pandas as pd  # (imported on first use: dfanalyzer._lazy)

__all__ = ["FAN_IN", "tree_reduce", "Folder", "run_metric"]

FAN_IN = 8


def tree_reduce(leaves: Sequence, combine: Callable, submit: Optional[Callable] = None, fan_in: int = FAN_IN):
    """``combine`` over ``leaves`` in a tree of ``fan_in`` (order kept); the root, or None when
    there are no leaves. ``submit(fn, *args)`` schedules one combine (``client.submit`` with
    ``pure=False``, ``dask.delayed(fn)(*args)``); None calls it here."""
    run = submit if submit is not None else (lambda fn, *a: fn(*a))
    level = list(leaves)
    if not level:
        return None
    if len(level) == 1:
        return run(combine, level[0])
    while len(level) > 1:
        level = [run(combine, *level[i : i + fan_in]) for i in range(0, len(level), fan_in)]
    return level[0]


class Folder:
    """Merges partials as they arrive (:meth:`add`), ``fan_in`` at a time per level, so a stream
    holds at most ``fan_in - 1`` partials per level; :meth:`result` merges what is left (None
    when nothing was added). Same result as ``tree_reduce`` for an exact, associative and
    commutative ``combine``."""

    def __init__(self, combine: Callable, fan_in: int = FAN_IN):
        self.combine = combine
        self.fan_in = max(2, int(fan_in))
        self.levels: List[List[Any]] = []

    def add(self, part) -> None:
        level = 0
        while True:
            if level == len(self.levels):
                self.levels.append([])
            self.levels[level].append(part)
            if len(self.levels[level]) < self.fan_in:
                return
            part = self.combine(*self.levels[level])
            self.levels[level] = []
            level += 1

    def result(self):
        return self.combine(*[p for level in self.levels for p in level])


def run_metric(events, partial: Callable, combine: Callable, finish: Callable, *args, client=None):
    """``finish(tree_reduce(partial(p, *args) for each partition p))`` of ``events``: a Dask
    DataFrame (partials run where its partitions live, one graph, computed on ``client`` or the
    default scheduler) or a pandas DataFrame (computed here). ``combine`` takes partials as
    positional arguments."""
    if isinstance(events, pd.DataFrame):
        return finish(combine(partial(events, *args)))
    from dask import delayed

    leaves = [delayed(partial)(p, *args) for p in events.to_delayed()]
    if not leaves:
        return finish(combine())
    root = delayed(finish)(tree_reduce(leaves, combine, submit=lambda fn, *a: delayed(fn)(*a)))
    if client is not None:
        return client.compute(root, sync=True)
    return root.compute()
