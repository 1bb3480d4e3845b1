"""ML evaluation as tasks of the PE loop: a task steps its stack of generator frames.

A task's `stack` holds the generators of the ML calls in progress (pam/ml/codegen.py); the
driver sends each callee's result to its caller, throws a raised exception into the caller
(where a `handle` may catch it), replaces a frame on a tail call and pushes one on a call. So a
step ends as the machine's protocol says: the task finished (commit), it waits for the result of
a forked task (suspend on that variable), or its exception reached the top (fail).

`ForkJoin.par`: the right thunk becomes a child task that anyone may run or steal; the parent
runs the left thunk, then joins: a child no one started is cancelled and run in place (so on one
PE, par costs little more than two calls); otherwise the parent suspends on the child's result
variable. A result is `(True, value)` or `(False, packet)`; the join re-raises the packet, and if
the left thunk raised, that exception wins, as in sequential evaluation.
"""

from __future__ import annotations

from types import GeneratorType

from pam.errors import Finished, Uncaught
from pam.ml.codegen import CANCEL, FORK, JOIN
from pam.ml.values import Packet
from pam.step import declare
from pam.task import Task
from pam.terms import Var

INNER = 100  # frame transitions (calls, returns, raises) per step, before the task yields the PE
TRANSITION_COST = 30  # T800 instructions per transition: a call or return with its frame work

UNSTARTED, STARTED, CANCELLED = 0, 1, 2


class MLTask(Task):
    """An ML evaluation. `thunk` is the closure a forked task applies to `()`; `result` is
    the variable its outcome binds (None for the program's main task)."""

    __slots__ = ("stack", "value", "exc", "thunk", "result", "state", "pending")

    # At the end of a slice an evaluation continues first (work first: its forked children
    # wait for thieves or its join).
    resume_first = True
    # A queued evaluation is a forked child no one has started: a thief or its parent's join
    # runs it (an endless one whose parent no longer needs it must never be started).
    starves = False

    def __init__(self, proc, thunk, result: Var | None, site, stack=None) -> None:
        super().__init__(proc, (), None, site)
        self.stack = stack if stack is not None else []
        self.value = None
        self.exc = None
        self.thunk = thunk
        self.result = result
        self.state = UNSTARTED
        self.pending = None


class MLTaskKind:
    """Only a forked thunk that no one has started, and that is pure, may move; it leaves
    with the globals its code may read, and its result variable stays here (the thief binds
    it). `place` is the PE's ML code (pam.ml.loader.MLPlace)."""

    name = "ml"
    task_class = MLTask

    def __init__(self, place) -> None:
        self.place = place

    def spare(self, task: MLTask) -> bool:
        return task.state == UNSTARTED and task.thunk.pure

    def export(self, task: MLTask) -> tuple:
        task.state = STARTED
        return (task.thunk, task.result, self.place.globals_for(task.thunk))

    def arrive(self, step, value: tuple, site) -> MLTask:
        thunk, result, globals_ = value
        self.place.set_globals(globals_)
        return MLTask(step, thunk, result, site)


def make_nested(calls: list, tick, settle, trace=None):
    """The driver of direct code that went deeper than Python recursion may: it runs a frame
    stack on the heap to the end (direct functions never fork) and returns the result or
    raises the exception. `calls[0]` counts its applications (calls and tail calls) as direct
    code counts calls, and `tick()` checks the limits now and then; `settle(exc)` (pam/ml/loader.py)
    takes back the calls a caught exception kept from being made. `entered` is 1 when the
    caller has not counted the application of `gen` itself. With `trace` (pam/ml/tracing.py)
    each application is a rewrite event; `place` is where `gen`'s frame is below the task's top
    frame (each frame on the heap stack one deeper)."""
    GEN = GeneratorType

    def nested(gen, entered: int = 0, place: int = 0):
        st = [gen]
        value = exc = None
        n = entered
        if trace is not None and entered:
            trace.nested(gen, place)
        while True:
            if n > 16383:
                calls[0] += n
                n = 0
                tick()
            try:
                if exc is None:
                    r = gen.send(value)
                else:
                    e, exc = exc, None
                    r = gen.throw(e)
            except StopIteration as s:
                v = s.value
                if type(v) is GEN:
                    st[-1] = gen = v
                    value = None
                    n += 1
                    if trace is not None:
                        trace.nested(v, place + len(st) - 1)
                    continue
                st.pop()
                if not st:
                    calls[0] += n
                    return v
                gen = st[-1]
                value = v
            except Packet as p:
                settle(p)
                st.pop()
                if not st:
                    calls[0] += n
                    raise
                gen = st[-1]
                exc = p
                value = None
            else:
                st.append(r)
                gen = r
                value = None
                n += 1
                if trace is not None:
                    trace.nested(r, place + len(st) - 1)
    return nested


def make_step(pe, describe, calls: list, banked: list, settle, trace=None):
    """The `proc` of ML tasks on `pe`; `describe(packet)` is the text of an uncaught exception.
    Direct code counts its calls in `calls[0]`, and `tick` moves them to `banked[0]` now and
    then (pam/ml/loader.py). With `trace` (pam/ml/tracing.py) every application is also a
    rewrite event."""
    GEN = GeneratorType
    stats = pe.stats
    ready = pe.ready

    def account(transitions: int, applied: int, stepped: int = 1) -> None:
        """A step made `transitions` frame transitions (virtual time) and `applied` applications
        (reductions), and direct code counted its calls. The PE loop counted the step itself as
        one reduction when it did not suspend (`stepped`): that one is taken back, so that only
        applications are reductions (docs/ml.md)."""
        direct = calls[0] + banked[0]
        calls[0] = banked[0] = 0
        stats.reductions += applied + direct - stepped
        pe.instructions += (transitions + direct) * TRANSITION_COST

    def finish(t, ok: bool, v):
        if t.result is None:
            if ok:
                raise Finished()
            raise Uncaught(f"uncaught exception {describe(v)}")
        pe.bind(t.result, (ok, v))
        return None

    @declare("ml", 0, 10, key="ml")
    def step(t):
        st = t.stack
        value, exc = t.value, t.exc
        applied = 0
        if trace is not None:
            trace.task = t
        if t.pending is not None:  # a join that waits for a child's result
            r = t.pending.result
            if r.val is None:
                return [r]
            t.pending = None
            ok, v = r.val
            if ok:
                value = v
            else:
                exc = v
        elif not st:  # a forked task starts: apply its thunk
            if t.state == CANCELLED:
                stats.reductions -= 1  # the PE loop counted the step; nothing was applied
                return None
            t.state = STARTED
            c = t.thunk
            applied = 1
            if trace is not None:
                trace.thunk(c, 0)
            try:
                v = c.fn(*c.env, ())
            except Packet as p:
                settle(p)
                account(0, 1)
                return finish(t, False, p)
            if not c.gen:
                account(0, 1)
                return finish(t, True, v)
            st.append(v)
        gen = st[-1]
        n = INNER
        while True:
            try:
                if exc is None:
                    r = gen.send(value)
                else:
                    e, exc = exc, None
                    r = gen.throw(e)
            except StopIteration as s:
                v = s.value
                if type(v) is GEN:  # a tail call: the callee replaces the frame
                    st[-1] = gen = v
                    value = None
                    applied += 1
                    if trace is not None:
                        trace.call(v, len(st) - 1)
                    continue
                st.pop()
                if not st:
                    account(INNER - n, applied)
                    return finish(t, True, v)
                gen = st[-1]
                value = v
            except Packet as p:
                settle(p)
                st.pop()
                if not st:
                    account(INNER - n, applied)
                    return finish(t, False, p)
                gen = st[-1]
                exc = p
                value = None
            else:
                if type(r) is GEN:  # a call
                    st.append(r)
                    gen = r
                    value = None
                    applied += 1
                    if trace is not None:
                        trace.call(r, len(st) - 1)
                else:
                    kind, arg = r
                    value = None
                    if kind == FORK:
                        child = MLTask(step, arg, Var(), t.site)
                        pe.push(child)
                        value = child
                        applied += 1
                        if trace is not None:
                            trace.fork(child, len(st) - 1)
                    elif kind == JOIN:
                        if arg.state == UNSTARTED:  # no one took it: run it here
                            arg.state = CANCELLED
                            if ready and ready[-1] is arg:  # usually the newest: drop it now
                                ready.pop()
                            c = arg.thunk
                            applied += 1
                            if trace is not None:
                                trace.thunk(c, len(st), arg)
                            try:
                                v = c.fn(*c.env, ())
                            except Packet as p:
                                settle(p)
                                exc = p
                                continue
                            if c.gen:
                                st.append(v)
                                gen = v
                            else:
                                value = v
                        else:
                            r = arg.result
                            if r.val is None:
                                t.pending = arg
                                t.value = t.exc = None
                                account(INNER - n, applied, 0)
                                return [r]
                            ok, v = r.val
                            if ok:
                                value = v
                            else:
                                exc = v
                    elif kind == CANCEL:
                        if arg.state == UNSTARTED:
                            arg.state = CANCELLED
                            if ready and ready[-1] is arg:
                                ready.pop()
            n -= 1
            if not n or calls[0] >= INNER:  # the slice is used up (direct calls count too)
                t.value, t.exc = value, exc
                account(INNER - n, applied)
                return t

    if trace is not None:
        step.traced = True  # it reports its own rewrites (pam.trace)
    return step
