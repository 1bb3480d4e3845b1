"""Runs an HPGREM module: compiles its rules, starts the entry goal, reports how it ended."""

from __future__ import annotations

import gc
import sys
import time
from dataclasses import dataclass

from hpgrem.ir import Module
from pam import rules
from pam.errors import MachineStop, ProgramFailure
from pam.pe import PE
from pam.stats import RunStats
from pam.task import Task
from pam.terms import Var
from pam.transport import Loopback
from pam.write import write_term


class Output:
    """Program output, buffered; PE 0 owns it so that it keeps program order."""

    def __init__(self, stream=None, limit: int = 256):
        self.stream = stream if stream is not None else sys.stdout
        self.parts: list[str] = []
        self.limit = limit

    def write(self, text: str) -> None:
        self.parts.append(text)
        if len(self.parts) >= self.limit:
            self.flush()

    def flush(self) -> None:
        if self.parts:
            self.stream.write("".join(self.parts))
            self.parts.clear()
        self.stream.flush()


@dataclass(slots=True)
class RunResult:
    """A finished run: the `--goal` bindings as `Name = Term` lines, and the statistics."""

    bindings: list[str]
    stats: RunStats


class Machine:
    """The abstract machine for one module; `run()` executes its entry goal."""

    def __init__(self, module: Module, *, stream=None, max_steps: int | None = None,
                 timeout: float | None = None):
        if module.entry is None:
            raise ValueError("the module has no entry goal")
        self.module = module
        self.output = Output(stream)
        self.transport = Loopback()
        self.pe = PE(0, self.output.write, max_steps, timeout)
        self.procs = rules.load(module, self.pe)

    def run(self) -> RunResult:
        entry = self.module.entry
        outputs = [Var() for _ in entry.outputs]
        rel = self.module.relations[entry.target]
        self.pe.push(Task(self.procs[entry.target], tuple(outputs), None, rel.span))
        began = time.perf_counter()
        collecting = gc.isenabled()
        gc.disable()  # the heap is mostly acyclic and freed by reference counting
        try:
            self.pe.run()
            if self.pe.suspended:
                raise self.pe.deadlock()
        except MachineStop:
            self.output.flush()
            raise
        finally:
            if collecting:
                gc.enable()
        elapsed = time.perf_counter() - began
        self.output.flush()
        names: dict[int, str] = {}
        bindings = [f"{name} = {write_term(v, names)}" for name, v in zip(entry.outputs, outputs)]
        stats = RunStats(1, "single", "sim", elapsed, [self.pe.stats])
        return RunResult(bindings, stats)


__all__ = ["Machine", "Output", "ProgramFailure", "RunResult"]
