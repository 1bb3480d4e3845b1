"""Deep guards (spec/parlog.md, "Deep guards"): a guard that calls relations runs as a local
computation of its clause.

A clause's compiled code, once its head has matched, asks `Guards.guard(t, spec, values)`:
the first time, a `GuardRun` starts (its goals made from the guard's IR calls, the clause's
matched values in place of its variables) and a `GuardTask` runs it on the PE, a time slice at a
time, interleaved with every other task: the guards of one search group run concurrently, and one
that never ends stops no other clause from committing. The calling goal waits on the run's `done`
variable; when the run ends it is retried and finds the outcome: succeeded (the clause commits,
taking the guard's own variables for its body), failed (only this clause is ruled out), or
needing variables of the call (the clause suspends on them and the guard starts afresh once one is
bound). A commit abandons the call's other runs (`Guards.done`): their tasks are dropped unrun.

Safety: during a slice every unbound variable of the call has a `Protect` first in its suspension
list, so a guard goal that binds one raises `BindsCall` from inside the binding (pam.pe.PE.wake
reads `waits`), before anyone waiting on it sees the value; the binding is undone and the guard
waits for the caller to bind that variable. The run's goals use the PE's ready queue and
suspension table while the slice lasts (the compiled steps hold the queue), so nothing of a guard
is ever in the PE's own queue or table between slices: no leftover tasks, no leaked suspensions.
Across PEs (`GuardKind`): a run may be stolen like a goal (once), when one of its goals'
relations can fan out (the grain rule of goals), and starts afresh on the thief (a guard binds
nothing of the call, so starting again is safe; what it did at home is lost). What travels is its guard (by the
number of its spec, the same on every PE), the call's matched values and its `done` variable;
the thief starts the run afresh and, when it ends, binds `done` (a proxy there) to the outcome
(`'$guard_ok'(Locals)`, `failed`, or `'$guard_waits'(Vars)`), which reaches the caller as a BIND.
A commit at home sends ABANDON to the PE of each of the call's other exported runs; the thief
drops them at their next step. On a thief every variable of the call is a proxy (or one of its
own): a guard goal that binds a proxy is refused by the Net (`refuse_bind`, set for the slice)
before a BIND leaves, and one that waits on a proxy makes the run wait for the caller, as at home.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from hpgrem.ir import Span
from hpgrem.ir.parlog import Call
from hpgrem.ir.parlog import Struct as IRStruct
from hpgrem.ir.parlog import Var as IRVar
from hpgrem.ir.parlog import Atom, Float, Int
from pam.errors import ProgramFailure
from pam.parlog.arith import ArithError, evaluate
from pam.parlog.write import write_term
from pam.parlog.goal import Goal
from pam.pe import SLICE
from pam.step import WaitAll, declare
from pam.task import AndGroup, Task
from pam.terms import Cons, Struct, Var, deref, from_list, mkatom, to_list

GUARD_OK, GUARD_WAITS, FAILED = mkatom("$guard_ok"), mkatom("$guard_waits"), mkatom("failed")


def guard_value(expr, site):
    """The value of a flat guard's `X is Expr` (pam/parlog/clause_code.py `guard_is`), or the
    unbound variable it waits for; an arithmetic error fails the program, as in a body."""
    try:
        return evaluate(expr)
    except ArithError as e:
        raise ProgramFailure(f"arithmetic error: {e}", "_ is " + write_term(expr), site) from None


@dataclass(frozen=True, slots=True, eq=False)
class GuardSpec:
    """A deep guard, fixed at compile time: its goals, the clause variables whose values the
    head's matching gives it (`known`), and its own variables the body may use (`local`)."""

    goals: tuple[Call, ...]
    known: tuple[int, ...]
    local: tuple[int, ...]
    nvars: int
    site: Span


class BindsCall(Exception):
    """A guard goal bound `var`, a variable of the call."""

    def __init__(self, var: Var) -> None:
        super().__init__("guard binds a call variable")
        self.var = var


class Protect:
    """Stands first in a call variable's suspension list during a guard's slice: PE.wake reads
    `waits` of each waiter, and this one answers by raising BindsCall."""

    __slots__ = ("var",)

    def __init__(self, var: Var) -> None:
        self.var = var

    @property
    def waits(self):
        raise BindsCall(self.var)


class GuardRun:
    """One clause's guard computation for one call."""

    __slots__ = ("caller", "spec", "done", "ready", "suspended", "group", "protected", "locals",
                 "outcome", "abandoned", "values", "slices", "at", "home", "number")

    def __init__(self, caller: Task | None, spec: GuardSpec, protected: list[Var], locals_: tuple,
                 values: tuple, done: Var | None = None) -> None:
        self.caller = caller  # None on a PE the run was sent to
        self.spec = spec
        self.done = Var() if done is None else done  # bound when the outcome is known: the caller waits on it
        self.ready: deque = deque()
        self.suspended: dict = {}
        self.group = AndGroup(None, [])
        self.protected = protected
        self.locals = locals_
        # None while running; True, False, a list of call variables to wait for, or "stuck"
        self.outcome: object = None
        self.abandoned = False
        self.values = values  # the call's matched values it started from
        self.slices = 0
        self.at: int | None = None  # the PE it was sent to, if it was
        self.home: tuple[int, int] | None = None  # on that PE: (the call's PE, its number there)
        self.number = 0  # its number on the call's PE once sent away


class GuardTask(Task):
    """The task that runs a `GuardRun`, a slice at a time."""

    __slots__ = ()

    def describe(self, names: dict | None = None) -> str:
        run = self.args[0]
        if run.caller is None:
            return f"guard of a call on PE {run.home[0]}"
        return f"guard of {run.caller.describe(names)}"


def build_term(term, env: list):
    """The run-time term of IR `term`, clause variable i being `env[i]` (made when None); a
    structure the IR shares is built once, its variables being the same in each place anyway."""
    out: list = []
    made: dict[int, object] = {}  # a structure used in several places (the IR is a graph): built once
    stack: list = [(term, False)]
    while stack:
        t, built = stack.pop()
        if isinstance(t, IRStruct):
            if not built:
                if id(t) in made:
                    out.append(made[id(t)])
                    continue
                stack.append((t, True))
                stack.extend((a, False) for a in reversed(t.args))
                continue
            n = len(t.args)
            args = tuple(out[len(out) - n:])
            del out[len(out) - n:]
            made[id(t)] = x = Cons(*args) if t.name == "[|]" and n == 2 else Struct(mkatom(t.name), args)
            out.append(x)
        elif isinstance(t, IRVar):
            if env[t.index] is None:
                env[t.index] = Var()
            out.append(env[t.index])
        elif isinstance(t, Atom):
            out.append(mkatom(t.name))
        elif isinstance(t, (Int, Float)):
            out.append(t.value)
        else:
            raise AssertionError(f"unexpected term {t!r}")
    return out[0]


def unbound_local_vars(values) -> list[Var]:
    """The unbound variables reachable from `values` that live on this PE (a proxy of a variable
    elsewhere cannot be protected: see docs/parlog.md)."""
    found: dict[int, Var] = {}
    seen: set[int] = set()
    stack = list(values)
    while stack:
        x = deref(stack.pop())
        tx = type(x)
        if tx is Var:
            if type(x.susp) is list or x.susp is None:
                found[id(x)] = x
        elif tx is Cons or tx is Struct:
            if id(x) in seen:
                continue
            seen.add(id(x))
            if tx is Cons:
                stack.append(x.head)
                stack.append(x.tail)
            else:
                stack.extend(x.args)
    return list(found.values())


def detach(suspended, task: Task) -> None:
    """Undo the suspension of `task`: out of its variables' suspension lists and of
    `suspended` (a PE's table, or the PE itself), so that no binding wakes it."""
    if not isinstance(suspended, dict):
        suspended = suspended.suspended
    waits = task.waits
    variables = waits.variables if type(waits) is WaitAll else waits or ()
    waiter = waits if type(waits) is WaitAll else task
    for v in variables:
        s = v.susp
        if isinstance(s, list) and waiter in s:  # a proxy's RemoteWaiters too
            s.remove(waiter)
            if not s and type(s) is list:
                v.susp = None
    task.waits = None
    suspended.pop(task, None)


class Guards:
    """The deep guards of one PE: runs by calling task and clause."""

    def __init__(self, pe, lookup, consts: dict | None = None) -> None:
        self.pe = pe
        self.lookup = lookup  # relation or primitive key -> this PE's step
        self.runs: dict[Task, dict[GuardSpec, GuardRun]] = {}
        # the program's guards by number (their constant's, the same on every PE), for runs that travel
        self.specs = {int(k[1:]): v for k, v in (consts or {}).items() if type(v) is GuardSpec}
        self.numbers = {id(v): k for k, v in self.specs.items()}
        self.exported: dict[int, GuardRun] = {}  # runs sent away, by their number here
        self.arrived: dict[tuple[int, int], GuardRun] = {}  # runs sent here, by (home PE, number)
        self.sent = 0
        self.fans: dict[int, bool] = {}  # by spec: one of its goals can fan out
        def slice_step(task: GuardTask):
            return self._slice(task)
        self.step = declare("guard", 1, 1, key="$guard")(slice_step)
        self.step.traced = True  # it reports its goals' rewrites itself
        if pe.net is not None:
            pe.net.add_kind(GuardKind(self))
            pe.net.add_handler("ABANDON", self._got_abandon)

    # -- what clause code calls -------------------------------------------------------------
    def guard(self, t: Task, spec: GuardSpec, values: tuple):
        """True-ish tuple of the guard's own variables when it succeeded; False when it failed;
        otherwise a list of variables for the calling clause to suspend on."""
        runs = self.runs.get(t)
        run = None if runs is None else runs.get(spec)
        if run is not None and run.at is not None and run.outcome is None:
            self._settle(run)
        if run is not None and type(run.outcome) is list:
            waits = [v for v in run.outcome if type(deref(v)) is Var]
            del runs[spec]
            if waits:
                return waits
            run = None  # bound meanwhile: start afresh
        if run is None:
            run = self._start(t, spec, values)
            self.runs.setdefault(t, {})[spec] = run
            return [run.done]
        outcome = run.outcome
        if outcome is True:
            return run.locals
        if outcome is False:
            return False
        return [run.done]  # running, or stuck on its own variables

    def done(self, t: Task) -> None:
        """The call `t` committed: its other guard runs are abandoned."""
        runs = self.runs.pop(t, None)
        if runs:
            for run in runs.values():
                run.abandoned = True
                if run.at is not None and self.exported.pop(run.number, None) is not None:
                    self.pe.net.send("ABANDON", run.at, (self.pe.number, run.number))

    # -- runs on other PEs ------------------------------------------------------------------
    def spare(self, task: GuardTask) -> bool:
        """A run may be sent away once, to start afresh there (what it did here is lost: an
        idle PE asks only between its PE's batches, which under MPI may be a thousand slices),
        when one of its goals can fan out."""
        run = task.args[0]
        if run.abandoned or run.home is not None or id(run.spec) not in self.numbers:
            return False
        fans = self.fans.get(id(run.spec))
        if fans is None:
            fans = self.fans[id(run.spec)] = any(getattr(self.lookup(g.target), "exportable", False)
                                                 for g in run.spec.goals)
        return fans

    def export(self, task: GuardTask) -> tuple:
        run = task.args[0]
        run.ready.clear()  # its goals are made afresh there
        self._unpark(run)
        self.sent += 1
        run.number = self.sent
        self.exported[run.number] = run
        return (self.pe.number, run.number, self.numbers[id(run.spec)], run.done, run.values)

    def moved(self, task: GuardTask, dst: int) -> None:
        task.args[0].at = dst

    def arrive(self, step, value: tuple, site) -> GuardTask:
        """A run sent here: started afresh, its outcome bound to the caller's `done`."""
        home, number, spec, done, values = value
        run = self._run_for(None, self.specs[spec], values, done)
        run.home = (home, number)
        self.arrived[run.home] = run
        counters = self.pe.stats.counters
        counters["guards_remote"] = counters.get("guards_remote", 0) + 1
        return GuardTask(self.step, (run,), None, site)

    def _got_abandon(self, m) -> None:
        run = self.arrived.pop(tuple(m.payload), None)
        if run is not None:
            run.abandoned = True  # its task drops it at its next step

    def _settle(self, run: GuardRun) -> None:
        """A run sent away: its outcome, once its `done` is bound there."""
        answer = deref(run.done)
        if type(answer) is Var:
            return
        self.exported.pop(run.number, None)
        if answer is FAILED:
            run.outcome = False
        elif type(answer) is Struct and answer.name == GUARD_OK:
            run.locals = tuple(to_list(answer.args[0])[0])
            run.outcome = True
        else:
            run.outcome = list(to_list(answer.args[0])[0])

    # -- runs -------------------------------------------------------------------------------
    def _start(self, t: Task, spec: GuardSpec, values: tuple) -> GuardRun:
        run = self._run_for(t, spec, values)
        task = GuardTask(self.step, (run,), None, spec.site)
        if self.pe.tracer is not None:
            self.pe.tracer.spawned(task)
        self.pe.to_back(task)
        return run

    def _run_for(self, t: Task | None, spec: GuardSpec, values: tuple, done: Var | None = None) -> GuardRun:
        env: list = [None] * spec.nvars
        for i, v in zip(spec.known, values):
            env[i] = v
        goals = [self._goal(g, env) for g in spec.goals]
        locals_ = tuple(env[i] if env[i] is not None else Var() for i in spec.local)
        run = GuardRun(t, spec, unbound_local_vars(values), locals_, tuple(values), done)
        for g in goals:
            g.group = run.group
        run.group.count = len(goals)
        run.ready.extend(reversed(goals))
        return run

    def _goal(self, call: Call, env: list) -> Task:
        return Goal(self.lookup(call.target), tuple(build_term(a, env) for a in call.args), None, call.span)

    def _slice(self, task: GuardTask):
        """The step of a GuardTask: run its guard's goals for a time slice."""
        run: GuardRun = task.args[0]
        if run.abandoned:
            self._report(task, "abandoned")
            self._unpark(run)
            return None
        pe = self.pe
        run.slices += 1
        outcome = self._run(run)
        if outcome is None:
            self._report(task, "ran a slice")
            pe.to_back(task)  # others take their turn
            return None
        self._report(task, {True: "succeeded", False: "failed"}.get(outcome, "suspended")
                     if type(outcome) is not list else "suspended")
        self._finish(run, outcome)
        return None

    def _report(self, task: GuardTask, what: str) -> None:
        """Each step of a GuardTask is a reduction (the PE's loop counts it): one rewrite event
        for it when traced, after the events of the guard's own goals in that slice."""
        tracer = self.pe.tracer
        if tracer is not None:
            run = task.args[0]
            caller = run.caller if run.caller is not None else task
            tracer.rewrite(caller, "guard", f"guard {what}: {caller.describe()}", [],
                           span=run.spec.site)

    def _run(self, run: GuardRun):
        """A slice of `run` with the PE's queue and suspensions its own; the outcome, or None."""
        pe = self.pe
        ready = pe.ready
        outer = list(ready)
        ready.clear()
        ready.extend(run.ready)
        outer_suspended = pe.suspended
        pe.suspended = run.suspended
        meter = pe.meter
        m0, m1 = meter
        saved: list = []
        for v in run.protected:
            if v.val is None:
                s = v.susp
                if s is None:
                    s = v.susp = []
                s.insert(0, Protect(v))
                saved.append((v, s))
        tracer = pe.tracer
        outcome = None
        done = [0]  # reductions so far: kept when a goal fails or binds the call mid-slice
        net = pe.net
        if net is not None:
            net.refuse_bind = _refuse_proxy
        try:
            self._steps(pe, ready, run, tracer, done)
        except BindsCall as bound:
            var = bound.var
            var.val = None
            for v, s in saved:
                if v is var:
                    v.susp = s
            outcome = [var]
        except ProgramFailure:
            outcome = False
        finally:
            if net is not None:
                net.refuse_bind = None
            for v, s in saved:
                if s and type(s[0]) is Protect:
                    del s[0]
                if v.susp is s and not s:
                    v.susp = None
            run.ready = deque(ready)
            ready.clear()
            ready.extend(outer)
            pe.suspended = outer_suspended
            meter[0], meter[1] = m0, m1
            pe.stats.reductions += done[0]
        if outcome is None:
            if run.group.count == 0:
                outcome = True
            else:  # a goal waiting for the caller: the guard waits, and starts afresh later
                outcome = self._waits_on_call(run) or (None if run.ready else "stuck")
        if outcome is not None and outcome is not True:
            self._unpark(run)
        return outcome

    def _steps(self, pe, ready, run: GuardRun, tracer, done: list[int]) -> None:
        """Up to a time slice of the run's goals (as pam.pe.PE.run would run them). `done[0]`
        counts the reductions as they happen: a step that suspends or fails is none (as in the
        PE's loop, and as the trace shows it: no rewrite event)."""
        meter = pe.meter
        calls = 0
        while ready and calls < SLICE:
            t = ready.pop()
            while True:
                calls += 1
                proc = t.proc
                pe.instructions += proc.cost
                meter[0] = SLICE - calls
                meter[1] = 0
                before = None
                if tracer is not None and not getattr(proc, "traced", False):
                    before = tracer.begin_task(t)
                try:
                    r = proc(t)
                except ProgramFailure:
                    done[0] += meter[1]  # the reductions a loop ran inside the step before it failed
                    raise
                extra = meter[1]
                meter[1] = 0
                calls += extra
                pe.instructions += extra * proc.cost
                kind = type(r)
                if kind is list:
                    done[0] += extra
                    pe.park(t, r)
                    break
                if kind is WaitAll:
                    done[0] += extra
                    pe.park_all(t, r)
                    break
                done[0] += 1 + extra
                if before is not None:
                    tracer.commit_task(before, r)
                if r is None:
                    if tracer is not None:
                        tracer.finished(t)
                    if t.group is not None:
                        pe.finish(t.group)
                    break
                t = r
                if calls >= SLICE:
                    ready.append(t)
                    break

    @staticmethod
    def _waits_on_call(run: GuardRun) -> list[Var]:
        """The call's variables its suspended goals wait on: protected ones, and proxies (a
        guard's own variables are all made on its PE)."""
        protected = {id(v) for v in run.protected}
        found: dict[int, Var] = {}
        for t in run.suspended:
            waits = t.waits
            for v in (waits.variables if type(waits) is WaitAll else waits or ()):
                v = deref(v)
                if type(v) is Var and (id(v) in protected or type(v.susp) not in (list, type(None))):
                    found[id(v)] = v
        return list(found.values())

    @staticmethod
    def _unpark(run: GuardRun) -> None:
        """Take the run's suspended goals out of the call's variables' suspension lists: the
        run is over, and a binding by the caller must not wake them."""
        for t in list(run.suspended):
            detach(run.suspended, t)
        run.ready.clear()

    def _finish(self, run: GuardRun, outcome) -> None:
        run.outcome = outcome
        if run.home is not None:
            self.arrived.pop(run.home, None)
        if outcome == "stuck":
            return  # the caller waits on `done` for ever: a deadlock at quiescence names it
        if run.home is None:
            self.pe.bind(run.done, mkatom("done"))
        elif outcome is True:  # the outcome goes home as the binding of its `done`
            self.pe.bind(run.done, Struct(GUARD_OK, (from_list(run.locals),)))
        elif outcome is False:
            self.pe.bind(run.done, FAILED)
        else:
            self.pe.bind(run.done, Struct(GUARD_WAITS, (from_list(outcome),)))


def _refuse_proxy(proxy: Var, remote) -> None:
    """Net.refuse_bind during a guard's slice: binding a proxy binds a variable of the call."""
    proxy.susp = remote
    raise BindsCall(proxy)


class GuardKind:
    """Guard runs travel before they start (`Guards.spare`), as their spec's number, the call's
    values and their `done` variable."""

    name = "guard"
    task_class = GuardTask

    def __init__(self, guards: Guards) -> None:
        self.spare = guards.spare
        self.export = guards.export
        self.moved = guards.moved
        self.arrive = guards.arrive
