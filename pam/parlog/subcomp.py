"""`call(Goal, Status, Control)` (spec/parlog.md): a sub-computation with its own failure boundary.

The goal runs as the first member of a `SubGroup`, an `&` group whose later part is the step that
binds `Status = succeeded`: the group reaches zero when the goal and every goal descending from
it have terminated, exactly as `&` knows it. Every task of the sub-computation has the group in
its chain of groups, which is how a failure (PE.boundary), a `stop` or a `suspend` finds them. A
watcher task reads the `Control` stream: `stop` discards the sub-computation's tasks (ready,
suspended, held, and the guard computations of its calls) and binds `Status = stopped`;
`suspend` holds its tasks (none runs, woken or not) until `continue` or `stop`. A failure discards them the same way
and binds `Status = failed`. Either way `call/3` then terminates as a member of its caller's group.

Across PEs its goals travel like any (stolen, or sent with `@`), marked with the sub-computation's
name `(PE, number)`, given when its first task leaves. On the receiving PE they belong to a
stand-in `SubGroup` for it (`remote`), which holds nothing but is found in their chain of groups
as the real one is at home. Each PE remembers to which PEs it sent tasks of a sub-computation
(`children`); the orders (`stop`, `suspend`, `continue`, and `end` when it succeeded) go from home
to those PEs and on from each to its own (CALL3 messages), and a failure on another PE is
reported home (CALL3_FAILED) after that PE discarded the sub-computation's tasks there. A BIND
made by one of its tasks carries its name (Net.bind_origin): a clash found at the variable's
owner fails it the same way (reported home), not the program. Messages
between two PEs keep their order, so an order reaches a PE after every task sent to it before;
a task that arrives for a stopped sub-computation is dropped.
"""

from __future__ import annotations

from pam.errors import ProgramFailure
from pam.parlog.goal import Goal
from pam.parlog.guards import GuardTask, detach
from pam.step import declare
from pam.task import AndGroup, Task
from pam.terms import NIL, Cons, Var, deref, mkatom
from pam.parlog.write import write_term

SUCCEEDED, FAILED, STOPPED = mkatom("succeeded"), mkatom("failed"), mkatom("stopped")
STOP, SUSPEND, CONTINUE = mkatom("stop"), mkatom("suspend"), mkatom("continue")


class SubGroup(AndGroup):
    """The root group of a sub-computation, or (`remote`) its stand-in on another PE."""

    __slots__ = ("status", "watcher", "held", "procs", "gate", "ended", "ident", "children", "remote")

    def __init__(self, parent, later: list, status, ident: tuple[int, int] | None = None) -> None:
        super().__init__(parent, later)
        self.status = status
        self.watcher: Task | None = None
        self.held: list[tuple[Task, int]] | None = None  # its ready tasks while suspended, with their levels
        # while suspended, its suspended tasks run the holding step; their own steps are here,
        # and `gate` (bound at `continue`) is what a woken one waits on
        self.procs: dict[Task, object] = {}
        self.gate: Var | None = None
        self.ended = False
        self.ident = ident  # its name on every PE, (home PE, number), once a task of it left home
        self.children: set[int] = set()  # the PEs this PE sent tasks of it to
        self.remote = ident is not None  # a stand-in on a PE other than its call's


def group_of(task: Task):
    """The group a task counts in; a guard's is its call's (none for a guard run sent here)."""
    if type(task) is GuardTask:
        caller = task.args[0].caller
        return None if caller is None else caller.group
    return task.group


def root_of(task: Task) -> SubGroup | None:
    """The innermost sub-computation `task` belongs to."""
    g = group_of(task)
    while g is not None:
        if type(g) is SubGroup and not g.ended:
            return g
        g = g.parent
    return None


def within(g, root: SubGroup) -> bool:
    while g is not None:
        if g is root:
            return True
        g = g.parent
    return False


def belongs(task: Task, root: SubGroup) -> bool:
    return within(group_of(task), root)


def take(root: SubGroup, pe) -> list[tuple[Task, int]]:
    """Take the sub-computation's tasks out of every ready queue of `pe` (the current priority
    level's and the others'), in queue order, each with its level."""
    out: list[tuple[Task, int]] = []
    for level, ready in ((pe.level, pe.ready), *(pe.levels or {}).items()):
        mine = [t for t in ready if belongs(t, root)]
        if mine:
            kept = [t for t in ready if not belongs(t, root)]
            ready.clear()
            ready.extend(kept)
            out += [(t, level) for t in mine]
    return out


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
        self.live: dict[SubGroup, None] = {}  # sub-computations running here (their roots, stand-ins)
        self.named: dict[tuple[int, int], SubGroup] = {}  # by name: those that crossed PEs
        self.next_name = 0
        pe.boundary = self  # PE.boundary(task, failure): `contain`
        if pe.net is not None:
            pe.net.add_handler("CALL3", self._got_order)
            pe.net.add_handler("CALL3_FAILED", self._got_failed)
            pe.net.bind_origin = self.origin
            pe.net.bind_clash = self.clashed

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

        def dropped(t):
            return None  # a task that arrived for a stopped sub-computation

        self.call3 = declare("call", 3, 1, key="call/3")(call3)
        self.watch_step = declare("$control", 2, 1, key="$control")(watch)
        self.succeed_step = declare("$succeeded", 1, 1, key="$succeeded")(succeed)
        self.hold_step = declare("$held", 0, 1, key="$held")(held)
        self.drop_step = declare("$dropped", 0, 1, key="$dropped")(dropped)

    @property
    def active(self) -> int:
        return len(self.live)

    # -- steps ------------------------------------------------------------------------------
    def start(self, t: Task):
        goal, status, control = t.args
        if type(deref(goal)) is Var:
            return [deref(goal)]
        root = SubGroup(t.group, [], status)
        root.later.append(Goal(self.succeed_step, (root,), None, t.site))
        if t.group is not None:
            t.group.count += 1  # the sub-computation stands for this call in its caller's group
        self.live[root] = None
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
                if c is NIL:
                    return None  # nothing more to obey
                raise ProgramFailure(f"the Control stream ends in {write_term(c)}, not []",
                                     "call/3", t.site)
            order = deref(c.head)
            if type(order) is Var:
                return [order]
            if order not in (STOP, SUSPEND, CONTINUE):
                raise ProgramFailure(f"unknown Control element {write_term(order)} "
                                     "(the elements are stop, suspend and continue)", "call/3", t.site)
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
        meanwhile waits on the gate instead of running. The order goes on to its other PEs."""
        pe = self.pe
        root.held = take(root, pe)
        root.gate = Var()
        for t in pe.suspended:
            if belongs(t, root) and type(t) is not GuardTask:
                root.procs[t] = t.proc
                t.proc = self.hold_step
        self._pass_on(root, "suspend")

    def release(self, root: SubGroup) -> None:
        """`continue`: everything held runs again."""
        for t, proc in root.procs.items():
            t.proc = proc
        root.procs.clear()
        gate, root.gate = root.gate, None
        self.pe.bind(gate, CONTINUE)
        for t, level in reversed(root.held):  # each back at its own priority level
            self.pe.enqueue(t, level)
        root.held = None
        self._pass_on(root, "continue")

    # -- across PEs ---------------------------------------------------------------------------
    def name(self, root: SubGroup) -> tuple[int, int]:
        """The sub-computation's name on every PE (given when a task of it first leaves)."""
        if root.ident is None:
            root.ident = (self.pe.number, self.next_name)
            self.next_name += 1
            self.named[root.ident] = root
        return root.ident

    def adopt(self, task: Task, ident: tuple[int, int]) -> None:
        """A task of sub-computation `ident` arrived here: it belongs to its stand-in (made on
        first sight); held if that is held, dropped if it was stopped."""
        root = self.named.get(ident)
        if root is None:
            if ident[0] == self.pe.number:  # home, and forgotten: it ended
                task.proc = self.drop_step
                return
            root = self.named[ident] = SubGroup(None, [], None, ident)
            self.live[root] = None
        task.group = root
        if root.ended:
            task.proc = self.drop_step
        elif root.held is not None:
            root.procs[task] = task.proc
            task.proc = self.hold_step

    def _pass_on(self, root: SubGroup, order: str) -> None:
        """Send `order` on to the PEs this PE sent tasks of `root` to."""
        if root.ident is not None:
            for pe in sorted(root.children):
                self.pe.net.send("CALL3", pe, (*root.ident, order))

    def _got_order(self, m) -> None:
        home, number, order = m.payload
        root = self.named.get((home, number))
        if root is None or root.ended:
            if root is None and order == "stop" and home != self.pe.number:
                root = self.named[(home, number)] = SubGroup(None, [], None, (home, number))
                root.ended = True  # a task of it still on its way here is dropped
            return
        if order == "stop":
            self.discard(root)
        elif order == "end":
            root.ended = True
            self.live.pop(root, None)
            del self.named[root.ident]
            self._pass_on(root, "end")
        elif order == "suspend" and root.held is None:
            self.hold(root)
        elif order == "continue" and root.held is not None:
            self.release(root)

    def _got_failed(self, m) -> None:
        self.failed_at_home(tuple(m.payload))

    def failed_at_home(self, ident: tuple[int, int]) -> None:
        """Sub-computation `ident`, at home here, failed; one that ended meanwhile is left."""
        root = self.named.get(ident)
        if root is not None and not root.ended and not root.remote:
            self.end(root, FAILED)

    def origin(self) -> tuple[int, int] | None:
        """Net.bind_origin: the name of the sub-computation of the running task (its BINDs carry
        it), or None."""
        task = self.pe.running
        if not self.live or task is None:
            return None
        root = root_of(task)
        return None if root is None else self.name(root)

    def clashed(self, ident: tuple[int, int]) -> bool:
        """Net.bind_clash: a BIND from sub-computation `ident` clashed with a binding here: that
        sub-computation fails (at its home, which stops its tasks on every PE)."""
        if len(ident) != 2:
            return False
        if ident[0] == self.pe.number:
            self.failed_at_home(ident)
        else:
            self.pe.net.send("CALL3_FAILED", ident[0], ident)
        return True

    # -- ends ---------------------------------------------------------------------------------
    def __call__(self, task: Task | None, failure: ProgramFailure) -> bool:
        """A failure inside a sub-computation fails that one only."""
        if not self.live or task is None:
            return False
        root = root_of(task)
        if root is None:
            return False
        self.guards.done(task)
        if root.remote:  # its tasks here go, and its home hears of the failure
            self.discard(root)
            self.pe.net.send("CALL3_FAILED", root.ident[0], root.ident)
        else:
            self.end(root, FAILED)
        return True

    def end(self, root: SubGroup, status, finish: bool = True) -> None:
        """Bind `Status`; unless the goal terminated by itself, discard its tasks (on every PE)
        and count the call/3 as terminated in its caller's group."""
        if root.ended:
            return
        pe = self.pe
        if finish:
            self.discard(root)
            if root.parent is not None:
                pe.finish(root.parent)
        else:
            root.ended = True
            self.live.pop(root, None)
            if root.ident is not None:
                del self.named[root.ident]
                self._pass_on(root, "end")
        watcher = root.watcher
        if watcher is not None and watcher.waits is not None:
            detach(pe, watcher)
        if watcher is not None:  # the sub-computation's end is a reduction of its call
            pe.stats.reductions += 1
            if pe.tracer is not None:
                pe.tracer.rewrite(watcher, "call/3", f"call/3 {status}", span=watcher.site)
        if not pe.unify(root.status, status):
            raise ProgramFailure(f"call/3: Status is already bound, cannot become {status}")

    def discard(self, root: SubGroup) -> None:
        """Its tasks here go (ready, held, suspended, its calls' guard runs), with the nested
        sub-computations started here; then the same on the PEs it reached."""
        pe = self.pe
        root.ended = True
        self.live.pop(root, None)
        gone = 0
        for t, _ in [*take(root, pe), *(root.held or ())]:
            gone += 1
            if type(t) is GuardTask:
                t.args[0].abandoned = True
            else:
                self.guards.done(t)
        for t in [t for t in pe.suspended if belongs(t, root)]:
            gone += 1
            detach(pe, t)
            self.guards.done(t)
        root.held = None
        root.procs.clear()
        if root.remote and gone:
            pe.stats.counters["stopped_remote"] = pe.stats.counters.get("stopped_remote", 0) + gone
        for inner in [r for r in self.live if r is not root and within(r.parent, root)]:
            if not inner.ended:
                self.discard(inner)  # nested here: its Status stays unbound, its watcher goes
        watcher = root.watcher
        if watcher is not None and watcher.waits is not None:
            detach(pe, watcher)
        if pe.net is not None:
            pe.net.forget_groups(lambda g: within(g, root))
        self._pass_on(root, "stop")
