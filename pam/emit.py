"""Lines of generated Python: what both rule compilers (PARLOG's pam/parlog/rules.py, ML's
pam/ml/codegen.py) write their step functions through."""

from __future__ import annotations


class Emitter:
    """Indented lines of Python source, and fresh temporary names (`prefix` + a number)."""

    def __init__(self, depth: int = 0, prefix: str = "_t") -> None:
        self.lines: list[str] = []
        self.depth = depth
        self.temps = 0
        self.prefix = prefix

    def emit(self, text: str) -> None:
        """One line, or several separated by newlines, at the current depth."""
        for line in text.split("\n"):
            self.lines.append("    " * self.depth + line)

    __call__ = emit

    def insert(self, at: int, line: str, depth: int | None = None) -> None:
        """A line before line number `at` (a value computed earlier), at `depth` (by default
        the current one)."""
        self.lines.insert(at, "    " * (self.depth if depth is None else depth) + line)

    def indent(self) -> None:
        self.depth += 1

    def dedent(self) -> None:
        self.depth -= 1

    def temp(self) -> str:
        self.temps += 1
        return f"{self.prefix}{self.temps}"
