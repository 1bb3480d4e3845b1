"""Compiles HPGREM relations, once at load time, into Python step functions (threaded code).

Each relation becomes one function `step(task)` that tries its clauses group by group: one-way
matching of the `?` arguments (suspending where a pattern needs structure that an argument does
not have yet), the flat guard, then commit: output unification, inline primitives, and the body's
goals as tasks. The first body goal continues in the same task object (no allocation, no trip
through the queue), which is what makes deep recursion and long streams cheap. The shapes the
passes asked for (docs/passes.md: a switch, a loop, lists built in place, arithmetic tasks)
are pam/parlog/relation_code.py's and pam/parlog/clause_code.py's.

The generated source is plain Python, one closure per relation, so `hpgrem ir` readers and
debuggers can look at it (`RuleCompiler.source`); each is declared a step (pam/step.py).
`ParlogRuntime` is PARLOG's runtime (pam/runtimes.py): it loads them with the primitives onto
each PE.
"""

from __future__ import annotations

import math

from hpgrem.ir import Module, use_counts, walk
from hpgrem.ir.parlog import SEARCH, AllSolutions, Atom, Float, Int, Relation, Struct, Term, Var
from pam.parlog import primitives, search
from pam.parlog.clause_code import is_ground, to_runtime
from pam.costs import DEFAULT
from pam.emit import Emitter
from pam.errors import ProgramFailure
from pam.parlog.goal import Goal, GoalKind
from pam.parlog.guards import Guards, guard_value
from pam.parlog.subcomp import Subcomputations
from pam.parlog.notes import COST, EXPORTABLE
from pam.twins import traced_twin
from pam.parlog.profile_names import rule_names
from pam.generated import GeneratedCode
from pam.parlog.relation_code import RelationCode, Shape
from pam.parlog.search import SearchCompiler
from pam.step import declare
from pam.task import Placed, Seq
from pam.terms import Cons
from pam.terms import Struct as RStruct
from pam.terms import Var as RVar
from pam.terms import deref, from_list, mkatom
from pam.unify import match_eq
from pam.parlog.write import write_term

__all__ = ["ParlogRuntime", "RuleCompiler", "is_ground", "load", "to_runtime"]


class RuleCompiler:
    """Generates the step functions of a module's relations. With `counting`, the code also
    counts clause tries, guard tests and enqueues into the PE's statistics (for measuring the
    passes; it costs time, so runs are not counted by default). With `tracing`, it reports each
    reduction to the PE's tracer (pam.trace), those run inside a step too (a loop's rounds, goals
    run in their caller's step): the same shapes, so the same schedule, with calls added at
    each commit (`TR` as it begins, `TB` once its bindings are made, `TE` or `TK`/`TL` as it
    ends, its goals made through a factory that records them), and no list built in place
    (a cell whose tail is still a hole could not be written in the trace)."""

    def __init__(self, module: Module, counting: bool = False, tracing: bool = False):
        self.module = module
        self.counting = counting
        self.tracing = tracing
        self.consts: dict[str, object] = {}
        self.const_names: dict[tuple, str] = {}
        # all-solutions relations are search's (pam/parlog/search.py); the steps of the constructs'
        # relations come from there too, named here for the clauses that call them
        self.searches = SearchCompiler(module)
        self.proc_names = {key: f"R{i}" for i, key in enumerate(module.rules)
                           if not isinstance(module.rules[key], AllSolutions) or module.rules[key].construct != SEARCH}
        self.out = Emitter()
        self.later: list[list[str]] = []  # steps made for one call site, emitted after their relation
        # By node id (the module keeps its nodes alive): whether a term is ground, and the
        # structures each clause uses in several places (the IR is a graph): each found once.
        self.grounds: dict[int, bool] = {}
        self.shared: dict[int, frozenset[int]] = {}
        self.source = self._generate()
        self.code = None  # the source compiled (pam/generated.py), once loaded

    # -- constants ------------------------------------------------------------------------------
    def const(self, kind: str, value, make) -> str:
        key = (kind, value if kind != "term" else id(value))
        name = self.const_names.get(key)
        if name is None:
            name = f"K{len(self.consts)}"
            self.const_names[key] = name
            self.consts[name] = make()
        return name

    def atom(self, name: str) -> str:
        return self.const("atom", name, lambda: mkatom(name))

    def site(self, span) -> str:
        return self.const("site", span, lambda: span)

    def ground(self, term: Term) -> str:
        if isinstance(term, Atom):
            return self.atom(term.name)
        if isinstance(term, Int) or isinstance(term, Float) and math.isfinite(term.value):
            return repr(term.value)
        if isinstance(term, Float):  # inf and nan (a .hpg may hold them) have no literal
            return self.const("float", repr(term.value), lambda: term.value)
        return self.const("term", term, lambda: to_runtime(term))

    def is_ground(self, term: Term) -> bool:
        """Whether `term` has no variable; computed once for each distinct node of the module."""
        if not isinstance(term, Struct):
            return not isinstance(term, Var)
        known = self.grounds.get(id(term))
        if known is not None:
            return known
        grounds = self.grounds  # of structures only (a leaf is known at once)
        stack: list = [(term, False)]
        while stack:
            t, done = stack.pop()
            if id(t) in grounds:
                continue
            if done:
                grounds[id(t)] = all(grounds[id(a)] if isinstance(a, Struct) else not isinstance(a, Var) for a in t.args)
            else:
                stack.append((t, True))
                stack.extend((a, False) for a in t.args if isinstance(a, Struct) and id(a) not in grounds)
        return grounds[id(term)]

    def shared_terms(self, clause) -> frozenset[int]:
        """The ids of the structures with variables that `clause` uses in several places (none
        in a tree): its code builds each once (pam/parlog/clause_code.py)."""
        out = self.shared.get(id(clause))
        if out is None:
            counts = use_counts((clause,))
            out = frozenset(i for i, n in counts.items() if n > 1) if any(n > 1 for n in counts.values()) else frozenset()
            if out:
                out = frozenset(id(x) for x in walk(clause) if id(x) in out and isinstance(x, Struct) and not self.is_ground(x))
            self.shared[id(clause)] = out
        return out

    def count(self, what: str) -> None:
        if self.counting:
            self.out(f"ST[{what!r}] += 1")

    def trace(self, line: str) -> None:
        """A line of the traced code only."""
        if self.tracing:
            self.out(line)

    # -- the module -----------------------------------------------------------------------------
    def _generate(self) -> str:
        e = self.out
        e("def make(RT):")
        e.indent()
        for name in ("Var", "Struct", "Cons", "Goal", "Seq", "Placed", "declare", "deref", "match_eq", "from_list",
                     "put", "wake", "spawn", "park_new", "push", "susp1", "fail_goal", "fail_output",
                     "arith_test", "INLINE", "PROCS", "CONSTS", "METER", "ST", "PRIMITIVE_COST", "new_cell",
                     "RUN", "SOLO", "SPARE", "GUARD", "GDONE", "GUARD_VALUE", "SEARCHES", *(("TR", "TB", "TE", "TK", "TL") if self.tracing else ())):
            e(f"{name} = RT['{name}']")
        e("globals().update(CONSTS)")
        for key, rel in self.module.rules.items():
            if isinstance(rel, AllSolutions):
                if key in self.proc_names:
                    e(f"{self.proc_names[key]} = SEARCHES[{key!r}]")
                continue
            self.relation(rel)
            for lines in self.later:
                for line in lines:
                    e(line)
            self.later = []
        e("return {" + ", ".join(f"{key!r}: {p}" for key, p in self.proc_names.items()) + "}")
        return "\n".join(e.lines) + "\n"

    def relation(self, rel: Relation) -> None:
        e = self.out
        notes = self.module.annotations.get(rel.key)
        if notes is None or COST not in notes:
            raise ValueError(f"relation {rel.key} has no granularity annotations: compile the module with "
                             "hpgrem.driver.pipeline (the machine runs no analysis of its own)")
        shape = Shape(notes, rel)
        if self.tracing:
            shape.dest = None
        e(f"@declare({rel.name!r}, {rel.arity}, {int(notes[COST])}, key={rel.key!r}, "
          f"exportable={bool(notes[EXPORTABLE])}, needs={rel.inputs!r})")
        e(f"def {self.proc_names[rel.key]}(t):")
        e.indent()
        n = rel.arity
        if n == 1:
            e("a0, = t.args")
        elif n:
            e(", ".join(f"a{i}" for i in range(n)) + " = t.args")
        code = RelationCode(self, rel, shape)
        code.emit()
        e.dedent()
        if shape.lift is not None:  # read by GoalKind.spare (pam/parlog/goal.py)
            e(f"{self.proc_names[rel.key]}.lift = {shape.lift!r}")
        if self.tracing:  # it reports its own rewrites (pam.trace)
            e(f"{self.proc_names[rel.key]}.traced = True")


def load(module: Module, pe, rc: RuleCompiler | None = None) -> dict:
    """The step functions of `module` bound to `pe`, by relation or primitive key."""
    rc = rc or RuleCompiler(module)
    procs: dict = {}

    def lookup(name: str, arity: int):
        key = f"{name}/{arity}"
        return procs.get(key) or procs.get(f"prelude:{key}")

    prims = primitives.build(pe, lookup)

    def susp1(s, *xs):
        if s is None:
            return list(xs)
        s.extend(xs)
        return s

    def fail_goal(t):
        return ProgramFailure("no clause matches", t.describe(), t.site)

    def fail_output(t, clause_site):
        return ProgramFailure(f"output unification failed after commitment to the clause at "
                              f"{clause_site.line}:{clause_site.col}", t.describe(), t.site)

    tracer = pe.tracer if rc.tracing else None
    goal = Goal if tracer is None else (lambda proc, args, group, site:
                                        tracer.spawned(Goal(proc, args, group, site)))

    def park_new(proc, args, group, site, waits):
        """An inline primitive that must wait becomes a suspended task of the committing goal's group."""
        pe.park(goal(proc, args, group, site), waits)
        if group is not None:
            group.count += 1

    meter, stats, ready, park = pe.meter, pe.stats, pe.ready, pe.park
    counting = rc.counting

    def run_here(u, g, cost):
        """schedule: run goal `u` (of group `g`) and what it continues with inside the calling
        step, as the PE's loop would, while the slice lasts: its reductions (a loop's too) are
        the step's extra ones (meter[1]) so the step limit and the slices stay exact; a goal that
        suspends is parked (a step but no reduction), one left when the slice ends is queued.
        The PE charges those extra steps at the caller's `cost`: the difference is set right here.
        The template of its traced twin (pam/twins.py): a step it runs that does not report its
        own rewrites (a primitive) is reported as one; a goal it parks, the tracer's park reports."""
        while True:
            b = meter[0] - 1
            k = meter[1]
            meter[0] = b
            meter[1] = 0
            p = u.proc
            #+ before = None if getattr(p, "traced", False) else tracer.begin_task(u)
            r = p(u)
            x = meter[1]
            meter[0] = b - x
            meter[1] = k + 1 + x
            pe.instructions += (1 + x) * (p.cost - cost)
            #+ tracer.offset -= (1 + x) * (p.cost - cost)  # the clock already has this part
            if r is None:
                #+ if before is not None:
                #+     tracer.commit_task(before, r)
                #+ tracer.finished(u)
                return
            if type(r) is list:
                if g is not None:
                    g.count += 1
                park(u, r)
                stats.reductions -= 1
                return
            #+ if before is not None:
            #+     tracer.commit_task(before, r)
            u = r
            if meter[0] <= 0:
                if g is not None:
                    g.count += 1
                if counting:
                    stats.counters["enqueues"] += 1
                ready.append(u)
                return

    if tracer is not None:
        run_here = traced_twin(run_here, tracer=tracer)
    guards = Guards(pe, lambda key: procs.get(key) or prims["procs"][key], rc.consts)
    prims["procs"]["call/3"] = Subcomputations(pe, prims["procs"]["call/1"], guards).call3
    prims["procs"]["$guard"] = guards.step  # a guard run that travels is named by it
    runtime = {
        "Var": RVar, "Struct": RStruct, "Cons": Cons, "Goal": goal, "Seq": Seq, "Placed": Placed,
        "declare": declare, "deref": deref,
        "match_eq": match_eq, "from_list": from_list, "put": pe.put, "wake": pe.wake,
        "spawn": pe.spawn, "park_new": park_new, "push": pe.ready.append, "susp1": susp1,
        "fail_goal": fail_goal, "fail_output": fail_output, "arith_test": primitives.arith_test,
        "INLINE": prims["inline"], "PROCS": prims["procs"], "CONSTS": rc.consts,
        "METER": pe.meter, "ST": pe.stats.counters, "PRIMITIVE_COST": DEFAULT.primitive_step,
        "new_cell": Cons.__new__,
        # schedule (pam/parlog/clause_code.py): a goal run in its caller's step that suspends is parked;
        # an exportable one runs there only on one PE or below the lift threshold
        "RUN": run_here, "SOLO": pe.net is None, "GUARD": guards.guard, "GDONE": guards.done,
        "GUARD_VALUE": guard_value,
        "SEARCHES": search.load(rc.searches, pe),
        "SPARE": GoalKind(getattr(getattr(pe.net.transport, "sim", None), "costs", DEFAULT)).spare
        if pe.net is not None else None,
    }
    if tracer is not None:
        runtime.update(trace_calls(tracer))
    if rc.code is None:  # compiled once, whatever the PEs (names for --profile: pam/profile.py)
        rc.code = GeneratedCode(rc.source, f"<rules of {module.source}>", rule_names, rc)
    procs.update(rc.code.run({})["make"](runtime))
    # A task that travels to another PE is named by its key: primitives' too (`X = a @ 3`).
    return {**prims["procs"], **procs}



def trace_calls(tracer) -> dict:
    """What the traced code calls (RuleCompiler with `tracing`): TR(t, proc, args, clause, site)
    as a clause commits, TB() once its bindings are made, TE() when it ends, TK(t) when the task
    goes on as its first body goal, TL(t, proc, args) when the loop goes round with `args`."""
    tracer.writer = write_term

    def goal_text(proc, args) -> tuple[str, list]:
        return tracer.term_text(RStruct(proc.goal_name, args)) if args else (proc.goal_name, [])

    def begin(t, proc, args, clause, site):
        if tracer.trace.cut:
            tracer.begin(t, proc.key, "", [])
        else:
            tracer.begin(t, proc.key, *goal_text(proc, args), clause=clause, span=site, cost=proc.cost)

    def round_again(t, proc, args):
        if tracer.trace.cut:
            tracer.continues(t)
        else:
            tracer.continues(t, *goal_text(proc, args))

    return {"TR": begin, "TB": tracer.bound, "TE": tracer.end, "TK": tracer.continues, "TL": round_again}


class ParlogRuntime:
    """PARLOG on the machine (`pam.runtimes`): the module's relations compiled once, loaded
    with the primitives onto each PE; goals are the task kind."""

    batch = 32  # steps a simulated PE runs between looks at its messages
    encoding = "utf-8"
    # what the passes change (docs/passes.md), counted by code compiled with `counting`
    counters = ("clause_tries",  # clause (or shared match) blocks entered
                "guard_tests",  # guard goals tested
                "enqueues",  # body goals put on the ready queue by committing clauses
                "cells_in_place",  # output list cells built in place, with no variable (dest-passing)
                # counted by every run, distributed ones (pam/parlog/guards.py, subcomp.py):
                "guards_remote",  # deep guard runs started on a PE other than their call's
                "stopped_remote")  # tasks of a call/3 discarded on a PE other than its own

    traces = True  # its code reports its own reductions when made with `tracing` (pam.runtimes)

    def __init__(self, module: Module, counting: bool = False, tracing: bool = False):
        self.module = module
        self.compiler = RuleCompiler(module, counting, tracing)
        self.steps: dict[int, dict] = {}  # by PE number

    def load(self, pe, timeout: float | None = None) -> dict:
        steps = self.steps[pe.number] = load(self.module, pe, self.compiler)
        if pe.net is not None:
            costs = getattr(getattr(pe.net.transport, "sim", None), "costs", DEFAULT)
            pe.net.add_kind(GoalKind(costs, pe.boundary))
        return steps

    def entry_task(self, pe, outputs: list) -> Goal:
        target = self.module.entry.target
        return Goal(self.steps[pe.number][target], tuple(outputs), None, self.module.rules[target].span)

    def show(self, value, names: dict) -> str:
        return write_term(value, names)
