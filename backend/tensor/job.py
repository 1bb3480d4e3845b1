"""A training job on the machine's PEs: the step graph loaded once on every PE (one process of
simulated PEs, or one PE per MPI rank), then replayed step after step. It lives in the back end,
not the machine, because it lowers the graph (a compiler pass) before loading it.

`TensorJob(module, params, layout=Layout(...))` takes a training step of the tensor dialect built
for the *global* batch (backend/tensor/gpt.py `build_training_step`) and its initial parameters
(the whole GPT-2-named tensors). It lowers the step for the layout (backend/tensor/layout.py
`lower`: tensor-parallel, data-parallel / ZeRO, ...) and loads on every rank the graph of its
pipeline stage and its own shard of each parameter (backend/tensor/shards.py). `dp=` alone is
the layout Layout(dp=dp). The same lowered graphs run on simulated PEs over any topology and,
with `mpi=True`, on the ranks of `mpiexec` (SPMD: every rank builds the same job).
`step(batch, lr, step)` feeds the global batch (each data-parallel rank takes its slice), runs
the step to its end on every PE and returns the loss and gradient norm (the same on every PE)
and the step's statistics (pam.tensor.stats).

The job is a client of the machine (pam.machine.Machine, its loaded mode): the machine makes the
PEs, their Nets and transports, drives them, detects each step's termination and reports a
rank that fails or leaves the job; the job lowers, feeds, and reads the results.
"""

from __future__ import annotations

from dataclasses import dataclass
from time import perf_counter

import numpy as np

from pam.costs import DEFAULT, CostModel
from pam.machine import Machine
from backend.tensor.layout import Layout, LayoutError, Lowered, lower
from hpgrem.ir.tensor.schedule import micro_batch_input, program_text
from backend.tensor.shards import shard, unshard
from pam.tensor.graph import COLLECTIVES, StepGraph, step_graph
from pam.tensor.runtime import T800_FLOPS, TensorRuntime
from pam.tensor.stats import PEStepStats, StepStats
from pam.topology import TopologyError, parse_topology

COORDINATES = {"rank.dp": "dp", "rank.tp": "tp", "rank.pp": "pp"}
"""Inputs a lowered graph may take: the rank's coordinate in the grid (ZeRO's own shard)."""


@dataclass(slots=True)
class StepResult:
    """One step: the global batch's mean loss, the gradient norm before clipping (the same on
    every PE) and the step's statistics."""

    loss: float
    grad_norm: float
    stats: StepStats


class TensorJob:
    """A training step loaded on the layout's ranks (`pes` must agree; under `mpi`, the
    communicator's ranks), with `params` (name -> whole array) as the initial parameters and
    zero optimizer state. `layout` defaults to Layout(dp=dp). `flops_per_s` is each PE's kernel
    rate in virtual time, `costs` the links' (pam.costs). `release` false keeps every value of a
    step until it ends (tests inspect them). `device_budget` (bytes per PE) holds offloading's
    fetches back while the device is full (pam.tensor.runtime). `trace` (a pam.trace.Trace) records
    every PE's steps and messages in one process, in virtual time (`hpgrem train --trace`)."""

    def __init__(self, module, params: dict[str, np.ndarray], *, layout: Layout | None = None,
                 pes: int | None = None, topology: str | None = None, dp: int = 1,
                 flops_per_s: float = T800_FLOPS, mpi: bool = False, costs: CostModel = DEFAULT,
                 seed: int = 0, kernels: dict | None = None, bucket_bytes: int | None = None,
                 release: bool = True, device_budget: int | None = None, trace=None):
        if layout is None:
            layout = Layout(dp=dp)
        layout.check()
        if dp != 1 and dp != layout.dp:
            raise LayoutError(f"dp = {dp} disagrees with the layout's dp = {layout.dp}")
        self.layout = layout
        ranks = layout.ranks
        self.comm = None
        if mpi:
            from pam.transport.mpi import comm_world
            self.comm = comm_world()
            size = self.comm.Get_size()
            if ranks != size:
                raise LayoutError(f"the layout needs dp * tp * pp = {ranks} ranks, not the {size} MPI ranks")
            if pes is not None and pes != size:
                raise LayoutError(f"--pes {pes} under mpiexec: the PEs are the {size} ranks")
        elif pes is not None and pes != ranks:
            raise LayoutError(f"the layout needs dp * tp * pp = {ranks} PEs, not {pes}")
        self.pes = ranks
        self.dp = layout.dp
        try:
            self.topology = parse_topology(topology, self.pes)
        except TopologyError as e:
            raise LayoutError(str(e)) from None
        self.costs = costs
        self.lowered: Lowered = lower(module, layout, bucket_bytes=bucket_bytes)
        self.shapes = {n: tuple(np.shape(v)) for n, v in params.items()}  # the whole parameters'
        self.graphs: list[StepGraph] = [step_graph(m) for m in self.lowered.stages]
        self.module = self.lowered.stages[0]
        self.graph = self.graphs[0]
        groups = layout.groups()
        comms = _sub_communicators(self.comm, self.graphs, groups, self.lowered.actions is not None) if mpi else None
        actions = self.lowered.actions
        self.runtimes = [TensorRuntime(m, kernels=kernels, flops_per_s=flops_per_s, costs=costs,
                                       comms=comms, groups=groups, release=release, device_budget=device_budget,
                                       program=None if actions is None else list(actions[layout.rank(pp=i)]))
                         for i, m in enumerate(self.lowered.stages)]
        self.runtime = self.runtimes[0]
        self.machine = Machine(self.module, pes=self.pes, topology=topology, seed=seed, costs=costs,
                               comm=self.comm, trace=trace, runtime_of=self.runtime_of)
        for pe in self.machine.pes:
            runtime = self.runtime_of(pe.number)
            runtime.replicas[pe.number].persistent = self._initial(pe.number, runtime.graph, params)

    @property
    def local_pes(self) -> list:
        """This process's PEs (every PE; under mpiexec, this rank's)."""
        return self.machine.pes

    def schedule_text(self) -> str:
        """Each pipeline stage's action list, one action a line (`hpgrem train --show-schedule`)."""
        actions = self.lowered.actions
        if actions is None:
            return "no pipeline: each rank runs its graph once per step"
        return program_text([list(actions[self.layout.rank(pp=i)]) for i in range(self.layout.pp)])

    def runtime_of(self, rank: int) -> TensorRuntime:
        """The runtime of the graph rank `rank` runs (its pipeline stage's)."""
        return self.runtimes[self.layout.coordinates(rank).pp]

    def replica_of(self, rank: int):
        return self.runtime_of(rank).replicas[rank]

    def _initial(self, rank: int, graph: StepGraph, params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Rank `rank`'s persistent values: its shard of each parameter, zero optimizer state."""
        out = {}
        for v in graph.params:
            if v.name not in params:
                raise ValueError(f"no initial value for the parameter {v.name!r}")
            part = shard(v.name, np.asarray(params[v.name]), self.layout, rank)
            if part.shape != v.shape:
                raise ValueError(f"parameter {v.name!r} has shape {list(np.shape(params[v.name]))}, "
                                 f"its shard {list(part.shape)}; the graph's is {list(v.shape)}")
            out[v.name] = np.array(part, dtype=v.dtype)
        out.update({v.name: np.zeros(v.shape, v.dtype) for v in graph.states})
        return out

    def _feeds(self, pe: int, batch: dict[str, np.ndarray], lr: float, step: int) -> dict[str, np.ndarray]:
        feeds = {}
        where = self.layout.coordinates(pe)
        runtime = self.runtime_of(pe)
        for v in runtime.graph.inputs:
            micro = micro_batch_input(v.name)
            if v.name in runtime.received:
                continue
            if micro is not None and micro[1] in batch:  # rows of this dp rank's slice, then of the micro-batch
                rows, (i, name) = v.shape[0], micro
                share = rows * self.layout.micro_batches
                if np.shape(batch[name])[0] != share * self.dp:
                    raise LayoutError(f"{name!r} has {np.shape(batch[name])[0]} rows; the step takes "
                                      f"{share * self.dp} (dp * micro_batches = {self.dp * self.layout.micro_batches} "
                                      f"slices of {rows})")
                value = np.asarray(batch[name])[where.dp * share + i * rows:where.dp * share + (i + 1) * rows]
            elif v.name == "lr":
                value = lr
            elif v.name == "step":
                value = step
            elif v.name in COORDINATES:
                value = getattr(where, COORDINATES[v.name])
            elif v.name in batch and not v.shape:
                value = batch[v.name]
            elif v.name in batch:
                whole = np.asarray(batch[v.name])
                rows = v.shape[0]
                if whole.shape != (rows * self.dp, *v.shape[1:]):
                    raise LayoutError(f"{v.name!r} has shape {list(whole.shape)}; the step takes "
                                      f"{[rows * self.dp, *v.shape[1:]]} ({self.dp} slice(s) of {rows})")
                value = whole[where.dp * rows:(where.dp + 1) * rows]
            else:
                raise ValueError(f"the step needs the input {v.name!r}")
            feeds[v.name] = np.asarray(value, dtype=v.dtype)
        return feeds

    def step(self, batch: dict[str, np.ndarray], lr: float, step: int) -> StepResult:
        """One training step on the global `batch` ("tokens", "targets": [B, T]; each input
        that is not a scalar is split along dimension 0 among the dp ranks) with learning rate
        `lr` at step number `step` (1 for the first: Adam's bias correction)."""
        replicas = [self.replica_of(pe.number) for pe in self.local_pes]
        for pe, replica in zip(self.local_pes, replicas):
            replica.start(self._feeds(pe.number, batch, lr, step))
        before = [(pe.instructions, pe.stats.received, pe.stats.bytes_sent) for pe in self.local_pes]
        began = perf_counter()
        seconds = self.machine.run_loaded()  # virtual time; under MPI this rank's busy seconds
        wall = perf_counter() - began
        if self.comm is not None:
            rows = self._gather(self._wall_row(self.local_pes[0], replicas[0], wall, seconds, before[0]))
            stats = StepStats("mpi", max(r.compute_s + r.comm_s + r.idle_s + r.loop_s for r in rows), wall,
                              sum(r.loop_share for r in rows) / len(rows), rows)
        else:
            stats = self._sim_stats(replicas, before, seconds, wall)
        for replica in replicas:
            replica.finish()
        first = replicas[0]
        return StepResult(float(first.value("loss")), float(first.value("grad_norm")), stats)

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
                                    k.kernels, k.collectives, k.reduced_bytes, pe.stats.bytes_sent - sent, share,
                                    r.meter.report().to_json()))
        return StepStats("sim", time_s, wall, share, rows)

    def _wall_row(self, pe, replica, wall: float, busy: float, before) -> PEStepStats:
        """This rank's row of a step under MPI, in wall seconds: idle is the step's time outside
        the turns that ran steps (waiting for collectives, for the other ranks' end)."""
        k = replica.clock
        idle = max(0.0, wall - busy)
        loop = max(0.0, busy - k.kernel_wall - k.comm_wall)
        return PEStepStats(pe.number, k.kernel_wall, k.comm_wall, idle, loop, k.kernels, k.collectives,
                           k.reduced_bytes, pe.stats.bytes_sent - before[2], loop / wall if wall > 0 else 0.0,
                           replica.meter.report().to_json())

    def _gather(self, row: PEStepStats) -> list[PEStepStats]:
        return list(self.comm.allgather(row))

    def parameters(self) -> dict[str, np.ndarray]:
        """The whole parameters by GPT-2 name, gathered from every rank's shard (the same on
        every rank; under mpiexec every rank takes part)."""
        return self._whole(lambda graph: graph.params)

    def optimizer_states(self) -> dict[str, np.ndarray]:
        """AdamW's whole states ("m.<param>", "v.<param>"), gathered as `parameters`."""
        return self._whole(lambda graph: graph.states)

    def _whole(self, kind) -> dict[str, np.ndarray]:
        mine = {pe.number: {v.name: self.replica_of(pe.number).persistent[v.name]
                            for v in kind(self.runtime_of(pe.number).graph)} for pe in self.local_pes}
        if self.comm is not None:
            mine = {r: part for row in self.comm.allgather(mine) for r, part in row.items()}
        out: dict[str, np.ndarray] = {}
        for i, graph in enumerate(self.graphs):
            for v in kind(graph):
                if v.name in out:
                    continue
                shape = self.shapes[v.name[2:] if v.name.startswith(("m.", "v.")) else v.name]
                parts = {r: values[v.name] for r, values in mine.items() if v.name in values}
                out[v.name] = unshard(v.name, parts, shape, self.layout, pp=i)
        return out

    def close(self) -> None:
        """The job cannot step after. Under mpiexec this rank leaves the machine (a rank still
        in a later step then ends the job: pam.machine.Machine.close) and frees the
        sub-communicators."""
        if self.machine.closed:
            return
        self.machine.close()
        for comm in (self.runtime.comms or {}).values():
            comm.Free()
        self.runtime.comms = None


def _sub_communicators(comm, graphs: list[StepGraph], groups: dict, pipeline: bool = False) -> dict:
    """A communicator per group of the layout that the graphs' collectives use, and "pp" for a
    pipeline's messages (every rank makes them in the same order, as MPI requires)."""
    from mpi4py import MPI

    used = sorted({op.attrs["group"] for graph in graphs for op in graph.ops if op.op in COLLECTIVES}
                  | ({"pp"} if pipeline else set()))
    me = comm.Get_rank()
    comms = {}
    for name in used:
        for members in groups[name]:
            sub = comm.Split(0 if me in members else MPI.UNDEFINED, me)
            if me in members:
                comms[tuple(members)] = sub
    return comms


__all__ = ["Layout", "LayoutError", "StepResult", "TensorJob"]
