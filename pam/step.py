"""The step protocol: the one contract between a dialect's compiled code and the machine.

A *step* is a plain function `step(task)` that performs one rewrite of `task` and ends in
exactly one of:

- commit: it returns None (the task is done here: it finished, or it was sent to another PE,
  `Net.export_task`, and finishes there) or the task to run next (usually `task` itself,
  rewritten in place: its first body goal, or an evaluation that paused);
- suspend: it returns a `list` (exactly that class: the PE loop tests it) of the unbound
  variables it waits for; the PE parks the task on them;
- fail: it raises `ProgramFailure`.

What the machine knows about a step is plain function attributes, read in the PE's hot loop
(`proc.cost`) and by distribution, set in one place: `declare`. Every place that makes steps
uses it: the generated PARLOG rule code, the primitives, ML.
"""

from __future__ import annotations

from typing import Protocol


class Step(Protocol):
    """A step function and its metadata."""

    goal_name: str  # the goal's name in reports and traces
    goal_arity: int  # how many of a task's arguments reports show
    cost: int  # T800 instructions of one step (the cost model's unit of virtual time)
    key: str  # names the step on every PE (a task that travels is rebuilt with it)
    exportable: bool  # a task of this step may be sent to another PE (its grain is worth it)
    needs: tuple[int, ...]  # argument positions that must be bound before the task is sent

    def __call__(self, task): ...


def declare(name: str, arity: int, cost: int, *, key: str, exportable: bool = False,
            needs: tuple[int, ...] = ()):
    """A decorator that makes a function a `Step`: it attaches the metadata and returns it."""
    def attach(fn):
        fn.goal_name = name
        fn.goal_arity = arity
        fn.cost = cost
        fn.key = key
        fn.exportable = exportable
        fn.needs = needs
        return fn
    return attach
