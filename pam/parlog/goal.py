"""PARLOG goals as tasks: how reports write them, and how they travel between PEs."""

from __future__ import annotations

from pam.task import Task
from pam.terms import Struct, Var, deref, mkatom
from pam.parlog.write import write_term

IN_CALL = mkatom("$in_call")  # a goal of a call/3 travels as '$in_call'(PE, Number, Args...)


class Goal(Task):
    """A PARLOG goal: `proc` is its relation's (or primitive's) step, `args` its arguments."""

    __slots__ = ()

    def describe(self, names: dict | None = None) -> str:
        proc = self.proc
        args = self.args[:proc.goal_arity]
        if not args:
            return proc.goal_name
        return write_term(Struct(proc.goal_name, args), names)


# A goal is lifted into a task worth sending away when its estimated work costs at least this
# many messages' worth of time (a message of this many bytes over one link). One measured best
# on fib24 over 16 simulated PEs (speedup 13.8; 13.4 to 13.5 with 2 to 4; 12.3 with 20): a
# higher threshold leaves thieves without work at the end.
LIFT_MESSAGES = 1
LIFT_MESSAGE_BYTES = 100


class GoalKind:
    """Goals travel as their step's key and their arguments."""

    name = "goal"
    task_class = Goal

    def __init__(self, costs=None, subcomputations=None) -> None:
        # the PE's call/3 sub-computations (pam/parlog/subcomp.py): a goal of one travels
        # marked with its name, and belongs to it on the PE it reaches
        self.subcomputations = subcomputations
        if subcomputations is not None:
            from pam.parlog.subcomp import root_of  # it imports this module
            self.root_of = root_of
        # The run-time threshold of node lifting (hpgrem/passes/parlog/lift.py), in instructions.
        self.threshold = 0.0 if costs is None else LIFT_MESSAGES * (
            costs.hop_startup + LIFT_MESSAGE_BYTES * costs.byte_one_way) / costs.instruction

    def spare(self, goal: Goal) -> bool:
        """Its relation can fan out (the compile-time grain estimate), it would not just wait
        for an argument on the other PE, and, where the lift pass found its size, the work
        that size promises outweighs the messages."""
        proc = goal.proc
        if not proc.exportable or not all(type(deref(goal.args[k])) is not Var for k in proc.needs):
            return False
        lift = getattr(proc, "lift", None)
        if lift is None:
            return True
        position, base, cost = lift
        size = deref(goal.args[position])
        return type(size) is not int or cost * base ** min(size, 400) >= self.threshold

    def _root(self, goal: Goal):
        subs = self.subcomputations
        if subs is None or not subs.live:
            return None
        return self.root_of(goal)

    def export(self, goal: Goal):
        root = self._root(goal)
        if root is None:
            return goal.args
        return Struct(IN_CALL, (*self.subcomputations.name(root), *goal.args))

    def moved(self, goal: Goal, dst: int) -> None:
        root = self._root(goal)
        if root is not None:
            root.children.add(dst)

    def arrive(self, step, value, site) -> Goal:
        if type(value) is not Struct:
            return Goal(step, value, None, site)
        home, number, *args = value.args
        goal = Goal(step, tuple(args), None, site)
        self.subcomputations.adopt(goal, (home, number))
        return goal
