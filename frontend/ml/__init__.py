"""The ML front end: Core SML source -> a typed, match-compiled program (spec/ml.md).

Files, one job each, in the order a program goes through them:
`lexer.py` (tokens; the split into top-level chunks), `ml.lark` + `parser.py` (surface syntax of
`syntax.py`), `elaborate.py` (types of expressions and patterns) and `declarations.py`
(declarations, the top level), with `types.py` (types, unification, printing), `env.py`
(scopes), `basis.py` (the initial basis: the one table of names the run time implements),
`match.py` (decision trees and match warnings). `typed.py` defines the result.

Running (spec/ml.md): each chunk, the text up to a top-level `;`, is checked before it runs, and
an error in chunk k leaves chunks 1..k-1 to run. A runner does:

    elaborator = Elaborator(file)
    for source in split_chunks(text, file):
        chunk = elaborator.chunk(source)     # CompileError: report it, stop (exit status 2)
        report(chunk.warnings); run(chunk.decs)

`elaborate_program` checks the whole program the same way (for tests); `compile_program`, the
entry every front end has (frontend/__init__.py), also lowers the chunks that check.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from frontend import Compiled
from hpgrem.diagnostics import CompileError, Diagnostic
from frontend.ml.declarations import TopLevel
from frontend.ml.lexer import SourceChunk, split_chunks
from frontend.ml.parser import parse_chunk
from frontend.ml.typed import Chunk, Program
from frontend.ml.types import Scheme


class Elaborator:
    """Checks the chunks of one program in order, carrying the top-level environment; a chunk
    with errors binds nothing."""

    def __init__(self, file: str):
        self.file = file
        self.top = TopLevel(file)

    def chunk(self, source: SourceChunk) -> Chunk:
        """Parse and elaborate one chunk; raises CompileError with all its errors."""
        try:
            with _deep_nesting():
                return self.top.chunk(parse_chunk(source, self.file))
        except RecursionError:
            raise CompileError([Diagnostic(source.span, "this part of the program is nested too deeply "
                                                        "to compile")]) from None

    def value_type(self, name: str) -> Scheme | None:
        """The type scheme of a top-level value bound so far."""
        return self.top.value_type(name)


@contextmanager
def _deep_nesting() -> Iterator[None]:
    """Parsing and elaboration recurse on the nesting of the program: allow about a thousand
    levels (Python's default stops near three hundred), within what the C stack bears."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 12000))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def elaborate_program(text: str, file: str) -> Program:
    """The typed program: every chunk elaborated and match-compiled, and its warnings.

    Raises CompileError at the first chunk with errors, holding that chunk's errors and the
    warnings of the chunks before it, in source order."""
    elaborator = Elaborator(file)
    chunks: list[Chunk] = []
    warnings: list[Diagnostic] = []
    for source in split_chunks(text, file):
        try:
            chunk = elaborator.chunk(source)
        except CompileError as err:
            raise CompileError(warnings + err.diagnostics) from None
        chunks.append(chunk)
        warnings.extend(chunk.warnings)
    return Program(tuple(chunks), tuple(warnings))


_PRELUDE: list = []


def _prelude_decs():
    """The prelude, elaborated once per process."""
    if not _PRELUDE:
        from frontend.ml.lower import PRELUDE_FILE
        text = PRELUDE_FILE.read_text(encoding="utf-8")
        program = elaborate_program(text, "<prelude>")
        _PRELUDE.append(program.decs)
    return _PRELUDE[0]


def compile_program(text: str, file: str, goal: str | None = None) -> Compiled:
    """Check, match-compile and lower an ML program, chunk by chunk, into an HPGREM module: the
    module of every chunk that checked, the warnings of those chunks, and the CompileError of
    the first chunk that did not (spec/ml.md, "Running"). An ML program has no `goal`: it runs
    its declarations (the pipeline refuses one)."""
    assert goal is None, "ML programs take no goal"
    from frontend.ml.lower import Lowerer
    from hpgrem.ir import Span

    lowerer = Lowerer()
    lowerer.prelude_decs(_prelude_decs())
    lowerer.forget_prelude_ids()
    elaborator = Elaborator(file)
    statements = []
    warnings: list[Diagnostic] = []
    error = None
    with _deep_nesting():
        for source in split_chunks(text, file):
            try:
                chunk = elaborator.chunk(source)
            except CompileError as err:
                error = err
                break
            warnings.extend(chunk.warnings)
            statements.extend(lowerer.top_decs(chunk.decs))
        module = lowerer.module(file, statements, Span(file, 1, 1))
    return Compiled(module, warnings, error)


__all__ = ["CompileError", "Compiled", "Elaborator", "Program", "SourceChunk", "compile_program",
           "elaborate_program", "split_chunks"]
