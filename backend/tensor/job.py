"""A training job on the machine's PEs: the step graph loaded once on every PE (one process of
simulated PEs, or one PE per MPI rank), then replayed step after step. It lives in the back end,
not the machine, because it lowers the graph (a compiler pass) before loading it.

`TensorJob(module, params, ...)` takes a training step of the tensor dialect built for the
*global* batch (backend/tensor/gpt.py `build_training_step`) and its initial parameters. With
`dp` > 1 it lowers the graph with the pass "tensor-data-parallel" (each PE a slice of the batch,
gradients all-reduced in buckets); the same lowered graph runs on simulated PEs over any
topology and, with `mpi=True`, on the ranks of `mpiexec` (SPMD: every rank builds the same job).
`step(batch, lr, step)` feeds the global batch (each PE takes its slice), runs the step to its
end on every PE and returns the loss and gradient norm (the same on every PE) and the step's
statistics (pam.tensor.stats).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from time import perf_counter

import numpy as np

from pam.costs import DEFAULT, CostModel
from pam.distribution import Net
from pam.driver import IDLE_SLEEP, Simulated, poll, run_alone
from pam.pe import PE
from pam.tensor.graph import COLLECTIVES, StepGraph, step_graph
from pam.tensor.runtime import T800_FLOPS, TensorRuntime
from pam.tensor.stats import PEStepStats, StepStats
from pam.topology import TopologyError, parse_topology
from pam.transport.sim import Simulation

DATA_PARALLEL = "tensor-data-parallel"
TAG_LEFT = 1  # on the job's control communicator: a rank has left the job after this many steps


class LayoutError(ValueError):
    """A parallel layout that does not fit: dp against the PEs or MPI ranks, or against the
    batch, or a topology that does not fit the PEs. The message is one line for the user (the
    command exits 2)."""


@dataclass(slots=True)
class StepResult:
    """One step: the global batch's mean loss, the gradient norm before clipping (the same on
    every PE) and the step's statistics."""

    loss: float
    grad_norm: float
    stats: StepStats


def _no_output(text: str) -> None:
    raise AssertionError("a tensor step writes no program output")


class TensorJob:
    """A training step loaded on `pes` PEs (`dp` by default; under `mpi`, the communicator's
    ranks), with `params` (name -> array) as the initial parameters and zero optimizer state.
    `flops_per_s` is each PE's kernel rate in virtual time, `costs` the links' (pam.costs)."""

    def __init__(self, module, params: dict[str, np.ndarray], *, pes: int | None = None,
                 topology: str | None = None, dp: int = 1, flops_per_s: float = T800_FLOPS,
                 mpi: bool = False, costs: CostModel = DEFAULT, seed: int = 0, kernels: dict | None = None,
                 bucket_bytes: int | None = None):
        if isinstance(dp, bool) or not isinstance(dp, int) or dp < 1:
            raise LayoutError(f"dp must be a positive integer, got {dp!r}")
        self.comm = self.control = None
        self.steps_done = 0
        self.left: dict[int, int] = {}  # rank -> the steps it had done when it left the job
        if mpi:
            from pam.transport.mpi import comm_world
            self.comm = comm_world()
            ranks = self.comm.Get_size()
            if dp != ranks:
                raise LayoutError(f"dp = {dp} does not match the {ranks} MPI ranks (ranks = dp)")
            if pes is not None and pes != ranks:
                raise LayoutError(f"--pes {pes} under mpiexec: the PEs are the {ranks} ranks")
        elif pes is not None and pes != dp:
            raise LayoutError(f"dp = {dp} needs {dp} PEs, not {pes} (PEs = dp)")
        self.pes = dp
        self.dp = dp
        try:
            self.topology = parse_topology(topology, self.pes)
        except TopologyError as e:
            raise LayoutError(str(e)) from None
        self.costs = costs
        self.module = lower(module, dp, bucket_bytes)
        self.graph: StepGraph = step_graph(self.module)
        self._check_params(params)
        groups = {"dp": (tuple(range(dp)),)}
        comms = _sub_communicators(self.comm, self.graph, groups) if mpi else None
        if mpi:
            self.control = self.comm.Dup()
        self.runtime = TensorRuntime(self.module, kernels=kernels, flops_per_s=flops_per_s, costs=costs,
                                     comms=comms, groups=groups)
        self.sim = Simulation(self.topology, costs, 0.0, seed) if self.pes > 1 and not mpi else None
        numbers = [self.comm.Get_rank()] if mpi else range(self.pes)
        self.local_pes: list[PE] = []
        for n in numbers:
            pe = PE(n, _no_output)
            if self.sim is not None:
                procs: dict = {}
                pe.net = Net(pe, self.sim.transport(n), self.topology, procs, seed,
                             (lambda k: lambda: self.sim.clock[k])(n))
                procs.update(self.runtime.load(pe))
            else:
                self.runtime.load(pe)
            replica = self.runtime.replicas[n]
            replica.persistent = {v.name: np.array(params[v.name], dtype=v.dtype) for v in self.graph.params}
            replica.persistent.update({v.name: np.zeros(v.shape, v.dtype) for v in self.graph.states})
            self.local_pes.append(pe)
        self.simulated = Simulated(self.local_pes, self.sim, self.runtime.batch) if self.sim is not None else None

    def _check_params(self, params: dict[str, np.ndarray]) -> None:
        for v in self.graph.params:
            if v.name not in params:
                raise ValueError(f"no initial value for the parameter {v.name!r}")
            if tuple(np.shape(params[v.name])) != v.shape:
                raise ValueError(f"parameter {v.name!r} has shape {list(np.shape(params[v.name]))}, "
                                 f"the graph's is {list(v.shape)}")

    def _feeds(self, pe: int, batch: dict[str, np.ndarray], lr: float, step: int) -> dict[str, np.ndarray]:
        feeds = {}
        for v in self.graph.inputs:
            if v.name == "lr":
                value = lr
            elif v.name == "step":
                value = step
            elif v.name in batch and not v.shape:
                value = batch[v.name]
            elif v.name in batch:
                whole = np.asarray(batch[v.name])
                rows = v.shape[0]
                if whole.shape != (rows * self.dp, *v.shape[1:]):
                    raise LayoutError(f"{v.name!r} has shape {list(whole.shape)}; the step takes "
                                      f"{[rows * self.dp, *v.shape[1:]]} ({self.dp} slice(s) of {rows})")
                value = whole[pe * rows:(pe + 1) * rows]
            else:
                raise ValueError(f"the step needs the input {v.name!r}")
            feeds[v.name] = np.asarray(value, dtype=v.dtype)
        return feeds

    def step(self, batch: dict[str, np.ndarray], lr: float, step: int) -> StepResult:
        """One training step on the global `batch` ("tokens", "targets": [B, T]; each input
        that is not a scalar is split along dimension 0 among the dp ranks) with learning rate
        `lr` at step number `step` (1 for the first: Adam's bias correction)."""
        replicas = [self.runtime.replicas[pe.number] for pe in self.local_pes]
        for pe, replica in zip(self.local_pes, replicas):
            replica.start(self._feeds(pe.number, batch, lr, step))
        before = [(pe.instructions, pe.stats.received, pe.stats.bytes_sent) for pe in self.local_pes]
        began = perf_counter()
        if self.comm is not None:
            self._run_rank(self.local_pes[0], replicas[0])
            wall = perf_counter() - began
            rows = self._gather(self._wall_row(self.local_pes[0], replicas[0], wall, before[0]))
            stats = StepStats("mpi", max(r.compute_s + r.comm_s + r.idle_s + r.loop_s for r in rows), wall,
                              sum(r.loop_share for r in rows) / len(rows), rows)
        else:
            start = 0.0
            if self.sim is None:
                run_alone(self.local_pes[0])
                end = (self.local_pes[0].instructions - before[0][0]) * self.costs.instruction
            else:
                start = max(self.sim.clock)
                self.sim.clock[:] = [start] * self.pes  # the step begins on every PE with its batch
                end = self.simulated.run(lambda: None) - start
            wall = perf_counter() - began
            stats = self._sim_stats(replicas, before, end, wall)
        self._check_done()
        self.steps_done += 1
        for replica in replicas:
            replica.finish()
        first = replicas[0]
        return StepResult(float(first.value("loss")), float(first.value("grad_norm")), stats)

    def _run_rank(self, pe: PE, replica) -> None:
        """This rank's PE until its step is done: a kernel, then a look at the outstanding
        collectives (the hooks), turn after turn; it sleeps while only collectives remain."""
        ready = pe.ready
        hooks = pe.hooks
        while True:
            pending = poll(hooks)
            if ready:
                pe.run(self.runtime.batch)
            elif pending:
                began = perf_counter()
                self._check_peers()
                time.sleep(IDLE_SLEEP)
                replica.clock.idle_wall += perf_counter() - began
            else:
                return

    def _check_peers(self) -> None:
        """While this rank waits for collectives: a peer that left the job before this step
        (it failed, and closed its job) will never send its part, so the job is abandoned: all
        ranks are ended with a message, rather than waiting forever."""
        from mpi4py import MPI

        status = MPI.Status()
        while self.control.Iprobe(source=MPI.ANY_SOURCE, tag=TAG_LEFT, status=status):
            self.left[status.Get_source()] = self.control.recv(source=status.Get_source(), tag=TAG_LEFT)
        gone = sorted(r for r, steps in self.left.items() if steps <= self.steps_done)
        if gone:
            me = self.comm.Get_rank()
            print(f"hpgrem: error: rank {gone[0]} left the job after {self.left[gone[0]]} step(s) while rank {me} "
                  f"was in step {self.steps_done + 1}: the job is abandoned", file=sys.stderr, flush=True)
            self.comm.Abort(1)

    def _check_done(self) -> None:
        left = [(pe.number, t.describe()) for pe in self.local_pes for t in list(pe.suspended)[:3]]
        if left:
            raise RuntimeError(f"the step ended with tasks still waiting: {left}")

    def _sim_stats(self, replicas, before, time_s: float, wall: float) -> StepStats:
        c = self.costs
        handling = c.message_handling * c.instruction + c.process_switch
        rows = []
        outside = sum(r.clock.kernel_wall + r.clock.comm_wall for r in replicas)
        share = max(0.0, wall - outside) / wall if wall > 0 else 0.0
        for pe, r, (instructions, received, sent) in zip(self.local_pes, replicas, before):
            k = r.clock
            handled = (pe.stats.received - received) * handling
            busy = (pe.instructions - instructions) * c.instruction + handled
            compute = k.compute_instr * c.instruction
            comm = k.comm_instr * c.instruction + handled
            rows.append(PEStepStats(pe.number, compute, comm, max(0.0, time_s - busy), busy - compute - comm,
                                    k.kernels, k.collectives, k.reduced_bytes, pe.stats.bytes_sent - sent, share))
        return StepStats("sim", time_s, wall, share, rows)

    def _wall_row(self, pe: PE, replica, wall: float, before) -> PEStepStats:
        k = replica.clock
        loop = max(0.0, wall - k.kernel_wall - k.comm_wall - k.idle_wall)
        return PEStepStats(pe.number, k.kernel_wall, k.comm_wall, k.idle_wall, loop, k.kernels, k.collectives,
                           k.reduced_bytes, pe.stats.bytes_sent - before[2], loop / wall if wall > 0 else 0.0)

    def _gather(self, row: PEStepStats) -> list[PEStepStats]:
        return list(self.comm.allgather(row))

    def parameters(self) -> dict[str, np.ndarray]:
        """The full parameters (the same on every PE), by name."""
        replica = self.runtime.replicas[self.local_pes[0].number]
        return {v.name: replica.persistent[v.name] for v in self.graph.params}

    def close(self) -> None:
        """The job cannot step after. Under mpiexec this rank tells the others that it has
        left after its steps (one that is still in a later step then ends the job, see
        `_check_peers`), and frees the sub-communicators."""
        if self.control is None:
            return
        me = self.comm.Get_rank()
        sends = [self.control.isend(self.steps_done, dest=r, tag=TAG_LEFT)
                 for r in range(self.comm.Get_size()) if r != me]
        for request in sends:
            request.wait()
        for comm in (self.runtime.comms or {}).values():
            comm.Free()
        self.runtime.comms = None
        self.control = None


def lower(module, dp: int, bucket_bytes: int | None = None):
    """`module` lowered for `dp` data-parallel ranks (the pass tensor-data-parallel), unless it
    already is; a StepGraph is taken as lowered."""
    if isinstance(module, StepGraph):
        return module
    from hpgrem.ir.tensor import STEP

    done = module.annotation(STEP, f"{DATA_PARALLEL}.dp")
    if done is not None:
        if done != dp:
            raise LayoutError(f"the graph is lowered for dp = {done}, the layout asks dp = {dp}")
        return module
    if dp == 1:
        return module
    from hpgrem.passes import PassError, run_passes

    options = {"dp": dp} if bucket_bytes is None else {"dp": dp, "bucket_bytes": bucket_bytes}
    try:
        return run_passes(module, [DATA_PARALLEL], analyses=False, options={DATA_PARALLEL: options})
    except PassError as e:
        raise LayoutError(str(e)) from None


def _sub_communicators(comm, graph: StepGraph, groups: dict) -> dict:
    """A communicator per group of the layout that the graph's collectives use (every rank
    makes them in the same order, as MPI requires)."""
    from mpi4py import MPI

    used = sorted({op.attrs["group"] for op in graph.ops if op.op in COLLECTIVES})
    me = comm.Get_rank()
    comms = {}
    for name in used:
        for members in groups[name]:
            sub = comm.Split(0 if me in members else MPI.UNDEFINED, me)
            if me in members:
                comms[tuple(members)] = sub
    return comms


__all__ = ["LayoutError", "StepResult", "TensorJob"]
