"""Event filters (``DFAnalyzer(..., query=...)``, ``--filter``) and their push-down to checkpoints.

A filter is a pandas query string over the columns of ``DFAnalyzer.events``
(``"cat == 'POSIX' and ts >= 1727387400000000"``). Every loaded batch is filtered with
``DataFrame.query``, so the result is exactly the rows the query selects. Before loading, the
top-level ``and`` terms of the query that compare ``ts`` / ``te`` with a number or ``cat`` /
``name`` with strings (``==``, ``in``, chained ``a <= ts < b``) are checked against the
per-checkpoint statistics kept in the index (``dfanalyzer.reader.checkpoint_stats``: min/max of
``ts`` and ``te``, the category and name sets); a checkpoint that no event can satisfy is not
read at all. Anything else in the query (``or``, other columns, functions) is only applied
after loading: push-down never changes the result, only the work.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np
import pandas as pd

__all__ = ["Predicate", "parse_query", "pushdown_predicates", "checkpoint_may_match", "apply_query"]

_TIME = ("ts", "te")
_SETS = ("cat", "name")
_FLIP = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE, ast.Eq: ast.Eq}
_BACKTICK = re.compile(r"`([^`]*)`")


@dataclass(frozen=True)
class Predicate:
    """One pushed-down term: ``column op value``; op is ``<``, ``<=``, ``>``, ``>=``, ``==`` (time)
    or ``in`` (``cat`` / ``name`` with a tuple of strings)."""

    column: str
    op: str
    value: object


def parse_query(query: str) -> ast.Expression:
    """Parse a pandas query string as a Python expression; ``ValueError`` when it is not one."""
    if not isinstance(query, str) or not query.strip():
        raise ValueError("empty filter query")
    text = _BACKTICK.sub(lambda m: "_bt_" + re.sub(r"\W", "_", m.group(1)), query)
    try:
        return ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"bad filter query {query!r}: {exc.msg}") from None


def _conjuncts(node) -> List[ast.AST]:
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        return [t for v in node.values for t in _conjuncts(v)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd):
        return _conjuncts(node.left) + _conjuncts(node.right)
    return [node]


def _const(node):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        v = node.operand.value
        return -v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        vals = [_const(e) for e in node.elts]
        return tuple(vals) if all(isinstance(v, str) for v in vals) else None
    return None


def _op_name(op) -> Optional[str]:
    return {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.In: "in"}.get(type(op))


def pushdown_predicates(query: Optional[str]) -> List[Predicate]:
    """The terms of ``query`` that can skip checkpoints (see the module doc); [] when none."""
    if not query:
        return []
    out: List[Predicate] = []
    for term in _conjuncts(parse_query(query).body):
        if not isinstance(term, ast.Compare):
            continue
        operands = [term.left] + list(term.comparators)
        for left, op, right in zip(operands[:-1], term.ops, operands[1:]):
            name = _op_name(op)
            if name is None:
                continue
            col, val = None, None
            if isinstance(left, ast.Name) and _const(right) is not None:
                col, val = left.id, _const(right)
            elif isinstance(right, ast.Name) and _const(left) is not None and type(op) in _FLIP:
                col, val = right.id, _const(left)
                name = _op_name(_FLIP[type(op)]())
            if col in _TIME and name != "in" and isinstance(val, (int, float)) and not isinstance(val, bool):
                out.append(Predicate(col, name, val))
            elif col in _SETS and name == "==" and isinstance(val, str):
                out.append(Predicate(col, "in", (val,)))
            elif col in _SETS and name == "in" and isinstance(val, tuple):
                out.append(Predicate(col, "in", val))
    return out


def checkpoint_may_match(stats: dict, preds: Sequence[Predicate]) -> bool:
    """False only when no event of the checkpoint (``stats`` as from ``checkpoint_stats``) can
    satisfy every predicate; damaged checkpoints (``events < 0``) always may."""
    if not preds:
        return True
    n = stats["events"]
    if n < 0:
        return True
    if n == 0:
        return False
    for p in preds:
        if p.column in _TIME:
            lo, hi = stats["min_" + p.column], stats["max_" + p.column]
            v = p.value
            if (
                (p.op == ">=" and hi < v)
                or (p.op == ">" and hi <= v)
                or (p.op == "<=" and lo > v)
                or (p.op == "<" and lo >= v)
                or (p.op == "==" and (v < lo or v > hi))
            ):
                return False
        else:
            have = stats["cats" if p.column == "cat" else "names"]
            if have is not None and not set(have).intersection(p.value):
                return False
    return True


def _referenced_names(query: str) -> set:
    tree = parse_query(query)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def apply_query(df: pd.DataFrame, query: str) -> pd.DataFrame:
    """Rows of ``df`` selected by ``query`` (a fresh ``RangeIndex``). A column the query names that
    ``df`` lacks (an args key absent from this batch) is all null, so comparisons with it are false."""
    missing = {n for n in _referenced_names(query) if n not in df.columns and not n.startswith("_bt_")}
    missing -= {"True", "False", "None", "and", "or", "not", "in"}
    resolvers = [{n: pd.Series(np.nan, index=df.index, dtype=float) for n in missing}] if missing else []
    out = df.query(query, resolvers=resolvers) if resolvers else df.query(query)
    return out.reset_index(drop=True)
