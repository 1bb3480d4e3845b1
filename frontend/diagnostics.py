"""One diagnostic type for every front end, rendered as `FILE:LINE:COL: error: MESSAGE`,
then the source line and a caret under the column (spec/cli.md)."""

from __future__ import annotations

from dataclasses import dataclass

from hpgrem.ir import Span


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A message about the user's program at a source location."""

    span: Span
    message: str
    severity: str = "error"

    def render(self, source: str | None) -> str:
        head = f"{self.span}: {self.severity}: {self.message}"
        if source is None or self.span.line < 1:
            return head
        lines = source.splitlines()
        if self.span.line > len(lines):
            return head
        text = lines[self.span.line - 1].replace("\t", " ")
        return f"{head}\n{text}\n{' ' * (self.span.col - 1)}^"


class CompileError(Exception):
    """The program was rejected: one or more error diagnostics (warnings may ride along)."""

    def __init__(self, diagnostics: list[Diagnostic]):
        super().__init__("; ".join(d.message for d in diagnostics))
        self.diagnostics = diagnostics
