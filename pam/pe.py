"""A processing element: its ready queue, suspensions and the reduction loop.

Scheduling is depth first with time slices: a committing task continues with its first body goal
(as Prolog would run it) for up to `SLICE` reductions, then goes to the back of the queue so that
producers and consumers of a stream take turns (memory stays proportional to live data). Woken
tasks go to the front. Everything is iterative: no step recurses in Python.
"""

from __future__ import annotations

import time
from collections import deque

from pam.errors import Deadlock, LimitExceeded, ProgramFailure
from pam.stats import PEStats
from pam.task import AndGroup, Seq, Task
from pam.terms import Struct, Var
from pam.unify import unify
from pam.write import write_term

SLICE = 200
DEADLOCK_REPORT_LIMIT = 20


class PE:
    """One processing element. `output` receives program output (text)."""

    def __init__(self, number: int, output, max_steps: int | None = None, timeout: float | None = None):
        self.number = number
        self.ready: deque[Task] = deque()
        self.suspended: dict[Task, None] = {}
        self.output = output
        self.max_steps = max_steps
        self.timeout = timeout
        self.stats = PEStats(number)
        self.procs: dict[str, object] = {}

    # -- variables --------------------------------------------------------------------------
    def wake(self, var: Var) -> None:
        """Make every task suspended on `var` runnable again (it was just bound)."""
        waiting = var.susp
        var.susp = None
        push = self.ready.append
        suspended = self.suspended
        n = 0
        for t in waiting:
            if t.waits is not None:
                t.waits = None
                del suspended[t]
                push(t)
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

    def park(self, task: Task, waits: list) -> None:
        """Suspend `task` on `waits` (a list of unbound variables)."""
        task.waits = waits
        self.stats.suspensions += 1
        for v in waits:
            s = v.susp
            if s is None:
                v.susp = [task]
            elif s[-1] is not task:
                s.append(task)
        self.suspended[task] = None

    # -- `&` groups ---------------------------------------------------------------------------
    def start(self, plan, group) -> int:
        """Schedule a body plan as members of `group`; returns how many members it added."""
        if type(plan) is Task:
            plan.group = group
            self.ready.append(plan)
            return 1
        if type(plan) is list:
            n = 0
            for part in reversed(plan):
                n += self.start(part, group)
            return n
        assert type(plan) is Seq
        sub = AndGroup(group, plan.parts[1:])
        sub.count = self.start(plan.parts[0], sub)
        return 1

    def spawn(self, plan, task: Task) -> None:
        """A committed task is replaced by `plan`: its group gains the plan's members."""
        g = task.group
        n = self.start(plan, g)
        if g is not None:
            g.count += n

    def finish(self, group) -> None:
        """A member of `group` terminated."""
        while group is not None:
            group.count -= 1
            if group.count > 0:
                return
            if group.later:
                part = group.later.pop(0)
                group.count = self.start(part, group)
                return
            group = group.parent

    # -- the reduction loop -------------------------------------------------------------------
    def push(self, task: Task) -> None:
        self.ready.append(task)

    def run(self) -> None:
        """Reduce until no task is ready. Raises ProgramFailure or LimitExceeded."""
        ready = self.ready
        pop = ready.pop
        stats = self.stats
        calls = 0
        suspensions = 0
        check_every = 4096
        limit = self.max_steps
        next_check = check_every if limit is None else min(check_every, limit)
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        finish = self.finish
        park = self.park
        began = time.perf_counter()
        t = None
        try:
            while ready:
                t = pop()
                budget = SLICE if limit is None else max(1, min(SLICE, next_check - calls))
                while True:
                    calls += 1
                    r = t.proc(t)
                    if r is None:
                        g = t.group
                        if g is not None:
                            finish(g)
                        break
                    if type(r) is list:
                        suspensions += 1
                        park(t, r)
                        break
                    t = r
                    budget -= 1
                    if not budget:
                        ready.appendleft(t)
                        break
                if calls >= next_check:
                    next_check = calls + check_every
                    if limit is not None:
                        next_check = min(next_check, limit)
                    if limit is not None and calls >= limit:
                        raise LimitExceeded(f"step limit reached after {calls} steps (--max-steps {limit})")
                    if deadline is not None and time.monotonic() > deadline:
                        raise LimitExceeded(f"time limit of {self.timeout:g} s reached (--timeout)")
        except ProgramFailure as failure:
            if failure.goal is None and t is not None:
                failure.goal = self.goal_text(t)
                failure.span = failure.span or t.site
            raise
        finally:
            stats.reductions += calls - suspensions
            stats.busy_time += time.perf_counter() - began

    # -- reports ------------------------------------------------------------------------------
    def goal_text(self, task: Task, names: dict | None = None) -> str:
        name = getattr(task.proc, "goal_name", "?")
        args = task.args[:getattr(task.proc, "goal_arity", len(task.args))]
        if not args:
            return name
        return write_term(Struct(name, args), names)

    def deadlock(self) -> Deadlock:
        names: dict[int, str] = {}
        goals = []
        for t in list(self.suspended)[:DEADLOCK_REPORT_LIMIT]:
            text = self.goal_text(t, names)
            waits = list(dict.fromkeys(write_term(v, names) for v in t.waits or []))
            goals.append((text, t.site, waits))
        return Deadlock(goals, len(self.suspended))
