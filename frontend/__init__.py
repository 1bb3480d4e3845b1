"""Front ends: parsers, checkers and lowering to HPGREM.

Every front end is a module with one entry, `compile_program(text, file, goal=None) ->
Compiled`, found by the program file's extension in its dialect's record (hpgrem/ir/dialects.py,
`front_end_for`) and imported only when a program needs it (hpgrem/driver/pipeline.py is the one
caller that chooses). A dialect from outside the project (HPGREM_PLUGINS) names its own front
end in its record.
"""

from __future__ import annotations

import gc
import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from hpgrem.diagnostics import CompileError, Diagnostic
from hpgrem.ir import Module
from hpgrem.ir.dialects import DIALECTS, of_extension


@dataclass
class Compiled:
    """What a front end gives: the module to run, the warnings, and the error that stopped
    compilation (None when the whole program compiled). An ML program is checked and run chunk
    by chunk, so after an error in a later chunk the module holds the chunks before it, which
    run before the error is reported (spec/ml.md, "Running"); a PARLOG error leaves no module."""

    module: Module | None
    warnings: list[Diagnostic] = field(default_factory=list)
    error: CompileError | None = None

    def complete(self) -> Module:
        """The module of the whole program; raises the error when part of it did not compile."""
        if self.error is not None:
            raise self.error
        return self.module


@dataclass(frozen=True)
class FrontEnd:
    package: str  # the module whose `compile_program` is the entry
    goals: bool  # whether `--goal` can replace the program's main

    def compile(self, text: str, file: str, goal: str | None = None) -> Compiled:
        with _collector_paused():
            return importlib.import_module(self.package).compile_program(text, file, goal)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off while a front end runs: what it builds is kept (the
    collector, which runs again after, finds next to nothing to free in it), and the collector's
    passes over the growing program made compiling grow faster than the program
    (PARLOG check: 84 against 59 us a relation at 50,000 relations; ML: 5.9 s against 3.4 s for
    10,000 functions)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def front_end_for(ext: str) -> FrontEnd | None:
    """The front end of the source files with extension `ext` (`.par`), by the dialects' records;
    None for an extension no dialect has (the plug-ins are loaded first)."""
    found = of_extension(ext)
    return None if found is None else FrontEnd(found.front_end, found.goals)


def extensions() -> list[str]:
    """Every source file extension a dialect has a front end for."""
    return [ext for d in DIALECTS.values() for ext in d.extensions]
