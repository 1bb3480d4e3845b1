"""The step protocol: the one contract between a dialect's compiled code and the machine.

A *step* is a plain function `step(task)` that performs one rewrite of `task` and ends in
exactly one of:

- commit: it returns None (the task is done here: it finished, or it was sent to another PE,
  `Net.export_task`, and finishes there) or the task to run next (usually `task` itself,
  rewritten in place: its first body goal, or an evaluation that paused);
- suspend: it returns a `list` (exactly that class: the PE loop tests it) of the unbound
  variables it waits for; the PE parks the task on them until one of them is bound;
- wait for all: it returns `WaitAll(variables)`; the PE parks the task with a count of the
  unbound ones, takes one off as each is bound, and makes the task runnable at zero (no step
  runs in between, so a join of n inputs is not rescanned n times). A variable bound to another
  unbound one is waited for as that one;
- fail: it raises `ProgramFailure`.

A step whose cost depends on its data (a kernel's FLOPs, a copy's length) declares the fixed part
as `cost` and charges the rest as it runs: `pe.charge(instructions)` (pam.pe).

What the machine knows about a step is plain function attributes, read in the PE's hot loop
(`proc.cost`) and by distribution, set in one place: `declare`. Every place that makes steps
uses it: the generated PARLOG rule code, the primitives, ML.
"""

from __future__ import annotations

from typing import Protocol

from pam.terms import Var, deref


class Step(Protocol):
    """A step function and its metadata."""

    goal_name: str  # the goal's name in reports and traces
    goal_arity: int  # how many of a task's arguments reports show
    cost: int  # T800 instructions of one step (the cost model's unit of virtual time)
    key: str  # names the step on every PE (a task that travels is rebuilt with it)
    exportable: bool  # a task of this step may be sent to another PE (its grain is worth it)
    needs: tuple[int, ...]  # argument positions that must be bound before the task is sent

    def __call__(self, task): ...


class WaitAll:
    """What a step returns to wait until every one of `variables` is bound. Parked, it stands
    in the variables' suspension lists for its `task`; `left` counts those still unbound."""

    __slots__ = ("variables", "left", "task")
    waits = None  # in a suspension list it is not a task waiting for one variable (pam.pe.wake)

    def __init__(self, variables) -> None:
        unbound = (deref(v) for v in variables)
        self.variables = list({id(v): v for v in unbound if type(v) is Var}.values())
        self.left = len(self.variables)
        self.task = None

    def __iter__(self):
        """The variables still unbound (what a deadlock report names)."""
        return (v for v in self.variables if v.val is None)


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
