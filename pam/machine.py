"""Runs an HPGREM module: loads its code onto the PEs, starts the entry task, reports how it ended.

The module's code comes from its dialect's runtime (pam.runtimes). One PE runs its reduction
loop directly; several simulated PEs run under `Simulation` in virtual time; under MPI each rank
runs one PE (pam.ranks). Every PE runs the same code and talks only through messages
(pam.distribution); pam.driver drives them.

This is the one place where PEs, their Nets and transports are made. A client that runs the
same loaded code again and again with new inputs (a training job: backend/tensor/job.py) uses
the *loaded mode*: it gives the PEs their tasks and calls `run_loaded()`, once per run, with
termination detection, deadlock reports and (under MPI) rank failures as for a program.
"""

from __future__ import annotations

import gc
import sys
from time import perf_counter
from dataclasses import dataclass

from hpgrem.ir import MODULE_FACTS, Module
from pam.costs import DEFAULT, CostModel
from pam.distribution import Net
from pam.driver import Simulated, resolve, run_alone
from pam.errors import Deadlock, Finished, LimitExceeded, MachineStop, ProgramFailure
from pam.limits import Deadline, Watchdog
from pam.pe import DEADLOCK_REPORT_LIMIT, PE
from pam.ranks import leave_ranks, run_on_ranks, step_on_ranks
from pam.runtimes import Runtime, counters_of, runtime_for
from pam.stats import RunStats
from pam.terms import Var
from pam.topology import parse_topology
from pam.transport.mpi import MPITransport
from pam.transport.mpi import now as mpi_now
from pam.transport.sim import Simulation


class Output:
    """Program output, buffered; PE 0 owns it so that it keeps program order."""

    def __init__(self, stream=None, limit: int = 256, encoding: str = "utf-8"):
        self.stream = stream if stream is not None else sys.stdout
        self.parts: list[str] = []
        self.limit = limit
        self.encoding = encoding  # used where the stream takes bytes (a terminal, a pipe, a file)

    def write(self, text: str) -> None:
        self.parts.append(text)
        if len(self.parts) >= self.limit:
            self.flush()

    def flush(self) -> None:
        if self.parts:
            text = "".join(self.parts)
            self.parts.clear()
            buffer = getattr(self.stream, "buffer", None)
            if buffer is not None:
                self.stream.flush()
                buffer.write(text.encode(self.encoding))
            else:
                self.stream.write(text)
        self.stream.flush()


@dataclass(slots=True)
class RunResult:
    """A finished run: the `--goal` bindings as `Name = Term` lines, and the statistics."""

    bindings: list[str]
    stats: RunStats


def _no_output(text: str) -> None:
    raise AssertionError("only PE 0 writes program output")


class Machine:
    """The abstract machine for one module; `run()` executes its entry on PE 0. `runtime` is
    the dialect runtime to load it with (pam.runtimes; by default the module's language's).
    `timeout` counts from `started` (a time.monotonic() instant), by default from now; with
    `hard_stop` (the command line's choice) a run that cannot be interrupted then is ended
    with its process (pam.limits.Watchdog). With `trace` (a pam.trace.Trace) every PE records
    its events there, running its traced loop and the runtime's traced code (docs/trace.md).
    Without `count_reductions` (a run whose statistics nobody reads: the CLI without --stats,
    --stats-json or --count) compiled code on one PE counts no reductions inside a step (ML's
    direct calls and loops), so the statistics then undercount them; limits, traces, several
    PEs (whose schedule follows the counts) and MPI count them all the same.

    A module without an entry is loaded to be run in the loaded mode (`run_loaded`), where
    `runtime_of(n)`, if given, is the runtime of PE n (a pipeline stage's graph)."""

    def __init__(self, module: Module, *, stream=None, pes: int = 1, topology: str | None = None,
                 seed: int = 0, max_steps: int | None = None, timeout: float | None = None,
                 costs: CostModel = DEFAULT, comm=None, jitter: float = 0.0, runtime: Runtime | None = None,
                 started: float | None = None, hard_stop: bool = False, trace=None,
                 count_reductions: bool = True, runtime_of=None):
        self.module = module
        self.costs = costs
        self.max_steps = max_steps
        self.timeout = timeout
        # one deadline for the whole run, from `started` (time.monotonic(); the CLI passes
        # its own start, so compiling counts) or now: every PE's loop and the watchdog use it
        self.deadline = None if timeout is None else Deadline(timeout, started)
        self.hard_stop = hard_stop
        if comm is not None:
            # the machine's own communicator: its notices never meet another machine's
            comm = comm.Dup()
            pes = comm.Get_size()
        self.comm = comm
        self.runs = 0  # runs of the loaded code (run_loaded)
        self.closed = False
        self.simulated: Simulated | None = None
        self.topology = parse_topology(topology, pes)
        self.sim = Simulation(self.topology, costs, jitter, seed) if pes > 1 and comm is None else None
        if runtime_of is not None:
            runtime = runtime_of(comm.Get_rank() if comm is not None else 0)
        self.runtime = runtime if runtime is not None else runtime_for(module, tracing=trace is not None)
        self.trace = trace  # a pam.trace.Trace: every PE records its events there
        self.output = Output(stream, encoding=getattr(self.runtime, "encoding", "utf-8"))
        self.pes: list[PE] = []
        self.procs: list[dict] = []  # each PE's steps by key
        numbers = [comm.Get_rank()] if comm is not None else range(pes)
        for n in numbers:
            pe = PE(n, self.output.write if n == 0 else _no_output,
                    max_steps if pes == 1 or comm is not None else None,
                    timeout if pes == 1 or comm is not None else None)
            pe.deadline = self.deadline if pes == 1 or comm is not None else None
            pe.counts_reductions = count_reductions or pes > 1 or comm is not None or trace is not None
            pe.stats.counters = dict.fromkeys(counters_of(self.runtime), 0)
            procs: dict = {}
            if self.sim is not None:
                pe.net = Net(pe, self.sim.transport(n), self.topology, procs, seed,
                             (lambda k: lambda: self.sim.clock[k])(n))
            elif comm is not None:
                self.transport = MPITransport(comm, self.topology)
                pe.net = Net(pe, self.transport, self.topology, procs, seed, mpi_now)
            if trace is not None:
                trace.tracer(pe, self._clock(pe, started))
            procs.update((self.runtime if runtime_of is None else runtime_of(n)).load(pe, timeout))
            self.pes.append(pe)
            self.procs.append(procs)
        self.pe = self.pes[0]

    def _clock(self, pe, started: float | None):
        """A traced PE's clock in microseconds: its virtual time (its simulated clock and the
        instructions of the batch it is running, those of reductions inside the running step
        too: pam.trace.Tracer.offset), or under MPI the wall time since `started`."""
        instruction = self.costs.instruction * 1e6
        if self.comm is not None:
            began = mpi_now() if started is None else started
            return lambda: (mpi_now() - began) * 1e6
        if self.sim is None:
            return lambda: (pe.instructions + pe.tracer.offset) * instruction
        clock, n = self.sim.clock, pe.number
        return lambda: clock[n] * 1e6 + (pe.instructions - pe.tracer.mark + pe.tracer.offset) * instruction

    def run(self) -> RunResult:
        entry = self.module.entry
        if entry is None:
            raise ValueError("the module has no entry goal")
        outputs = [Var() for _ in entry.outputs]
        collecting = gc.isenabled()
        gc.disable()  # the heap is mostly acyclic and freed by reference counting
        # The watchdog stops the run at the deadline wherever it is (pam.limits); under MPI the
        # rank disarms it once the run's outcome is known, before the ranks part.
        watchdog = Watchdog(self.deadline, self.hard_stop)
        began = perf_counter()
        try:
            with watchdog:
                if self.comm is not None:
                    elapsed, per_pe = self._run_ranks(outputs, watchdog)
                    stats = RunStats(len(per_pe), self.topology.name, "mpi", elapsed, per_pe)
                else:
                    vtime = self._run_here(outputs)
                    self._busy_times()
                    stats = RunStats(len(self.pes), self.topology.name, "sim", vtime, [pe.stats for pe in self.pes])
                stats.wall_s = perf_counter() - began  # the run alone: wall_s in --stats-json
                names: dict[int, str] = {}
                bindings = [f"{name} = {self.runtime.show(v, names)}" for name, v in zip(entry.outputs, outputs)]
        except MachineStop:
            self.output.flush()
            raise
        finally:
            if collecting:
                gc.enable()
        self.output.flush()
        return RunResult(bindings, stats)

    def _run_ranks(self, outputs: list[Var], watchdog: Watchdog) -> tuple[float, list]:
        """This rank's part of an MPI run (pam.ranks)."""
        if self.pe.number == 0:
            self.pe.push(self.runtime.entry_task(self.pe, outputs))
        try:
            return run_on_ranks(self.pe, self.transport, self.comm, outputs, watchdog)
        finally:
            self.output.flush()

    def _run_here(self, outputs: list[Var]) -> float:
        """The run on one PE or on simulated PEs; returns its virtual time. Raises Deadlock
        when tasks are left suspended."""
        self.pe.push(self.runtime.entry_task(self.pe, outputs))
        try:
            if self.sim is None:
                run_alone(self.pe)
            else:
                # the module fact the `aggregate` pass records (docs/passes.md); the machine imports no pass
                self.sim.aggregate = self.module.annotation(MODULE_FACTS, "aggregate.messages") == "aggregate"
                simulated = Simulated(self.pes, self.sim, self.runtime.batch)
                vtime = simulated.run(self._check_limits)
                resolve(self.pe.net, outputs, simulated.deliver)
        except Finished:  # the entry task ended the run: tasks it left behind are not waited for
            return self.sim.clock[0] if self.sim is not None else self.pe.instructions * self.costs.instruction
        if self.sim is None:
            vtime = self.pe.instructions * self.costs.instruction
        self._check_deadlock()
        return vtime

    def run_loaded(self) -> float:
        """The loaded mode: run the tasks the client has given this process's PEs (`pes`),
        every PE until the run terminates, as often as the client likes. Returns the run's
        seconds: virtual time on one PE or simulated PEs (which all start it at the same
        time), or under MPI the seconds this rank spent running steps. Raises Deadlock when
        tasks are left suspended, and under MPI how the run ended on any rank that failed or
        left the job (pam.ranks.step_on_ranks)."""
        if self.closed:
            raise ValueError("the machine is closed")
        if self.comm is not None:
            busy = step_on_ranks(self.pe, self.transport, self.comm)
            self.runs += 1
            return busy
        if self.sim is None:
            before = self.pe.instructions
            run_alone(self.pe)
            vtime = (self.pe.instructions - before) * self.costs.instruction
        else:
            if self.simulated is None:
                self.simulated = Simulated(self.pes, self.sim, self.runtime.batch)
            start = max(self.sim.clock)
            self.sim.clock[:] = [start] * len(self.pes)  # the run begins on every PE at once
            vtime = self.simulated.run(self._check_limits) - start
        self.runs += 1
        self._check_deadlock()
        return vtime

    def close(self) -> None:
        """No run after this. Under MPI this rank leaves the machine: a rank still in a later
        run of the loaded code ends the job instead of waiting for it (pam.ranks.leave_ranks)."""
        if self.comm is not None and not self.closed:
            leave_ranks(self.transport, self.pe.number, self.runs)
        self.closed = True

    def _check_deadlock(self) -> None:
        suspended = sum(len(pe.suspended) for pe in self.pes)
        if suspended:
            names: dict[int, str] = {}
            goals = []
            for pe in self.pes:
                goals += pe.suspended_goals(names, DEADLOCK_REPORT_LIMIT - len(goals))
            raise Deadlock(goals, suspended)

    def _busy_times(self) -> None:
        for pe in self.pes:
            received = pe.stats.received
            pe.stats.busy_time = (pe.instructions + received * self.costs.message_handling) \
                * self.costs.instruction + received * self.costs.process_switch

    def _check_limits(self) -> None:
        if self.max_steps is not None:
            steps = sum(pe.steps for pe in self.pes)
            if steps >= self.max_steps:
                raise LimitExceeded(f"step limit reached after {steps} steps (--max-steps {self.max_steps})")
        if self.deadline is not None:
            self.deadline.check()


__all__ = ["Machine", "Output", "ProgramFailure", "RunResult"]
