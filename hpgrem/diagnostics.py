"""User errors with a source position: one diagnostic type for every layer that reads a file (the
front ends, the tensor back end's TOML), at the bottom of the layers, rendered as `FILE:LINE:COL: error: MESSAGE`,
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
        """The diagnostic, quoting its line of `source` (the whole text of its file)."""
        return self.render_line(_nth_line(source, self.span.line))

    def render_line(self, line: str | None) -> str:
        """The diagnostic, quoting `line` (the text of its source line, or None: no quote)."""
        message = _LONG_WORD.sub(lambda m: excerpt(m.group()), self.message)
        head = visible(f"{self.span}: {self.severity}: {message}")
        if line is None or self.span.line < 1 or self.severity == "note":
            return head
        line = line.removesuffix("\r").replace("\t", " ")  # a tab is one column
        col = max(self.span.col, 1)
        lo, hi = 0, len(line)
        if len(line) > 2 * LINE_WINDOW:  # a line of thousands of characters: the part around the column
            lo, hi = max(0, col - 1 - LINE_WINDOW), min(len(line), col - 1 + LINE_WINDOW)
        before = ("..." if lo else "") + visible(line[lo:col - 1])
        after = visible(line[col - 1:hi]) + ("..." if hi < len(line) else "")
        return f"{head}\n{before}{after}\n{' ' * len(before)}^"


def _nth_line(text: str | None, number: int) -> str | None:
    if text is None or number < 1:
        return None
    lines = text.split("\n", number)
    return lines[number - 1] if number <= len(lines) else None


class Quotable:
    """The source lines diagnostics may quote. Only text the command itself read is quoted:
    the program file it was given, the `--goal` string, and the lines a compiled module carries
    in its own content (`Module.source_lines`). A file a span names is never opened: a `.hpg`
    is untrusted and may name any path (the password file, an endless device, a FIFO)."""

    __slots__ = ("_texts", "_module")

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}
        self._module = None

    def add_text(self, file: str, text: str | None) -> None:
        """`text` was read as `file` (the program, or `<goal>`): its lines may be quoted."""
        if text is not None:
            self._texts[file] = text

    def add_module(self, module) -> None:
        """A compiled module read from a `.hpg`: the lines it carries may be quoted."""
        self._module = module

    def line(self, span: Span) -> str | None:
        """The text of `span`'s line, where it is known; else None."""
        if span.file in self._texts:
            return _nth_line(self._texts[span.file], span.line)
        m = self._module
        if m is not None and span.file == m.source:
            line = getattr(m, "source_lines", {}).get(span.line)
            return line if type(line) is str else None
        return None

    def render(self, diagnostic: Diagnostic) -> str:
        """`diagnostic` with its source line, where one may be quoted."""
        return diagnostic.render_line(self.line(diagnostic.span))


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
