"""A pipeline stage's step: its action list (hpgrem/ir/tensor/schedule.py) as scheduled tasks.

The list is compiled here into the plan's steps it runs (`compile_program`); the runtime
(pam.tensor.runtime, `TensorRuntime._schedule`) makes each kernel, collective, send and recv of
it a task of its own, placed in the PE's priority queue at its place in the list and waiting
for the one before it. So the PE's scheduler runs the list exactly as given, one task (one
rewrite) per op, on simulated PEs and on MPI ranks alike: the schedule (GPipe, 1F1B,
interleaved), not the data flow, decides what a stage does next, so its bubble and its memory
are the schedule's. A send goes out without waiting; a recv waits until its message is in the
inbox (pam.tensor.p2p).

Each PE's `Clock` records, for the bubble: the instructions of its forward and backward
kernels, and the virtual time its last backward ended (the pipeline's flush).
"""

from __future__ import annotations

from dataclasses import dataclass

from hpgrem.ir.tensor.schedule import COMPUTE, Action


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


def bubble(clocks: list, instruction: float) -> float:
    """The pipeline bubble of a step from its stages' clocks (one per stage): the mean over the
    stages of (flush - start - compute) / compute, where the flush is when the last stage ran
    its last backward, the start when the first began, and compute is the stage's own forward
    and backward kernels (Megatron's t_pb / t_id, which is (p - 1) / m for equal stages)."""
    start = min(c.pipeline_start for c in clocks)
    flush = max(c.pipeline_end for c in clocks)
    shares = [(flush - start - c.pipeline_instr * instruction) / (c.pipeline_instr * instruction) for c in clocks]
    return sum(shares) / len(shares)


__all__ = ["Step", "bubble", "compile_program"]
