"""Runs an HPGREM module: compiles its rules, starts the entry goal, reports how it ended.

One PE runs its reduction loop directly. Several simulated PEs run under `Simulation` in virtual
time; every PE runs the same code and talks only through messages (pam.distribution).
"""

from __future__ import annotations

import gc
import sys
import time
from dataclasses import dataclass

from hpgrem.ir import Module
from pam import rules
from pam.costs import DEFAULT, CostModel
from pam.distribution import Net
from pam.errors import Deadlock, Finished, LimitExceeded, MachineStop, ProgramFailure
from pam.pe import DEADLOCK_REPORT_LIMIT, PE
from pam.stats import RunStats
from pam.task import Task
from pam.terms import Var
from pam.topology import parse_topology
from pam.transport.mpi import MPITransport
from pam.transport.mpi import now as mpi_now
from pam.transport.sim import BATCH, ML_BATCH, Simulation
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


def _no_output(text: str) -> None:
    raise AssertionError("only PE 0 writes program output")


class Machine:
    """The abstract machine for one module; `run()` executes its entry goal on PE 0."""

    def __init__(self, module: Module, *, stream=None, pes: int = 1, topology: str | None = None,
                 seed: int = 0, max_steps: int | None = None, timeout: float | None = None,
                 costs: CostModel = DEFAULT, comm=None, jitter: float = 0.0):
        if module.entry is None:
            raise ValueError("the module has no entry goal")
        self.module = module
        self.output = Output(stream)
        self.costs = costs
        self.max_steps = max_steps
        self.timeout = timeout
        self.comm = comm
        if comm is not None:
            pes = comm.Get_size()
        self.topology = parse_topology(topology, pes)
        self.sim = Simulation(self.topology, costs, jitter, seed) if pes > 1 and comm is None else None
        compiler = rules.RuleCompiler(module)
        self.ml = None
        self.batch = BATCH  # steps a simulated PE runs between looks at its messages
        if module.functions:
            from pam.ml.loader import CompiledML
            self.ml = CompiledML(module)
            self.batch = ML_BATCH
        self.pes: list[PE] = []
        self.procs: list[dict] = []
        numbers = [comm.Get_rank()] if comm is not None else range(pes)
        for n in numbers:
            pe = PE(n, self.output.write if n == 0 else _no_output,
                    max_steps if pes == 1 or comm is not None else None,
                    timeout if pes == 1 or comm is not None else None)
            procs: dict = {}
            if self.sim is not None:
                pe.net = Net(pe, self.sim.transport(n), self.topology, procs, seed,
                             (lambda k: lambda: self.sim.clock[k])(n))
            elif comm is not None:
                self.transport = MPITransport(comm, self.topology)
                pe.net = Net(pe, self.transport, self.topology, procs, seed, mpi_now)
            procs.update(rules.load(module, pe, compiler))
            if self.ml is not None:
                procs.update(self.ml.load(pe, pe.output, timeout))
            self.pes.append(pe)
            self.procs.append(procs)
        self.pe = self.pes[0]

    def run(self) -> RunResult:
        entry = self.module.entry
        outputs = [Var() for _ in entry.outputs]
        collecting = gc.isenabled()
        gc.disable()  # the heap is mostly acyclic and freed by reference counting
        try:
            if self.comm is not None:
                return run_on_ranks(self, outputs)
            self.pe.push(self.entry_task(outputs))
            finished = False
            try:
                if self.sim is None:
                    self.pe.run()
                else:
                    vtime = self._simulate()
                    self._resolve(outputs)
            except Finished:  # an ML program: its main evaluation is done, orphans are not waited for
                finished = True
                if self.sim is not None:
                    vtime = self.sim.clock[0]
            if self.sim is None:
                vtime = self.pe.instructions * self.costs.instruction
            suspended = 0 if finished else sum(len(pe.suspended) for pe in self.pes)
            if suspended:
                names: dict[int, str] = {}
                goals = []
                for pe in self.pes:
                    goals += pe.suspended_goals(names, DEADLOCK_REPORT_LIMIT - len(goals))
                raise Deadlock(goals, suspended)
        except MachineStop:
            self.output.flush()
            raise
        finally:
            if collecting:
                gc.enable()
        self.output.flush()
        names = {}
        bindings = [f"{name} = {write_term(v, names)}" for name, v in zip(entry.outputs, outputs)]
        for pe in self.pes:
            received = pe.stats.received
            pe.stats.busy_time = (pe.instructions + received * self.costs.message_handling) \
                * self.costs.instruction + received * self.costs.process_switch
        stats = RunStats(len(self.pes), self.topology.name, "sim", vtime, [pe.stats for pe in self.pes])
        return RunResult(bindings, stats)

    def entry_task(self, outputs: list[Var]) -> Task:
        target = self.module.entry.target
        proc = self.procs[0][target]
        if self.module.language == "ml":
            return proc.entry()
        return Task(proc, tuple(outputs), None, self.module.relations[target].span)

    # -- simulated PEs ----------------------------------------------------------------------------
    def _simulate(self) -> float:
        """Run every PE to global termination (Safra); returns the virtual time it took."""
        sim, pes, costs = self.sim, self.pes, self.costs
        for n in range(len(pes)):
            sim.wake_pe(n, 0.0)
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        turns = 0
        while True:
            event = sim.next_event()
            if event is None:
                raise AssertionError("simulation ran out of events before termination")
            t, kind, n, message = event
            pe = pes[n]
            if kind == 1:
                sim.advance(n, t, costs.message_handling, switch=True)
                pe.net.receive(message)
                sim.flush(n)
                sim.wake_pe(n, sim.clock[n])
                continue
            sim.clock[n] = max(sim.clock[n], t)
            if pe.ready:
                before = pe.instructions
                pe.run(self.batch)
                sim.advance(n, sim.clock[n], pe.instructions - before)
                sim.flush(n)
                sim.wake_pe(n, sim.clock[n])
            else:
                net = pe.net
                net.idle()
                action, arg = net.safra.step()
                if action == "send":
                    net.send("TOKEN", arg[0], arg[1])
                sim.flush(n)
                if action == "terminated":
                    return max(sim.clock)
                if not net.steal_pending:
                    sim.wake_pe(n, net.steal_after)
            turns += 1
            if turns % 256 == 0:
                self._check_limits(deadline)

    def _check_limits(self, deadline) -> None:
        if self.max_steps is not None:
            steps = sum(pe.steps for pe in self.pes)
            if steps >= self.max_steps:
                raise LimitExceeded(f"step limit reached after {steps} steps (--max-steps {self.max_steps})")
        if deadline is not None and time.monotonic() > deadline:
            raise LimitExceeded(f"time limit of {self.timeout:g} s reached (--timeout)")

    def _resolve(self, outputs: list[Var]) -> None:
        """Fetch the current values of remote variables in the `--goal` bindings (PEEK)."""
        while self.pe.net.ask_peeks(outputs):
            self.sim.flush(0)
            while self.pe.net.peeks:
                event = self.sim.next_event()
                if event is None:
                    return
                t, kind, n, message = event
                if kind == 1:
                    self.pes[n].net.receive(message)
                    self.sim.flush(n)


from pam.ranks import run_on_ranks  # noqa: E402  (it uses Machine's pieces)

__all__ = ["Machine", "Output", "ProgramFailure", "RunResult"]
