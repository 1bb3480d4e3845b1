"""The code of one PARLOG clause inside its relation's step function (pam/parlog/rules.py):
one-way matching of the head's inputs, the flat guard, and the commit (outputs, inline
primitives, body goals as tasks; a self call going round the relation's loop; a list cell built
in place; a pending `is` as a task with a step of its own)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpgrem.ir.parlog import Atom, Call, Clause, Float, Int, Struct, Term, Var, calls_in
from hpgrem.ir.core import fold
from hpgrem.ir.parlog import deep_guard
from pam.parlog import primitives
from pam.parlog.arith import MAX_INT_BITS
from pam.parlog.guards import GuardSpec
from pam.parlog.notes import EXPORTABLE, LIFT, SCHEDULE
from pam.terms import Cons
from pam.terms import Struct as RStruct
from pam.terms import mkatom

if TYPE_CHECKING:
    from pam.parlog.relation_code import RelationCode

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
              "max": "max({}, {})", "mod": "({} % {})", "//": "({} // {})", "/\\": "({} & {})",
              "\\/": "({} | {})"}
INT_UNARY = {"-": "(-{})", "abs": "abs({})"}


def deref_line(x: str) -> str:
    """One line of generated code that dereferences `x`: the first step inline (most chains are
    one variable long, and an unbound variable then costs no call), deref() for the rest."""
    return f"if type({x}) is Var and (_d := {x}.val) is not None: {x} = _d if type(_d) is not Var else deref(_d)"


DEEP = 24  # nesting depth above which built terms go through temporaries (Python's parser limit)
LONG = 500  # list literals longer than this are built a chunk of lines at a time


def to_runtime(term: Term):
    """A ground IR term as a run-time term: a node used in several places (the IR is a graph)
    is built once and shared, as run-time terms are never changed (only a list cell built in
    place is, and this builds none)."""
    def at(t: Term, args: list):
        if isinstance(t, Struct):
            return Cons(*args) if t.name == "[|]" and len(args) == 2 else RStruct(mkatom(t.name), tuple(args))
        if isinstance(t, Atom):
            return mkatom(t.name)
        if isinstance(t, (Int, Float)):
            return t.value
        raise AssertionError("to_runtime of a non-ground term")
    return fold(term, at)


def is_ground(term: Term) -> bool:
    """Whether `term` has no variable (each distinct node looked at once)."""
    seen: set[int] = set()
    stack = [term]
    while stack:
        t = stack.pop()
        if isinstance(t, Var):
            return False
        if isinstance(t, Struct) and id(t) not in seen:
            seen.add(id(t))
            stack.extend(t.args)
    return True


COMPLEMENTS = {"=:=/2": "=\\=/2", "=\\=/2": "=:=/2", "</2": ">=/2", ">=/2": "</2", ">/2": "=</2", "=</2": ">/2"}


class ClauseCode:
    """The code of one clause inside its relation's step function: inside a `while True:`
    block that `break`s to the next clause on mismatch or suspension and `return`s on commit
    (or, looping, goes round again)."""

    def __init__(self, rel_code: RelationCode, clause: Clause, bound: set | None = None, temps: int = 0):
        self.code = rel_code
        self.rc = rel_code.rc
        self.rel = rel_code.rel
        self.shape = rel_code.shape
        self.clause = clause
        self.e = self.rc.out
        self.bound: set[int] = bound if bound is not None else set()
        self.temps = temps
        self.arith_steps: dict[int, str | None] = {}  # id of an `is` call -> its own step
        # A structure used in several places of the clause (the IR is a graph) means what copies
        # would: it is built once, into a temporary (`_expr`), read again where it is met again
        # while that temporary is still set (`_recall`); a tree's code has none of them.
        self.shared = self.rc.shared_terms(clause)
        self.made: dict[int, tuple[str, int]] = {}  # node id -> (temporary, emitter depth)
        self.matched: dict[int, tuple[str, int]] = {}  # a pattern's id -> (the value it matched, depth)
        self.deepest = -1  # the greatest depth in `made` and `matched`
        self.seen_lines = len(self.e.lines)

    def temp(self) -> str:
        self.temps += 1
        return f"x{self.temps}"

    def match_head(self, known: int | None) -> None:
        """One-way matching of the `?` arguments; `known`: the switch already tested that one's
        principal functor."""
        for i, (mode, pat) in enumerate(zip(self.rel.modes, self.clause.head)):
            if mode == "?":
                self.match(pat, f"a{i}", tested=(i == known))

    def guards(self, guard) -> None:
        if deep_guard(guard):
            self.deep_guard(guard)
            return
        for g in guard:
            self.rc.count("guard_tests")
            self.guard(g)

    def deep_guard(self, guard) -> None:
        """A guard that calls relations runs as a local computation (pam/parlog/guards.py): the
        matched variables go in, its own variables come out for the body."""
        e = self.e
        self.code.close_hole()
        self.rc.count("guard_tests")
        used = {n.index for g in guard for a in g.args for n in _nodes(a) if isinstance(n, Var)}
        # only what the guard uses goes in: its safety walk (unbound_local_vars) then visits what
        # the guard can reach, not every argument the head matched
        known = tuple(sorted(self.bound & used))
        local = tuple(sorted(used - self.bound))
        spec = self.rc.const("guard", id(guard), lambda: GuardSpec(tuple(guard), known, local,
                                                                  self.clause.nvars, self.clause.span))
        values = "".join(f"v{i}, " for i in known)
        e(f"r = GUARD(t, {spec}, ({values}))")
        e("if type(r) is not tuple:")
        e("    if r is not False: s = susp1(s, *r)")
        e("    break")
        if local:
            e("".join(f"v{i}, " for i in local) + "= r")
            self.bound.update(local)

    # -- matching -------------------------------------------------------------------------------
    def suspend_or_break(self, x: str) -> None:
        e = self.e
        e.indent()
        e(f"if type({x}) is Var: s = susp1(s, {x})")
        e("break")
        e.dedent()

    def match(self, pat: Term, x: str, tested: bool = False) -> None:
        """Match the dereferenced value in `x` against `pat` (one way: binds clause variables
        only); `tested`: its principal functor is known to be the pattern's. Iterative, in
        pre-order: a pattern may be a list of 20,000 elements."""
        e = self.e
        dest = self.shape.dest
        todo = [(pat, x, tested)]
        while todo:
            pat, x, tested = todo.pop()
            if isinstance(pat, Var):
                if pat.index in self.bound:
                    e(f"r = match_eq(v{pat.index}, {x})")
                    e("if r is not True:")
                    e("    if r is not False: s = susp1(s, *r)")
                    e("    break")
                else:
                    e(f"v{pat.index} = {x}")
                    self.bound.add(pat.index)
                continue
            if isinstance(pat, Atom):
                if not tested:
                    e(f"if {x} is not {self.rc.atom(pat.name)}:")
                    self.suspend_or_break(x)
                continue
            if isinstance(pat, (Int, Float)):
                if not tested:
                    kind = "int" if isinstance(pat, Int) else "float"
                    e(f"if type({x}) is not {kind} or {x} != {self.rc.ground(pat)}:")
                    self.suspend_or_break(x)
                continue
            assert isinstance(pat, Struct)
            if id(pat) in self.shared:  # met before: the value must be the one matched there
                first = self._recall(pat, self.matched)
                if first is not None:
                    e(f"r = match_eq({first}, {x})")
                    e("if r is not True:")
                    e("    if r is not False: s = susp1(s, *r)")
                    e("    break")
                    continue
                self.matched[id(pat)] = (x, e.depth)
                self.deepest = max(self.deepest, e.depth)
            if not tested and self.rc.is_ground(pat) and _more_nodes(pat, 8):  # a big constant: one equality test
                e(f"r = match_eq({self.rc.ground(pat)}, {x})")
                e("if r is not True:")
                e("    if r is not False: s = susp1(s, *r)")
                e("    break")
                continue
            if pat.name == "[|]" and len(pat.args) == 2:
                if not tested:
                    e(f"if type({x}) is not Cons:")
                    self.suspend_or_break(x)
                parts = [(pat.args[0], f"{x}.head"), (pat.args[1], f"{x}.tail")]
            else:
                if not tested:
                    e(f"if type({x}) is not Struct or {x}.name is not {self.rc.atom(pat.name)} "
                      f"or len({x}.args) != {len(pat.args)}:")
                    self.suspend_or_break(x)
                names = [self.temp() for _ in pat.args]
                e(", ".join(names) + (", = " if len(names) == 1 else " = ") + f"{x}.args")
                parts = list(zip(pat.args, names))
            later = []
            for sub, src in parts:
                if isinstance(sub, Var) and sub.index not in self.bound:
                    e(f"v{sub.index} = {src}")
                    if dest is not None and src.endswith(".tail"):  # the hole of a list built in place
                        self.fill_hole(f"v{sub.index}")
                    self.bound.add(sub.index)
                    continue
                y = self.temp() if "." in src else src
                if y != src:
                    e(f"{y} = {src}")
                if dest is not None and src.endswith(".tail"):
                    self.fill_hole(y)
                e(deref_line(y))
                later.append((sub, y, False))
            todo.extend(reversed(later))

    def fill_hole(self, x: str) -> None:
        self.code.fill_hole(x)

    # -- guards ---------------------------------------------------------------------------------
    def guard(self, g: Call) -> None:
        e = self.e
        key = g.target
        if key in ("=/2", "==/2", "\\==/2"):  # they may walk into the list this loop is building
            self.code.close_hole()
        if key == "=/2":  # match the known left side against the pattern on the right
            x = self.temp()
            e(f"{x} = {self.build(g.args[0])}")
            e(deref_line(x))
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
            e(deref_line(x))
            e(f"if type({x}) is Var:")
            e(f"    s = susp1(s, {x})")
            e("    break")
            if key != "data/1":
                e(f"if {TYPE_TESTS[key].format(x=x)}: break")
        elif key == "is/2":
            self.guard_is(g)
        elif key == "var/1":
            x = self.temp()
            e(f"{x} = {self.build(g.args[0])}")
            e(deref_line(x))
            e(f"if type({x}) is not Var: break")
        else:  # the front end admits nothing else in a guard
            raise AssertionError(f"unexpected guard {key}")

    def guard_is(self, g: Call) -> None:
        """`X is E` as a flat guard test (KL1's `:=` in a guard): E's value, suspending while an
        operand is unbound; a new X names it, a known X must equal it (a call variable still
        unbound suspends: a guard binds nothing of the call)."""
        e = self.e
        lhs, expr = g.args
        y = self.temp()
        fast = self.int_arith([expr])
        if fast is not None:
            (value,), check = fast
            e(f"if {check}: {y} = {value}")
            e("else:")
            e.indent()
        self.code.close_hole()
        e(f"{y} = GUARD_VALUE({self.build(expr)}, {self.rc.site(g.span)})")
        e(f"if type({y}) is Var:")
        e(f"    s = susp1(s, {y})")
        e("    break")
        if fast is not None:
            e.dedent()
        if self.is_new(lhs):
            e(f"v{lhs.index} = {y}")
            self.bound.add(lhs.index)
            return
        x = self.temp()
        e(f"{x} = {self.build(lhs)}")
        e(deref_line(x))
        e(f"if type({x}) is Var:")
        e(f"    s = susp1(s, {x})")
        e("    break")
        e(f"if type({x}) is not type({y}) or {x} != {y}: break")

    def generic_comparison(self, g: Call) -> None:
        e = self.e
        e(f"r = arith_test({g.target.split('/')[0]!r}, {self.build(g.args[0])}, "
          f"{self.build(g.args[1])}, {self.rc.site(g.span)})")
        e("if r is not True:")
        e("    if r is not False: s = susp1(s, *r)")
        e("    break")

    def comparison(self, g: Call) -> None:
        """Integer arithmetic compares inline; anything else goes through the evaluator."""
        e = self.e
        op = COMPARISONS[g.target]
        fast = self.int_arith(g.args)
        if fast is None:
            self.generic_comparison(g)
            return
        (x, y), check = fast
        e(f"if {check}:")
        e(f"    if not ({x} {op} {y}): break")
        e("else:")
        e.indent()
        self.generic_comparison(g)
        e.dedent()

    def complementary(self, other: Clause) -> bool:
        """This clause and the next both have one comparison of the same operands as guard,
        the one holding exactly when the other does not (on integers)."""
        a, b = self.clause.guard, other.guard
        return (self.shape.share and len(a) == 1 and len(b) == 1 and COMPLEMENTS.get(a[0].target) == b[0].target
                and a[0].args == b[0].args and not any(isinstance(n, Float) for t in a[0].args for n in _nodes(t)))

    def complementary_pair(self, other: Clause, first: ClauseCode) -> None:
        """`A <- X op Y : ...` then `B <- X op' Y : ...` with the same match: integers decide
        both with one test; anything else tests each clause in turn as usual."""
        e = self.e
        g = self.clause.guard[0]
        self.rc.count("guard_tests")
        fast = self.int_arith(g.args)
        second = ClauseCode(self.code, other, bound=set(first.bound), temps=self.temps)
        if fast is not None:
            (x, y), check = fast
            e(f"if {check}:")
            e.indent()
            e(f"if {x} {COMPARISONS[g.target]} {y}:")
            e.indent()
            self.commit()
            e.dedent()
            e("else:")
            e.indent()
            self.rc.count("clause_tries")
            second.commit()
            e.dedent()
            e.dedent()
            e("else:")
            e.indent()
        for clause in (self.clause, other):
            code = ClauseCode(self.code, clause, bound=set(first.bound), temps=self.temps + 20)
            e("while True:")
            e.indent()
            self.code.blocks += 1
            code.generic_comparison(code.clause.guard[0])
            code.commit()
            self.code.blocks -= 1
            e.dedent()
            self.code.after_block()
        if fast is not None:
            e.dedent()

    def int_arith(self, exprs) -> tuple[list[str], str] | None:
        """Python expressions for arithmetic `exprs` valid when every variable in them holds an
        integer, and the test that says so; None when some operator has no plain-int meaning
        here (division rounds differently, `mod` may divide by zero) or a variable is new."""
        leaves: dict[int, str] = {}
        out = self.int_expressions(exprs, leaves)
        if out is None:
            return None
        exprs_text, nonzero = out
        for index, x in leaves.items():
            self.e(f"{x} = v{index}")
            self.e(deref_line(x))
        checks = [f"type({x}) is int" for x in leaves.values()] + nonzero
        return exprs_text, " and ".join(checks)

    def int_expressions(self, exprs, leaves: dict, bound: set | None = None):
        """The Python text of integer `exprs` over the temporaries `leaves` names (variable
        number -> temporary), and the conditions (divisors not zero, products not too large) under
        which they compute what the evaluator would; None when not plain."""
        bound = self.bound if bound is None else bound
        nonzero: list[str] = []

        def expr(t) -> str | None:
            if isinstance(t, Int):
                return repr(t.value)
            if isinstance(t, Var):
                if t.index not in bound:
                    return None
                if t.index not in leaves:
                    leaves[t.index] = self.temp()
                return leaves[t.index]
            if isinstance(t, Struct) and len(t.args) == 2 and t.name in INT_BINARY:
                a, b = expr(t.args[0]), expr(t.args[1])
                if a is None or b is None:
                    return None
                if t.name == "mod":  # Python's % is SWI's mod, but for a zero divisor
                    nonzero.append(f"{b} != 0")
                elif t.name == "//":  # SWI's // truncates, Python's floors: they agree when a >= 0 < b
                    nonzero.append(f"{b} > 0 and {a} >= 0")
                elif t.name == "*":  # a product too large is the evaluator's error (pam.parlog.arith)
                    nonzero.append(f"({a}).bit_length() + ({b}).bit_length() <= {MAX_INT_BITS}")
                return INT_BINARY[t.name].format(a, b)
            if isinstance(t, Struct) and len(t.args) == 1 and t.name in INT_UNARY:
                a = expr(t.args[0])
                return None if a is None else INT_UNARY[t.name].format(a)
            return None

        out = [expr(x) for x in exprs]
        if any(x is None for x in out) or not leaves:
            return None
        return out, nonzero

    def is_new(self, term: Term) -> bool:
        return isinstance(term, Var) and term.index not in self.bound

    # -- building terms -------------------------------------------------------------------------
    def fresh(self, term: Term) -> None:
        """Create the clause variables of `term` not bound yet (in order of first appearance;
        each distinct node looked at once)."""
        seen: set[int] = set()
        stack = [term]
        while stack:
            t = stack.pop()
            if isinstance(t, Var):
                if t.index not in self.bound:
                    self.e(f"v{t.index} = Var()")
                    self.bound.add(t.index)
            elif isinstance(t, Struct) and id(t) not in seen:
                seen.add(id(t))
                stack.extend(reversed(t.args))

    def build(self, term: Term) -> str:
        """A Python expression that builds `term` (its variables must exist: see `fresh`)."""
        self.fresh(term)
        return self._expr(term, 0)

    def _recall(self, t: Term, table: dict[int, tuple[str, int]]) -> str | None:
        """The name in `table` (`made` or `matched`) of shared structure `t`, if it was set where
        the code now being emitted runs after it: every line since was at its depth or deeper
        (a block that ended, a branch not taken, may not have set it)."""
        lines, depth = self.e.lines, self.e.depth
        for line in lines[self.seen_lines:]:
            depth = min(depth, (len(line) - len(line.lstrip(" "))) // 4)
        self.seen_lines = len(lines)
        if self.deepest > depth:
            for known in (self.made, self.matched):
                for k in [k for k, (_, d) in known.items() if d > depth]:
                    del known[k]
            self.deepest = depth
        found = table.get(id(t))
        return found[0] if found is not None else None

    def _expr(self, t: Term, level: int) -> str:
        if id(t) in self.shared:
            x = self._recall(t, self.made)
            if x is None:
                x = self.temp()
                self.e(f"{x} = {self._build(t, 0)}")
                self.made[id(t)] = (x, self.e.depth)
                self.deepest = max(self.deepest, self.e.depth)
            return x
        return self._build(t, level)

    def _build(self, t: Term, level: int) -> str:
        if self.rc.is_ground(t):
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
            while isinstance(tail, Struct) and tail.name == "[|]" and len(tail.args) == 2 and \
                    not self.rc.is_ground(tail) and (tail is t or id(tail) not in self.shared):
                items.append(tail.args[0])
                tail = tail.args[1]
            if len(items) > 4:
                if len(items) > LONG:  # a long list literal: built by a loop of lines, not one expression
                    return self.long_list(items, tail, level)
                elems = ", ".join(self._expr(i, level + 1) for i in items)
                return f"from_list([{elems}], {self._expr(tail, level + 1)})"
            return f"Cons({self._expr(t.args[0], level + 1)}, {self._expr(t.args[1], level + 1)})"
        args = ", ".join(self._expr(a, level + 1) for a in t.args)
        return f"Struct({self.rc.atom(t.name)}, ({args},))"

    def long_list(self, items: list, tail: Term, level: int) -> str:
        """The elements go into a Python list a chunk of lines at a time (one line of 20,000
        elements would be one huge expression)."""
        x = self.temp()
        self.e(f"{x} = []")
        for i in range(0, len(items), LONG):
            elems = ", ".join(self._expr(item, level + 1) for item in items[i:i + LONG])
            self.e(f"{x} += [{elems}]")
        return f"from_list({x}, {self._expr(tail, level + 1)})"

    # -- commit ---------------------------------------------------------------------------------
    def self_call(self) -> Call | None:
        """The self call this clause loops back with, if the relation loops and the body is
        flat with the self call first among its tasks."""
        if not self.shape.loop:
            return None
        body = self.clause.body
        calls = calls_in(body)
        if body is None or any(c.placement is not None for c in calls) or not (
                isinstance(body, Call) or (body.op == "," and all(isinstance(p, Call) for p in body.parts))):
            return None
        for c in calls:
            if c.target in self.rc.module.rules:
                return c if c.target == self.rel.key else None
            if c.target not in primitives.INLINE:
                return None
        return None

    def dest_shape(self, call: Call | None) -> str | None:
        """How this clause gives the output built in place: "pass" (`V` on to the self call),
        "cons" (`[E|V]`, V the self call's), or None (the general way, after closing the hole)."""
        d = self.shape.dest
        if d is None or call is None:
            return None
        if any(c.target in primitives.INLINE and c.target not in ("is/2", "true/0") for c in calls_in(self.clause.body)):
            return None  # a primitive run at commit may walk into the list: no cell without a tail then
        out, passed = self.clause.head[d], call.args[d]
        if not isinstance(passed, Var) or passed.index in self.bound:
            return None
        uses = sum(occurrences(t, passed.index) for t in (*self.clause.head,
                                                          *[a for c in calls_in(self.clause.body) for a in c.args]))
        if uses != 2 or any(isinstance(n, Var) and n.index == passed.index for g in self.clause.guard
                            for a in g.args for n in _nodes(a)):
            return None
        if out == passed:
            return "pass"
        if isinstance(out, Struct) and out.name == "[|]" and len(out.args) == 2 and out.args[1] == passed:
            return "cons"
        return None

    def commit(self) -> None:
        e = self.e
        if any(deep_guard(c.guard) for c in self.rel.clauses()):
            e("GDONE(t)")  # the call's other guard computations are abandoned
        self.rc.trace(f"TR(t, {self.rc.proc_names[self.rel.key]}, {self.code.args()}, {self.number()}, "
                      f"{self.rc.site(self.clause.span)})")
        call = self.self_call()
        shape = self.dest_shape(call)
        d = self.shape.dest
        if d is not None and shape is None and self.is_new(self.clause.head[d]):
            self.code.close_hole()
        for i, (mode, pat) in enumerate(zip(self.rel.modes, self.clause.head)):
            if mode != "^":
                continue
            if i == d and shape == "cons":
                self.cons_in_place(pat)
                continue
            if isinstance(pat, Var) and pat.index not in self.bound:
                e(f"v{pat.index} = a{i}")  # a new variable simply names the caller's argument
                self.bound.add(pat.index)
                continue
            x = self.temp()
            e(f"{x} = {self.build(pat)}")
            if i == d and shape is None:  # the last cell built in place takes it as its tail
                e(f"if d{d} is not None:")
                e(f"    d{d}.tail = {x}")
                e(f"    d{d} = None")
                e("el" + self.output_test(i, x, pat)[0])
                for line in self.output_test(i, x, pat)[1:]:
                    e(line)
                continue
            for line in self.output_test(i, x, pat):
                e(line)
        body = self.clause.body
        if body is None:
            self.done()
        elif all(c.placement is None for c in calls_in(body)) and (
                isinstance(body, Call) or (body.op == "," and all(isinstance(p, Call) for p in body.parts))):
            self.flat_body(calls_in(body), call)
        else:
            self.plan_body(body)

    def output_test(self, i: int, x: str, pat: Term) -> list[str]:
        """Lines that unify output argument i with the value built in `x`, the first an `if`."""
        site = self.rc.site(self.clause.span)
        if isinstance(pat, Var):
            return [f"if not put(a{i}, {x}): raise fail_output(t, {site})"]
        return [f"if type(a{i}) is Var and a{i}.val is None:",
                f"    a{i}.val = {x}",
                f"    if a{i}.susp is not None: wake(a{i})",
                f"elif not put(a{i}, {x}): raise fail_output(t, {site})"]

    def number(self) -> int:
        """The clause's number in its relation, from 1 (as the trace names it)."""
        return next(k for k, cl in enumerate(self.rel.clauses(), 1) if cl is self.clause)

    def done(self) -> None:
        if self.shape.loop:
            self.e("METER[1] = n")
        self.rc.trace("TE()")
        self.e("return None")

    def cons_in_place(self, pat: Struct) -> None:
        """`[E|V]` into the output: a cell whose tail the next iteration fills (no Var for V),
        unless the caller's argument is not an unbound variable nobody waits on."""
        e = self.e
        d = self.shape.dest
        c = self.temp()
        head = self.build(pat.args[0])
        e(f"{c} = new_cell(Cons)")  # object.__new__: no Python-level __init__ call for a cell
        e(f"{c}.head = {head}")
        e(f"{c}.tail = None")
        e(f"if d{d} is not None:")
        e(f"    d{d}.tail = {c}")
        e(f"    d{d} = {c}")
        if self.rc.counting:
            e("    ST['cells_in_place'] += 1")
        e(f"elif type(a{d}) is Var and a{d}.val is None and a{d}.susp is None:")
        e(f"    a{d}.val = {c}")
        e(f"    d{d} = {c}")
        e("else:")
        e(f"    {c}.tail = Var()")
        e(f"    if not put(a{d}, {c}): raise fail_output(t, {self.rc.site(self.clause.span)})")
        v = pat.args[1].index
        e(f"v{v} = {c}.tail")
        self.bound.add(v)

    def args_tuple(self, call: Call) -> str:
        parts = [self.build(a) for a in call.args]
        return "(" + "".join(p + ", " for p in parts) + ")"

    def pending_arith(self, c: Call, relation_vars: set[int]) -> bool:
        """`X is E` whose operands wait for body goals (order-nodes): a task of its own, placed
        after them, rather than inline (where it could only suspend, twice for two operands)."""
        if not self.shape.arith_tasks or c.target != "is/2":
            return False
        return any(isinstance(n, Var) and n.index not in self.bound and n.index in relation_vars
                   for n in _nodes(c.args[1]))

    def flat_body(self, calls: list[Call], loop_call: Call | None) -> None:
        """`A, B, ...`: inline primitives run now; relation calls become tasks, the first of
        which continues in this task (or, the relation's own call with a loop, goes round)."""
        e = self.e
        relation_vars = {n.index for c in calls if c.target in self.rc.module.rules
                         for a in c.args for n in _nodes(a) if isinstance(n, Var)}
        tasks: list = []
        for c in calls:
            if self.pending_arith(c, relation_vars):
                tasks.append(c)
                continue
            if c.target == "is/2" and self.is_new(c.args[0]) and self.fast_is(c):
                continue
            if c.target == "is/2" and isinstance(c.args[0], Var) and self.fast_is_into(c):
                continue
            if c.target == "=/2" and (self.is_new(c.args[0]) or self.is_new(c.args[1])):
                new, other = c.args if self.is_new(c.args[0]) else reversed(c.args)
                # A new variable just names the other side, unless it occurs there (`X = [a|X]`
                # is a cyclic term: it must be bound, below, not named).
                if not any(isinstance(n, Var) and n.index == new.index for n in _nodes(other)):
                    value = self.build(other)
                    e(f"v{new.index} = {value}")
                    self.bound.add(new.index)
                    continue
            if c.target in primitives.INLINE:
                self.inline_primitive(c)
            else:
                tasks.append(c)
        self.rc.trace("TB()")
        if not tasks:
            self.done()
            return
        built = [(c, self.task_args(c)) for c in tasks]
        direct = {id(c) for c in tasks[1:] if self.scheduled(c, tasks)}
        queued = [(c, args) for c, args in built[1:] if id(c) not in direct]
        if len(tasks) > 1:
            e("g = t.group")
        if queued:
            e(f"if g is not None: g.count += {len(queued)}")
        for c, args in reversed(built[1:]):  # a goal run here may run while its siblings wait: none feeds it
            if id(c) in direct:
                self.run_directly(c, args)
            else:
                self.rc.count("enqueues")
                e(f"push(Goal({self.proc(c)}, {args}, g, {self.rc.site(c.span)}))")
        c, args = built[0]
        if c is loop_call:
            self.loop_back(c, args)
            return
        if self.shape.loop:
            e("METER[1] = n")
        e(f"t.proc = {self.proc(c)}")
        e(f"t.args = {args}")
        e(f"t.site = {self.rc.site(c.span)}")
        self.rc.trace("TK(t)")
        e("return t")

    def scheduled(self, c: Call, tasks: list[Call]) -> bool:
        """The schedule pass's restricted form (hpgrem/passes/parlog/schedule.py): a goal of a marked
        relation that no other goal of this body that becomes a task feeds (the flow analysis's
        note), in a relation that does not loop (its step's meter is the PE's, not a loop's
        count)."""
        module = self.rc.module
        notes = module.annotations.get(c.target) or {}
        fed = self.shape.fed
        if self.shape.loop or fed is None or c.placement is not None or c.target not in module.rules \
                or notes.get(SCHEDULE) is not True:
            return False
        clause = next((k for k, cl in enumerate(self.rel.clauses()) if cl is self.clause), None)
        number = {id(x): i for i, x in enumerate(calls_in(self.clause.body))}
        feeders = fed.get((clause, number[id(c)]), ())
        return not any(number[id(o)] in feeders for o in tasks if o is not c)

    def run_directly(self, c: Call, args: str) -> None:
        """Run goal `c` now, in this step, and what it continues with, while the time slice
        lasts (pam/parlog/rules.py's RUN); with no slice left, or where the goal is worth exporting,
        it goes to the queue as usual."""
        e = self.e
        notes = self.rc.module.annotations.get(c.target) or {}
        proc = self.proc(c)
        e(f"u = Goal({proc}, {args}, g, {self.rc.site(c.span)})")
        if not notes.get(EXPORTABLE):
            test = "METER[0] > 0"
        elif notes.get(LIFT) is not None:
            test = "METER[0] > 0 and (SOLO or not SPARE(u))"  # below the lift threshold: sequential here
        else:
            test = "METER[0] > 0 and SOLO"  # worth a thief's while on several PEs: to the queue
        e(f"if {test}: RUN(u, g, t.proc.cost)")
        e("else:")
        e.indent()
        self.rc.count("enqueues")
        e("if g is not None: g.count += 1")
        e("push(u)")
        e.dedent()

    def loop_back(self, c: Call, args: str) -> None:
        """The self call: the next iteration's arguments, and round again while the PE's time
        slice lasts; else the task holds the call and goes back to the PE."""
        e = self.e
        e(f"{', '.join(f'a{i}' for i in range(self.rel.arity))}{',' if self.rel.arity == 1 else ''} = {args}")
        self.rc.trace(f"TL(t, {self.rc.proc_names[self.rel.key]}, {self.code.args()})")
        if self.code.loop_site == "ls":
            e(f"ls = {self.rc.site(c.span)}")
        e("if n < m:")
        e("    n += 1")
        if self.code.blocks:
            e("    lp = True")
            e("    break")
        else:  # no block to leave: straight round
            e("    continue")
        self.code.close_hole()
        e("METER[1] = n")
        e(f"t.args = {self.code.args()}")
        e(f"t.site = {self.rc.site(c.span)}")
        e("return t")

    def task_args(self, c: Call) -> str:
        if c.target == "is/2" and self.shape.arith_tasks:
            return self.arith_task_args(c)
        return self.args_tuple(c)

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

    def fast_is_into(self, c: Call) -> bool:
        """`X is Expr` with X known, and unbound when it runs (an output cell's element, `[Z|Zs]`
        in the head: Z is made at commit): bound to the Python int as pe.bind would, when Expr's
        variables hold ints; anything else (X bound, a chain, not ints) is the evaluator's."""
        fast = self.int_arith([c.args[1]])
        if fast is None:
            return False
        (value,), check = fast
        x = self.temp()
        e = self.e
        e(f"{x} = v{c.args[0].index}")
        e(f"if {check} and type({x}) is Var and {x}.val is None:")
        e(f"    {x}.val = {value}")
        e(f"    if {x}.susp is not None: wake({x})")
        e("else:")
        e.indent()
        self.inline_primitive(c)
        e.dedent()
        return True

    # -- arithmetic tasks -----------------------------------------------------------------------
    def arith_task_args(self, c: Call) -> str:
        """The arguments of a pending `X is E` task: X, E and then E's variables, which its own
        step (made for this call site) tests and computes with inline."""
        args = self.args_tuple(c)
        leaves: dict[int, str] = {}
        plain = self.int_expressions([c.args[1]], leaves, bound={n.index for n in _nodes(c.args[1])
                                                                 if isinstance(n, Var)})
        if plain is None:
            self.arith_steps[id(c)] = None
            return args
        (text,), nonzero = plain
        name = f"A{self.rc.proc_names[self.rel.key][1:]}_{len(self.rc.later)}"
        self.arith_steps[id(c)] = name
        lines = [f"@declare('is', 2, PRIMITIVE_COST, key={self.rel.key + '#' + name!r})", f"def {name}(t):",
                 f"    x, e, {''.join(x + ', ' for x in leaves.values())}= t.args"]
        for x in leaves.values():
            lines += ["    " + deref_line(x), f"    if type({x}) is Var: return [{x}]"]
        checks = [f"type({x}) is int" for x in leaves.values()] + nonzero
        lines += [f"    if {' and '.join(checks)} and type(x) is Var and x.val is None:",
                  f"        x.val = {text}",
                  "        if x.susp is not None: wake(x)",
                  "        return None",
                  "    return INLINE['is/2'](x, e, t.site)"]
        self.rc.later.append(lines)
        return args[:-1] + "".join(f"v{i}, " for i in leaves) + ")"

    def proc(self, call: Call) -> str:
        if call.target in self.rc.proc_names:
            return self.rc.proc_names[call.target]
        if call.target == "is/2" and self.arith_steps.get(id(call)):
            return self.arith_steps[id(call)]
        return f"PROCS[{call.target!r}]"

    def plan_body(self, body) -> None:
        """A body with `&`: build its plan of tasks and let the PE schedule it."""
        e = self.e
        self.rc.trace("TB()")
        e(f"spawn({self.plan(body)}, t)")
        self.done()

    def plan(self, body) -> str:
        if isinstance(body, Call):
            task = f"Goal({self.proc(body)}, {self.args_tuple(body)}, None, {self.rc.site(body.span)})"
            if body.placement is not None:
                return f"Placed({task}, {self.build(body.placement)})"
            return task
        parts = ", ".join(self.plan(p) for p in body.parts)
        return f"[{parts}]" if body.op == "," else f"Seq([{parts}])"


def _more_nodes(term: Term, limit: int) -> bool:
    """Whether `term` has more than `limit` nodes counted as a tree would (once per place)."""
    n, stack = 0, [term]
    while stack:
        t = stack.pop()
        n += 1
        if n > limit:
            return True
        if isinstance(t, Struct):
            stack.extend(t.args)
    return False


def occurrences(term: Term, index: int) -> int:
    """How many times clause variable `index` occurs in `term`, once per place (as in copies of
    its shared nodes), computed once per distinct node."""
    return fold(term, lambda n, kids: sum(kids) + (isinstance(n, Var) and n.index == index))


def _nodes(term: Term):
    """The distinct nodes of an IR term, iteratively (a node shared by several places once)."""
    seen: set[int] = set()
    stack = [term]
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        yield t
        if isinstance(t, Struct):
            stack.extend(t.args)

