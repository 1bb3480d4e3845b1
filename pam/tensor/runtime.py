"""The tensor dialect's runtime: a training step as tasks on the machine's PEs.

Every value of the step graph (pam.tensor.graph) is a slot holding a write-once variable. An
*op task* runs one kernel: it waits (a counted wait, `WaitAll`) until its input tensors exist,
runs the kernel, is charged its FLOPs at the PE's rate (`flops_per_s`) as virtual time and binds
its output. A *collective task* all-reduces one bucket of values: it waits for its inputs, then
completes when its peers' parts have arrived (pam.tensor.collectives: parts as messages of the
runtime's own kind over the simulated links, or a non-blocking MPI operation polled by a PE
hook). Tasks never move between PEs: under data parallelism every PE runs the whole graph on its
slice of the batch.

The task graph is built once per PE (`Replica`) and replayed every step with fresh variables:
the tasks are pushed in the graph's order, so a PE runs the kernels in that order (the same
order as the sequential reference `evaluate`); when tasks wait, the kernels that are ready run
in the plan's order, a collective starts in the turn of the op that makes its last input, and
a collective's turns come before any op's (docs/tensor.md, "Replay"), so every PE goes through
the backward in the same order and a bucket's collective progresses while backward goes on.
"""

from __future__ import annotations

from dataclasses import dataclass
from time import perf_counter
from typing import Callable

import numpy as np

from hpgrem.ir import NO_SPAN
from hpgrem.ir.tensor.schedule import COMPUTE
from pam.costs import DEFAULT, CostModel
from pam.step import WaitAll, declare
from pam.task import Task
from pam.tensor.collectives import MPIAllReduce, SimAllReduce
from pam.tensor.kernels import INTO
from pam.tensor.graph import COLLECTIVES, StepGraph, step_graph
from pam.tensor.memory import MemoryMeter, category_of, nbytes
from pam.tensor.offload import TRANSFERS
from pam.terms import Var

FRESH = frozenset({"add", "matmul", "embedding_grad"})
"""Kernels whose result is always a new array of its own (never an input returned as is)."""

T800_FLOPS = 1.5e6  # a T800-20's sustained floating point rate: kernels keep its balance with its links
OP_COST = 10  # instructions of the PE loop's own work for one kernel call (the kernel's FLOPs are charged apart)
COLLECTIVE_COST = 20  # instructions of one turn of a collective (starting it, or taking one part)


@dataclass(slots=True)
class KernelCall:
    """One kernel call of the plan: `run(attrs, *inputs)`, its slots and its virtual time. A
    tuple-valued op binds its components' slots itself (`parts`: (index, slot)): a `get` is
    no task of its own."""

    name: str
    op: str
    run: Callable
    attrs: dict
    inputs: tuple[int, ...]
    output: int
    parts: tuple[tuple[int, int], ...]
    flops: int
    instructions: int
    index: int = -1  # its place in the plan's steps


@dataclass(slots=True)
class Bucket:
    """One collective of `kind` (allreduce, reduce_scatter, all_gather: pam.tensor.collectives)
    over the PEs of `group` (a name, such as "dp", that the layout resolves on each PE): the
    members of an all-reduce bucket, reduced as one flat buffer; a reduce-scatter or all-gather
    has one member."""

    name: str
    key: int
    group: str
    mean: bool
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    shapes: tuple[tuple[int, ...], ...]
    dtype: np.dtype
    kind: str = "allreduce"
    ordinal: int = -1  # an all-gather: how many all-gathers the plan runs before it

    def buffer(self, values: list[np.ndarray], position: int, ranks: int) -> np.ndarray:
        """The flat buffer the transport works on: the values (an all-reduce), the value
        zero-padded to `ranks` chunks (a reduce-scatter), or `ranks` chunks with the value in
        chunk `position` (an all-gather)."""
        flat = np.concatenate([v.ravel() for v in values]).astype(self.dtype, copy=False)
        if self.kind == "allreduce":
            return flat
        s = flat.size if self.kind == "all_gather" else -(-flat.size // ranks)
        out = np.zeros(s * ranks, self.dtype)
        at = position * s if self.kind == "all_gather" else 0
        out[at:at + flat.size] = flat
        return out

    def result(self, buffer: np.ndarray, position: int, ranks: int) -> np.ndarray:
        """What the member at `position` keeps of the finished buffer (flat)."""
        if self.kind == "reduce_scatter":
            s = buffer.size // ranks
            return buffer[position * s:(position + 1) * s].copy()
        if self.kind == "all_gather":
            return buffer[:int(np.prod(self.shapes[0]))]
        return buffer


class Plan:
    """What every PE replays: the slots of the graph's values and its kernel calls and buckets
    in the graph's order (a bucket where its last member stands)."""

    def __init__(self, graph: StepGraph, kernels: dict, flops_per_s: float, costs: CostModel):
        self.graph = graph
        self.slot: dict[str, int] = {}
        shapes: dict[str, tuple[int, ...]] = {}
        for v in graph.persistent + graph.inputs:
            self.slot[v.name] = len(self.slot)
            shapes[v.name] = v.shape
        per_flop = 1.0 / (flops_per_s * costs.instruction)
        self.steps: list[KernelCall | Bucket] = []
        members: dict[tuple, list] = {}
        last: dict[tuple, int] = {}
        parts: dict[str, list[tuple[int, int]]] = {}
        for i, op in enumerate(graph.ops):
            self.slot[op.name] = len(self.slot)
            shapes[op.name] = op.shape
            if op.op == "get":
                parts.setdefault(op.inputs[0], []).append((op.attrs["index"], self.slot[op.name]))
            elif op.op in COLLECTIVES:
                key = (op.op, op.attrs["group"], op.attrs["bucket"])
                members.setdefault(key, []).append(op)
                last[key] = i
        buckets = {i: key for key, i in last.items()}
        gathers = 0
        for i, op in enumerate(graph.ops):
            if op.op in COLLECTIVES:
                if i in buckets:
                    key = buckets[i]
                    ops = members[key]
                    if key[0] != "allreduce" and len(ops) > 1:
                        raise ValueError(f"a {key[0]} takes one value, not the bucket {key[2]} of {len(ops)}")
                    self.steps.append(Bucket(
                        f"{key[0]} {key[1]} bucket {key[2]}", len(self.steps), key[1],
                        key[0] != "all_gather" and ops[0].attrs.get("reduce", "mean") == "mean",
                        tuple(self.slot[o.inputs[0]] for o in ops), tuple(self.slot[o.name] for o in ops),
                        tuple(o.shape for o in ops), np.dtype(ops[0].dtype), key[0],
                        gathers if key[0] == "all_gather" else -1))
                    gathers += key[0] == "all_gather"
                continue
            if op.op == "get":
                continue
            if op.op not in kernels:
                raise ValueError(f"the tensor runtime has no kernel for {op.op!r} ({op.name})")
            kernel = kernels[op.op]
            flops = int(kernel.flops(op.attrs, [shapes[x] for x in op.inputs]))
            instructions = round(flops * per_flop)
            if op.op in TRANSFERS:  # bytes to or from the host, one link away: the link's byte time
                moved = int(np.prod(op.shape)) * np.dtype(op.dtype).itemsize
                instructions = round(moved * costs.byte_one_way / costs.instruction)
            self.steps.append(KernelCall(op.name, op.op, kernel.run, op.attrs, tuple(self.slot[x] for x in op.inputs),
                                         self.slot[op.name], tuple(parts.get(op.name, ())), flops, instructions,
                                         len(self.steps)))
        self.size = len(self.slot)
        self._plan_memory()
        self.urgent = self._urgent()
        self.gathers = gathers
        self.gates = self._gates()

    def _gates(self) -> dict[int, int]:
        """ZeRO-3's prefetch, as DeepSpeed's: the parameters one op reads (a LayerNorm's weight
        and bias, a linear layer's weight and bias) are gathered one after the other, and the
        next op's are gathered while they are in use, no sooner; so a PE that runs ahead does
        not gather every parameter before it needs them. Returns, for each all-gather whose
        result is read, the slot whose first read marks it in use (the gathered value, or the
        reshape of it that the step reads), by ordinal; sets `after[k]`, the all-gather whose
        result must be in use before all-gather k starts (-1: none)."""
        first_reader: dict[int, int] = {}  # slot -> the plan index of its first reader
        for i, s in enumerate(self.steps):
            for slot in s.inputs:
                first_reader.setdefault(slot, i)
        gates, group, self.after = {}, [], []
        for s in self.steps:
            if type(s) is not Bucket or s.kind != "all_gather":
                continue
            slot = s.outputs[0]
            view = self.steps[first_reader[slot]] if slot in first_reader else None
            if self.readers[slot] == 1 and type(view) is KernelCall and view.op == "reshape":
                slot = view.output
            if self.readers[slot]:
                gates[slot] = s.ordinal
            reader = first_reader.get(slot, -1 - s.ordinal)  # unread: a group of its own
            if group and group[-1][1] != reader:  # a new op's parameters: after the last op's are in use
                self.after.append(group[-1][0])
            else:
                self.after.append(self.after[-1] if group else -1)
            group.append((s.ordinal, reader))
        return gates

    def _urgent(self) -> frozenset[int]:
        """The plan's steps that run before any other ready kernel: the collectives (a
        collective's turns, starting it and taking its peers' parts, come before any op's) and
        the `reshape`s that only flatten a value for one (so a collective starts as soon as the
        op that fills it has run, as DDP's and DeepSpeed's gradient hooks launch a bucket's
        reduction from the backward op that fills it)."""
        made_by = {s.output: i for i, s in enumerate(self.steps) if type(s) is KernelCall}
        out = set()
        for i, s in enumerate(self.steps):
            if type(s) is not Bucket:
                continue
            out.add(i)
            for slot in set(s.inputs):
                flatten = made_by.get(slot)
                if flatten is not None and self.steps[flatten].op == "reshape" and self.readers[slot] == 1:
                    out.add(flatten)
        return frozenset(out)

    def priority(self, index: int) -> int:
        """The scheduling priority of the task of plan step `index` (the smallest runs first):
        the plan's order, the urgent steps first (`_urgent`)."""
        return index - len(self.steps) if index in self.urgent else index

    def _plan_memory(self) -> None:
        """What memory accounting needs: each slot's category, how many steps read it (it is
        dropped after the last), the slots kept past the step (outputs and updates), and the
        kernels that update a persistent value in place (their output takes the place of an
        input that dies there, as an optimizer's in-place update)."""
        graph = self.graph
        params = frozenset(v.name for v in graph.params)
        states = frozenset(v.name for v in graph.states)
        names = sorted(self.slot, key=self.slot.__getitem__)
        self.category = [category_of(name, params, states) for name in names]
        self.readers = [0] * self.size
        for s in self.steps:
            for i in set(s.inputs):
                self.readers[i] += 1
        self.kept = [False] * self.size
        for name in (*graph.outputs, *graph.updates.values()):
            self.kept[self.slot[name]] = True
        kept = self.kept
        self.in_place = frozenset(s.output for s in self.steps if type(s) is KernelCall
                                  and any(kept[slot] for _, slot in s.parts))
        self.accumulating = self.accumulating_adds()
        self.host = [False] * self.size  # held in the host store (tensor-offload), not on the device
        for op in graph.ops:
            if op.op == "fetch":
                self.host[self.slot[op.inputs[0]]] = True
            elif op.op == "evict":
                self.host[self.slot[op.name]] = True
        self.fetches = frozenset(s.output for s in self.steps if type(s) is KernelCall and s.op == "fetch")
        self.lazy = self._lazy()

    def _lazy(self) -> dict[int, int]:
        """The kernel calls that read only the step's persistent values and inputs (directly or
        through other such calls), and that only kernel calls read: slot -> plan index. Each
        runs when a reader needs it, not when its task comes (a PE that waits on a collective
        would otherwise run ahead into, say, the optimizer's reshapes and shards of every
        parameter and hold them all step), as a framework takes such views at their use."""
        given = {self.slot[v.name] for v in (*self.graph.persistent, *self.graph.inputs)}
        collective_reads = {i for s in self.steps if type(s) is Bucket for i in s.inputs}
        lazy: dict[int, int] = {}
        for i, s in enumerate(self.steps):
            if type(s) is KernelCall and not s.parts and s.op not in TRANSFERS and self.readers[s.output] \
                    and not self.kept[s.output] and s.output not in collective_reads \
                    and all(x in given or x in lazy for x in s.inputs):
                lazy[s.output] = i
        return lazy

    def accumulating_adds(self) -> dict[int, int]:
        """The kernel calls that write into their first input (to that input's slot): the `add`s
        that sum a parameter's gradient contributions (a tied weight's two, a pipeline's
        micro-batches'), as a framework accumulates `.grad` in place (the running sum, the
        contribution and a new sum never coexist), and the GELU's backward, into the gradient
        it reads (the MLP's two 4sbh gradients never coexist). That input must be an array no
        other value shares (`owned`) of the output's shape and dtype; whether it dies at the
        call is checked when it runs. Called again once a pipeline's sends count as readers."""
        values = {v.name: v for v in (*self.graph.persistent, *self.graph.inputs, *self.graph.ops)}
        calls = {s.output: s for s in self.steps if type(s) is KernelCall}
        names = sorted(self.slot, key=self.slot.__getitem__)

        def owned(slot: int) -> bool:
            call = calls.get(slot)
            if call is None or self.kept[slot]:
                return False
            if call.op == "reshape":  # a view of its input, alone if nothing else reads that
                return self.readers[call.inputs[0]] == 1 and owned(call.inputs[0])
            return call.op in FRESH

        out = {}
        for s in self.steps:
            if type(s) is not KernelCall or s.op not in INTO or not s.inputs:
                continue
            if s.op == "add" and self.category[s.inputs[0]] != "gradients":
                continue
            x, z = values[names[s.inputs[0]]], values[names[s.output]]
            if owned(s.inputs[0]) and self.readers[s.inputs[0]] == 1 and x.shape == z.shape and x.dtype == z.dtype \
                    and all(values[names[i]].dtype == z.dtype for i in s.inputs):
                out[s.output] = s.inputs[0]
        return out


class TensorTask(Task):
    """A task of a tensor step. `priority` orders the PE's ready queue (pam.ready: the plan's
    order, or a pipeline stage's schedule); in a pipeline stage, `order` is its place in the
    stage's schedule, `after` the place of the one it runs after (-1: none), and `action` the
    schedule's action it is part of (hpgrem.ir.tensor.schedule.Action)."""

    __slots__ = ("priority", "order", "after", "action")
    starves = False  # the priorities decide; the queue is never turned round

    def __init__(self, proc, args: tuple, priority: int) -> None:
        super().__init__(proc, args, None, NO_SPAN)
        self.priority = priority
        self.order = self.after = -1
        self.action = None

    def in_schedule(self, order: int, action) -> TensorTask:
        """This task at place `order` of a pipeline stage's schedule, part of `action`."""
        self.priority = self.order = order
        self.after = order - 1
        self.action = action
        return self


class OpTask(TensorTask):
    """The task of one kernel call (`args` = (the KernelCall,))."""

    __slots__ = ()

    def describe(self, names=None) -> str:
        """`tensor matmul h.0.attn.qkv` (and in a pipeline stage `(forward mb 1 chunk 0)`)."""
        where = "" if self.action is None else f" ({self.action.label()})"
        return f"tensor {self.args[0].op} {self.args[0].name}{where}"


class CollectiveTask(TensorTask):
    """The task of one bucket's all-reduce on one PE; `stage` is how far its protocol is
    (pam.tensor.collectives), `buffer` the bucket flattened."""

    __slots__ = ("stage", "buffer", "chunks")

    def __init__(self, proc, bucket: Bucket, priority: int) -> None:
        super().__init__(proc, (bucket,), priority)
        self.reset()

    def reset(self) -> None:
        self.stage = -1
        self.buffer = None
        self.chunks = None
        self.waits = None

    def describe(self, names=None) -> str:
        where = "" if self.action is None else f" ({self.action.label()})"
        return f"tensor {self.args[0].name}{where}"


class P2PTask(TensorTask):
    """A pipeline stage's send or recv (`args` = (the pam.tensor.pipeline.Step,))."""

    __slots__ = ()

    def describe(self, names=None) -> str:
        return f"tensor {self.args[0].action.text()}"


@dataclass(slots=True)
class Clock:
    """What one PE spent in a step beside the loop itself: kernels and collectives, as
    instructions charged (virtual time) and as wall seconds."""

    compute_instr: int = 0
    comm_instr: int = 0
    kernel_wall: float = 0.0
    comm_wall: float = 0.0
    kernels: int = 0
    collectives: int = 0
    reduced_bytes: int = 0
    pipeline_instr: int = 0  # a pipeline stage's forward and backward kernels
    pipeline_start: float = -1.0  # the PE's clock when its first scheduled task began
    pipeline_end: float = 0.0  # the PE's clock when its last backward had run (the pipeline's flush)
    flushed: bool = False


class Replica:
    """The step graph on one PE: its slots, its tasks (made once) and its persistent values."""

    def __init__(self, plan: Plan, pe, members: dict[str, tuple[int, ...]]) -> None:
        self.plan = plan
        self.pe = pe
        self.members = members  # group name -> the PEs of this PE's group of that name
        self.slots: list[Var] = []
        self.tasks: list[Task] = []
        self.persistent: dict[str, np.ndarray] = {}
        self.round = 0  # steps started here: names a step's collective parts
        self.clock = Clock()
        self.meter = MemoryMeter()
        self.release = True  # drop dead values (False: keep all until the step ends, for tests)
        self.room_var: Var | None = None  # fetches wait on it for room under the device budget
        self.in_flight = 0  # collectives begun and not finished: they will free memory
        self.gathered = 0  # all-gathers finished in this step
        self.opened = bytearray()  # per all-gather: its result is in use (Plan._gates)
        self.gather_waits: dict[int, Var] = {}  # an all-gather waiting for its turn (by ordinal): its variable
        self.pending: list[int] = []  # per slot: the steps still to read it in this step
        self.turns: list[Var] = []  # a pipeline stage: per scheduled task, bound once it has run

    def start(self, feeds: dict[str, np.ndarray]) -> None:
        """Fresh variables for a new step, the persistent values and `feeds` bound, and every
        task pushed (the PE's queue orders them by priority)."""
        plan = self.plan
        self.round += 1
        self.clock = Clock()
        slots = self.slots = [Var() for _ in range(plan.size)]
        self.meter.reset()
        self.room_var, self.in_flight = None, 0
        self.gathered, self.gather_waits = 0, {}
        self.opened = bytearray(plan.gathers)
        self.pending = list(plan.readers)
        self.turns = [Var() for t in self.tasks if t.order >= 0]
        for name, value in (*self.persistent.items(), *feeds.items()):
            slot = plan.slot[name]
            slots[slot].val = value
            self.meter.alloc(plan.category[slot], nbytes(value), plan.host[slot])
        for t in self.tasks:
            if type(t) is CollectiveTask:
                t.reset()
            self.pe.push(t)

    def finish(self) -> None:
        """After the step: the persistent values become their updates."""
        slots, slot = self.slots, self.plan.slot
        for name, new in self.plan.graph.updates.items():
            self.persistent[name] = slots[slot[new]].val

    def value(self, name: str):
        return self.slots[self.plan.slot[name]].val

    def bind(self, slot: int, value) -> None:
        self.pe.bind(self.slots[slot], value)

    def produced(self, slot: int, value) -> None:
        """Account `value`, just bound to `slot`; a value nothing reads nor keeps is dropped."""
        plan = self.plan
        self.meter.alloc(plan.category[slot], nbytes(value), plan.host[slot])
        if not plan.readers[slot] and not plan.kept[slot]:
            self.drop(slot)

    def consumed(self, inputs: tuple[int, ...]) -> None:
        """A step has read `inputs`: each one it was the last reader of is dropped."""
        pending, kept, gates = self.pending, self.plan.kept, self.plan.gates
        for i in set(inputs):
            if i in gates and pending[i] == self.plan.readers[i]:
                self.in_use(gates[i])
            pending[i] -= 1
            if not pending[i] and not kept[i]:
                self.drop(i)

    def drop(self, slot: int) -> None:
        """The value of `slot` is dead: uncounted, and released unless the runtime keeps
        every value for inspection (`release` false)."""
        var = self.slots[slot]
        self.meter.free(self.plan.category[slot], nbytes(var.val), self.plan.host[slot])
        if self.release:
            var.val = None

    def may_gather(self, ordinal: int) -> bool:
        """Whether all-gather `ordinal` may start: one at a time, in the plan's order, and the
        parameters of the op before its own in use (Plan._gates)."""
        after = self.plan.after[ordinal]
        return self.gathered >= ordinal and (after < 0 or self.opened[after])

    def gather_turn(self) -> None:
        """An all-gather has finished, or a gathered parameter is in use: the next looks again."""
        var = self.gather_waits.get(self.gathered)  # the only one that may start now
        if var is not None and self.may_gather(self.gathered):
            del self.gather_waits[self.gathered]
            self.pe.bind(var, True)

    def in_use(self, ordinal: int) -> None:
        """All-gather `ordinal`'s result is in use."""
        self.opened[ordinal] = 1
        self.gather_turn()

    def waits_for_turn(self, task: TensorTask, waits: list) -> list:
        """`waits` with, in a pipeline stage, the turn of the task scheduled before `task`."""
        if task.after >= 0 and self.turns[task.after].val is None:
            waits.append(self.turns[task.after])
        return waits

    def room(self) -> Var:
        """What a fetch held back by the device budget waits on: bound when an op has run."""
        if self.room_var is None:
            self.room_var = Var()
        return self.room_var

    def made_room(self) -> None:
        """An op has run (and perhaps freed memory): the fetches held back look again."""
        if self.room_var is not None:
            var, self.room_var = self.room_var, None
            self.pe.bind(var, True)


class TensorRuntime:
    """Loads a training step (a tensor-dialect module, or a StepGraph) onto PEs. `flops_per_s`
    is each PE's kernel rate; `groups` is the layout: for each group name of the graph's
    collectives, the PEs partitioned into groups of that name; `comms` maps a group (its PE
    numbers) to its MPI sub-communicator under mpiexec, None in one process (parts then travel
    as messages). `release` false keeps every value of a step until it ends (to inspect them);
    the memory figures are the same either way. `device_budget` (bytes) is the back-pressure of
    offloading: a `fetch` runs only when the device's live bytes leave room for its result, or
    when nothing else is ready to run nor any collective in flight (so a step never waits
    forever)."""

    batch = 1  # a kernel is a large step: a simulated PE looks at its messages after each
    counters = ("kernels", "collectives")

    def __init__(self, module, counting: bool = False, *, kernels: dict | None = None,
                 flops_per_s: float = T800_FLOPS, costs: CostModel = DEFAULT, comms: dict | None = None,
                 groups: dict[str, tuple[tuple[int, ...], ...]] | None = None, feeds: dict | None = None,
                 release: bool = True, program: list | None = None, device_budget: int | None = None):
        if kernels is None:
            from pam.tensor.kernels import KERNELS as kernels
        if not flops_per_s > 0:
            raise ValueError(f"flops_per_s must be positive, got {flops_per_s!r}")
        self.graph = step_graph(module)
        self.plan = Plan(self.graph, kernels, flops_per_s, costs)
        self.program = None  # a pipeline stage's action list, compiled (pam.tensor.pipeline)
        self.received = frozenset(x for a in program or () if a.kind == "recv" for x in a.values)  # not fed
        if program is not None:
            from pam.tensor.pipeline import compile_program

            self.program = compile_program(self.plan, program)
            for s in self.program:
                if s.action.kind == "send":  # a send reads its values: they live until it
                    for i in s.slots:
                        self.plan.readers[i] += 1
            # a simulated receiver may hold a sent array itself: never add into one
            self.plan.accumulating = self.plan.accumulating_adds()
        self.flops_per_s = flops_per_s
        self.costs = costs
        self.counting = counting
        self.comms = comms
        self.groups = groups or {}
        self.feeds = feeds
        self.release = release
        self.device_budget = device_budget
        self.replicas: dict[int, Replica] = {}
        self.steps: dict[int, dict] = {}

    def load(self, pe, timeout: float | None = None) -> dict:
        replica = self.replicas[pe.number] = Replica(self.plan, pe, self._members(pe.number))
        replica.release = self.release
        pe.order_by_priority()  # the plan's order (or the stage's schedule), whatever wakes when
        counting = self.counting
        counters = pe.stats.counters
        in_place_outputs, accumulating = self.plan.in_place, self.plan.accumulating
        budget, fetches = self.device_budget, self.plan.fetches
        per_flop = 1.0 / (self.flops_per_s * self.costs.instruction)
        plan_steps = self.plan.steps
        lazy = self.plan.lazy if self.program is None else {}
        # the PE's virtual clock, for a pipeline's bubble (under MPI, its instructions)
        now = (lambda: pe.net.now()) if pe.net is not None and self.comms is None \
            else (lambda: pe.instructions * self.costs.instruction)

        def looks(task: TensorTask) -> None:
            """The bubble's start: when a pipeline stage's first task first looks."""
            if task.order == 0 and replica.clock.pipeline_start < 0:
                replica.clock.pipeline_start = now()

        def flush() -> None:
            """The bubble's flush: the first time, the stage's clock now."""
            if not replica.clock.flushed:
                replica.clock.flushed = True
                replica.clock.pipeline_end = now()

        def scheduled(task: TensorTask) -> None:
            """A pipeline stage's task runs: the bubble's flush is when the first task of an
            action that is neither a forward nor a backward runs (or the last task has run)."""
            kind = task.action.kind
            if kind in COMPUTE and kind not in ("forward", "backward"):
                flush()

        def turn_done(task: TensorTask) -> None:
            """A pipeline stage's task has run: the next in its schedule may."""
            if task.order >= 0:
                if task.order == len(replica.turns) - 1:
                    flush()
                pe.bind(replica.turns[task.order], True)

        @declare("tensor op", 1, OP_COST, key="tensor-op")
        def op(task: OpTask):
            k = task.args[0]
            slots = replica.slots
            looks(task)
            unbound = replica.waits_for_turn(task, [slots[i] for i in k.inputs if slots[i].val is None and i not in lazy])
            if unbound:
                replica.made_room()  # a held-back fetch may be what this op waits for
                return WaitAll(unbound)
            if budget is not None and k.output in fetches and (pe.ready or replica.in_flight) \
                    and replica.meter.total + nbytes(slots[k.inputs[0]].val) > budget:
                replica.meter.stalls += 1  # back-pressure: other work first, a fetch when it fits
                return WaitAll([replica.room()])
            if task.order >= 0:
                scheduled(task)
                if task.action.kind in ("forward", "backward"):
                    replica.clock.pipeline_instr += k.instructions
            run_kernel(k)
            turn_done(task)
            return None

        def run_kernel(k: KernelCall) -> None:
            slots = replica.slots
            clock = replica.clock
            for i in k.inputs:
                if slots[i].val is None and i in lazy:  # made now, for this reader (Plan._lazy)
                    run_kernel(plan_steps[lazy[i]])
            began = perf_counter()
            accumulate = k.output in accumulating and replica.pending[k.inputs[0]] == 1
            value = INTO[k.op](*[slots[i].val for i in k.inputs]) if accumulate and replica.release \
                else k.run(k.attrs, *[slots[i].val for i in k.inputs])
            clock.kernel_wall += perf_counter() - began
            pe.charge(k.instructions)
            clock.compute_instr += k.instructions
            clock.kernels += 1
            if counting:
                counters["kernels"] += 1
            in_place = k.output in in_place_outputs or (
                k.op == "reshape" and value.base is not None and replica.pending[k.inputs[0]] == 1)
            if in_place or accumulate:  # the output takes the place of an input that dies here
                replica.consumed(k.inputs)
            replica.bind(k.output, value)
            replica.produced(k.output, value)
            for index, slot in k.parts:
                replica.bind(slot, value[index])
                replica.produced(slot, value[index])
            if not (in_place or accumulate):
                replica.consumed(k.inputs)
            replica.made_room()

        collective = self._collective(replica, pe, per_flop, scheduled, turn_done)

        plan = self.plan
        made_by_readers = set(lazy.values())  # lazy kernels have no task: their readers run them
        replica.tasks = [CollectiveTask(collective, s, plan.priority(i)) if type(s) is Bucket
                         else OpTask(op, (s,), plan.priority(i))
                         for i, s in enumerate(plan.steps) if i not in made_by_readers]
        steps = self.steps[pe.number] = {"tensor-op": op, "tensor-collective": collective,
                                         "tensor-main": self._main(replica)}
        if self.program is not None:
            steps.update(self._schedule(replica, pe, looks, scheduled, turn_done))
        return steps

    def _collective(self, replica: Replica, pe, per_flop: float, scheduled, turn_done):
        """The step of a collective's task on `pe`: it waits for its inputs (and, for ZeRO-3's
        all-gathers, its turn: Plan._gates), starts the collective and takes its peers' parts
        over the Net (SimAllReduce) or from MPI (MPIAllReduce, polled by a PE hook), then binds
        its outputs."""
        counting, counters = self.counting, pe.stats.counters
        gated = frozenset(self.plan.gates.values())
        allreduce = (SimAllReduce if self.comms is None else MPIAllReduce)(replica, pe, per_flop, self.comms)

        def launch(task: CollectiveTask, b: Bucket) -> None:
            """Start the collective of `b`, whose inputs exist: its buffer made, its first parts
            sent (or its MPI request started)."""
            slots = replica.slots
            clock = replica.clock
            began = perf_counter()
            group = replica.members[b.group]
            task.buffer = b.buffer([slots[i].val for i in b.inputs], group.index(pe.number), len(group))
            replica.meter.alloc("communication", task.buffer.nbytes)
            replica.in_flight += 1
            replica.consumed(b.inputs)
            clock.collectives += 1
            clock.reduced_bytes += task.buffer.nbytes
            if counting:
                counters["collectives"] += 1
            task.stage = 0
            allreduce.begin(task, b)
            clock.comm_wall += perf_counter() - began

        @declare("tensor collective", 1, COLLECTIVE_COST, key="tensor-collective")
        def collective(task: CollectiveTask):
            b = task.args[0]
            slots = replica.slots
            clock = replica.clock
            if task.stage < 0:
                unbound = replica.waits_for_turn(task, [slots[i] for i in b.inputs if slots[i].val is None])
                if unbound:
                    return WaitAll(unbound)
                if b.ordinal >= 0 and not replica.may_gather(b.ordinal):  # prefetch: Plan._gates
                    return WaitAll([replica.gather_waits.setdefault(b.ordinal, Var())])
                if task.order >= 0:
                    scheduled(task)
                launch(task, b)
            began = perf_counter()
            waiting = allreduce.advance(task, b)
            if waiting is not None:
                clock.comm_wall += perf_counter() - began
                return waiting
            group = replica.members[b.group]
            ranks = len(group)
            whole = task.buffer
            buffer = b.result(whole, group.index(pe.number), ranks)
            if b.mean and ranks > 1:
                buffer /= ranks
            views = buffer is whole or buffer.base is whole
            if views:  # the outputs are views of the buffer: counted from here as they are bound
                replica.meter.free("communication", whole.nbytes)
            offset = 0
            for i, shape in zip(b.outputs, b.shapes):
                n = int(np.prod(shape))
                part = buffer[offset:offset + n].reshape(shape)
                replica.bind(i, part)
                replica.produced(i, part)
                offset += n
            if not views:  # a reduce-scatter's chunk is a copy: both lived until here
                replica.meter.free("communication", whole.nbytes)
            replica.in_flight -= 1
            if b.kind == "all_gather":
                replica.gathered += 1
                if b.ordinal not in gated:  # nothing reads it: done is in use
                    replica.opened[b.ordinal] = 1
                replica.gather_turn()
            replica.made_room()
            task.buffer = task.chunks = None
            clock.comm_wall += perf_counter() - began
            turn_done(task)
            return None

        return collective

    def _schedule(self, replica: Replica, pe, looks, scheduled, turn_done) -> dict:
        """A pipeline stage: its tasks in the order of its action list (pam.tensor.pipeline),
        each after the one before it; a send goes out without waiting, a recv waits until its
        message is in the inbox (pam.tensor.p2p). Returns the steps of sends and recvs."""
        from pam.tensor.p2p import MPIPointToPoint, SimPointToPoint

        stages = replica.members.get("pp", (pe.number,))
        p2p = (SimPointToPoint if self.comms is None else MPIPointToPoint)(pe, (self.comms or {}).get(stages), stages)

        @declare("tensor send", 1, OP_COST, key="tensor-send")
        def send(task: P2PTask):
            s = task.args[0]
            waits = replica.waits_for_turn(task, [])
            if waits:
                return WaitAll(waits)
            scheduled(task)
            slots = replica.slots
            values = tuple(slots[i].val for i in s.slots)
            p2p.send(stages[s.peer], (replica.round, s.action.values[0]), values)
            replica.consumed(s.slots)
            turn_done(task)
            return None

        @declare("tensor recv", 1, OP_COST, key="tensor-recv")
        def recv(task: P2PTask):
            s = task.args[0]
            key = (replica.round, s.action.values[0])
            looks(task)
            waits = replica.waits_for_turn(task, [])
            if waits:
                return WaitAll(waits)
            values = p2p.take(key)
            if values is None:
                return [p2p.slot(key)]
            scheduled(task)
            for i, value in zip(s.slots, values):
                pe.bind(replica.slots[i], value)
                replica.produced(i, value)
            turn_done(task)
            return None

        by_index = {t.args[0].index if type(t) is OpTask else t.args[0].key: t for t in replica.tasks}
        tasks = []
        for s in self.program:
            if s.action.kind in COMPUTE:
                tasks += [by_index[i].in_schedule(len(tasks) + n, s.action) for n, i in enumerate(s.items)]
            else:
                tasks.append(P2PTask(send if s.action.kind == "send" else recv, (s,), 0)
                             .in_schedule(len(tasks), s.action))
        replica.tasks = tasks
        return {"tensor-send": send, "tensor-recv": recv}

    def _members(self, pe: int) -> dict[str, tuple[int, ...]]:
        """This PE's group of each name the graph's collectives use."""
        members = {}
        names = {s.group for s in self.plan.steps if type(s) is Bucket}
        if self.program is not None and any(s.action.kind in ("send", "recv") for s in self.program):
            names.add("pp")
        for name in names:
            if name not in self.groups:
                raise ValueError(f"the graph's collectives name the group {name!r}, which the layout does not define")
            mine = [g for g in self.groups[name] if pe in g]
            if len(mine) != 1:
                raise ValueError(f"PE {pe} is in {len(mine)} groups {name!r} of the layout, not one")
            members[name] = tuple(mine[0])
        return members

    def _main(self, replica: Replica):
        pe = replica.pe
        loss = self.graph.outputs[0]

        @declare("tensor step", 1, OP_COST, key="tensor-main")
        def main(task: Task):
            value = replica.slots[self.plan.slot[loss]]
            if value.val is None:
                return WaitAll([value])
            pe.bind(task.args[0], float(value.val))
            return None
        return main

    def entry_task(self, pe, outputs: list):
        """How the machine runs a tensor module: one step on `pe` with the `feeds` given at
        construction (every parameter, state and input by name), its first output bound to the
        graph's first output (the loss). Training runs through backend.tensor.job.TensorJob."""
        if self.feeds is None:
            raise ValueError("a tensor step needs its parameters and inputs: run it with backend.tensor.job.TensorJob")
        self.replicas[pe.number].start(self.feeds)
        return TensorTask(self.steps[pe.number]["tensor-main"], (outputs[0],), len(self.plan.steps))

    def show(self, value, names: dict) -> str:
        value = value.val if type(value) is Var else value
        return repr(value)


__all__ = ["T800_FLOPS", "Plan", "Replica", "TensorRuntime"]
