"""Tasks (active nodes, redexes), the kinds they come in, and the groups that detect when the
left side of `&` is done.

A task's `proc` is a step (`pam.step`): the PE loop calls it and reads what it returns. Every
task kind is a subclass of `Task`; the PE loop knows a kind only through the class attribute
`resume_first` and `describe()`. A dialect's runtime tells distribution how to move its kinds
between PEs by registering a `TaskKind` with each PE's `Net`.
"""

from __future__ import annotations

from typing import Protocol


class Task:
    """A task: `proc(self)` steps it; `args` are its arguments; `group` the `&` it belongs to
    (None at top level); `site` the call's source span; `waits` the variables it is suspended
    on (None while runnable)."""

    __slots__ = ("proc", "args", "group", "site", "waits")

    # When a task's time slice is up it goes to the back of the ready queue, so that producers
    # and consumers take turns; a kind that should rather continue first says so here.
    resume_first = False
    # A task left at the back of the queue for FAIR reductions is run first (pam/pe.py), so
    # that no task waits for ever; a kind whose queued tasks are sparks (run by a thief or by
    # their parent's join, never needed before that) says False.
    starves = True

    def __init__(self, proc, args: tuple, group, site) -> None:
        self.proc = proc
        self.args = args
        self.group = group
        self.site = site
        self.waits = None

    def describe(self, names: dict | None = None) -> str:
        """The task as failure and deadlock reports show it; `names` names its variables."""
        return self.proc.goal_name


class TaskKind(Protocol):
    """How distribution moves tasks of one class between PEs; a runtime registers one per PE
    (`Net.add_kind`), so it may hold that PE's state."""

    name: str  # names the kind in SPAWN messages
    task_class: type  # the tasks it moves (exactly this class)

    def spare(self, task) -> bool:
        """May this ready task be sent to another PE now?"""

    def export(self, task):
        """The term that travels for `task` (its unbound variables become global names)."""

    def arrive(self, step, value, site) -> Task:
        """The task rebuilt on the receiving PE from `value`; `step` is the step it had. A
        group it gives the task (a scope the task belongs to on this PE) becomes the parent of
        the stand-in group that reports its end home; usually None."""

    # Optional: `moved(task, dst)`, told where a task was sent (after `export`), for a kind
    # that must reach its tasks later (a call/3 stopping its goals on other PEs).


class Seq:
    """A body plan `P1 & P2 & ...`: each part starts when the one before it has terminated.
    Parts are tasks, lists of parts (started together, as `,` does) or nested Seqs."""

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
