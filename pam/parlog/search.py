"""All-solutions relations (spec/parlog.md): Prolog's depth-first search with backtracking,
compiled once at load time into Python, and run as tasks of the PE by `set/3`, `subset/3` and `~`.

Each clause of an all-solutions relation becomes one function `clause(args, k, tr)`: it unifies
the head with the call's arguments (binding variables through the trail `tr`), runs the
primitives that open its body inline, and returns the goals still to run, its first relation
call in front of the continuation `k`, or False when it fails. Goals are frames
`(relation, args, next)`: a linked list that choice points share, so a search of any depth is a
loop, never Python recursion. A primitive that follows a relation call in a body becomes a
`Procedure` of one clause of its own, run when its frame is reached. `Search` is the loop: it runs frames
and choice points for a budget of resolutions and says whether it found a solution, is out of
solutions, or has more to do.

A construct (`set/3`, `subset/3`, `~`) became a relation whose one clause is
`'$c'(Template, NonLocals...) :- Conj` (frontend/parlog/lower.py); its call's step waits until the
non-local variables are ground, then becomes a `SearchTask` that runs its search a budget at a
time, so a long search takes its turns with the other tasks and stops when they are stopped.
A `subset/3` that waits for demand is held by the PE's demand hook, not suspended: it is no
goal of a deadlock, and is abandoned silently at quiescence.
"""

from __future__ import annotations

import math

from hpgrem.ir import Module, fold, use_counts
from hpgrem.ir.parlog import SEARCH, AllSolutions, Atom, Call, Float, Int, Struct, Term, Var, calls_in
from pam.emit import Emitter
from pam.errors import ProgramFailure
from pam.parlog import primitives
from pam.parlog.arith import ArithError, evaluate
from pam.parlog.clause_code import to_runtime
from pam.parlog.goal import Goal
from pam.parlog.notes import COST
from pam.parlog.profile_names import search_names
from pam.generated import GeneratedCode
from pam.parlog.write import write_term
from pam.step import declare
from pam.terms import NIL, Cons, GroundCheck, from_list, mkatom
from pam.terms import Struct as RStruct
from pam.terms import Var as RVar
from pam.unify import match_eq, unify

# What `Search.run` says.
FOUND, DONE, MORE = 0, 1, 2
# Resolutions a search task runs in one step at most (the PE's time slice counts each).
STEP_RESOLUTIONS = 100
ARITH_OPS = {"+": "+", "-": "-", "*": "*"}
COMPARISONS = {"<": "<", ">": ">", "=<": "<=", ">=": ">=", "=:=": "==", "=\\=": "!="}
TYPE_TESTS = {
    "atom/1": "type({0}) is str", "integer/1": "type({0}) is int", "float/1": "type({0}) is float",
    "number/1": "type({0}) in (int, float)", "atomic/1": "type({0}) in (str, int, float)",
    "compound/1": "type({0}) in (Struct, Cons)", "data/1": "type({0}) is not Var", "var/1": "type({0}) is Var",
}


class Procedure:
    """An all-solutions relation compiled: its clause functions, in written order, and `index`
    (None, or the clauses that may match a first argument: first-argument indexing, so that
    a call leaves no choice point for clauses that cannot match)."""

    __slots__ = ("clauses", "key", "index")

    def __init__(self, key: str) -> None:
        self.key = key
        self.clauses: tuple = ()
        self.index = None


class Search:
    """One depth-first search: `goals` the frames still to run (None: a solution; False:
    backtrack), `cps` the choice points (trail mark, clauses, args, continuation, next clause),
    `tr` the trail of bound variables."""

    __slots__ = ("goals", "cps", "tr")

    def __init__(self, rel: Procedure, args: tuple, tr: list | None = None) -> None:
        self.goals = (rel, args, None)
        self.cps: list = []
        self.tr = [] if tr is None else tr

    def run(self, budget: int) -> tuple[int, int]:
        """Resolve up to `budget` goals: (FOUND, DONE or MORE, resolutions run). After FOUND
        the next run backtracks into the next solution."""
        tr = self.tr
        cps = self.cps
        goals = self.goals
        n = 0
        while n < budget:
            if goals is None:
                self.goals = False
                return FOUND, n
            n += 1
            if goals is False:
                if not cps:
                    self.goals = False
                    return DONE, n
                mark, cl, args, k, i = cps.pop()
                if len(tr) > mark:
                    for v in tr[mark:]:
                        v.val = None
                    del tr[mark:]
            else:
                rel, args, k = goals
                index = rel.index
                cl = rel.clauses if index is None else index(args[0])
                if not cl:
                    goals = False
                    continue
                i = 0
                mark = len(tr)
            last = len(cl) - 1
            while True:
                r = cl[i](args, k, tr)
                if r is not False:
                    if i < last:
                        cps.append((mark, cl, args, k, i + 1))
                    goals = r
                    break
                if len(tr) > mark:  # most clauses fail before binding anything
                    for v in tr[mark:]:
                        v.val = None
                    del tr[mark:]
                if i == last:
                    goals = False
                    break
                i += 1
        self.goals = goals
        return MORE, n


def solves(rel: Procedure, args: tuple, tr: list) -> bool:
    """`~` inside a search: whether the goal has a solution (its bindings undone)."""
    mark = len(tr)
    search = Search(rel, args, tr)
    status = MORE
    while status == MORE:
        status, _ = search.run(1 << 30)
    for v in tr[mark:]:
        v.val = None
    del tr[mark:]
    return status == FOUND


def unify_tr(a, b, tr: list) -> bool:
    """Unify, recording every binding on the trail."""
    app = tr.append

    def bind(v, x):
        v.val = x
        app(v)
    return unify(a, b, bind)


def not_unifiable(a, b, tr: list) -> bool:
    """`\\=`: the unification fails (what it bound is undone)."""
    mark = len(tr)
    ok = unify_tr(a, b, tr)
    for v in tr[mark:]:
        v.val = None
    del tr[mark:]
    return not ok


def identical(a, b) -> bool:
    """`==`: the same term now (an unbound variable is identical to itself only)."""
    return match_eq(a, b) is True


def copy_term(term):
    """A copy of `term` as bound now, with fresh variables for its unbound ones: an instance of
    a template, which keeps nothing of the search (its trail undoes the originals)."""
    fresh: dict = {}
    out: list = []
    stack: list = [(term, False)]
    while stack:
        x, built = stack.pop()
        if built:
            if type(x) is Cons:
                tail = out.pop()
                out[-1] = Cons(out[-1], tail)
            else:
                n = len(x.args)
                args = tuple(out[len(out) - n:])
                del out[len(out) - n:]
                out.append(RStruct(x.name, args))
            continue
        while type(x) is RVar and x.val is not None:
            x = x.val
        tx = type(x)
        if tx is RVar:
            v = fresh.get(x)
            if v is None:
                v = fresh[x] = RVar()
            out.append(v)
        elif tx is Cons:
            stack.append((x, True))
            stack.append((x.tail, False))
            stack.append((x.head, False))
        elif tx is RStruct:
            stack.append((x, True))
            stack.extend((a, False) for a in reversed(x.args))
        else:
            out.append(x)
    return out[0]


def arith_value(expr, name: str, site):
    """`is` and comparisons in a search: the value of `expr`, or an error of the program
    naming the goal `name` (an unbound operand raises no suspension here, as in Prolog)."""
    try:
        v = evaluate(expr)
    except ArithError as e:
        raise ProgramFailure(f"arithmetic error: {e}", f"{name} {write_term(expr)}", site) from None
    if type(v) is RVar:
        raise ProgramFailure("arguments are not sufficiently instantiated", f"{name} {write_term(expr)}",
                             site)
    return v


class SearchCompiler:
    """The Python source of a module's all-solutions relations (`source`), one function per
    clause and one per primitive goal that follows a relation call, executed once per PE."""

    def __init__(self, module: Module):
        self.module = module
        self.rels = {key: rel for key, rel in module.rules.items() if isinstance(rel, AllSolutions)}
        self.names = {key: f"S{i}" for i, key in enumerate(self.rels)}
        self.consts: dict[str, object] = {}
        self.const_names: dict[tuple, str] = {}
        self.out = Emitter()
        self.temps = 0
        self.grounds: dict[int, bool] = {}
        self.later: list[str] = []  # the functions of a clause's goal frames, emitted after it
        self.source = self._generate()
        self.code = None  # the source compiled (pam/generated.py), once loaded

    def const(self, kind: str, value, make) -> str:
        key = (kind, value if kind != "term" else id(value))
        name = self.const_names.get(key)
        if name is None:
            name = self.const_names[key] = f"K{len(self.consts)}"
            self.consts[name] = make()
        return name

    def ground(self, t: Term) -> str:
        if isinstance(t, Atom):
            return self.const("atom", t.name, lambda: mkatom(t.name))
        if isinstance(t, Int) or isinstance(t, Float) and math.isfinite(t.value):
            return repr(t.value)
        if isinstance(t, Float):
            return self.const("float", repr(t.value), lambda: t.value)
        return self.const("term", t, lambda: to_runtime(t))

    def temp(self) -> str:
        self.temps += 1
        return f"x{self.temps}"

    def _generate(self) -> str:
        e = self.out
        e("def make(RT):")
        e.indent()
        for name in ("Var", "Struct", "Cons", "UNIFY", "NOTUNIFY", "IDENT", "SOLVES", "ARITH", "PRIM", "Rel",
                     "CONSTS"):
            e(f"{name} = RT['{name}']")
        e("globals().update(CONSTS)")
        for key in self.rels:
            e(f"{self.names[key]} = Rel({key!r})")
        for key, rel in self.rels.items():
            fns = [self.clause(rel, i, c) for i, c in enumerate(rel.clauses())]
            e(f"{self.names[key]}.clauses = ({''.join(f + ', ' for f in fns)})")
            self.index(rel, fns)
        e("return {" + ", ".join(f"{k!r}: {n}" for k, n in self.names.items()) + "}")
        return "\n".join(e.lines) + "\n"

    def index(self, rel: AllSolutions, fns: list[str]) -> None:
        """The relation's first-argument index, when some clause's first argument is not a
        variable: by list cell, by functor of a structure, by type and value of an atomic."""
        firsts = [c.head[0] if c.head else None for c in rel.clauses()]
        if all(f is None or isinstance(f, Var) for f in firsts):
            return
        e = self.out
        anywhere = [f for f, p in zip(fns, firsts) if isinstance(p, Var)]
        keys: dict[str, str] = {}  # key expression -> the kind of table it goes in
        for p in firsts:
            if isinstance(p, Struct) and p.name == "[|]" and len(p.args) == 2:
                continue
            if isinstance(p, Struct):
                keys[_principal_key(self, p)] = "struct"
            elif isinstance(p, (Atom, Int, Float)):
                keys[_principal_key(self, p)] = "atomic"

        def matching(key: str | None) -> str:
            fs = [f for f, p in zip(fns, firsts) if isinstance(p, Var) or _principal_key(self, p) == key]
            return "(" + "".join(f + ", " for f in fs) + ")"

        name = self.names[rel.key]
        struct = [k for k, kind in keys.items() if kind == "struct"]
        atomic = [k for k, kind in keys.items() if kind == "atomic"]
        rest = "(" + "".join(f + ", " for f in anywhere) + ")"
        # the tables are made once, beside the function
        e(f"{name}_cons = {matching('cons')}")
        e(f"{name}_rest = {rest}")
        e(f"{name}_structs = {{{', '.join(f'{k}: {matching(k)}' for k in struct)}}}")
        e(f"{name}_atomics = {{{', '.join(f'{k}: {matching(k)}' for k in atomic)}}}")
        e(f"def {name}_ix(a0):")
        e.indent()
        self.deref("x", "a0")
        e("t = type(x)")
        e(f"if t is Var: return {name}.clauses")
        e(f"if t is Cons: return {name}_cons")
        e(f"if t is Struct: return {name}_structs.get((x.name, len(x.args)), {name}_rest)")
        e(f"return {name}_atomics.get((t, x), {name}_rest)")
        e.dedent()
        e(f"{name}.index = {name}_ix")

    # -- clauses ------------------------------------------------------------------------------
    def clause(self, rel: AllSolutions, ci: int, clause) -> str:
        """Emit one clause's function; returns its name."""
        e = self.out
        fname = f"{self.names[rel.key]}_{ci}"
        goals = calls_in(clause.body)
        first = next((i for i, g in enumerate(goals) if g.target in self.rels and
                      self.rels[g.target].construct == SEARCH), len(goals))
        e(f"def {fname}(a, k, tr):")
        e.indent()
        bound: set[int] = set()
        if rel.arity:
            e(", ".join(f"a{i}" for i in range(rel.arity)) + (", = a" if rel.arity == 1 else " = a"))
        for i, pat in enumerate(clause.head):
            self.match(pat, f"a{i}", bound)
        for g in goals[:first]:
            self.primitive(g, bound)
        later: list[str] = []
        for g in goals[first:]:
            if g.target in self.rels and self.rels[g.target].construct == SEARCH:
                later.append(f"({self.names[g.target]}, ({''.join(self.build(a, bound) + ', ' for a in g.args)}), ")
            else:
                later.append(self.goal_frame(g, bound))
        e("return " + "".join(later) + "k" + ")" * len(later))
        e.dedent()
        self.out.lines += self.later
        self.later = []
        return fname

    def goal_frame(self, g: Call, bound: set[int]) -> str:
        """A primitive after a relation call: a relation of one clause that runs it on the
        goal's variables, passed as its arguments."""
        variables = sorted({v.index for v in _vars(g)})
        args = "".join(self.build(Var("_", i), bound) + ", " for i in variables)
        saved, self.out = self.out, Emitter(1)
        e = self.out
        name = self.temp().replace("x", "G")
        e(f"def {name}(a, k, tr):")
        e.indent()
        if variables:
            e(", ".join(f"V{i}" for i in variables) + (", = a" if len(variables) == 1 else " = a"))
        self.primitive(g, set(variables))
        e("return k")
        e.dedent()
        e(f"{name}R = Rel({g.target!r})")
        e(f"{name}R.clauses = ({name},)")
        self.later += e.lines
        self.out = saved
        return f"({name}R, ({args}), "

    # -- head matching ------------------------------------------------------------------------
    def deref(self, x: str, src: str) -> None:
        """`x` = the runtime term `src` with its bound variables followed (inline: no call)."""
        self.out(f"{x} = {src}")
        self.out(f"while type({x}) is Var and {x}.val is not None: {x} = {x}.val")

    def bind_var(self, x: str, value: str) -> None:
        self.out(f"{x}.val = {value}")
        self.out(f"tr.append({x})")

    def match(self, pat: Term, src: str, bound: set[int]) -> None:
        """Unify the head pattern `pat` with the runtime term `src` (through the trail)."""
        e = self.out
        if isinstance(pat, Var):
            if pat.index in bound:
                x, y = self.temp(), self.temp()
                self.deref(x, f"V{pat.index}")
                self.deref(y, src)
                e(f"if {x} is {y}: pass")
                e(f"elif type({x}) is Var:")
                e.indent()
                self.bind_var(x, y)
                e.dedent()
                e(f"elif type({y}) is Var:")
                e.indent()
                self.bind_var(y, x)
                e.dedent()
                e(f"elif not UNIFY({x}, {y}, tr): return False")
            else:
                bound.add(pat.index)
                e(f"V{pat.index} = {src}")
            return
        x = self.temp()
        self.deref(x, src)
        if isinstance(pat, (Atom, Int, Float)):
            k = self.ground(pat)
            e(f"if type({x}) is Var:")
            e.indent()
            self.bind_var(x, k)
            e.dedent()
            if isinstance(pat, Atom):
                e(f"elif {x} is not {k}: return False")
            else:
                e(f"elif type({x}) is not {type(pat.value).__name__} or {x} != {k}: return False")
            return
        e(f"if type({x}) is Var:")
        e.indent()
        built = set(bound)
        self.bind_var(x, self.build(pat, built))
        e.dedent()
        if pat.name == "[|]" and len(pat.args) == 2:
            e(f"elif type({x}) is Cons:")
            e.indent()
            self.match(pat.args[0], f"{x}.head", bound)
            self.match(pat.args[1], f"{x}.tail", bound)
        else:
            name = self.ground(Atom(pat.name))
            e(f"elif type({x}) is Struct and {x}.name is {name} and len({x}.args) == {len(pat.args)}:")
            e.indent()
            for i, arg in enumerate(pat.args):
                self.match(arg, f"{x}.args[{i}]", bound)
        e("pass")
        e.dedent()
        e("else: return False")
        bound |= built

    def build(self, t: Term, bound: set[int]) -> str:
        """An expression for the term `t` (new variables made first, as statements). A
        structure with variables that `t` uses in several places (the IR is a graph) is built
        once, into a temporary, and read again (a tree's code has none)."""
        if self.is_ground(t):
            return self.ground(t)
        for v in _vars(t):
            if v.index not in bound:
                bound.add(v.index)
                self.out(f"V{v.index} = Var()")
        counts = use_counts((t,))
        shared = {i for i, n in counts.items() if n > 1} if any(n > 1 for n in counts.values()) else set()
        return self._expr(t, shared, {})

    def is_ground(self, t: Term) -> bool:
        """Whether `t` has no variable, computed once per distinct node (`ground`: by id, the
        module keeping its nodes alive)."""
        if not isinstance(t, (Struct, Call)):
            return not isinstance(t, Var)
        known = self.grounds.get(id(t))
        if known is None:
            for n, g in fold_all(t, lambda x, kids: all(kids) and not isinstance(x, Var)):
                if isinstance(n, (Struct, Call)):
                    self.grounds[id(n)] = g
            known = self.grounds[id(t)]
        return known

    def _expr(self, t: Term, shared: set[int], made: dict[int, str]) -> str:
        if isinstance(t, Var):
            return f"V{t.index}"
        if not isinstance(t, Struct) or self.is_ground(t):
            return self.ground(t)
        if id(t) in made:
            return made[id(t)]
        if t.name == "[|]" and len(t.args) == 2:
            text = f"Cons({self._expr(t.args[0], shared, made)}, {self._expr(t.args[1], shared, made)})"
        else:
            text = f"Struct({self.ground(Atom(t.name))}, ({''.join(self._expr(a, shared, made) + ', ' for a in t.args)}))"
        if id(t) in shared:
            made[id(t)] = x = self.temp()
            self.out(f"{x} = {text}")
            return x
        return text

    # -- primitives ---------------------------------------------------------------------------
    def primitive(self, g: Call, bound: set[int]) -> None:
        """A primitive (or `~`) of a body, inline: `return False` when it fails."""
        e = self.out
        t = g.target
        args = g.args
        site = self.const("site", g.span, lambda: g.span)
        if t == "true/0":
            return
        if t == "=/2":
            left, right = args
            for a, b in ((left, right), (right, left)):
                if isinstance(a, Var) and a.index not in bound:
                    value = self.build(b, bound)
                    if a.index not in bound:
                        bound.add(a.index)
                        e(f"V{a.index} = {value}")
                        return
            e(f"if not UNIFY({self.build(left, bound)}, {self.build(right, bound)}, tr): return False")
        elif t == "\\=/2":
            e(f"if not NOTUNIFY({self.build(args[0], bound)}, {self.build(args[1], bound)}, tr): return False")
        elif t == "==/2" or t == "\\==/2":
            test = "not IDENT" if t == "==/2" else "IDENT"
            e(f"if {test}({self.build(args[0], bound)}, {self.build(args[1], bound)}): return False")
        elif t in TYPE_TESTS:
            x = self.temp()
            self.deref(x, self.build(args[0], bound))
            e(f"if not ({TYPE_TESTS[t].format(x)}): return False")
        elif t == "is/2":
            value = self.arith(args[1], bound, g, site)
            out = args[0]
            if isinstance(out, Var) and out.index not in bound:
                bound.add(out.index)
                e(f"V{out.index} = {value}")
            else:
                x, r = self.temp(), self.temp()
                e(f"{r} = {value}")
                self.deref(x, self.build(out, bound))
                e(f"if type({x}) is Var:")
                e.indent()
                self.bind_var(x, r)
                e.dedent()
                e(f"elif type({x}) is not type({r}) or {x} != {r}: return False")
        elif t.split("/")[0] in COMPARISONS and t.endswith("/2"):
            op = t.split("/")[0]
            a = self.arith(args[0], bound, g, site)
            b = self.arith(args[1], bound, g, site)
            x, y = self.temp(), self.temp()
            e(f"{x} = {a}")
            e(f"{y} = {b}")
            e(f"if not ({x} {COMPARISONS[op]} {y}): return False")
        elif t in self.rels:  # `~ Conj`, its non-locals passed
            e(f"if SOLVES({self.names[t]}, ({''.join(self.build(a, bound) + ', ' for a in args)}), tr): "
              "return False")
        else:  # the pure term primitives, run with the trail
            e(f"if not PRIM({t!r}, ({''.join(self.build(a, bound) + ', ' for a in args)}), tr, {site}): "
              "return False")

    def arith(self, expr: Term, bound: set[int], g: Call, site: str) -> str:
        """An expression for the value of `expr`: integer `+ - *` of variables and integers
        inline, anything else by the evaluator."""
        e = self.out
        if isinstance(expr, Int):
            return repr(expr.value)
        leaves: list[Var] = []
        if _int_expr(expr, leaves) and all(v.index in bound for v in leaves):
            names = {}
            for v in leaves:
                if v.index not in names:
                    names[v.index] = self.temp()
                    self.deref(names[v.index], f"V{v.index}")
            r = self.temp()
            test = " and ".join(f"type({n}) is int" for n in names.values())
            e(f"if {test}: {r} = {_py(expr, names)}")
            e(f"else: {r} = ARITH({self.build(expr, bound)}, {self.goal_text(g)}, {site})")
            return r
        return f"ARITH({self.build(expr, bound)}, {self.goal_text(g)}, {site})"

    def goal_text(self, g: Call) -> str:
        """The goal's name, as failure reports give it."""
        name = g.target.rsplit("/", 1)[0]
        return self.const("text", name, lambda: name)


def _principal_key(compiler: SearchCompiler, p: Term) -> str:
    """The index key of a first argument that is not a variable (as `SearchCompiler.index`
    writes it)."""
    if isinstance(p, Struct) and p.name == "[|]" and len(p.args) == 2:
        return "cons"
    if isinstance(p, Struct):
        return f"({compiler.ground(Atom(p.name))}, {len(p.args)})"
    runtime_type = {Atom: "str", Int: "int", Float: "float"}[type(p)]
    return f"({runtime_type}, {compiler.ground(p)})"


def _vars(t) -> list[Var]:
    """The variables of `t`, looking into each distinct structure once."""
    out: list[Var] = []
    seen: set[int] = set()
    stack = [t]
    while stack:
        x = stack.pop()
        if isinstance(x, Var):
            out.append(x)
        elif isinstance(x, (Struct, Call)) and id(x) not in seen:
            seen.add(id(x))
            stack.extend(x.args)
    return out


def fold_all(root, fn) -> list:
    """(node, fn(node, results of its children)) for each distinct node below `root`, bottom up."""
    out: list = []

    def at(x, kids):
        r = fn(x, kids)
        out.append((x, r))
        return r
    fold(root, at)
    return out


def _int_expr(t: Term, leaves: list[Var]) -> bool:
    if isinstance(t, Var):
        leaves.append(t)
        return True
    if isinstance(t, Int):
        return True
    return isinstance(t, Struct) and t.name in ARITH_OPS and len(t.args) == 2 and \
        all(_int_expr(a, leaves) for a in t.args)


def _py(t: Term, names: dict[int, str]) -> str:
    if isinstance(t, Var):
        return names[t.index]
    if isinstance(t, Int):
        return repr(t.value)
    return f"({_py(t.args[0], names)} {ARITH_OPS[t.name]} {_py(t.args[1], names)})"


# -- on the machine ---------------------------------------------------------------------------


class SearchTask(Goal):
    """A construct's search under way: `search` its state, `answer` the variable its template
    is bound to in each solution; `found` the instances so far (`set/3`); `tail` the list's
    current tail (`subset/3`)."""

    __slots__ = ("search", "answer", "found", "tail")


class _Trailed:
    """What the pure term primitives (pam.parlog.primitives) see of a PE inside a search: their
    bindings go on the running search's trail `tr`."""

    number = 0
    net = None
    output = None

    def __init__(self) -> None:
        self.tr: list = []

    def bind(self, var, value) -> None:
        while type(value) is RVar and value.val is not None:
            value = value.val
        if value is not var:
            var.val = value
            self.tr.append(var)

    def unify(self, a, b) -> bool:
        return unify_tr(a, b, self.tr)


def load(compiler: SearchCompiler, pe) -> dict:
    """The steps of `pe` for the constructs' relations (set/3, subset/3, ~), by key; registers
    the demand hook of `subset/3` when the module has one."""
    if not compiler.rels:
        return {}
    trailed = _Trailed()
    pure = primitives.build(trailed, lambda name, arity: None)["inline"]

    def prim(key: str, args: tuple, tr: list, site) -> bool:
        trailed.tr = tr
        try:
            waits = pure[key](*args, site)
        except ProgramFailure as failure:
            if failure.message == "failed":
                return False
            raise
        if waits:
            goal = write_term(RStruct(key.rsplit("/", 1)[0], args))
            raise ProgramFailure("arguments are not sufficiently instantiated", goal, site)
        return True

    runtime = {"Var": RVar, "Struct": RStruct, "Cons": Cons, "UNIFY": unify_tr, "NOTUNIFY": not_unifiable,
               "IDENT": identical, "SOLVES": solves, "ARITH": arith_value, "PRIM": prim, "Rel": Procedure,
               "CONSTS": compiler.consts}
    if compiler.code is None:  # compiled once, whatever the PEs (names for --profile: pam/profile.py)
        compiler.code = GeneratedCode(compiler.source, f"<searches of {compiler.module.source}>", search_names,
                                      compiler)
    rels = compiler.code.run({})["make"](runtime)
    waiting: list[SearchTask] = []
    steps = {key: _construct_step(pe, compiler, rel, rels[key], waiting)
             for key, rel in compiler.rels.items() if rel.construct != SEARCH}
    if any(rel.construct == "subset" for rel in compiler.rels.values()):
        pe.hooks.append(_demand_hook(pe, waiting))
    return steps


def _deref(x):
    while type(x) is RVar:
        v = x.val
        if v is None:
            return x
        x = v
    return x


def _demand_hook(pe, waiting: list[SearchTask]):
    """Each turn: a `subset/3` whose tail the consumer has bound, or that a task waits on (or
    another PE reads), goes on. Never pending: a subset waiting for demand keeps no PE busy."""
    def demand() -> bool:
        if waiting:
            still = []
            for t in waiting:
                x = _deref(t.tail)
                if type(x) is RVar and not x.susp:
                    still.append(t)
                else:
                    pe.push(t)
            waiting[:] = still
        return False
    return demand


def _construct_step(pe, compiler: SearchCompiler, rel: AllSolutions, srel: Procedure, waiting: list):
    """The step of a call of a construct's relation: it waits until the non-local variables
    are ground, then becomes the search's task."""
    notes = compiler.module.annotations.get(rel.key, {})
    cost = int(notes.get(COST, 10))
    kind = rel.construct
    has_list = kind != "not"
    meter = pe.meter
    tracer = pe.tracer  # a traced run reports each resolution as a rewrite (pam.trace)
    rule = f"{rel.key}:search"

    @declare(rel.name, rel.arity, cost, key=rel.key)
    def start(t):
        args = t.args
        for x in args[1:] if has_list else args:
            v = GroundCheck(x).first_unbound()
            if v is not None:
                return [v]
        task = SearchTask(run, args, t.group, t.site)
        task.answer = RVar() if has_list else None
        task.search = Search(srel, (task.answer, *args[1:]) if has_list else args)
        task.found = [] if kind == "set" else None
        task.tail = args[0] if kind == "subset" else None
        return task

    def traced_search(t, budget: int, shown: list) -> tuple[int, int]:
        """`Search.run` in a traced run: one rewrite per resolution, so the trace's rewrites
        are the reductions the statistics count."""
        n = 0
        while n < budget:
            status, k = t.search.run(1)
            if k:
                n += 1
                report(t, shown)
            if status != MORE:
                return status, n
        return MORE, n

    def report(t, shown: list) -> None:
        if not shown:
            shown += ("", []) if tracer.trace.cut else tracer.task_text(t)
        tracer.rewrite(t, rule, shown[0], shown[1], span=t.site, cost=cost)

    @declare(rel.name, rel.arity, cost, key=rule)
    def run(t):
        budget = min(STEP_RESOLUTIONS, max(1, meter[0] + 1))
        used = 0
        status = MORE
        shown: list = []  # the task's text and variables, once per step (traced runs)
        while used < budget:
            if kind == "subset":
                tail = _deref(t.tail)
                if type(tail) is RVar and not tail.susp:  # no demand yet
                    if t.group is not None:
                        t.group.count += 1  # still live for `&`: the PE's finish undoes this
                    waiting.append(t)
                    status = None
                    break
                if tail is NIL:  # the consumer wants no more: the search is abandoned
                    status = None
                    break
            status, n = t.search.run(budget - used) if tracer is None else traced_search(t, budget - used, shown)
            used += n
            if status != FOUND:
                break
            if kind == "not":
                meter[1] += used  # its resolutions were reductions (and rewrites), though it fails
                raise ProgramFailure("~: the conjunction has a solution", t.describe(), t.site)
            instance = copy_term(t.answer)
            if kind == "set":
                t.found.append(instance)
            else:
                _deliver(pe, t, instance)
            status = MORE
        if used > 1:
            meter[1] += used - 1
        elif tracer is not None and not used:  # the step is a reduction though it resolved nothing
            report(t, shown)
        if status is None:
            return None
        if status == MORE:
            return t
        if kind == "set" and not pe.unify(t.args[0], from_list(t.found)):
            raise ProgramFailure("failed", t.describe(), t.site)
        if kind == "subset" and not pe.unify(t.tail, NIL):
            raise ProgramFailure("failed: no more solutions for the list's next cell", t.describe(), t.site)
        return None

    if tracer is not None:
        run.traced = True
    return start


def _deliver(pe, t: SearchTask, instance) -> None:
    """A solution of `subset/3` into the list's current cell, which demand made."""
    tail = _deref(t.tail)
    if type(tail) is RVar:
        rest = RVar()
        pe.bind(tail, Cons(instance, rest))
        t.tail = rest
    elif type(tail) is Cons:
        if not pe.unify(tail.head, instance):
            raise ProgramFailure("failed", t.describe(), t.site)
        t.tail = tail.tail
    else:
        raise ProgramFailure("failed: the list is not a list", t.describe(), t.site)
    t.args = (t.tail, *t.args[1:])  # the cells before it are the consumer's to hold, or drop
