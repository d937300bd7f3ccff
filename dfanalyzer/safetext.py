"""Trace strings made safe for a terminal and for matplotlib (issue 25, "safe output").

Event names, categories, file names, hostnames and args values come from the traced
application, which may be anybody's: a name holding ``ESC ] 0 ; ... BEL`` would set the window
title of whoever prints a table, ``ESC [ 2 J`` would clear the screen, ``ESC ] 8`` plant a
hyperlink, a bidi override reorder what is read. Every table, log line and warning that the
``dfanalyzer`` command and API print goes through :func:`escape`, which writes each such
character as the JSON escape ``dftracer-cat`` shows for it in the trace line itself
(``\\u001b``, ``\\n``, ``\\t``...). JSON output is left to the JSON encoder (it escapes them).

Rich would also read ``[link=...]`` in a cell as markup: :func:`cell` returns a ``rich.text.Text``
(never parsed as markup) of the escaped string.

matplotlib reads ``$...$`` in any label as math (``$\\frac{A$`` raises while the figure is
drawn): :data:`PLAIN_TEXT` are the text properties that keep a label plain text.
"""

from __future__ import annotations

import re

__all__ = ["escape", "cell", "PLAIN_TEXT"]

# C0 controls, DEL, C1 controls (their 8-bit CSI/OSC forms), the bidi embeddings, overrides and
# isolates, the implicit direction marks and the Unicode line/paragraph separators.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_SHORT = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}

#: keyword arguments for matplotlib text artists (tick labels, titles) holding trace strings:
#: no mathtext, no LaTeX, whatever the user's matplotlibrc says
PLAIN_TEXT = {"parse_math": False, "usetex": False}


def _sub(m: "re.Match") -> str:
    c = m.group(0)
    return _SHORT.get(c) or f"\\u{ord(c):04x}"


def escape(text) -> str:
    """``str(text)`` with every control character (C0 including ``\\n``, ``\\r``, ``\\t``; DEL;
    C1), bidi control and line separator written as its JSON escape (``\\u001b``, ``\\n``...);
    every other character unchanged. O(len) and a no-op (the same string) for clean text."""
    s = text if isinstance(text, str) else str(text)
    return _UNSAFE.sub(_sub, s) if _UNSAFE.search(s) else s


def cell(text, style: str = ""):
    """A ``rich.text.Text`` of :func:`escape` (``text``): printed as is, never read as markup."""
    from rich.text import Text

    return Text(escape(text), style=style)
