"""Compiles HPGREM relations, once at load time, into Python step functions (threaded code).

Each relation becomes one function `step(task)` that tries its clauses group by group: one-way
matching of the `?` arguments (suspending where a pattern needs structure that an argument does
not have yet), the flat guard, then commit: output unification, inline primitives, and the body's
goals as tasks. The first body goal continues in the same task object (no allocation, no trip
through the queue), which is what makes deep recursion and long streams cheap.

The generated source is plain Python, one closure per relation, so `hpgrem ir` readers and
debuggers can look at it (`RuleCompiler.source`); each is declared a step (pam/step.py).
`ParlogRuntime` is PARLOG's runtime (pam/runtimes.py): it loads them with the primitives onto
each PE.
"""

from __future__ import annotations

from hpgrem.ir import (Atom, Call, Clause, Float, Int, Module, Relation, Struct, Term, Var,
                       calls_in)
from pam import primitives
from pam.emit import Emitter
from pam.errors import ProgramFailure
from pam.goal import Goal, GoalKind
from pam.step import declare
from pam.task import Placed, Seq
from pam.terms import Cons
from pam.terms import Struct as RStruct
from pam.terms import Var as RVar
from pam.terms import deref, from_list, mkatom
from pam.unify import match_eq
from pam.write import write_term

TYPE_TESTS = {
    "atom/1": "type({x}) is not str",
    "integer/1": "type({x}) is not int",
    "float/1": "type({x}) is not float",
    "number/1": "type({x}) is not int and type({x}) is not float",
    "atomic/1": "type({x}) is not str and type({x}) is not int and type({x}) is not float",
    "compound/1": "type({x}) is not Struct and type({x}) is not Cons",
}
COMPARISONS = {"</2": "<", ">/2": ">", "=</2": "<=", ">=/2": ">=", "=:=/2": "==", "=\\=/2": "!="}
INT_BINARY = {"+": "({} + {})", "-": "({} - {})", "*": "({} * {})", "min": "min({}, {})",
              "max": "max({}, {})", "mod": "({} % {})", "/\\": "({} & {})", "\\/": "({} | {})"}
INT_UNARY = {"-": "(-{})", "abs": "abs({})"}
DEEP = 24  # nesting depth above which built terms go through temporaries (Python's parser limit)


def to_runtime(term: Term):
    """A ground IR term as a run-time term."""
    out: list = []
    stack: list = [(term, False)]
    while stack:
        t, built = stack.pop()
        if isinstance(t, Struct):
            if not built:
                stack.append((t, True))
                stack.extend((a, False) for a in reversed(t.args))
                continue
            n = len(t.args)
            args = tuple(out[len(out) - n:])
            del out[len(out) - n:]
            out.append(Cons(*args) if t.name == "[|]" and n == 2 else RStruct(mkatom(t.name), args))
        elif isinstance(t, Atom):
            out.append(mkatom(t.name))
        elif isinstance(t, (Int, Float)):
            out.append(t.value)
        else:
            raise AssertionError("to_runtime of a non-ground term")
    return out[0]


def is_ground(term: Term) -> bool:
    stack = [term]
    while stack:
        t = stack.pop()
        if isinstance(t, Var):
            return False
        if isinstance(t, Struct):
            stack.extend(t.args)
    return True


class RuleCompiler:
    """Generates the step functions of a module's relations."""

    def __init__(self, module: Module):
        self.module = module
        self.consts: dict[str, object] = {}
        self.const_names: dict[tuple, str] = {}
        self.proc_names = {key: f"R{i}" for i, key in enumerate(module.relations)}
        self.out = Emitter()
        self.source = self._generate()

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
        if isinstance(term, (Int, Float)):
            return repr(term.value)
        return self.const("term", term, lambda: to_runtime(term))

    # -- the module -----------------------------------------------------------------------------
    def _generate(self) -> str:
        e = self.out
        e("def make(RT):")
        e.indent()
        for name in ("Var", "Struct", "Cons", "Goal", "Seq", "Placed", "declare", "deref", "match_eq", "from_list",
                     "put", "wake", "spawn", "park_new", "push", "susp1", "fail_goal", "fail_output",
                     "arith_test", "INLINE", "PROCS", "CONSTS"):
            e(f"{name} = RT['{name}']")
        e("globals().update(CONSTS)")
        for key, rel in self.module.relations.items():
            self.relation(rel)
        e("return {" + ", ".join(f"{key!r}: {p}" for key, p in self.proc_names.items()) + "}")
        return "\n".join(e.lines) + "\n"

    def relation(self, rel: Relation) -> None:
        e = self.out
        notes = self.module.annotations.get(rel.key)
        if notes is None or "cost" not in notes:
            raise ValueError(f"relation {rel.key} has no granularity annotations: compile the module with "
                             "hpgrem.pipeline (the machine runs no analysis of its own)")
        e(f"@declare({rel.name!r}, {rel.arity}, {int(notes['cost'])}, key={rel.key!r}, "
          f"exportable={bool(notes['exportable'])}, needs={rel.inputs!r})")
        e(f"def {self.proc_names[rel.key]}(t):")
        e.indent()
        n = rel.arity
        if n == 1:
            e("a0, = t.args")
        elif n:
            e(", ".join(f"a{i}" for i in range(n)) + " = t.args")
        # Dereference each input argument once, if some clause looks inside it.
        for i, mode in enumerate(rel.modes):
            if mode == "?" and any(not isinstance(c.head[i], Var) for g in rel.groups for c in g):
                e(f"if type(a{i}) is Var: a{i} = deref(a{i})")
        e("s = None")
        for group in rel.groups:
            for clause in group:
                _ClauseCode(self, rel, clause).emit()
            e("if s is not None: return s")
        e("raise fail_goal(t)")
        e.dedent()


class _ClauseCode:
    """The code of one clause inside its relation's step function: a `while True:` block that
    `break`s to the next clause on mismatch or suspension and `return`s on commit."""

    def __init__(self, rc: RuleCompiler, rel: Relation, clause: Clause):
        self.rc = rc
        self.rel = rel
        self.clause = clause
        self.e = rc.out
        self.bound: set[int] = set()
        self.temps = 0

    def temp(self) -> str:
        self.temps += 1
        return f"x{self.temps}"

    def emit(self) -> None:
        e = self.e
        e("while True:")
        e.indent()
        for i, (mode, pat) in enumerate(zip(self.rel.modes, self.clause.head)):
            if mode == "?":
                self.match(pat, f"a{i}")
        for g in self.clause.guard:
            self.guard(g)
        self.commit()
        e.dedent()

    # -- matching -------------------------------------------------------------------------------
    def suspend_or_break(self, x: str) -> None:
        e = self.e
        e.indent()
        e(f"if type({x}) is Var: s = susp1(s, {x})")
        e("break")
        e.dedent()

    def match(self, pat: Term, x: str) -> None:
        """Match the dereferenced value in `x` against `pat` (one way: binds clause variables only)."""
        e = self.e
        if isinstance(pat, Var):
            if pat.index in self.bound:
                e(f"r = match_eq(v{pat.index}, {x})")
                e("if r is not True:")
                e("    if r is not False: s = susp1(s, *r)")
                e("    break")
            else:
                e(f"v{pat.index} = {x}")
                self.bound.add(pat.index)
            return
        if isinstance(pat, Atom):
            e(f"if {x} is not {self.rc.atom(pat.name)}:")
            self.suspend_or_break(x)
            return
        if isinstance(pat, (Int, Float)):
            kind = "int" if isinstance(pat, Int) else "float"
            e(f"if type({x}) is not {kind} or {x} != {pat.value!r}:")
            self.suspend_or_break(x)
            return
        assert isinstance(pat, Struct)
        if pat.name == "[|]" and len(pat.args) == 2:
            e(f"if type({x}) is not Cons:")
            self.suspend_or_break(x)
            parts = [(pat.args[0], f"{x}.head"), (pat.args[1], f"{x}.tail")]
        else:
            e(f"if type({x}) is not Struct or {x}.name is not {self.rc.atom(pat.name)} "
              f"or len({x}.args) != {len(pat.args)}:")
            self.suspend_or_break(x)
            names = [self.temp() for _ in pat.args]
            e(", ".join(names) + (", = " if len(names) == 1 else " = ") + f"{x}.args")
            parts = list(zip(pat.args, names))
        for sub, src in parts:
            if isinstance(sub, Var) and sub.index not in self.bound:
                e(f"v{sub.index} = {src}")
                self.bound.add(sub.index)
                continue
            y = self.temp() if "." in src else src
            if y != src:
                e(f"{y} = {src}")
            e(f"if type({y}) is Var: {y} = deref({y})")
            self.match(sub, y)

    # -- guards ---------------------------------------------------------------------------------
    def guard(self, g: Call) -> None:
        e = self.e
        key = g.target
        if key == "=/2":  # match the known left side against the pattern on the right
            x = self.temp()
            e(f"{x} = {self.build(g.args[0])}")
            e(f"if type({x}) is Var: {x} = deref({x})")
            self.match(g.args[1], x)
        elif key in ("==/2", "\\==/2"):
            fails, holds = ("False", "True") if key == "==/2" else ("True", "False")
            e(f"r = match_eq({self.build(g.args[0])}, {self.build(g.args[1])})")
            e(f"if r is not {holds}:")
            e(f"    if r is not {fails}: s = susp1(s, *r)")
            e("    break")
        elif key in COMPARISONS:
            self.comparison(g)
        elif key in TYPE_TESTS or key == "data/1":
            x = self.temp()
            e(f"{x} = {self.build(g.args[0])}")
            e(f"if type({x}) is Var: {x} = deref({x})")
            e(f"if type({x}) is Var:")
            e(f"    s = susp1(s, {x})")
            e("    break")
            if key != "data/1":
                e(f"if {TYPE_TESTS[key].format(x=x)}: break")
        elif key == "var/1":
            x = self.temp()
            e(f"{x} = {self.build(g.args[0])}")
            e(f"if type({x}) is Var: {x} = deref({x})")
            e(f"if type({x}) is not Var: break")
        else:  # the front end admits nothing else in a guard
            raise AssertionError(f"unexpected guard {key}")

    def comparison(self, g: Call) -> None:
        """Integer arithmetic compares inline; anything else goes through the evaluator."""
        e = self.e
        op = COMPARISONS[g.target]
        fast = self.int_arith(g.args)
        generic = [
            f"r = arith_test({g.target.split('/')[0]!r}, {self.build(g.args[0])}, "
            f"{self.build(g.args[1])}, {self.rc.site(g.span)})",
            "if r is not True:",
            "    if r is not False: s = susp1(s, *r)",
            "    break",
        ]
        if fast is None:
            for line in generic:
                e(line)
            return
        (x, y), check = fast
        e(f"if {check}:")
        e(f"    if not ({x} {op} {y}): break")
        e("else:")
        e.indent()
        for line in generic:
            e(line)
        e.dedent()

    def int_arith(self, exprs) -> tuple[list[str], str] | None:
        """Python expressions for arithmetic `exprs` valid when every variable in them holds an
        integer, and the test that says so; None when some operator has no plain-int meaning
        here (division rounds differently, `mod` may divide by zero) or a variable is new."""
        leaves: dict[int, str] = {}
        nonzero: list[str] = []

        def expr(t) -> str | None:
            if isinstance(t, Int):
                return repr(t.value)
            if isinstance(t, Var):
                if t.index not in self.bound:
                    return None
                if t.index not in leaves:
                    leaves[t.index] = self.temp()
                return leaves[t.index]
            if isinstance(t, Struct) and len(t.args) == 2 and t.name in INT_BINARY:
                a, b = expr(t.args[0]), expr(t.args[1])
                if a is None or b is None:
                    return None
                if t.name == "mod":  # Python's % is SWI's mod, but for a zero divisor
                    nonzero.append(b)
                return INT_BINARY[t.name].format(a, b)
            if isinstance(t, Struct) and len(t.args) == 1 and t.name in INT_UNARY:
                a = expr(t.args[0])
                return None if a is None else INT_UNARY[t.name].format(a)
            return None

        out = [expr(x) for x in exprs]
        if any(x is None for x in out) or not leaves:
            return None
        for index, x in leaves.items():
            self.e(f"{x} = v{index}")
            self.e(f"if type({x}) is Var: {x} = deref({x})")
        checks = [f"type({x}) is int" for x in leaves.values()] + [f"{b} != 0" for b in nonzero]
        return out, " and ".join(checks)

    def is_new(self, term: Term) -> bool:
        return isinstance(term, Var) and term.index not in self.bound

    # -- building terms -------------------------------------------------------------------------
    def fresh(self, term: Term) -> None:
        """Create the clause variables of `term` not bound yet."""
        stack = [term]
        while stack:
            t = stack.pop()
            if isinstance(t, Var):
                if t.index not in self.bound:
                    self.e(f"v{t.index} = Var()")
                    self.bound.add(t.index)
            elif isinstance(t, Struct):
                stack.extend(reversed(t.args))

    def build(self, term: Term) -> str:
        """A Python expression that builds `term` (its variables must exist: see `fresh`)."""
        self.fresh(term)
        return self._expr(term, 0)

    def _expr(self, t: Term, level: int) -> str:
        if is_ground(t):
            return self.rc.ground(t)
        if isinstance(t, Var):
            return f"v{t.index}"
        assert isinstance(t, Struct)
        if level > DEEP:
            x = self.temp()
            self.e(f"{x} = {self._expr(t, 0)}")
            return x
        if t.name == "[|]" and len(t.args) == 2:
            items, tail = [], t
            while isinstance(tail, Struct) and tail.name == "[|]" and len(tail.args) == 2 and not is_ground(tail):
                items.append(tail.args[0])
                tail = tail.args[1]
            if len(items) > 4:
                elems = ", ".join(self._expr(i, level + 1) for i in items)
                return f"from_list([{elems}], {self._expr(tail, level + 1)})"
            return f"Cons({self._expr(t.args[0], level + 1)}, {self._expr(t.args[1], level + 1)})"
        args = ", ".join(self._expr(a, level + 1) for a in t.args)
        return f"Struct({self.rc.atom(t.name)}, ({args},))"

    # -- commit ---------------------------------------------------------------------------------
    def commit(self) -> None:
        e = self.e
        for i, (mode, pat) in enumerate(zip(self.rel.modes, self.clause.head)):
            if mode != "^":
                continue
            if isinstance(pat, Var) and pat.index not in self.bound:
                e(f"v{pat.index} = a{i}")  # a new variable simply names the caller's argument
                self.bound.add(pat.index)
                continue
            x = self.temp()
            e(f"{x} = {self.build(pat)}")
            if isinstance(pat, Var):
                e(f"if not put(a{i}, {x}): raise fail_output(t, {self.rc.site(self.clause.span)})")
                continue
            e(f"if type(a{i}) is Var and a{i}.val is None:")
            e(f"    a{i}.val = {x}")
            e(f"    if a{i}.susp is not None: wake(a{i})")
            e(f"elif not put(a{i}, {x}): raise fail_output(t, {self.rc.site(self.clause.span)})")
        body = self.clause.body
        if body is None:
            e("return None")
        elif all(c.placement is None for c in calls_in(body)) and (
                isinstance(body, Call) or (body.op == "," and all(isinstance(p, Call) for p in body.parts))):
            self.flat_body(calls_in(body))
        else:
            self.plan_body(body)

    def args_tuple(self, call: Call) -> str:
        parts = [self.build(a) for a in call.args]
        return "(" + "".join(p + ", " for p in parts) + ")"

    def flat_body(self, calls: list[Call]) -> None:
        """`A, B, ...`: inline primitives run now; relation calls become tasks, the first of
        which continues in this task."""
        e = self.e
        tasks: list[Call] = []
        for c in calls:
            if c.target == "is/2" and self.is_new(c.args[0]) and self.fast_is(c):
                continue
            if c.target == "=/2" and (self.is_new(c.args[0]) or self.is_new(c.args[1])):
                new, other = c.args if self.is_new(c.args[0]) else reversed(c.args)
                value = self.build(other)
                e(f"v{new.index} = {value}")  # a new variable just names the other side
                self.bound.add(new.index)
                continue
            if c.target in primitives.INLINE:
                self.inline_primitive(c)
            else:
                tasks.append(c)
        if not tasks:
            e("return None")
            return
        built = [(c, self.args_tuple(c)) for c in tasks]
        if len(tasks) > 1:
            e("g = t.group")
            e(f"if g is not None: g.count += {len(tasks) - 1}")
            for c, args in reversed(built[1:]):
                e(f"push(Goal({self.proc(c)}, {args}, g, {self.rc.site(c.span)}))")
        c, args = built[0]
        e(f"t.proc = {self.proc(c)}")
        e(f"t.args = {args}")
        e(f"t.site = {self.rc.site(c.span)}")
        e("return t")

    def inline_primitive(self, c: Call) -> None:
        e = self.e
        args = self.temp()
        e(f"{args} = {self.args_tuple(c)}")
        site = self.rc.site(c.span)
        e(f"r = INLINE[{c.target!r}](*{args}, {site})")
        e(f"if r is not None: park_new(PROCS[{c.target!r}], {args}, t.group, {site}, r)")

    def fast_is(self, c: Call) -> bool:
        """`X is Expr` with X new: X is the Python int itself when Expr's variables hold ints."""
        fast = self.int_arith([c.args[1]])
        if fast is None:
            return False
        (value,), check = fast
        x = c.args[0].index
        e = self.e
        e(f"if {check}:")
        e(f"    v{x} = {value}")
        e("else:")
        e.indent()
        self.inline_primitive(c)  # creates v{x} as a variable for the general evaluator
        e.dedent()
        return True

    def proc(self, call: Call) -> str:
        if call.target in self.rc.proc_names:
            return self.rc.proc_names[call.target]
        return f"PROCS[{call.target!r}]"

    def plan_body(self, body) -> None:
        """A body with `&`: build its plan of tasks and let the PE schedule it."""
        e = self.e
        e(f"spawn({self.plan(body)}, t)")
        e("return None")

    def plan(self, body) -> str:
        if isinstance(body, Call):
            task = f"Goal({self.proc(body)}, {self.args_tuple(body)}, None, {self.rc.site(body.span)})"
            if body.placement is not None:
                return f"Placed({task}, {self.build(body.placement)})"
            return task
        parts = ", ".join(self.plan(p) for p in body.parts)
        return f"[{parts}]" if body.op == "," else f"Seq([{parts}])"


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

    def park_new(proc, args, group, site, waits):
        """An inline primitive that must wait becomes a suspended task of the committing goal's group."""
        pe.park(Goal(proc, args, group, site), waits)
        if group is not None:
            group.count += 1

    runtime = {
        "Var": RVar, "Struct": RStruct, "Cons": Cons, "Goal": Goal, "Seq": Seq, "Placed": Placed,
        "declare": declare, "deref": deref,
        "match_eq": match_eq, "from_list": from_list, "put": pe.put, "wake": pe.wake,
        "spawn": pe.spawn, "park_new": park_new, "push": pe.push, "susp1": susp1,
        "fail_goal": fail_goal, "fail_output": fail_output, "arith_test": primitives.arith_test,
        "INLINE": prims["inline"], "PROCS": prims["procs"], "CONSTS": rc.consts,
    }
    namespace: dict = {}
    exec(compile(rc.source, f"<rules of {module.source}>", "exec"), namespace)
    procs.update(namespace["make"](runtime))
    # A task that travels to another PE is named by its key: primitives' too (`X = a @ 3`).
    return {**prims["procs"], **procs}



class ParlogRuntime:
    """PARLOG on the machine (`pam.runtimes`): the module's relations compiled once, loaded
    with the primitives onto each PE; goals are the task kind."""

    batch = 32  # steps a simulated PE runs between looks at its messages
    encoding = "utf-8"

    def __init__(self, module: Module):
        self.module = module
        self.compiler = RuleCompiler(module)
        self.steps: dict[int, dict] = {}  # by PE number

    def load(self, pe, timeout: float | None = None) -> dict:
        steps = self.steps[pe.number] = load(self.module, pe, self.compiler)
        if pe.net is not None:
            pe.net.add_kind(GoalKind())
        return steps

    def entry_task(self, pe, outputs: list) -> Goal:
        target = self.module.entry.target
        return Goal(self.steps[pe.number][target], tuple(outputs), None, self.module.relations[target].span)

    def show(self, value, names: dict) -> str:
        return write_term(value, names)
