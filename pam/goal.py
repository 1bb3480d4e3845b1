"""PARLOG goals as tasks: how reports write them, and how they travel between PEs."""

from __future__ import annotations

from pam.task import Task
from pam.terms import Struct, Var, deref
from pam.write import write_term


class Goal(Task):
    """A PARLOG goal: `proc` is its relation's (or primitive's) step, `args` its arguments."""

    __slots__ = ()

    def describe(self, names: dict | None = None) -> str:
        proc = self.proc
        args = self.args[:proc.goal_arity]
        if not args:
            return proc.goal_name
        return write_term(Struct(proc.goal_name, args), names)


class GoalKind:
    """Goals travel as their step's key and their arguments."""

    name = "goal"
    task_class = Goal

    def spare(self, goal: Goal) -> bool:
        """Its relation can fan out (the compile-time grain estimate) and it would not just wait
        for an argument on the other PE."""
        proc = goal.proc
        return proc.exportable and all(type(deref(goal.args[k])) is not Var for k in proc.needs)

    def export(self, goal: Goal) -> tuple:
        return goal.args

    def arrive(self, step, args: tuple, site) -> Goal:
        return Goal(step, args, None, site)
