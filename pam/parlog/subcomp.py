"""`call(Goal, Status, Control)` (spec/parlog.md): a sub-computation with its own failure boundary.

The goal runs as the first member of a `SubGroup`, an `&` group whose later part is the step that
binds `Status = succeeded`: the group reaches zero when the goal and every goal descending from
it have terminated, exactly as `&` knows it. Every task of the sub-computation has the group in
its chain of groups, which is how a failure (PE.boundary), a `stop` or a `suspend` finds them. A
watcher task reads the `Control` stream: `stop` discards the sub-computation's tasks (ready,
suspended, held, and the guard computations of its calls) and binds `Status = stopped`;
`suspend` holds its tasks (none runs, woken or not) until `continue` or `stop`. A failure discards them the same way
and binds `Status = failed`. Either way `call/3` then terminates as a member of its caller's group.

Its tasks stay on the PE of the `call/3` (the goal kind does not offer them to other PEs), so a
stopped sub-computation leaves no task anywhere; a goal sent away with `@` is not controlled.
"""

from __future__ import annotations

from pam.errors import ProgramFailure
from pam.parlog.goal import Goal
from pam.parlog.guards import GuardTask, detach
from pam.step import declare
from pam.task import AndGroup, Task
from pam.terms import NIL, Cons, Var, deref, mkatom

SUCCEEDED, FAILED, STOPPED = mkatom("succeeded"), mkatom("failed"), mkatom("stopped")
STOP, SUSPEND, CONTINUE = mkatom("stop"), mkatom("suspend"), mkatom("continue")


class SubGroup(AndGroup):
    """The root group of a sub-computation."""

    __slots__ = ("status", "watcher", "held", "procs", "gate", "ended")

    def __init__(self, parent, later: list, status) -> None:
        super().__init__(parent, later)
        self.status = status
        self.watcher: Task | None = None
        self.held: list[Task] | None = None  # its ready tasks while suspended
        # while suspended, its suspended tasks run the holding step; their own steps are here,
        # and `gate` (bound at `continue`) is what a woken one waits on
        self.procs: dict[Task, object] = {}
        self.gate: Var | None = None
        self.ended = False


def root_of(task: Task) -> SubGroup | None:
    """The innermost sub-computation `task` belongs to."""
    g = task.args[0].caller.group if type(task) is GuardTask else task.group
    while g is not None:
        if type(g) is SubGroup and not g.ended:
            return g
        g = g.parent
    return None


def belongs(task: Task, root: SubGroup) -> bool:
    g = task.args[0].caller.group if type(task) is GuardTask else task.group
    while g is not None:
        if g is root:
            return True
        g = g.parent
    return False


def take(root: SubGroup, ready) -> list[Task]:
    """Take the sub-computation's tasks out of the ready queue, in queue order."""
    mine = [t for t in ready if belongs(t, root)]
    if mine:
        kept = [t for t in ready if not belongs(t, root)]
        ready.clear()
        ready.extend(kept)
    return mine


class ControlTask(Task):
    """The watcher of a call/3's Control stream."""

    __slots__ = ()

    def describe(self, names: dict | None = None) -> str:
        from pam.parlog.write import write_term
        return f"call/3 control {write_term(self.args[1], names)}"


class Subcomputations:
    """The sub-computations of one PE: the `call/3` step, the watcher, and the failure boundary
    (PE.boundary: calling it contains a failure inside a sub-computation)."""

    def __init__(self, pe, call1, guards) -> None:
        self.pe = pe
        self.call1 = call1  # call/1's step: the goal's first task
        self.guards = guards
        self.active = 0  # sub-computations running here (none: nothing to look for)
        pe.boundary = self  # PE.boundary(task, failure): `contain`

        def call3(t):
            return self.start(t)

        def watch(t):
            return self.watch(t)

        def succeed(t):
            self.end(t.args[0], SUCCEEDED, finish=False)

        def held(t):
            g = t.group
            while type(g) is not SubGroup or g.gate is None:
                g = g.parent
            return [g.gate]

        self.call3 = declare("call", 3, 1, key="call/3")(call3)
        self.watch_step = declare("$control", 2, 1, key="$control")(watch)
        self.succeed_step = declare("$succeeded", 1, 1, key="$succeeded")(succeed)
        self.hold_step = declare("$held", 0, 1, key="$held")(held)

    # -- steps ------------------------------------------------------------------------------
    def start(self, t: Task):
        goal, status, control = t.args
        if type(deref(goal)) is Var:
            return [deref(goal)]
        root = SubGroup(t.group, [], status)
        root.later.append(Goal(self.succeed_step, (root,), None, t.site))
        if t.group is not None:
            t.group.count += 1  # the sub-computation stands for this call in its caller's group
        self.active += 1
        root.count = self.pe.start(Goal(self.call1, (goal,), None, t.site), root)
        # the watcher looks at Control now, so that it is suspended on it (and woken first
        # when it is bound) however busy the goal keeps this PE
        watcher = root.watcher = ControlTask(self.watch_step, (root, control), None, t.site)
        waits = self.watch(watcher)
        if waits is not None:
            self.pe.park(watcher, waits)
        return None

    def watch(self, t: Task):
        root, control = t.args
        while not root.ended:
            c = deref(control)
            if type(c) is Var:
                return [c]
            if type(c) is not Cons:
                return None  # `[]` (or anything else): nothing more to obey
            order = deref(c.head)
            if type(order) is Var:
                return [order]
            if order is STOP:
                self.end(root, STOPPED)
            elif order is SUSPEND and root.held is None:
                self.hold(root)
            elif order is CONTINUE and root.held is not None:
                self.release(root)
            control = c.tail
            t.args = (root, control)
        return None

    def hold(self, root: SubGroup) -> None:
        """`suspend`: its ready tasks leave the queue; a suspended one that a binding wakes
        meanwhile waits on the gate instead of running."""
        pe = self.pe
        root.held = take(root, pe.ready)
        root.gate = Var()
        for t in pe.suspended:
            if belongs(t, root) and type(t) is not GuardTask:
                root.procs[t] = t.proc
                t.proc = self.hold_step

    def release(self, root: SubGroup) -> None:
        """`continue`: everything held runs again."""
        for t, proc in root.procs.items():
            t.proc = proc
        root.procs.clear()
        gate, root.gate = root.gate, None
        self.pe.bind(gate, CONTINUE)
        self.pe.ready.extend(reversed(root.held))
        root.held = None

    # -- ends ---------------------------------------------------------------------------------
    def __call__(self, task: Task | None, failure: ProgramFailure) -> bool:
        """A failure inside a sub-computation fails that one only."""
        if not self.active or task is None:
            return False
        root = root_of(task)
        if root is None:
            return False
        self.guards.done(task)
        self.end(root, FAILED)
        return True

    def end(self, root: SubGroup, status, finish: bool = True) -> None:
        """Bind `Status`; unless the goal terminated by itself, discard its tasks and count the
        call/3 as terminated in its caller's group."""
        if root.ended:
            return
        root.ended = True
        self.active -= 1
        pe = self.pe
        if finish:
            for t in [*take(root, pe.ready), *(root.held or ())]:
                if type(t) is GuardTask:
                    t.args[0].abandoned = True
                else:
                    self.guards.done(t)
            for t in [t for t in pe.suspended if belongs(t, root)]:
                detach(pe, t)
                self.guards.done(t)
            root.held = None
            root.procs.clear()
            if root.parent is not None:
                pe.finish(root.parent)
        watcher = root.watcher
        if watcher is not None and watcher.waits is not None:
            detach(pe, watcher)
        if watcher is not None:  # the sub-computation's end is a reduction of its call
            pe.stats.reductions += 1
            if pe.tracer is not None:
                pe.tracer.rewrite(watcher, "call/3", f"call/3 {status}", span=watcher.site)
        if not pe.unify(root.status, status):
            raise ProgramFailure(f"call/3: Status is already bound, cannot become {status}")

    def exportable(self, task: Task) -> bool:
        """May distribution send `task` away? Not while it belongs to a sub-computation."""
        return not self.active or root_of(task) is None
