"""Rewrite traces: one event stream of a run, recorded by a `Tracer` on each PE (docs/trace.md).

A traced run is made by `Machine(..., trace=Trace(header, limit))`: each PE then gets a
`Tracer` (`pe.tracer`, and its Net's `net.tracer`), runs its traced loop (`PE.run_traced`) and
the traced code of its dialect's runtime (`runtime_for(module, tracing=True)`). An untraced run
has `pe.tracer = None` and runs none of this: the hot loop (`PE.run`) and the code generators'
plain code are unchanged, and the few hooks outside them (a message sent or received, an idle
turn) test `tracer is not None` once per message or turn, never per reduction.

Events are dicts in the order they happen (simulated PEs run one at a time, so the order, and
with it the stream, is deterministic). Each has "ev", "pe", "seq" (per PE, from 0) and "t" (the
PE's clock in microseconds: virtual time on one PE and in simulation, wall time under MPI). The
fields of each kind are in docs/trace.md.

How a runtime's code reports its reductions (PARLOG's traced code: pam/parlog/rules.py and
clause_code.py; ML's: pam/ml/tracing.py):

- a step function that reports its own rewrites has the attribute `traced = True`; for any other
  step (a primitive, a step made by hand) the traced loop reports one rewrite per committed step
  itself (`Tracer.begin_task` / `Tracer.commit_task`), so every reduction --stats counts is one
  rewrite event;
- a reduction: `begin(task, rule, redex, variables, clause=, span=)` when it commits (before it
  binds anything: `variables` are the unbound variables of the redex, whose bindings are
  reported), then `spawned(task)` for each task it creates (PARLOG's traced code makes its goals
  through a factory that calls it), `bound()` once its own bindings are made (optional: `end`
  calls it too), and `end()`; or `continues(task, goal, variables)` when the task itself goes on
  as a new goal (a body's first goal, a loop's next round), which ends it. Reductions may nest (a
  goal run inside its caller's step begins while its caller's rewrite is open): each is its own
  event, `inline` when it is not the first reduction of the step the PE's loop called. The open
  event is `open[-1][0]` (None past the cut), for a runtime that sets a field itself (ML's depth);
- `rewrite(task, rule, redex, ...)` is begin and end at once, for a reduction that creates and
  binds nothing worth listing.

The rest is reported by the machine: suspensions and wake-ups by the PE's traced `park`,
`park_all` and `wake` (installed by `Trace.tracer`), failures by the traced loop, messages, steals
and idle turns by the Net (`send`, `receive`, `exporting`, `arrived`, `steal`, `idle`), the end
by `Trace.terminate`. A task's id is dropped when it terminates (`finished`).

Texts are made with the runtime's writer (`Tracer.writer(term, names) -> str`, which the runtime
sets at load time: PARLOG's is write_term; the default writes `str(term)`), on as much of a term
as an event shows (`shown`: TERM_NODES nodes, breadth first): `term_text(term)` and
`task_text(task)` return the text and the unbound variables in it, named by `name(var)`: `_N`
with N = PE + 1 + PEs * k, unique in the trace (the variable is kept alive so that its name
stays its own).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator

from pam.terms import Cons, Struct, Var, mkatom

VERSION = 1
TEXT_LIMIT = 300  # characters of a goal or term text in an event; longer ones end in "..."
TERM_NODES = 60  # nodes of a term an event shows (about TEXT_LIMIT characters); past them, `...`
ELIDED = mkatom("...")
STATUSES = ("success", "failure", "deadlock", "limit")


class Trace:
    """One run's stream: its header, the events of every PE in order, and the limit on them.
    `limit` (--trace-limit) bounds the events kept; past it the stream is cut (the run goes on)."""

    __slots__ = ("header", "events", "limit", "cut", "tracers", "ended")

    def __init__(self, header: dict, limit: int | None = None) -> None:
        self.header = {"trace": "hpgrem", "version": VERSION, **header}
        self.events: list[dict] = []
        self.limit = limit
        self.cut = False
        self.tracers: list[Tracer] = []
        self.ended = False

    def tracer(self, pe, now: Callable[[], float]) -> Tracer:
        """A Tracer for `pe` whose clock is `now()` (microseconds), attached to it: `pe.tracer`,
        its traced loop and its traced wake and park (the Net's hooks are attached by Net)."""
        t = Tracer(self, pe, now)
        self.tracers.append(t)
        pe.tracer = t
        pe.run = pe.run_traced
        pe.wake = t.traced_wake(pe.wake)
        pe.park = t.traced_park(pe.park)
        pe.park_all = t.traced_park_all(pe.park_all)
        if pe.net is not None:
            pe.net.tracer = t
        return t

    def add(self, event: dict) -> bool:
        """Record `event`; False (and the stream is cut) once the limit is reached."""
        if self.cut:
            return False
        if self.limit is not None and len(self.events) >= self.limit:
            self.cut = True
            return False
        self.events.append(event)
        return True

    def terminate(self, status: str, suspended: list[int], in_flight: list[int] = ()) -> None:
        """The run's end, on PE 0: how it ended, the tasks left suspended (a deadlock's) and the
        messages still in flight when it ended (sent, never received)."""
        if self.ended:
            return
        self.ended = True
        event = {"status": status, "suspended": sorted(suspended)}
        if in_flight:
            event["in_flight"] = sorted(in_flight)
        self.tracers[0].event("terminate", event)

    def suspended_tasks(self) -> list[int]:
        """The ids of every task left suspended on the PEs traced here."""
        return [tr.tid(t) for tr in self.tracers for t in tr.pe.suspended]

    def end_line(self) -> dict:
        return {"ev": "end", "events": len(self.events), "cut": self.cut, "limit": self.limit}

    def lines(self) -> Iterator[str]:
        """The stream as JSON lines (each without its newline): header, events, end."""
        yield dumps(self.header)
        for e in self.events:
            yield dumps(e)
        yield dumps(self.end_line())


def dumps(obj: dict) -> str:
    """One line of the stream: compact, keys in the order made, UTF-8 kept as is."""
    return json.dumps(obj, ensure_ascii=False, separators=(", ", ": "))


def clip(text: str) -> str:
    return text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT - 3] + "..."


def shown(terms: tuple) -> tuple[tuple, list[Var]]:
    """A copy of `terms` that stops after TERM_NODES nodes (what lies past them is the atom
    `...`), and the unbound variables in it, in order of their place: what an event shows of
    them, made in time proportional to that (a long list, a long chain of bound variables, a
    cyclic term) rather than to the terms. The nodes are taken breadth first, so every argument
    of a goal shows before the depths of any one of them."""
    budget = TERM_NODES
    nodes: list = list(terms)
    parts: list = [None] * len(nodes)  # the slots of a compound node's parts
    found: dict[int, Var] = {}
    i = 0
    while i < len(nodes):
        x = nodes[i]
        while type(x) is Var and x.val is not None and budget > 0:  # a chain of bindings counts too
            x = x.val
            budget -= 1
        if budget <= 0:
            nodes[i] = ELIDED
            i += 1
            continue
        budget -= 1
        nodes[i] = x
        tx = type(x)
        if tx is Var:
            found.setdefault(id(x), x)
        elif tx is Cons or tx is Struct:
            sub = (x.head, x.tail) if tx is Cons else x.args[:budget + 1]
            parts[i] = range(len(nodes), len(nodes) + len(sub))
            nodes.extend(sub)
            parts.extend([None] * len(sub))
        i += 1
    out = [None] * len(nodes)
    for i in reversed(range(len(nodes))):  # parts come after their term: built first
        x, k = nodes[i], parts[i]
        if k is None:
            out[i] = x
        elif type(x) is Cons:
            out[i] = Cons(out[k[0]], out[k[1]])
        else:
            out[i] = Struct(x.name, tuple(out[j] for j in k))
    return tuple(out[:len(terms)]), list(found.values())


def span_of(site) -> list | None:
    """A source span as the stream writes it: [file, line, col]."""
    if site is None or getattr(site, "line", 0) <= 0:
        return None
    return [site.file, site.line, site.col]


def _plain_text(term, names: dict) -> str:
    return names.get(id(term), "_") if type(term) is Var else str(term)


class Tracer:
    """One PE's recorder. Tasks get ids unique in the trace (`tid`: PE + PEs * k) when first
    seen; a task that goes on as a new goal (`continues`) gets a new id. Every method is safe to
    call after the stream was cut (it then records nothing but still counts rewrites)."""

    __slots__ = ("trace", "pe", "number", "pes", "now", "seq", "ids", "depths", "next_id", "names",
                 "kept", "next_name", "open", "rewrites", "fresh", "mark", "offset", "messages", "leaving",
                 "writer", "idle_now")

    def __init__(self, trace: Trace, pe, now: Callable[[], float]) -> None:
        self.trace = trace
        self.pe = pe
        self.number = pe.number
        self.pes = trace.header.get("pes", 1)
        self.now = now
        self.seq = 0
        self.ids: dict = {}  # task -> its current id
        self.depths: dict[int, int] = {}  # task id -> goal depth
        self.next_id = 0
        self.names: dict[int, str] = {}  # id(var) -> name
        self.kept: list[Var] = []  # named variables, alive so their ids stay theirs
        self.next_name = 0
        self.open: list = []  # rewrites begun and not ended: [event or None, variables]
        self.rewrites = 0  # rewrite events on this PE, counted past the cut too (the loop checks it)
        self.fresh = False  # the PE's loop called a step and no rewrite has begun in it yet
        self.mark = 0  # the PE's instructions when its running batch began (the simulated clock)
        # instructions of the reductions run inside the running step so far, which the PE adds to
        # its count only when the step returns: the virtual clock of an event inside a step
        self.offset = 0
        self.messages = 0
        self.leaving = None  # the id of the task the next SPAWN carries
        self.writer: Callable[[object, dict], str] = _plain_text  # the runtime sets its own at load
        self.idle_now = False

    # -- names and texts ----------------------------------------------------------------------
    def name(self, var: Var) -> str:
        name = self.names.get(id(var))
        if name is None:
            self.next_name += 1
            name = self.names[id(var)] = f"_{self.number + 1 + self.pes * (self.next_name - 1)}"
            self.kept.append(var)
        return name

    def names_of(self, variables) -> list[str]:
        return [self.name(v) for v in variables]

    def text(self, term) -> str:
        """`term` written with the runtime's writer (as much as an event shows: `shown`), its
        variables named here."""
        return self.term_text(term)[0]

    def term_text(self, term) -> tuple[str, list[Var]]:
        """`term`'s text and the unbound variables in it."""
        (part,), variables = shown((term,))
        self.names_of(variables)
        return clip(self.writer(part, self.names)), variables

    def task_text(self, task) -> tuple[str, list[Var]]:
        """A task as reports write it (`describe`, on as much of its arguments as an event
        shows), and the unbound variables in that, named here."""
        part = copy.copy(task)
        part.args, variables = shown(task.args)
        self.names_of(variables)
        return clip(part.describe(self.names)), variables

    # -- tasks --------------------------------------------------------------------------------
    def tid(self, task, depth: int = 0) -> int:
        """The task's id, given one (at `depth`) if it has none."""
        i = self.ids.get(task)
        if i is None:
            i = self._new_id(task, depth)
        return i

    def _new_id(self, task, depth: int) -> int:
        i = self.number + self.pes * self.next_id
        self.next_id += 1
        self.ids[task] = i
        self.depths[i] = depth
        return i

    def finished(self, task) -> None:
        """`task` terminated: its id is no longer needed (nor the task kept alive for it)."""
        self.ids.pop(task, None)

    def depth(self, task) -> int:
        return self.depths[self.tid(task)]

    # -- the stream ---------------------------------------------------------------------------
    def event(self, ev: str, fields: dict) -> dict | None:
        """Record an event of kind `ev` with `fields` at the PE's clock; None once cut."""
        event = {"ev": ev, "pe": self.number, "seq": self.seq, "t": round(self.now(), 3), **fields}
        if not self.trace.add(event):
            return None
        self.seq += 1
        self.idle_now = ev == "idle"
        return event

    # -- rewrites -----------------------------------------------------------------------------
    def begin(self, task, rule: str, redex: str, variables: list, *, clause: int | None = None,
              span=None, cost: int = 0) -> None:
        """A reduction of `task` commits: the rule that rewrote it, its clause (1-based; None
        for a function), the rule's source span, the redex's text and its unbound variables;
        `cost` its instructions, by which the clock moves on when it runs inside a step."""
        self.rewrites += 1
        inline = not self.fresh
        self.fresh = False
        if inline:
            self.offset += cost
        if self.trace.cut:
            self.open.append([None, ()])
            return
        i = self.tid(task)
        fields = {"task": i, "rule": rule}
        if clause is not None:
            fields["clause"] = clause
        fields["span"] = span_of(span)
        fields["redex"] = clip(redex)
        fields["vars"] = self.names_of(variables)
        fields["bind"] = None  # filled in by bound()
        fields["spawn"] = []
        fields["depth"] = self.depths[i]
        if inline:
            fields["inline"] = True
        self.open.append([self.event("rewrite", fields), variables])

    def bound(self) -> None:
        """The open reduction has made its bindings: record those of its redex's variables."""
        top = self.open[-1]
        event = top[0]
        if event is None or event["bind"] is not None:
            return
        event["bind"] = {self.name(v): self.text(v.val) for v in top[1] if v.val is not None}

    def spawned(self, task):
        """The open reduction created `task` (returned, so a factory can wrap a constructor)."""
        if self.trace.cut:
            return task
        if not self.open:
            self.tid(task)
            return task
        event = self.open[-1][0]
        depth = 0 if event is None else event["depth"] + 1
        i = self._new_id(task, depth)
        if event is not None:
            goal, variables = self.task_text(task)
            event["spawn"].append({"task": i, "goal": goal, "vars": self.names_of(variables)})
        return task

    def continues(self, task, goal: str | None = None, variables: list | None = None) -> None:
        """The open reduction ends with `task` going on as a new goal (its first body goal, a
        loop's next round): the task gets a new id, listed among those spawned. `goal` and
        `variables` give the new goal's text where the task does not hold it yet (a loop)."""
        event = self.open[-1][0]
        if event is not None:
            self.bound()
            depth = event["depth"] + 1
            i = self._new_id(task, depth)
            if goal is None:
                goal, variables = self.task_text(task)
            event["spawn"].append({"task": i, "goal": clip(goal), "vars": self.names_of(variables)})
        self.open.pop()

    def end(self) -> None:
        """The open reduction is over (its task terminated, or it was suspended on nothing)."""
        if self.open[-1][0] is not None:
            self.bound()
        self.open.pop()

    def rewrite(self, task, rule: str, redex: str, variables: list = (), **fields) -> None:
        """A whole reduction at once: begin, then end."""
        self.begin(task, rule, redex, list(variables), **fields)
        self.end()

    # -- steps that do not report their own reductions ----------------------------------------
    def begin_task(self, task) -> list:
        """Before the traced loop runs a step that reports nothing itself: what it needs to
        report the reduction if the step commits (`commit_task`)."""
        goal, variables = self.task_text(task) if not self.trace.cut else ("", [])
        return [task, task.proc, goal, variables]

    def commit_task(self, before: list, result) -> None:
        """That step committed, returning `result` (None, or the task to run next)."""
        task, proc, redex, variables = before
        self.begin(task, proc.key, redex, variables, span=task.site, cost=proc.cost)
        if result is not None and result is task:
            self.continues(task)
        else:
            if result is not None:
                self.spawned(result)
            self.end()

    # -- suspensions --------------------------------------------------------------------------
    def suspend(self, task, on) -> None:
        if self.trace.cut:
            return
        variables = list({id(v): v for v in on if type(v) is Var}.values())  # a clause may name one twice
        self.event("suspend", {"task": self.tid(task), "goal": self.task_text(task)[0],
                               "on": self.names_of(variables)})

    def resume(self, task, var: Var) -> None:
        if not self.trace.cut:
            self.event("resume", {"task": self.tid(task), "by": self.name(var)})

    def fail(self, task, goal: str | None, span) -> None:
        if not self.trace.cut:
            self.event("fail", {"task": None if task is None else self.tid(task),
                                "goal": goal, "span": span_of(span)})

    def traced_wake(self, wake):
        """`PE.wake` that reports each task it makes runnable."""
        suspended = self.pe.suspended

        def traced(var: Var) -> None:
            waiting = var.susp
            before = [w for w in (waiting or ()) if getattr(w, "task", w) in suspended]
            wake(var)
            for w in before:
                t = getattr(w, "task", w)
                if t not in suspended:
                    self.resume(t, var)
        return traced

    def traced_park(self, park):
        def traced(task, waits: list) -> None:
            park(task, waits)
            self.suspend(task, waits)
        return traced

    def traced_park_all(self, park_all):
        def traced(task, wait) -> None:
            park_all(task, wait)
            if wait.left:
                self.suspend(task, wait.variables)
        return traced

    # -- the network --------------------------------------------------------------------------
    def send(self, kind: str, dst: int, nbytes: int, hops: int) -> tuple[int, int | None, int]:
        """A message leaves: its id, and the task it carries (with that task's depth), which
        travel with it (`Message.trace`) so that its receiver reports the same ids."""
        msg = self.number + self.pes * self.messages
        self.messages += 1
        task, self.leaving = self.leaving, None
        fields = {"msg": msg, "kind": kind, "to": dst, "bytes": nbytes, "hops": hops}
        if task is not None:
            fields["task"] = task
        if not self.trace.cut:
            self.event("send", fields)
        return (msg, task, 0 if task is None else self.depths.get(task, 0))

    def exporting(self, task) -> None:
        """The next message sent carries `task` (SPAWN)."""
        i = self.tid(task)
        self.ids.pop(task, None)
        self.leaving = i

    def receive(self, message) -> None:
        if self.trace.cut:
            return
        trace = message.trace
        self.event("receive", {"msg": None if trace is None else trace[0], "kind": message.kind,
                               "from": message.src, "bytes": message.nbytes, "hops": len(message.hops) - 1})

    def arrived(self, task, message) -> None:
        """A task that travelled in `message` keeps the id it had (and its depth)."""
        trace = message.trace
        if trace is None or trace[1] is None:
            self.tid(task)
            return
        self.ids[task] = trace[1]
        self.depths[trace[1]] = trace[2]

    def steal(self, task, thief: int) -> None:
        """This PE (the victim) gives `task` to `thief`."""
        if not self.trace.cut:
            self.event("steal", {"task": self.tid(task), "from": self.number, "to": thief})

    def idle(self) -> None:
        """The PE has no ready task (reported once until it runs again)."""
        if not self.idle_now and not self.trace.cut:
            self.event("idle", {})


__all__ = ["STATUSES", "TEXT_LIMIT", "Trace", "Tracer", "VERSION", "clip", "dumps", "span_of"]
