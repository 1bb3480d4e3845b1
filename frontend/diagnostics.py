"""One diagnostic type for every front end, rendered as `FILE:LINE:COL: error: MESSAGE`,
then the source line and a caret under the column (spec/cli.md).

Lines end at `\\n` (a `\\r` before it is part of the line break), in the lexers and here alike,
so `\\f`, `\\v`, U+2028 and the like are characters of a line, not line breaks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hpgrem.ir import Span

# Parse trees deeper than this are refused: every later stage (the checks, the lowering, the
# passes, the code generators) may recurse on nesting, and they all handle about twice this
# (measured) within the recursion limit the front ends and the command line set. A flat list
# or a long conjunction is not nesting.
MAX_NESTING = 1200


def visible(text: str) -> str:
    """`text` with every character a terminal would not show as itself (controls, format and
    separator characters) written as its Python escape, e.g. `\\x07`, `\\u2028`."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def excerpt(text: str) -> str:
    """`text` as a message quotes it: a long one (a literal of thousands of digits) cut short."""
    return text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"


LINE_WINDOW = 80
"""How much of a long source line a diagnostic shows on each side of its column."""
_LONG_WORD = re.compile(r"\S{41,}")


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A message about the user's program at a source location."""

    span: Span
    message: str
    severity: str = "error"

    def render(self, source: str | None) -> str:
        message = _LONG_WORD.sub(lambda m: excerpt(m.group()), self.message)
        head = visible(f"{self.span}: {self.severity}: {message}")
        if source is None or self.span.line < 1 or self.severity == "note":
            return head
        lines = source.split("\n")
        if self.span.line > len(lines):
            return head
        line = lines[self.span.line - 1].removesuffix("\r").replace("\t", " ")  # a tab is one column
        col = max(self.span.col, 1)
        lo, hi = 0, len(line)
        if len(line) > 2 * LINE_WINDOW:  # a line of thousands of characters: the part around the column
            lo, hi = max(0, col - 1 - LINE_WINDOW), min(len(line), col - 1 + LINE_WINDOW)
        before = ("..." if lo else "") + visible(line[lo:col - 1])
        after = visible(line[col - 1:hi]) + ("..." if hi < len(line) else "")
        return f"{head}\n{before}{after}\n{' ' * len(before)}^"


MAX_ERRORS = 20
"""The most error diagnostics one rejection shows; a note says how many more there were."""


class CompileError(Exception):
    """The program was rejected: one or more error diagnostics (warnings may ride along), at
    most MAX_ERRORS of them and a note for the rest."""

    def __init__(self, diagnostics: list[Diagnostic]):
        errors = [d for d in diagnostics if d.severity == "error"]
        if len(errors) > MAX_ERRORS:
            last = errors[MAX_ERRORS - 1]
            kept, n = [], 0
            for d in diagnostics:
                n += d.severity == "error"
                if d.severity != "error" or n <= MAX_ERRORS:
                    kept.append(d)
            diagnostics = kept + [Diagnostic(last.span, f"{len(errors) - MAX_ERRORS} more errors not shown", "note")]
        super().__init__("; ".join(d.message for d in diagnostics))
        self.diagnostics = diagnostics


def check_nesting(tree, file: str, flat: frozenset[str] = frozenset()) -> None:
    """Raise CompileError at the first construct of a Lark parse tree nested more than
    MAX_NESTING deep (iteratively: the tree may be far deeper than Python's stack). Nodes of
    the rules in `flat` (an argument list, a link of a conjunction chain) add no level."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            span = Span(file, node.meta.line, node.meta.column)
            raise CompileError([Diagnostic(span, f"nested too deeply (more than {MAX_NESTING} levels)")])
        for child in reversed(node.children):
            if not isinstance(child, str):  # a subtree, not a token
                stack.append((child, depth if child.data in flat else depth + 1))
