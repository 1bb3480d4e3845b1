"""A processing element: its ready queue, suspensions and the reduction loop.

Scheduling is depth first with time slices: a committing task continues with its first body goal
(as Prolog would run it) for up to `SLICE` reductions, then goes to the back of the queue so that
producers and consumers of a stream take turns (memory stays proportional to live data), unless
its kind says it resumes first. Woken tasks go to the front. A back that has not moved for
FAIR reductions turns the queue round, so that no task waits for ever. Everything is iterative: no step
recurses in Python. The loop knows tasks only through the step protocol (pam/step.py) and the
`Task` class; it names no dialect.

Priorities (`Goal @ priority(N)`, `Goal @ lower_priority`; docs/distribution.md, "Priorities"):
a PE that meets its first prioritised task gets a ready queue per level (`levels`), and runs a
task of a lower level only when no task of a higher one is ready. The queue the loop runs,
`ready`, stays the same deque object throughout (compiled code holds its `append`): it always
holds the tasks of the current level (`level`, the running task's), and a switch of level moves
contents between it and `levels`. So a goal a task spawns is of its parent's level without
being told, and a PE that never meets a priority runs exactly as before.
"""

from __future__ import annotations

import time
from collections import deque

from pam.distribution import RemoteReader
from pam.errors import LimitExceeded, ProgramFailure
from pam.limits import Deadline
from pam.ready import DEFAULT_PRIORITY, PriorityReady, priority_level
from pam.stats import PEStats
from pam.step import WaitAll
from pam.task import AndGroup, Placed, Seq, Task
from pam.twins import traced_twin
from pam.terms import Var, deref, unbound_vars, var_name
from pam.unify import unify

SLICE = 200
# Depth first keeps the queue's front busy: a goal that fans out for ever (each round spawning a
# tree, then the next round) would leave the tasks below it waiting for ever (the goal that would
# stop it, a stream's producer). Every FAIR reductions the loop looks at the back of the queue:
# if the same task is still there, the queue is turned round. A program that gets round to its
# back meanwhile runs as before.
FAIR = 10 * SLICE
DEADLOCK_REPORT_LIMIT = 20
NEVER = -(1 << 62)  # `fair_at` with priorities: the loop asks `_next_task` at every pick


class PE:
    """One processing element. `output` receives program output (text)."""

    def __init__(self, number: int, output, max_steps: int | None = None, timeout: float | None = None):
        self.number = number
        self.ready: deque[Task] = deque()
        self.suspended: dict[Task, None] = {}
        self.output = output
        self.max_steps = max_steps
        self.timeout = timeout
        # the run's deadline (pam.limits), shared by the PEs of a machine; between batches the
        # loop looks at it, and a watchdog stops a run that is inside a slow step
        self.deadline = None if timeout is None else Deadline(timeout)
        self.stats = PEStats(number)
        self.steps = 0
        self.instructions = 0
        self.net = None  # the PE's side of distribution (pam.distribution), None on one PE
        self.tracer = None  # its recorder in a traced run (pam.trace), which runs `run_traced`
        # Whether compiled code must count the reductions it makes inside one step (direct
        # code's calls): false only where nothing observes them (Machine, count_reductions).
        self.counts_reductions = True
        # A step that loops (a self tail call run inside its step function) shares the time
        # slice: before each call meter[0] is how many more reductions it may run itself; it
        # leaves in meter[1] how many it ran, which the loop counts as reductions.
        self.meter = [0, 0]
        # Other event sources, polled at every turn of the driver (pam.driver): each returns
        # True while it waits for an event outside the PE (the PE is then not passive).
        self.hooks: list = []
        # A runtime's failure boundary: boundary(task, failure) is True when it contained the
        # failure of `task` (the task whose step raised it: `failed`), which then ends no run.
        self.boundary = None
        # the task paused with `paused_left` reductions of its time slice still to run
        self.paused: Task | None = None
        self.paused_left = SLICE
        self.failed: Task | None = None
        self.running: Task | None = None  # the task the loop runs now (None outside the loop)
        self.fair_at = FAIR  # the step count of the next look at the back of the queue
        self.back: Task | None = None  # the task at the back at the last look
        # Priorities (the module's docstring): None until the first task of a level other than
        # DEFAULT_PRIORITY; then the ready tasks of the other levels, by level (never empty).
        self.levels: dict[int, deque] | None = None
        self.level = DEFAULT_PRIORITY  # that of the tasks in `ready` and of the running task
        self.fair_due = FAIR  # with priorities: the step count of the next look at the back
        self.preempt = False  # a task of a higher level became ready while a task ran
        self.home_suspended = self.suspended  # a deep guard's run puts a table of its own there

    # -- variables --------------------------------------------------------------------------
    def new_var(self, owner: int) -> Var:
        """A fresh variable owned by PE `owner` (modulo the PEs), wherever it is made: e.g. a
        reduction's result owned by the PE that should answer its readers."""
        net = self.net
        if net is None or owner % net.topology.pes == self.number:
            return Var()
        return net.new_var(owner % net.topology.pes)

    def charge(self, instructions: int) -> None:
        """Charge the running step `instructions` more than its declared cost (virtual time):
        a cost that depends on the step's data."""
        self.instructions += instructions

    def wake(self, var: Var) -> None:
        """Make every task suspended on `var` runnable again (it was just bound). A variable
        owned elsewhere sends its binding to its owner; remote readers get the value."""
        waiting = var.susp
        var.susp = None
        if type(waiting) is not list:
            self.net.proxy_bound(var, waiting)
        if self.levels is not None:
            self._wake_levels(waiting, var)
            return
        push = self.ready.append
        suspended = self.suspended
        n = 0
        for t in waiting:
            if type(t) is RemoteReader:
                t.send_value(var)
            elif t.waits is not None:
                t.waits = None
                del suspended[t]
                push(t)
                n += 1
            elif type(t) is WaitAll and not self._still_waits(t, var):
                t = t.task
                t.waits = None
                del suspended[t]
                push(t)
                n += 1
        self.stats.resumptions += n

    def _wake_levels(self, waiting: list, var: Var) -> None:
        """`wake` with priorities: each task goes back to the level it was parked at."""
        suspended = self.suspended
        n = 0
        for t in waiting:
            if type(t) is RemoteReader:
                t.send_value(var)
                continue
            if t.waits is None:
                if type(t) is not WaitAll or self._still_waits(t, var):
                    continue
                t = t.task
            t.waits = None
            level = suspended.pop(t)
            if level is None or level == self.level:
                self.ready.append(t)
            else:
                self.enqueue(t, level)
            n += 1
        self.stats.resumptions += n

    def bind(self, var: Var, value) -> None:
        """Bind the unbound `var` to `value` (dereferenced; binding a variable to itself is a no-op)."""
        while type(value) is Var:
            v = value.val
            if v is None:
                break
            value = v
        if value is var:
            return
        var.val = value
        if var.susp is not None:
            self.wake(var)

    def unify(self, a, b) -> bool:
        return unify(a, b, self.bind)

    def put(self, out, value) -> bool:
        """Unify a call's output argument with the value a committed clause built for it."""
        while type(out) is Var:
            v = out.val
            if v is None:
                self.bind(out, value)
                return True
            out = v
        return unify(out, value, self.bind)

    def _still_waits(self, wait: WaitAll, var: Var) -> bool:
        """`var`, one of the variables `wait` is for, was bound: True while others are still
        unbound. Bound to another unbound variable, it is waited for as that one."""
        target = deref(var)
        if type(target) is Var:
            wait.variables[wait.variables.index(var)] = target
            self.park_on(target, wait)
            return True
        wait.left -= 1
        return wait.left > 0

    def park_all(self, task: Task, wait: WaitAll) -> None:
        """Suspend `task` until every variable of `wait` is bound (at once runnable if none is
        unbound): `wait` stands for it in their suspension lists."""
        self.stats.suspensions += 1
        if not wait.left:
            self.ready.append(task)
            return
        task.waits = wait
        wait.task = task
        for v in wait.variables:
            self.park_on(v, wait)
        self.suspended[task] = self.level  # the level it wakes at (`wake`)

    def park_on(self, v: Var, waiter) -> None:
        """Put `waiter` (a task, or a WaitAll) in the suspension list of the unbound `v`; a
        proxy's value is fetched from its owner."""
        s = v.susp
        if s is None:
            v.susp = [waiter]
        else:
            if type(s) is not list and not s.fetched:
                self.net.fetch(v, s)
            if not s or s[-1] is not waiter:
                s.append(waiter)

    def park(self, task: Task, waits: list) -> None:
        """Suspend `task` on `waits` (a list of unbound variables) until one of them is bound."""
        self.stats.suspensions += 1
        task.waits = waits
        for v in waits:  # park_on, inline: parking is frequent
            s = v.susp
            if s is None:
                v.susp = [task]
            else:
                if type(s) is not list and not s.fetched:
                    self.net.fetch(v, s)
                if not s or s[-1] is not task:
                    s.append(task)
        self.suspended[task] = self.level  # the level it wakes at (`wake`)

    # -- `&` groups ---------------------------------------------------------------------------
    def start(self, plan, group) -> int:
        """Schedule a body plan as members of `group`; returns how many members it added."""
        tp = type(plan)
        if tp is list:
            n = 0
            for part in reversed(plan):
                n += self.start(part, group)
            return n
        if tp is Seq:
            sub = AndGroup(group, plan.parts[1:])
            sub.count = self.start(plan.parts[0], sub)
            return 1
        if tp is Placed:
            plan.task.group = group
            self.place(plan.task, plan.where)
            return 1
        plan.group = group  # a task
        self.ready.append(plan)
        return 1

    def spawn(self, plan, task: Task) -> None:
        """A committed task is replaced by `plan`: its group gains the plan's members."""
        g = task.group
        n = self.start(plan, g)
        if g is not None:
            g.count += n
        if self.preempt:
            self._preempt()

    def finish(self, group) -> None:
        """A member of `group` terminated."""
        while group is not None:
            group.count -= 1
            if group.count > 0:
                return
            if group.later:
                part = group.later.pop(0)
                group.count = self.start(part, group)
                if self.preempt:
                    self._preempt()
                return
            if group.home is not None:  # a group exported to this PE: tell the exporter
                self.net.group_finished(group)
                return
            group = group.parent

    # -- the reduction loop -------------------------------------------------------------------
    def push(self, task: Task) -> None:
        """Make `task` ready at the current level."""
        self.ready.append(task)

    def enqueue(self, task: Task, level: int) -> None:
        """Make `task` ready at priority `level` (pam.ready: the larger is the more urgent). In a
        deep guard's run (which has a queue and a table of its own) it stays in the run's queue."""
        if level == self.level or self.suspended is not self.home_suspended:
            self.ready.append(task)
            return
        levels = self.levels
        if levels is None:
            levels = self._enter_levels()
        if self.running is None:
            # between batches `ready` holds the most urgent level that has a ready task
            if level > self.level or not self.ready:
                self._switch(level)
                self.ready.append(task)
                return
        elif level > self.level:
            self.preempt = True  # the running task's spawn ends the batch (`_preempt`)
        held = levels.get(level)
        if held is None:
            levels[level] = deque((task,))
        else:
            held.append(task)

    def _enter_levels(self) -> dict:
        """The first task of a level other than the default: from now on the loop picks every
        task through `_next_task`, which runs the most urgent level."""
        self.levels = {}
        self.fair_due = self.fair_at
        self.fair_at = NEVER
        return self.levels

    def _switch(self, level: int) -> None:
        """Make `level` the current one: the ready tasks of the current level wait in `levels`
        (after any already held there: they are the newer), those of `level` come to `ready`."""
        ready, levels = self.ready, self.levels
        if ready:
            held = levels.get(self.level)
            if held is None:
                levels[self.level] = deque(ready)
            else:
                held.extend(ready)
            ready.clear()
        waiting = levels.pop(level, None)
        if waiting:
            ready.extend(waiting)
        self.level = level

    def _settle(self) -> bool:
        """Outside the loop: `ready` holds the most urgent level with ready tasks; whether any is."""
        levels = self.levels
        if levels:
            top = max(levels)
            if top >= self.level or not self.ready:
                self._switch(top)
        return bool(self.ready)

    def _preempt(self) -> None:
        """A task of a higher level became ready in the running task's spawn: the current
        level's ready tasks wait in `levels`, so the loop picks no other task of it before
        switching (a loop that began before the PE had levels does not look at them at every
        pick). In a deep guard's run `ready` is the guard's own queue: it stays."""
        self.preempt = False
        ready = self.ready
        if not ready or self.suspended is not self.home_suspended:
            return
        held = self.levels.get(self.level)
        if held is None:
            self.levels[self.level] = deque(ready)
        else:
            held.extend(ready)
        ready.clear()

    def ready_queues(self) -> list:
        """Every ready queue: the current level's (`ready`) first, then the other levels'. (A
        runtime that takes tasks out of the queue, such as PARLOG's call/3 `stop`, should look
        at all of them.)"""
        return [self.ready, *self.levels.values()] if self.levels else [self.ready]

    def ready_count(self) -> int:
        """How many tasks are ready here, at every level."""
        levels = self.levels
        return len(self.ready) + (sum(map(len, levels.values())) if levels else 0)

    def order_by_priority(self) -> None:
        """From now on the ready queue runs the task of the smallest `priority` first (every
        task a runtime pushes here must have one): pam.ready.PriorityReady."""
        self.ready = PriorityReady(self.ready)

    def place(self, task: Task, where) -> None:
        """`Goal @ Where`: run `task` on the PE that `where` names (here, on one PE), or here at
        the priority it names (`priority(N)`, `lower_priority`: pam.ready.priority_level). A
        task sent to another PE keeps the level of the task that spawned it."""
        where = deref(where)
        if type(where) is not int:
            level = priority_level(where, self.level)
            if level is not None:
                self.enqueue(task, level)
                return
        target = self.number if self.net is None else self.net.placement(where, task)
        if target == self.number:
            self.ready.append(task)
        else:
            self.net.export_task(task, target)

    def pause(self, task: Task, left: int, paused: bool) -> None:
        """The running `task` stops: at a pause for limits or messages it resumes first, and
        keeps what is `left` of its time slice across the pause (so an endless goal still lets
        others run between batches); as a kind that resumes first always does. Otherwise its
        time slice is up: to the back of the queue."""
        if task.resume_first:
            self.ready.append(task)
        elif paused and left > 0:
            self.ready.append(task)
            self.paused, self.paused_left = task, left
        else:
            self.to_back(task)

    def run(self, budget: int | None = None) -> int:
        """Reduce until no task is ready, or `budget` steps have run; returns the steps run.
        Raises ProgramFailure or LimitExceeded. A failure that a runtime's `boundary` contains
        (a PARLOG call/3's sub-computation) ends only what it bounds, and the loop goes on."""
        return self._bounded(self._run, budget)

    def run_traced(self, budget: int | None = None) -> int:
        """`run` in a traced run (`_run_traced`, the twin of `_run`)."""
        return self._bounded(self._run_traced, budget)

    def _bounded(self, reduce, budget: int | None) -> int:
        start = self.steps
        while True:
            try:
                reduce(None if budget is None else max(1, budget - (self.steps - start)))
                # with priorities, a level done (or a preempting spawn) ends the loop: the next
                # level runs in this batch, unless its budget is spent
                if self.levels is None or not self._settle() or (
                        budget is not None and self.steps - start >= budget):
                    return self.steps - start
            except ProgramFailure as failure:
                if self.boundary is None or not self.boundary(self.failed, failure):
                    raise
                # the failed step was counted as a reduction, but what it reduced is only what
                # it ran inside itself before failing (a loop's rounds: rewrites when traced)
                self.stats.reductions += self.meter[1] - 1
                self.meter[1] = 0
                if budget is not None and self.steps - start >= budget:
                    return self.steps - start

    def to_back(self, task: Task) -> None:
        """Send `task` to the back of the ready queue (its time slice is up)."""
        self.ready.appendleft(task)

    def _next_task(self, ready, calls: int) -> Task:
        """The next task when a look at the back is due (FAIR): if the back is the task that
        was there at the last look, the queue is turned round (the tasks at the back run
        first, oldest first; those at the front wait their turn at the back). With priorities
        (`levels`) it is asked at every pick (`_next_leveled`)."""
        if self.levels is not None:
            return self._next_leveled(ready, calls)
        self.fair_at = self.steps + calls + FAIR
        if ready[0] is self.back and len(ready) > 1 and ready[0].starves:
            ready.reverse()
        self.back = ready[0]
        return ready.pop()

    def _next_leveled(self, ready, calls: int) -> Task:
        """The next task with priorities: a more urgent level that has a ready task (or the
        current one's tasks held by `_preempt`) becomes the current one first; the look at
        the back is due every FAIR steps as without priorities, in the current level."""
        levels = self.levels
        if levels:
            top = max(levels)
            if top >= self.level:
                self._switch(top)
        now = self.steps + calls
        if now >= self.fair_due:
            self.fair_due = now + FAIR
            if ready[0] is self.back and len(ready) > 1 and ready[0].starves:
                ready.reverse()
            self.back = ready[0]
        return ready.pop()

    def _next_check(self, calls: int, limit, deadline, budget, check_every: int) -> int | None:
        """At a batch's end (both loops): LimitExceeded past --max-steps or --timeout; None when
        the loop's budget is spent; otherwise the call count of the next look."""
        if limit is not None and calls >= limit:
            raise LimitExceeded(f"step limit reached after {self.max_steps} steps "
                                f"(--max-steps {self.max_steps})")
        if deadline is not None and time.monotonic() > deadline:
            raise LimitExceeded(self.deadline.message())
        if budget is not None and calls >= budget:
            return None
        next_check = calls + check_every
        return next_check if limit is None else min(next_check, limit)

    def _run(self, budget: int | None = None) -> int:
        """The reduction loop, and the template of its traced twin `_run_traced` (pam/twins.py):
        in a traced run the same schedule, step for step (so the same reductions, virtual time
        and messages), reporting each step to `self.tracer`. A step that does not report its own
        reductions (`proc.traced`) is reported as one rewrite when it commits. Apart, so that an
        untraced run pays nothing for tracing; the twin keeps the instructions on the PE as it
        goes, since the tracer's clock reads them inside a step."""
        ready = self.ready
        pop = ready.pop
        stats = self.stats
        calls = 0
        suspensions = 0
        instructions = 0
        check_every = 4096 if budget is None else budget
        limit = self.max_steps
        if limit is not None:
            limit -= self.steps
        next_check = check_every if limit is None else min(check_every, limit)
        deadline = None if self.deadline is None else self.deadline.at
        finish = self.finish
        park = self.park
        wait_all = WaitAll
        meter = self.meter
        looped = 0
        t = None
        #+ tracer = self.tracer
        #+ tracer.mark = self.instructions
        fair = self.fair_at - self.steps  # in this run's calls
        try:
            while ready:
                if calls < fair:
                    t = pop()
                else:
                    t = self._next_task(ready, calls)
                    fair = self.fair_at - self.steps  # calls + FAIR, or every pick with priorities
                full = SLICE
                self.running = t  # whose binds these are (a call/3's, across PEs: Net.bind_origin)
                if t is self.paused:
                    full, self.paused = self.paused_left, None
                slice_left = full if next_check - calls >= full else max(1, next_check - calls)
                first = slice_left
                while True:
                    calls += 1
                    proc = t.proc
                    instructions += proc.cost  #-
                    #+ self.instructions += proc.cost
                    meter[0] = slice_left - 1
                    #+ tracer.fresh = True
                    #+ before = None if getattr(proc, "traced", False) else tracer.begin_task(t)
                    r = proc(t)
                    #+ tracer.offset = 0  # the reductions it ran inside are counted now
                    if meter[1]:
                        extra = meter[1]
                        meter[1] = 0
                        looped += extra
                        calls += extra
                        instructions += extra * proc.cost  #-
                        #+ self.instructions += extra * proc.cost
                        slice_left -= extra
                    if r is None:
                        #+ if before is not None:
                        #+     tracer.commit_task(before, r)
                        #+ tracer.fresh = False
                        #+ tracer.finished(t)
                        g = t.group
                        if g is not None:
                            finish(g)
                        break
                    kind = type(r)  # once: the test below is on every step's path
                    if kind is list:
                        suspensions += 1
                        park(t, r)
                        break
                    if kind is wait_all:
                        suspensions += 1
                        self.park_all(t, r)
                        break
                    #+ if before is not None:
                    #+     tracer.commit_task(before, r)
                    #+ tracer.fresh = False
                    t = r  # it continues
                    slice_left -= 1
                    if slice_left <= 0:
                        self.pause(t, full - (first - slice_left), calls >= next_check)
                        break
                if calls >= next_check:
                    next_check = self._next_check(calls, limit, deadline, budget, check_every)
                    if next_check is None:
                        break
            #+ tracer.mark = self.instructions  # the batch is over: the driver advances the clock
        except ProgramFailure as failure:
            self.failed = t
            if failure.goal is None and t is not None:
                failure.goal = t.describe()
                failure.span = failure.span or t.site
            if failure.pe is None:
                failure.pe = self.number
            #+ tracer.fail(t, failure.goal, failure.span)
            raise
        finally:
            self.running = None
            #+ tracer.open.clear()  # a step stopped by a failure or a limit leaves its rewrites open
            #+ tracer.offset = 0
            self.steps += calls
            stats.reductions += calls - suspensions
            stats.looped += looped
            self.instructions += instructions  #-
        return calls

    # -- reports ------------------------------------------------------------------------------
    def suspended_goals(self, names: dict, limit: int = DEADLOCK_REPORT_LIMIT) -> list[tuple]:
        """(goal, call site, variables waited for, PE) of up to `limit` suspended tasks."""
        goals = []
        for t in list(self.suspended)[:limit]:
            if self.net is not None:
                self.net.name_variables(unbound_vars(t.args), names)
            text = t.describe(names)
            waits = list(dict.fromkeys(var_name(v, names) for v in t.waits or []))
            goals.append((text, t.site, waits, self.number))
        return goals


PE._run_traced = traced_twin(PE._run)
