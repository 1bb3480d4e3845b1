"""A pipeline stage's step: its action list (hpgrem/ir/tensor/schedule.py) run in order.

One task per PE, the *action runner*, walks the list: each kernel of a compute action is one
step of it (charged its FLOPs, as an op task is), a bucket's collective is handed to its
collective task and waited for, a send goes out without waiting, and a recv waits until its
message is in the inbox (pam.tensor.p2p). The list is run exactly as given, on simulated PEs
and on MPI ranks alike: the schedule (GPipe, 1F1B, interleaved), not the data flow, decides
what a stage does next, so its bubble and its memory are the schedule's.

Each PE's `Clock` records, for the bubble: the instructions of its forward and backward
kernels, and the virtual time its last backward ended (the pipeline's flush).
"""

from __future__ import annotations

from dataclasses import dataclass

from hpgrem.ir import NO_SPAN
from hpgrem.ir.tensor.schedule import COMPUTE, Action
from pam.step import WaitAll, declare
from pam.task import Task

ACTION_COST = 10  # instructions of one turn of the runner beside a kernel's own FLOPs


@dataclass(frozen=True, slots=True)
class Step:
    """One action with what it touches: the plan's steps of a compute action, the slots of the
    values a send or recv moves, and the PE at the other end."""

    action: Action
    items: tuple[int, ...]
    slots: tuple[int, ...]
    peer: int


def compile_program(plan, program: list[Action]) -> list[Step]:
    """The actions as indexes into `plan` (pam.tensor.runtime.Plan); ValueError if an action
    names a value the plan lacks or the list leaves a kernel out."""
    from pam.tensor.runtime import Bucket

    names = {slot: name for name, slot in plan.slot.items()}
    index: dict[str, int] = {}
    for i, s in enumerate(plan.steps):
        for name in ([names[slot] for slot in s.outputs] if type(s) is Bucket else [s.name]):
            index[name] = i
    out, used = [], set()
    for a in program:
        if a.kind in COMPUTE:
            items = []
            for name in a.values:
                i = index.get(name)
                if i is None and name not in plan.slot:
                    raise ValueError(f"the action {a.text()} names {name!r}, which the stage's graph lacks")
                if i is not None and i not in used:
                    used.add(i)
                    items.append(i)
            out.append(Step(a, tuple(items), (), -1))
        else:
            missing = [x for x in a.values if x not in plan.slot]
            if missing:
                raise ValueError(f"the action {a.text()} moves {missing[0]!r}, which the stage's graph lacks")
            out.append(Step(a, (), tuple(plan.slot[x] for x in a.values), a.peer))
    items = [list(s.items) for s in out]
    for i in reversed(range(len(plan.steps))):  # a consumer placed before its producer is sought
        if i not in used:
            _place(plan, i, items)
            used.add(i)
    return [Step(s.action, tuple(run), s.slots, s.peer) for s, run in zip(out, items)]


def _place(plan, step: int, items: list[list[int]]) -> None:
    """A kernel that a later lowering added (a recomputation, an offload's fetch) runs in the
    action of its first reader, just before it; one that nothing reads (an offload's evict) in
    the action of its input's producer, just after it; ValueError if neither is there."""
    made = set(_outputs(plan.steps[step]))
    for run in items:
        for k, j in enumerate(run):
            if made & set(plan.steps[j].inputs):
                run.insert(k, step)
                return
    needs = set(plan.steps[step].inputs)
    for run in items:
        for k in reversed(range(len(run))):
            if needs & set(_outputs(plan.steps[run[k]])):
                run.insert(k + 1, step)
                return
    raise ValueError(f"the stage's action list never runs {plan.steps[step].name!r}")


def _outputs(call) -> tuple[int, ...]:
    from pam.tensor.runtime import Bucket

    if type(call) is Bucket:
        return tuple(call.outputs)
    return (call.output, *(slot for _, slot in call.parts))


class ActionTask(Task):
    """The runner of one PE's action list: `at` is the action, `item` the step within it."""

    __slots__ = ("at", "item", "handed", "steps")

    def __init__(self, proc, steps: list[Step]) -> None:
        super().__init__(proc, (), None, NO_SPAN)
        self.at = self.item = 0
        self.handed = False
        self.steps = steps

    def describe(self, names=None) -> str:
        """The action it is at (a trace's rewrite shows it: `tensor forward mb 1 chunk 0 (14 ops)`)."""
        steps = self.steps
        return f"tensor {steps[self.at].action.text()}" if self.at < len(steps) else "tensor actions done"


def runner(replica, pe, steps: list[Step], run_kernel, collectives: dict, p2p, stages: tuple[int, ...],
           now) -> ActionTask:
    """The action runner of `replica` on `pe`: `run_kernel(call)` runs one kernel call whose
    inputs exist, `collectives` maps a bucket's plan index to its task, `p2p` moves messages to
    the PEs `stages` (stage -> PE), `now()` is the PE's clock in seconds."""
    plan = replica.plan

    @declare("tensor action", 1, ACTION_COST, key="tensor-action")
    def act(task: ActionTask):
        slots = replica.slots
        if replica.clock.pipeline_start < 0:
            replica.clock.pipeline_start = now()
        while task.at < len(steps):
            s = steps[task.at]
            kind = s.action.kind
            if kind in COMPUTE:
                if task.item == 0 and kind not in ("forward", "backward") and not replica.clock.flushed:
                    replica.clock.flushed = True
                    replica.clock.pipeline_end = now()
                if task.item < len(s.items):
                    index = s.items[task.item]
                    call = plan.steps[index]
                    if index in collectives:
                        outputs = [slots[i] for i in call.outputs]
                        if not task.handed:
                            task.handed = True
                            collectives[index].reset()
                            pe.push(collectives[index])
                        if any(v.val is None for v in outputs):
                            return WaitAll(outputs)
                        task.handed = False
                    else:
                        unbound = [slots[i] for i in call.inputs if slots[i].val is None]
                        if unbound:
                            return WaitAll(unbound)
                        run_kernel(call)
                        if kind in ("forward", "backward"):
                            replica.clock.pipeline_instr += call.instructions
                    task.item += 1
                    return task
            elif kind == "send":
                values = tuple(slots[i].val for i in s.slots)
                replica.clock.p2p_bytes += p2p.send(stages[s.peer], (replica.round, s.action.values[0]), values)
                replica.consumed(s.slots)
            else:
                values = p2p.take((replica.round, s.action.values[0]))
                if values is None:
                    return [p2p.slot((replica.round, s.action.values[0]))]
                for i, value in zip(s.slots, values):
                    pe.bind(slots[i], value)
                    replica.produced(i, value)
            task.at += 1
            task.item = 0
            if kind in ("send", "recv"):
                return task
        task.at = 0
        return None

    return ActionTask(act, steps)


def bubble(clocks: list, instruction: float) -> float:
    """The pipeline bubble of a step from its stages' clocks (one per stage): the mean over the
    stages of (flush - start - compute) / compute, where the flush is when the last stage ran
    its last backward, the start when the first began, and compute is the stage's own forward
    and backward kernels (Megatron's t_pb / t_id, which is (p - 1) / m for equal stages)."""
    start = min(c.pipeline_start for c in clocks)
    flush = max(c.pipeline_end for c in clocks)
    shares = [(flush - start - c.pipeline_instr * instruction) / (c.pipeline_instr * instruction) for c in clocks]
    return sum(shares) / len(shares)


__all__ = ["ActionTask", "Step", "bubble", "compile_program", "runner"]
