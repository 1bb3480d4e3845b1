"""Tasks (active nodes, redexes) and the groups that detect when the left side of `&` is done.

A task's `proc` performs one step of its goal (see `pam.rules`): it returns None when the task
committed and left nothing to run, another Task to run next when it committed and continues, or
a list of variables when it suspends on them. It raises `ProgramFailure` when it fails.
"""

from __future__ import annotations

from pam.terms import Var


class Task:
    """A goal to reduce: `proc(self)` steps it; `args` are its arguments; `group` the `&` it
    belongs to (None at top level); `site` the call's source span; `waits` the variables it is
    suspended on (None while runnable)."""

    __slots__ = ("proc", "args", "group", "site", "waits")

    def __init__(self, proc, args: tuple, group, site) -> None:
        self.proc = proc
        self.args = args
        self.group = group
        self.site = site
        self.waits = None


class Seq:
    """A body plan `P1 & P2 & ...`: each part starts when the one before it has terminated.
    Parts are Tasks, lists of parts (started together, as `,` does) or nested Seqs."""

    __slots__ = ("parts",)

    def __init__(self, parts: list) -> None:
        self.parts = parts


class Placed:
    """A body plan item `Goal @ Where`: the task and the (unevaluated) placement term."""

    __slots__ = ("task", "where")

    def __init__(self, task: Task, where) -> None:
        self.task = task
        self.where = where


class AndGroup:
    """Counts the live tasks descending from the running part of a `Seq`; at zero the next part
    starts, and after the last part the group is finished as one member of its parent. A group
    standing on this PE for one exported member of a group elsewhere has `home` = (PE, number)
    and no parent: when it finishes, the exporter is told."""

    __slots__ = ("count", "parent", "later", "home")

    def __init__(self, parent, later: list, home=None) -> None:
        self.count = 0
        self.parent = parent
        self.later = later
        self.home = home


class _Moved:
    """What a step returns when its task left for another PE (it finishes there)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MOVED"


MOVED = _Moved()


UNSTARTED, STARTED, CANCELLED = 0, 1, 2


class MLTask(Task):
    """An ML evaluation (pam/ml/task.py steps it). `thunk` is the closure a forked task applies to `()`; `result` is
    the variable its outcome binds (None for the program's main task)."""

    __slots__ = ("stack", "value", "exc", "thunk", "result", "state", "pending")

    def __init__(self, proc, thunk, result: Var | None, site, stack=None) -> None:
        super().__init__(proc, (), None, site)
        self.stack = stack if stack is not None else []
        self.value = None
        self.exc = None
        self.thunk = thunk
        self.result = result
        self.state = UNSTARTED
        self.pending = None
