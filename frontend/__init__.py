"""Front ends: parsers, checkers and lowering to HPGREM.

Every front end is a module with one entry, `compile_program(text, file, goal=None) ->
Compiled`, found by the program file's extension in `FRONT_ENDS` and imported only when a
program needs it (hpgrem/driver/pipeline.py is the one caller that chooses). A dialect from
outside the project (HPGREM_PLUGINS) adds its own with `register_front_end`.
"""

from __future__ import annotations

import gc
import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from hpgrem.diagnostics import CompileError, Diagnostic
from hpgrem.ir import Module


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


PARLOG = FrontEnd("frontend.parlog", goals=True)
ML = FrontEnd("frontend.ml", goals=False)
FRONT_ENDS: dict[str, FrontEnd] = {".par": PARLOG, ".parlog": PARLOG, ".sml": ML, ".ml": ML}


def register_front_end(extensions: tuple[str, ...], front_end: FrontEnd) -> None:
    """Make `front_end` compile the files whose extension is one of `extensions` (`.toy`): a
    plug-in's front end registers so. An extension taken by another front end is a ValueError."""
    if not isinstance(front_end, FrontEnd):
        raise TypeError("register_front_end takes a FrontEnd")
    for ext in extensions:
        if not (isinstance(ext, str) and ext.startswith(".") and len(ext) > 1 and ext == ext.lower()):
            raise ValueError(f"a file extension is a lowercase '.name', not {ext!r}")
        if ext == ".hpg" or FRONT_ENDS.get(ext, front_end) != front_end:
            raise ValueError(f"the file extension {ext!r} has a front end already")
    for ext in extensions:
        FRONT_ENDS[ext] = front_end
