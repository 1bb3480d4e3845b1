"""The PARLOG dialect of HPGREM: terms, goals, guarded clauses and relations.

A `Relation` is a rule: modes (`?` input, `^` output) and clauses cut into ordered search
groups by `;`. Clause variables are numbered per clause. Each node says how it prints
(`render`, see hpgrem/printer.py); everything else comes from its declared fields.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field

from hpgrem.ir.core import IN, NL, NO_SPAN, OUT, Node, Rule, Span, inline, node, transform, walk

CONS = "[|]"
NIL = "[]"
GOAL_OPS = frozenset({"=", "\\=", "==", "\\==", "is", "<", ">", "=<", ">=", "=:=", "=\\=", "=.."})


def quote_atom(name: str) -> str:
    """An atom as source text, quoted where it must be."""
    if name == "[]" or (name[:1].islower() and name.replace("_", "a").isalnum()):
        return name
    return "'" + name.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _args(items) -> list:
    out: list = []
    for i, a in enumerate(items):
        out += ([", "] if i else []) + [a]
    return out


# ---------------------------------------------------------------------------------------------
# Terms


@node("parlog")
@dataclass(frozen=True, slots=True)
class Var(Node):
    """A clause variable: `index` numbers it within its clause; `name` is the source name."""

    name: str
    index: int = -1
    span: Span = field(default=NO_SPAN, compare=False)

    def render(self) -> list:
        return [self.name]


@node("parlog")
@dataclass(frozen=True, slots=True)
class Atom(Node):
    """An atom such as `foo`, `[]` or `'Hello world'`."""

    name: str
    span: Span = field(default=NO_SPAN, compare=False)

    def render(self) -> list:
        return [quote_atom(self.name)]


@node("parlog")
@dataclass(frozen=True, slots=True)
class Int(Node):
    """An unbounded integer."""

    value: int
    span: Span = field(default=NO_SPAN, compare=False)

    def render(self) -> list:
        return [repr(self.value)]


@node("parlog")
@dataclass(frozen=True, slots=True)
class Float(Node):
    """A floating-point number."""

    value: float
    span: Span = field(default=NO_SPAN, compare=False)

    def render(self) -> list:
        return [repr(self.value)]


@node("parlog")
@dataclass(frozen=True, slots=True)
class Struct(Node):
    """A compound term `name(args...)`; lists use the functor `'[|]'/2` as in SWI-Prolog 7+."""

    name: str
    args: tuple[Term, ...]
    span: Span = field(default=NO_SPAN, compare=False)

    def render(self) -> list:
        if not (self.name == CONS and len(self.args) == 2):
            return [quote_atom(self.name), "(", *_args(self.args), ")"]
        items, tail = [], self
        while isinstance(tail, Struct) and tail.name == CONS and len(tail.args) == 2:
            items.append(tail.args[0])
            tail = tail.args[1]
        rest = [] if isinstance(tail, Atom) and tail.name == NIL else ["|", tail]
        return ["[", *_args(items), *rest, "]"]


Term = Var | Atom | Int | Float | Struct


def make_list(items: list[Term], tail: Term | None = None, span: Span = NO_SPAN) -> Term:
    """Build `[items... | tail]` from cons cells."""
    result: Term = tail if tail is not None else Atom(NIL, span)
    for item in reversed(items):
        result = Struct(CONS, (item, result), span)
    return result


def term_vars(term: Term) -> list[Var]:
    """The variables of `term` in order of first appearance (no duplicates by name)."""
    seen: dict[str, Var] = {}
    looked: set[int] = set()  # structures looked into (a shared one once)
    stack = [term]
    while stack:
        t = stack.pop()
        if isinstance(t, Var):
            if t.name != "_" and t.name not in seen:
                seen[t.name] = t
        elif isinstance(t, Struct) and id(t) not in looked:
            looked.add(id(t))
            stack.extend(reversed(t.args))
    return list(seen.values())


# ---------------------------------------------------------------------------------------------
# Goals and clauses


class ConjOp(enum.StrEnum):
    """`,` starts all parts at once; `&` starts each part only after the previous part and all
    its descendants have terminated."""

    PARALLEL = ","
    SEQUENTIAL = "&"


@node("parlog")
@dataclass(frozen=True, slots=True)
class Call(Node):
    """A goal: a call of the relation or primitive `target` (a key such as `append/3`).

    `placement` is the `Where` of `Goal @ Where`, or None.
    """

    target: str
    args: tuple[Term, ...]
    span: Span = field(compare=False)
    placement: Term | None = None

    def render(self) -> list:
        name = self.target.rsplit("/", 1)[0]
        if name in GOAL_OPS and len(self.args) == 2:
            out = [self.args[0], f" {name} ", self.args[1]]
        elif self.args:
            out = [quote_atom(name), "(", *_args(self.args), ")"]
        else:
            out = [quote_atom(name)]
        return out if self.placement is None else [*out, " @ ", self.placement]


@node("parlog")
@dataclass(frozen=True, slots=True)
class Conj(Node):
    """A conjunction of `parts` joined by `op`."""

    op: ConjOp
    parts: tuple[Body, ...]

    def render(self) -> list:
        out: list = []
        for i, p in enumerate(self.parts):
            if i:
                out.append(", " if self.op == ConjOp.PARALLEL else " & ")
            out += [p] if isinstance(p, Call) or p.op == self.op else ["(", p, ")"]
        return out


Body = Call | Conj


def calls_in(body: Body | None) -> list[Call]:
    """Every call of a body, left to right."""
    out: list[Call] = []
    stack: list[Body] = [body] if body is not None else []
    while stack:
        b = stack.pop()
        if isinstance(b, Call):
            out.append(b)
        else:
            stack.extend(reversed(b.parts))
    return out


@node("parlog")
@dataclass(frozen=True, slots=True)
class Clause(Node):
    """A guarded clause `head <- guard : body`; variables are numbered 0..nvars-1."""

    head: tuple[Term, ...]
    guard: tuple[Call, ...]
    body: Body | None
    nvars: int
    span: Span = field(compare=False)

    def render(self) -> list:
        """The clause without its relation's name: `(args) <- guard : body.`"""
        out: list = ["(", *_args(self.head), ")"] if self.head else []
        if self.guard:
            out += [" <- ", *_args(self.guard), " : ", *([self.body] if self.body is not None else ["true"])]
        elif self.body is not None:
            out += [" <- ", self.body]
        return out


@node("parlog")
@dataclass(frozen=True, slots=True)
class Relation(Rule):
    """A PARLOG relation: modes (`?` input, `^` output) and clauses cut into search groups by `;`."""

    key: str
    name: str
    modes: tuple[str, ...]
    groups: tuple[tuple[Clause, ...], ...]
    span: Span = field(compare=False)

    @property
    def arity(self) -> int:
        return len(self.modes)

    @property
    def inputs(self) -> tuple[int, ...]:
        """The `?` positions that some clause looks into (a variable head matches anything)."""
        return tuple(i for i, m in enumerate(self.modes)
                     if m == "?" and any(not isinstance(c.head[i], Var) for g in self.groups for c in g))

    def clauses(self) -> list[Clause]:
        return [c for g in self.groups for c in g]

    def primitives(self) -> frozenset[str]:
        """The primitives its clauses may call."""
        from hpgrem.ir.parlog.primitives import PRIMITIVES
        return PRIMITIVES

    def check(self, module) -> list[str]:
        """The dialect's rules (hpgrem/verify.py runs the structural checks first): modes,
        search groups, head arities, calls of defined relations or primitives with the right
        number of arguments, variable numbers inside the clause's range."""
        out: list[str] = []
        if any(m not in ("?", "^") for m in self.modes):
            out.append("modes must be '?' or '^'")
        if not self.groups or any(not g for g in self.groups):
            out.append("empty search group")
        for c in self.clauses():
            where = f"clause at {c.span.line}:{c.span.col}: "
            if len(c.head) != self.arity:
                out.append(f"{where}head has {len(c.head)} arguments, modes say {self.arity}")
            for call in (*c.guard, *calls_in(c.body)):
                callee = module.rules.get(call.target)
                if call.target not in self.primitives() and callee is None:
                    out.append(f"{where}calls undefined {call.target}")
                elif callee is not None and callee.arity != len(call.args):
                    out.append(f"{where}calls {call.target} with {len(call.args)} arguments")
            for v in walk(c):
                if isinstance(v, Var) and not 0 <= v.index < c.nvars:
                    out.append(f"{where}variable {v.name} numbered {v.index}, outside 0..{c.nvars - 1}")
        return out[:5]

    def render(self) -> list:
        modes = f" ({', '.join(self.modes)})" if self.modes else ""
        out: list = [f"relation {self.key}{modes}", IN]
        for gi, group in enumerate(self.groups, 1):
            out += [NL, f"group {gi}:", IN]
            for c in group:
                out += [NL, quote_atom(self.name), inline(c),
                        f".    % {c.span.line}:{c.span.col}, {c.nvars} vars"]
            out.append(OUT)
        out.append(OUT)
        return out

    block_form = True


# What an all-solutions relation stands for: a user's `:-` relation, or the relation a construct
# of a clause was lowered to (its one clause is `'$c'(Template, NonLocals...) :- Conj`).
SEARCH = "search"
CONSTRUCTS = frozenset({"set", "subset", "not"})


@node("parlog")
@dataclass(frozen=True, slots=True)
class AllSolutions(Relation):
    """An all-solutions relation (spec/parlog.md): its clauses, in one group in written order,
    are searched depth first with backtracking, bodies left to right. Its modes are all `?`
    (a search binds only variables of its own). `construct` is SEARCH for a relation written
    with `:-`; `set`, `subset` or `not` for the relation a construct was lowered to: its call
    site passes the list (`set`, `subset`) and the construct's non-local variables, and its
    clause's head is the template (`set`, `subset`) and the same non-locals, in that order."""

    construct: str = SEARCH

    def primitives(self) -> frozenset[str]:
        from hpgrem.ir.parlog.primitives import SEARCH_PRIMITIVES
        return SEARCH_PRIMITIVES

    def check(self, module) -> list[str]:
        out = [] if self.construct in CONSTRUCTS | {SEARCH} else [f"unknown construct {self.construct!r}"]
        if len(self.groups) != 1:
            out.append("an all-solutions relation has one search group")
        if any(c.guard for c in self.clauses()):
            out.append("an all-solutions clause has no guard")
        return out + Relation.check(self, module)

    def render(self) -> list:
        what = "all-solutions" if self.construct == SEARCH else self.construct
        out: list = [f"{what} relation {self.key}", IN]
        for c in self.clauses():
            head = ["(", *_args(c.head), ")"] if c.head else []
            body = [" :- ", c.body] if c.body is not None else []
            out += [NL, quote_atom(self.name), *head, *body, f".    % {c.span.line}:{c.span.col}, {c.nvars} vars"]
        out.append(OUT)
        return out


def substitute_vars(node: Node, mapping: dict[int, Term]) -> Node:
    """`node` with each clause variable whose number is in `mapping` replaced by its term."""
    return transform(node, lambda n: mapping.get(n.index, n) if isinstance(n, Var) else n)


def renumber(clause: Clause) -> Clause:
    """The clause with its variables numbered 0, 1, ... in order of first appearance (after a
    rewrite dropped or added some)."""
    order: dict[int, int] = {}
    for n in walk(clause):
        if isinstance(n, Var) and n.index not in order:
            order[n.index] = len(order)
    renamed = transform(clause, lambda n: Var(n.name, order[n.index], n.span) if isinstance(n, Var) else n)
    return dataclasses.replace(renamed, nvars=len(order))


def relation_key(name: str, arity: int) -> str:
    return f"{name}/{arity}"


def deep_guard(guard: tuple[Call, ...]) -> bool:
    """Whether a guard is deep (spec/parlog.md, "Deep guards"): it does more than the tests,
    matching `=` and arithmetic `is` that clause code runs inline, so it runs as a local
    computation of its clause."""
    from hpgrem.ir.parlog.primitives import FLAT_GUARD
    return any(g.target not in FLAT_GUARD for g in guard)
