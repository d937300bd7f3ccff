"""Event filters (``DFAnalyzer(..., query=...)``, ``--filter``): a small grammar of our own.

**A filter is data, never code.** The text is read by the tokenizer and recursive-descent parser
below (nothing is ever given to ``eval``, ``DataFrame.query`` or ``pandas.eval``), before any
file is read; anything outside the grammar is a :class:`FilterError` (a ``ValueError``) naming
the character where it goes wrong. The parsed filter is then compiled to NumPy boolean masks
over each loaded batch, and its top-level ``and`` terms to the checkpoint push-down.

Grammar (``docs/analyzer.md``, "Filters", has the same with examples)::

    filter     := or_expr
    or_expr    := and_expr (("or" | "|") and_expr)*
    and_expr   := not_expr (("and" | "&") not_expr)*
    not_expr   := "not" not_expr | "(" or_expr ")" | test
    test       := operand (cmp operand)+                    # chained: 1 <= ts < 2 is 1 <= ts and ts < 2
                | column ["not"] "in" list                  # list: [v, ...] or (v, ...)
                | column ["not"] ("startswith" | "endswith" | "contains") string
                | column "is" ["not"] "null"
    cmp        := "==" | "!=" | "<" | "<=" | ">" | ">="
    operand    := column | literal                          # at least one column per comparison
    column     := name | `any text but a backtick`          # name: [A-Za-z_][A-Za-z0-9_]*
    literal    := ["-"] number [unit] | string
    string     := '...' | "..."   escapes: \\\\ \\' \\" \\n \\t \\r \\0 \\xHH \\uHHHH \\UHHHHHHHH

A filter has at most ``MAX_LENGTH`` (65,536) characters and ``MAX_DEPTH`` (100) nested ``not`` and
parentheses.

Units (no space between number and unit): time ``ns us µs ms s min h`` → µs (the unit of
``ts``, ``dur``, ``te``: ``250ms`` is 250000); sizes ``B kB KB MB GB TB`` (powers of 1000) and
``KiB MiB GiB TiB`` (powers of 1024) → bytes. Keywords are lower case; a column with a keyword's
name (or any odd name) is written in backticks.

Columns: the 12 core columns of ``DFAnalyzer.events`` (text: ``name cat ph hostname fname``;
numbers: ``pid tid ts dur te size offset``) and the args keys of the trace. Core columns are
checked before loading: text columns take ``== != in startswith endswith contains is null`` with
strings, number columns comparisons and ``in`` with numbers, time units only on ``ts dur te``
and size units only on ``size offset``. An args column is checked on the data: a name that no
event read has as an args key is an error (not an empty result), and so is comparing an args
column that holds text with a number (or numbers with a string, or ordering text).

Nulls: ``==``, ``<``, ``<=``, ``>``, ``>=``, ``in``, ``startswith``, ``endswith``, ``contains``
are false where the column is null (or absent from the event); ``!=``, ``not in`` and the
negated string tests are their exact complements (true there); ``is null`` selects them.

Push-down: before loading, the top-level ``and`` terms that compare ``ts`` / ``te`` with a
number (``<``, ``<=``, ``>``, ``>=``, ``==``, chained ``a <= ts < b``) or test ``cat`` /
``name`` with strings (``==``, ``in``, ``startswith``, ``endswith``, ``contains``) are checked
against the per-checkpoint statistics kept in the index (``dfanalyzer.reader.checkpoint_stats``:
min/max of ``ts`` and ``te``, the category and name sets); a checkpoint that no event can
satisfy is not read at all. Everything else is only applied after loading: push-down never
changes the result, only the work.
"""

from __future__ import annotations

import difflib
import functools
import operator
from dataclasses import dataclass
from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal, InvalidOperation, localcontext
from typing import Dict, FrozenSet, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from .schema import CORE_KINDS

__all__ = [
    "FilterError",
    "Filter",
    "Predicate",
    "parse_filter",
    "referenced_columns",
    "pushdown_predicates",
    "checkpoint_may_match",
    "filter_mask",
    "apply_query",
    "check_columns_seen",
]

_TIME = ("ts", "te")
_SETS = ("cat", "name")
_TEXT_CORE = frozenset(c for c, k in CORE_KINDS.items() if k == "category")
_TIME_COLUMNS = frozenset(("ts", "dur", "te"))
_SIZE_COLUMNS = frozenset(("size", "offset"))

#: unit -> (dimension, factor to the column unit: µs or bytes)
UNITS: Dict[str, Tuple[str, Decimal]] = {
    "ns": ("time", Decimal("0.001")),
    "us": ("time", Decimal(1)),
    "µs": ("time", Decimal(1)),  # MICRO SIGN
    "μs": ("time", Decimal(1)),  # GREEK SMALL LETTER MU
    "ms": ("time", Decimal(1000)),
    "s": ("time", Decimal(10**6)),
    "min": ("time", Decimal(60 * 10**6)),
    "h": ("time", Decimal(3600 * 10**6)),
    "B": ("size", Decimal(1)),
    "kB": ("size", Decimal(10**3)),
    "KB": ("size", Decimal(10**3)),
    "MB": ("size", Decimal(10**6)),
    "GB": ("size", Decimal(10**9)),
    "TB": ("size", Decimal(10**12)),
    "KiB": ("size", Decimal(2**10)),
    "MiB": ("size", Decimal(2**20)),
    "GiB": ("size", Decimal(2**30)),
    "TiB": ("size", Decimal(2**40)),
}
#: most nested 'not' and parentheses a filter may have, and its most characters
MAX_DEPTH = 100
MAX_LENGTH = 1 << 16
_KEYWORDS = frozenset(("and", "or", "not", "in", "is", "null", "startswith", "endswith", "contains"))
_STROPS = ("startswith", "endswith", "contains")
_CMP = ("==", "!=", "<", "<=", ">", ">=")
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_NP_OPS = {"==": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
#: Python words that are not part of the grammar (a clearer message than "expected an operator")
_PYTHON_WORDS = frozenset(
    "lambda import from def class return yield await async if else elif for while with as global "
    "nonlocal del assert raise try except finally pass break continue True False None".split()
)


class FilterError(ValueError):
    """A filter that is not in the grammar (``pos``: 0-based character offset into ``query``) or
    that cannot be applied to the data (unknown column, text compared with a number).

    ``str()`` is :attr:`line`, then, when the position is known, the filter and a caret line under
    that character. :attr:`line` alone is the one-line form the command line prints."""

    def __init__(self, reason: str, query: Optional[str] = None, pos: Optional[int] = None):
        self.reason, self.query, self.pos = reason, query, pos
        super().__init__(self._text())

    def __reduce__(self):  # (pickled between Dask workers and the client)
        return (type(self), (self.reason, self.query, self.pos))

    @property
    def line(self) -> str:
        """One line: ``filter: char N: reason`` (N 1-based) or ``filter: reason``; control
        characters (of a path, a column name) escaped, as ``\\x1b``."""
        reason = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in self.reason)
        if self.pos is None:
            return f"filter: {reason}"
        return f"filter: char {self.pos + 1}: {reason}"

    def _text(self) -> str:
        if self.query is None or self.pos is None:
            return self.line
        # control characters would move the caret (and must not reach a terminal raw)
        shown = "".join(ch if ch.isprintable() else "?" for ch in self.query)
        return f"{self.line}\n  {shown}\n  {' ' * self.pos}^"


def _show(text: str) -> str:
    """A token as the messages quote it: control characters escaped, long text cut."""
    text = text if len(text) <= 40 else text[:37] + "..."
    return "'" + "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text) + "'"


# ----------------------------------------------------------------------------- tokens
@dataclass(frozen=True)
class _Tok:
    kind: str  # name, kw, op, num, str, end
    value: object
    pos: int
    text: str


_OPS2 = ("==", "!=", "<=", ">=")
_OPS1 = "<>()[],&|-"


def _tokenize(q: str) -> Iterator[_Tok]:
    """The tokens of ``q``, lazily: a bad character is reported only when the parser gets there,
    so the first error in reading order is the one named."""
    i, n = 0, len(q)
    while i < n:
        ch = q[i]
        if ch in " \t\r\n":
            i += 1
            continue
        if ch.isascii() and (ch.isalpha() or ch == "_"):
            j = i + 1
            while j < n and q[j].isascii() and (q[j].isalnum() or q[j] == "_"):
                j += 1
            word = q[i:j]
            if j < n and q[j] in "'\"":
                raise FilterError(f"string prefixes ({word}'...') are not part of the filter grammar", q, i)
            if word in _PYTHON_WORDS:
                raise FilterError(f"{_show(word)} is not part of the filter grammar", q, i)
            yield _Tok("kw" if word in _KEYWORDS else "name", word, i, word)
            i = j
            continue
        if ch == "`":
            j = q.find("`", i + 1)
            if j < 0:
                raise FilterError("unterminated `column name`", q, i)
            if j == i + 1:
                raise FilterError("empty `column name`", q, i)
            yield _Tok("name", q[i + 1 : j], i, q[i : j + 1])
            i = j + 1
            continue
        if ch.isdigit() or (ch == "." and i + 1 < n and q[i + 1].isdigit()):
            tok = _number(q, i)
            yield tok
            i += len(tok.text)
            continue
        if ch in "'\"":
            tok = _string(q, i)
            yield tok
            i += len(tok.text)
            continue
        two = q[i : i + 2]
        if two in _OPS2:
            yield _Tok("op", two, i, two)
            i += 2
            continue
        if two in ("&&", "||"):
            raise FilterError(f"{_show(two)}: write 'and' / 'or' (or '&' / '|')", q, i)
        if ch in _OPS1:
            yield _Tok("op", ch, i, ch)
            i += 1
            continue
        raise FilterError(_bad_char(q, i), q, i)
    while True:
        yield _Tok("end", None, n, "")


def _bad_char(q: str, i: int) -> str:
    ch = q[i]
    if ch == ".":
        return (
            "attribute access ('.') is not part of the filter grammar "
            "(string tests: name startswith 'read', fname contains 'ckpt')"
        )
    if ch == "=":
        return "'=' is not an operator: compare with '=='"
    if ch == "!":
        return "'!' is not an operator: negate with 'not', compare with '!='"
    if ch == "@":
        return "'@' (a pandas local variable) is not part of the filter grammar: write the value itself"
    if ch in "+*/%^~":
        return f"{_show(ch)}: arithmetic and bitwise operators are not part of the filter grammar"
    if ch in "{}:;":
        return f"{_show(ch)} is not part of the filter grammar"
    return f"unexpected character {_show(ch)}"


_DIGITS = "0123456789_"


def _number(q: str, i: int) -> _Tok:
    n = len(q)
    j = i
    while j < n and q[j] in _DIGITS:
        j += 1
    is_float = False
    if j < n and q[j] == ".":
        is_float = True
        j += 1
        while j < n and q[j] in _DIGITS:
            j += 1
    if (
        j < n
        and q[j] in "eE"
        and ((j + 1 < n and q[j + 1].isdigit()) or (j + 2 < n and q[j + 1] in "+-" and q[j + 2].isdigit()))
    ):
        is_float = True
        j += 2
        while j < n and q[j].isdigit():
            j += 1
    digits = q[i:j]
    if "__" in digits or digits.endswith("_") or "_." in digits or "._" in digits:
        raise FilterError(f"bad number {_show(digits)}", q, i)
    k = j
    while k < n and (q[k].isalpha() or q[k] == "µ"):
        k += 1
    unit = q[j:k]
    if k < n and (q[k].isdigit() or q[k] == "_" or q[k] == "."):
        raise FilterError(f"bad number {_show(q[i : k + 1])}", q, i)
    try:
        value = Decimal(digits.replace("_", ""))
    except InvalidOperation:  # pragma: no cover - the scan above only passes decimal numbers
        raise FilterError(f"bad number {_show(digits)}", q, i) from None
    dim = None
    if unit:
        if unit not in UNITS:
            raise FilterError(
                f"unknown unit {_show(unit)} after {digits} (time: ns us µs ms s min h; "
                "sizes: B kB MB GB TB KiB MiB GiB TiB)",
                q,
                j,
            )
        dim, factor = UNITS[unit]
        with localcontext(Context(prec=60, Emax=MAX_EMAX, Emin=MIN_EMIN)):  # (1e999999999s: no Overflow)
            value *= factor
    # 250ms and 1.5s are exact integers (µs); 1.7e15 without a unit stays the float it reads as
    # (numbers beyond 1e30 stay floats: an exact int of 1e999999999s would take the memory)
    if (unit or not is_float) and value.adjusted() <= 30 and value == value.to_integral_value():
        num: Union[int, float] = int(value)
    else:
        num = float(value)
    return _Tok("num", (num, dim), i, q[i:k])


_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t", "r": "\r", "0": "\0"}


def _string(q: str, i: int) -> _Tok:
    quote = q[i]
    out = []
    j = i + 1
    n = len(q)
    while j < n:
        ch = q[j]
        if ch == quote:
            return _Tok("str", "".join(out), i, q[i : j + 1])
        if ch == "\\":
            if j + 1 >= n:
                break
            e = q[j + 1]
            if e in _ESCAPES:
                out.append(_ESCAPES[e])
                j += 2
                continue
            width = {"x": 2, "u": 4, "U": 8}.get(e)
            hexd = q[j + 2 : j + 2 + width] if width else ""
            if not width or len(hexd) != width or any(c not in "0123456789abcdefABCDEF" for c in hexd):
                raise FilterError(
                    f"bad escape {_show(q[j : j + 2])} in a string "
                    "(known: \\\\ \\' \\\" \\n \\t \\r \\0 \\xHH \\uHHHH \\UHHHHHHHH)",
                    q,
                    j,
                )
            code = int(hexd, 16)
            if code > 0x10FFFF:
                raise FilterError(f"bad escape {_show(q[j : j + 2 + width])}: beyond U+10FFFF", q, j)
            out.append(chr(code))
            j += 2 + width
            continue
        out.append(ch)
        j += 1
    raise FilterError("unterminated string", q, i)


# ----------------------------------------------------------------------------- syntax tree
@dataclass(frozen=True)
class Col:
    name: str
    pos: int


@dataclass(frozen=True)
class Lit:
    value: object  # str, int or float
    dim: Optional[str]  # "time" / "size" when written with a unit
    pos: int


@dataclass(frozen=True)
class Cmp:
    op: str
    left: Union[Col, Lit]
    right: Union[Col, Lit]
    pos: int


@dataclass(frozen=True)
class In:
    col: Col
    values: Tuple[Lit, ...]
    negate: bool
    pos: int


@dataclass(frozen=True)
class StrTest:
    op: str  # startswith, endswith, contains
    col: Col
    value: Lit
    negate: bool
    pos: int


@dataclass(frozen=True)
class IsNull:
    col: Col
    negate: bool
    pos: int


@dataclass(frozen=True)
class BoolOp:
    op: str  # and, or
    terms: Tuple[object, ...]


@dataclass(frozen=True)
class Not:
    term: object


class _Parser:
    def __init__(self, q: str):
        self.q = q
        self._source = _tokenize(q)
        self.depth = 0
        self._ahead: List[_Tok] = []

    def peek(self, k: int = 0) -> _Tok:
        while len(self._ahead) <= k:
            self._ahead.append(next(self._source))
        return self._ahead[k]

    def take(self) -> _Tok:
        t = self.peek()
        self._ahead.pop(0)
        return t

    def fail(self, tok: _Tok, what: str):
        if tok.kind == "end":
            raise FilterError(f"unexpected end of filter: expected {what}", self.q, tok.pos)
        raise FilterError(f"unexpected {_show(tok.text)}: expected {what}", self.q, tok.pos)

    def is_op(self, *ops) -> bool:
        t = self.peek()
        return t.kind == "op" and t.value in ops

    def is_kw(self, *kws) -> bool:
        t = self.peek()
        return t.kind == "kw" and t.value in kws

    def parse(self):
        if self.peek().kind == "end":
            raise FilterError("empty filter", self.q, 0)
        node = self.or_expr()
        t = self.peek()
        if t.kind != "end":
            self.fail(t, "'and', 'or' or the end of the filter")
        return node

    def or_expr(self):
        terms = [self.and_expr()]
        while self.is_kw("or") or self.is_op("|"):
            self.take()
            terms.append(self.and_expr())
        return terms[0] if len(terms) == 1 else BoolOp("or", tuple(terms))

    def and_expr(self):
        terms = [self.not_expr()]
        while self.is_kw("and") or self.is_op("&"):
            self.take()
            terms.append(self.not_expr())
        return terms[0] if len(terms) == 1 else BoolOp("and", tuple(terms))

    def not_expr(self):
        t = self.peek()
        if (t.kind == "kw" and t.value == "not") or (t.kind == "op" and t.value == "("):
            self.depth += 1  # (a bound, not Python's recursion limit, ends a hostile nesting)
            if self.depth > MAX_DEPTH:
                raise FilterError(f"nested deeper than {MAX_DEPTH} levels of 'not' and parentheses", self.q, t.pos)
            self.take()
            if t.value == "not":
                node = Not(self.not_expr())
            else:
                node = self.or_expr()
                if not self.is_op(")"):
                    self.fail(self.peek(), "')'")
                self.take()
            self.depth -= 1
            return node
        return self.test()

    def operand(self) -> Union[Col, Lit]:
        t = self.peek()
        if t.kind == "name":
            self.take()
            nxt = self.peek()
            if nxt.kind == "op" and nxt.value == "(":
                raise FilterError("function calls are not part of the filter grammar", self.q, nxt.pos)
            if nxt.kind == "op" and nxt.value == "[":
                raise FilterError("subscripts ('[') are not part of the filter grammar", self.q, nxt.pos)
            return Col(t.value, t.pos)
        return self.literal("a column, a number or a string")

    def literal(self, what: str) -> Lit:
        t = self.peek()
        if t.kind == "op" and t.value == "-" and self.peek(1).kind == "num":
            self.take()
            num = self.take()
            value, dim = num.value
            return Lit(-value, dim, t.pos)
        if t.kind == "num":
            self.take()
            value, dim = t.value
            return Lit(value, dim, t.pos)
        if t.kind == "str":
            self.take()
            return Lit(t.value, None, t.pos)
        self.fail(t, what)

    def test(self):
        start = self.peek()
        left = self.operand()
        t = self.peek()
        if t.kind == "op" and t.value in _CMP:
            node = None
            terms = []
            while self.is_op(*_CMP):
                op = self.take()
                right = self.operand()
                terms.append(_comparison(self.q, op.value, left, right, op.pos))
                left = right
            node = terms[0] if len(terms) == 1 else BoolOp("and", tuple(terms))
            return node
        if not isinstance(left, Col):
            self.fail(t, "a comparison operator (== != < <= > >=)")
        negate = False
        if self.is_kw("not"):
            negate = True
            self.take()
            if not self.is_kw("in", *_STROPS):
                self.fail(self.peek(), "'in', 'startswith', 'endswith' or 'contains' after 'not'")
        if self.is_kw("in"):
            self.take()
            return In(left, self.list_literal(), negate, start.pos)
        if self.is_kw(*_STROPS):
            op = self.take().value
            v = self.literal(f"a string after {op!r}")
            if not isinstance(v.value, str):
                raise FilterError(f"{op!r} needs a string", self.q, v.pos)
            return StrTest(op, left, v, negate, start.pos)
        if self.is_kw("is") and not negate:
            self.take()
            neg = False
            if self.is_kw("not"):
                self.take()
                neg = True
            if not self.is_kw("null"):
                self.fail(self.peek(), "'null' after 'is'")
            self.take()
            return IsNull(left, neg, start.pos)
        self.fail(t, "a comparison (== != < <= > >=), 'in', 'startswith', 'endswith', 'contains' or 'is null'")

    def list_literal(self) -> Tuple[Lit, ...]:
        t = self.peek()
        if not (t.kind == "op" and t.value in "(["):
            self.fail(t, "a list [v, ...] after 'in'")
        close = ")" if t.value == "(" else "]"
        self.take()
        vals: List[Lit] = []
        while not self.is_op(close):
            vals.append(self.literal(f"a number, a string or {close!r}"))
            if self.is_op(","):
                self.take()
            elif not self.is_op(close):
                self.fail(self.peek(), f"',' or {close!r}")
        self.take()
        kinds = {isinstance(v.value, str) for v in vals}
        if len(kinds) > 1:
            raise FilterError("a list mixes strings and numbers", self.q, t.pos)
        return tuple(vals)


def _comparison(q: str, op: str, left, right, pos: int) -> Cmp:
    if isinstance(left, Lit) and isinstance(right, Lit):
        raise FilterError("a comparison needs a column on one side", q, pos)
    if isinstance(left, Lit):  # the column first: 5 < ts is ts > 5
        left, right, op = right, left, _FLIP[op]
    return Cmp(op, left, right, pos)


# ----------------------------------------------------------------------------- the filter
def _walk(node):
    yield node
    if isinstance(node, BoolOp):
        for t in node.terms:
            yield from _walk(t)
    elif isinstance(node, Not):
        yield from _walk(node.term)


def _columns_of(node) -> List[Col]:
    out = []
    for n in _walk(node):
        if isinstance(n, Cmp):
            out += [x for x in (n.left, n.right) if isinstance(x, Col)]
        elif isinstance(n, (In, StrTest, IsNull)):
            out.append(n.col)
    return out


class Filter:
    """A parsed filter: :attr:`text`, :attr:`root` (syntax tree), :attr:`columns` (every column it
    names) and :attr:`args_columns` (those that are not core columns: args keys)."""

    def __init__(self, text: str):
        if not isinstance(text, str):
            raise FilterError(f"a filter is a string, not {type(text).__name__}")
        self.text = text
        if len(text) > MAX_LENGTH:
            raise FilterError(f"a filter of {len(text):,} characters: at most {MAX_LENGTH:,}", text, MAX_LENGTH)
        self.root = _Parser(text).parse()
        cols = _columns_of(self.root)
        self.columns: FrozenSet[str] = frozenset(c.name for c in cols)
        self.args_columns: FrozenSet[str] = frozenset(c for c in self.columns if c not in CORE_KINDS)
        self._first_pos = {}
        for c in cols:
            self._first_pos.setdefault(c.name, c.pos)
        for n in _walk(self.root):
            _check_static(self.text, n)

    def mask(self, df: pd.DataFrame) -> np.ndarray:
        """Boolean NumPy array, one per row of ``df``: the rows the filter selects."""
        return _eval(self, self.root, df)

    def pushdown(self) -> List["Predicate"]:
        """The push-down predicates (module doc)."""
        terms = self.root.terms if isinstance(self.root, BoolOp) and self.root.op == "and" else (self.root,)
        out: List[Predicate] = []
        for t in _flatten_and(terms):
            if isinstance(t, Cmp) and isinstance(t.left, Col) and isinstance(t.right, Lit):
                col, v = t.left.name, t.right.value
                if col in _TIME and t.op != "!=" and not isinstance(v, str):
                    out.append(Predicate(col, t.op, v))
                elif col in _SETS and t.op == "==" and isinstance(v, str):
                    out.append(Predicate(col, "in", (v,)))
            elif isinstance(t, In) and not t.negate and t.col.name in _SETS:
                out.append(Predicate(t.col.name, "in", tuple(v.value for v in t.values)))
            elif isinstance(t, StrTest) and not t.negate and t.col.name in _SETS:
                out.append(Predicate(t.col.name, t.op, t.value.value))
        return out


def _flatten_and(terms):
    for t in terms:
        if isinstance(t, BoolOp) and t.op == "and":
            yield from _flatten_and(t.terms)
        else:
            yield t


def _check_static(q: str, n) -> None:
    """Type rules of the core columns (module doc), before anything is loaded."""
    if isinstance(n, Cmp):
        left, right = n.left, n.right
        if isinstance(right, Col):
            a, b = CORE_KINDS.get(left.name), CORE_KINDS.get(right.name)
            if a and b and (left.name in _TEXT_CORE) != (right.name in _TEXT_CORE):
                raise FilterError(f"{left.name!r} and {right.name!r} cannot be compared (text and number)", q, n.pos)
            if a and b and left.name in _TEXT_CORE and n.op not in ("==", "!="):
                raise FilterError(f"text columns are compared with == and != only, not {n.op!r}", q, n.pos)
            return
        _check_literal(q, left.name, right, n.op, n.pos)
    elif isinstance(n, In):
        for v in n.values:
            _check_literal(q, n.col.name, v, "in", v.pos)
    elif isinstance(n, StrTest):
        if n.col.name in CORE_KINDS and n.col.name not in _TEXT_CORE:
            raise FilterError(f"{n.col.name!r} is a number column: {n.op!r} needs a text column", q, n.pos)


def _check_literal(q: str, col: str, lit: Lit, op: str, pos: int) -> None:
    if col not in CORE_KINDS:
        return  # args columns: checked on the data
    if col in _TEXT_CORE:
        if not isinstance(lit.value, str):
            raise FilterError(f"{col!r} is a text column: compare it with a string, not a number", q, lit.pos)
        if op not in ("==", "!=", "in"):
            raise FilterError(
                f"{col!r} is a text column: use ==, !=, in, startswith, endswith or contains, not {op!r}", q, pos
            )
        return
    if isinstance(lit.value, str):
        raise FilterError(f"{col!r} is a number column: compare it with a number, not a string", q, lit.pos)
    if lit.dim == "time" and col not in _TIME_COLUMNS:
        raise FilterError(f"a time unit on {col!r}: time units go with ts, dur and te (µs)", q, lit.pos)
    if lit.dim == "size" and col not in _SIZE_COLUMNS:
        raise FilterError(f"a size unit on {col!r}: size units go with size and offset (bytes)", q, lit.pos)


@functools.lru_cache(maxsize=128)
def _parse_cached(text: str) -> Filter:
    return Filter(text)


def parse_filter(query) -> Filter:
    """Parse ``query`` (a string in the module doc's grammar) into a :class:`Filter`; nothing is
    read or evaluated. :class:`FilterError` (a ``ValueError``) naming the position for anything
    outside the grammar or against the core columns' types."""
    if isinstance(query, Filter):
        return query
    if not isinstance(query, str):
        raise FilterError(f"a filter is a string, not {type(query).__name__}")
    return _parse_cached(query)


def referenced_columns(query) -> FrozenSet[str]:
    """Every column ``query`` names (core columns and args keys)."""
    return parse_filter(query).columns


# ----------------------------------------------------------------------------- evaluation
class _Absent:
    """An args column this batch does not have: null for every row."""


def _column(df: pd.DataFrame, name: str):
    return df[name] if name in df.columns else _Absent


def _is_text(s: pd.Series) -> bool:
    d = s.dtype
    return isinstance(d, pd.CategoricalDtype) or pd.api.types.is_string_dtype(d) or d == object


def _as_category(s: pd.Series) -> pd.Series:
    if isinstance(s.dtype, pd.CategoricalDtype):
        return s
    return s.astype("category")


def _text_hits(s: pd.Series, test) -> np.ndarray:
    """``test`` (categories Index -> bool array) per row of text column ``s``; False for nulls."""
    s = _as_category(s)
    cats = s.cat.categories
    if not isinstance(cats, pd.Index) or not (cats.dtype == object or pd.api.types.is_string_dtype(cats.dtype)):
        cats = cats.astype(str)
    hit = np.append(np.asarray(test(cats), dtype=bool), False)  # code -1 (null) -> the False
    return hit[s.cat.codes.to_numpy()]


def _numbers(s: pd.Series) -> Tuple[np.ndarray, np.ndarray]:
    """(values, null mask) of a number column as NumPy arrays."""
    d = s.dtype
    if isinstance(d, pd.api.extensions.ExtensionDtype):
        null = s.isna().to_numpy()
        kind = "float64" if pd.api.types.is_float_dtype(d) else "int64"
        if pd.api.types.is_bool_dtype(d):
            kind = "int64"
        return s.to_numpy(dtype=kind, na_value=0), null
    a = s.to_numpy()
    if a.dtype.kind == "f":
        return a, np.isnan(a)
    if a.dtype.kind == "b":
        a = a.astype(np.int64)
    return a, np.zeros(len(a), dtype=bool)


def _where(f: Filter, name: str) -> str:
    return f"column {name!r} (char {f._first_pos.get(name, 0) + 1} of the filter)"


def _text_or_fail(f: Filter, name: str, s, want_text: bool, what: str) -> None:
    if _is_text(s) != want_text:
        held = "text" if _is_text(s) else "numbers"
        raise FilterError(f"{_where(f, name)} holds {held} in this data: {what}")


def _eval(f: Filter, n, df: pd.DataFrame) -> np.ndarray:
    rows = len(df)
    if isinstance(n, BoolOp):
        out = _eval(f, n.terms[0], df)
        for t in n.terms[1:]:
            out = (out & _eval(f, t, df)) if n.op == "and" else (out | _eval(f, t, df))
        return out
    if isinstance(n, Not):
        return ~_eval(f, n.term, df)
    if isinstance(n, IsNull):
        s = _column(df, n.col.name)
        null = np.ones(rows, dtype=bool) if s is _Absent else s.isna().to_numpy()
        return ~null if n.negate else null
    if isinstance(n, In):
        s = _column(df, n.col.name)
        vals = [v.value for v in n.values]
        if s is _Absent or not vals:
            hit = np.zeros(rows, dtype=bool)
        elif vals and isinstance(vals[0], str):
            _text_or_fail(f, n.col.name, s, True, "a list of strings needs a text column")
            hit = _text_hits(s, lambda cats: cats.isin(vals))
        else:
            _text_or_fail(f, n.col.name, s, False, "a list of numbers needs a number column")
            a, null = _numbers(s)
            hit = np.isin(a, np.asarray(vals)) & ~null
        return ~hit if n.negate else hit
    if isinstance(n, StrTest):
        s = _column(df, n.col.name)
        v = n.value.value
        if s is _Absent:
            hit = np.zeros(rows, dtype=bool)
        else:
            _text_or_fail(f, n.col.name, s, True, f"{n.op!r} needs a text column")
            if n.op == "contains":
                hit = _text_hits(s, lambda cats: cats.str.contains(v, regex=False))
            else:
                hit = _text_hits(s, lambda cats: getattr(cats.str, n.op)(v))
        return ~hit if n.negate else hit
    if isinstance(n, Cmp):
        return _eval_cmp(f, n, df)
    raise TypeError(f"unknown filter node {n!r}")  # pragma: no cover


def _eval_cmp(f: Filter, n: Cmp, df: pd.DataFrame) -> np.ndarray:
    rows = len(df)
    op = "==" if n.op == "!=" else n.op  # != is the complement of ==
    left = _column(df, n.left.name)
    if isinstance(n.right, Col):
        right = _column(df, n.right.name)
        if left is _Absent or right is _Absent:
            hit = np.zeros(rows, dtype=bool)
        elif _is_text(left) != _is_text(right):
            raise FilterError(
                f"{_where(f, n.left.name)} and {_where(f, n.right.name)} hold text and numbers "
                "in this data: they cannot be compared"
            )
        elif _is_text(left):
            if op != "==":
                raise FilterError(f"{_where(f, n.left.name)} holds text: compare text with == and != only")
            a = left.astype(object).to_numpy()
            b = right.astype(object).to_numpy()
            null = left.isna().to_numpy() | right.isna().to_numpy()
            hit = np.zeros(rows, dtype=bool)
            ok = ~null
            hit[ok] = a[ok] == b[ok]
        else:
            a, na = _numbers(left)
            b, nb = _numbers(right)
            hit = _NP_OPS[op](a, b) & ~na & ~nb
    else:
        v = n.right.value
        if left is _Absent:
            hit = np.zeros(rows, dtype=bool)
        elif isinstance(v, str):
            _text_or_fail(f, n.left.name, left, True, f"it cannot be compared with the string {_show(v)}")
            if op != "==":
                raise FilterError(f"{_where(f, n.left.name)} holds text: compare text with == and != only")
            hit = _text_hits(left, lambda cats: cats == v)
        else:
            _text_or_fail(f, n.left.name, left, False, f"it cannot be compared with the number {v}")
            a, null = _numbers(left)
            hit = _NP_OPS[op](a, v) & ~null
    hit = np.asarray(hit, dtype=bool)
    return ~hit if n.op == "!=" else hit


def filter_mask(df: pd.DataFrame, query) -> np.ndarray:
    """The rows of ``df`` that ``query`` selects, as a boolean NumPy array. A column the filter
    names that ``df`` lacks (an args key absent from this batch) is null in every row.
    :class:`FilterError` when an args column's data does not fit its use (module doc)."""
    return parse_filter(query).mask(df)


def apply_query(df: pd.DataFrame, query) -> pd.DataFrame:
    """Rows of ``df`` selected by ``query`` (:func:`filter_mask`), with a fresh ``RangeIndex``."""
    m = filter_mask(df, query)
    return df[m].reset_index(drop=True)


def check_columns_seen(query, seen: Sequence[Optional[Sequence[str]]]) -> None:
    """Raise :class:`FilterError` for an args column of ``query`` that none of the loaded batches
    has. ``seen``: per load task, the filter's args columns present in what it read (None for a
    task that read no event); nothing is checked when no task read an event."""
    f = parse_filter(query)
    read = [set(s) for s in seen if s is not None]
    if not f.args_columns or not read:
        return
    missing = sorted(f.args_columns - set().union(*read))
    if not missing:
        return
    name = missing[0]
    hint = difflib.get_close_matches(name, list(CORE_KINDS), n=1)
    raise FilterError(  # one line (no caret): raised after the load, as the command line prints it
        f"unknown column {name!r} (char {f._first_pos[name] + 1}): not an events column "
        f"({', '.join(CORE_KINDS)}) and no event read has an args key of that name"
        + (f"; did you mean {hint[0]!r}?" if hint else "")
    )


# ----------------------------------------------------------------------------- push-down
@dataclass(frozen=True)
class Predicate:
    """One pushed-down term: ``column op value``; op is ``<``, ``<=``, ``>``, ``>=``, ``==`` (time,
    a number), ``in`` (``cat`` / ``name`` with a tuple of strings) or ``startswith``,
    ``endswith``, ``contains`` (``cat`` / ``name`` with a string)."""

    column: str
    op: str
    value: object


def pushdown_predicates(query: Optional[str]) -> List[Predicate]:
    """The terms of ``query`` that can skip checkpoints (see the module doc); [] when none.
    :class:`FilterError` for a query outside the grammar."""
    if query is None or query == "":
        return []
    return parse_filter(query).pushdown()


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
            if have is None:
                continue
            if p.op == "in":
                if not set(have).intersection(p.value):
                    return False
            elif p.op == "contains":
                if not any(p.value in h for h in have):
                    return False
            elif not any(getattr(h, p.op)(p.value) for h in have):
                return False
    return True
