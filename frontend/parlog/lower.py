"""Takes clause terms apart into HPGREM clauses: head, flat guard, body of `,` and `&`.

Variables are numbered per clause in order of first appearance (head, guard, body); each `_` gets
its own number. Calls are left with `name/arity` targets; `check.py` resolves them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from hpgrem.diagnostics import Diagnostic
from hpgrem.ir import Span
from hpgrem.ir.parlog import AllSolutions, Atom, Body, Call, Clause, Conj, ConjOp, Float, Int, Relation, Struct, Term, Var, relation_key, term_vars
from hpgrem.ir.parlog.primitives import NOT_YET
from hpgrem.ir.parlog.dialect import EFFECTS


@dataclass(slots=True)
class RawClause:
    """A clause before relation resolution: its relation's name and arity, and the IR clause."""

    name: str
    arity: int
    clause: Clause
    kind: str = "guarded"  # "guarded" (`<-`), "search" (`:-`) or "fact"
    constructs: list[Relation] = field(default_factory=list)  # what its set/3, subset/3, ~ became
    broken: bool = False  # its guard or body had errors: it only says that its relation exists


# The name of the relation each construct is lowered to (its goals are reported by it).
CONSTRUCT_NAMES = {"set": "set", "subset": "subset", "not": "~"}

# What `Goal @ Where` accepts (spec/parlog.md): an integer PE, `random`, a neighbour name of some
# topology (pam/topology.py's NEIGHBOUR_NAMES; `child` alone is `child(0)`), `child(I)`, or a
# priority: `priority(N)`, `lower_priority`. A variable is checked at run time.
PLACEMENT_ATOMS = frozenset({"random", "lower_priority", "north", "south", "east", "west", "left", "right",
                             "parent", "child"})
PLACEMENT_EXPECTED = ("an integer PE number, random, a neighbour name (north, south, east, west, left, "
                      "right, parent, child(I)), priority(N) or lower_priority")


class ClauseLowering:
    """Lowers one clause term; problems are appended to `diagnostics`. `totals` counts the
    occurrences of each variable name in the whole clause (which variables of a construct are
    non-local); `search` is set while lowering the body of an all-solutions clause."""

    def __init__(self, diagnostics: list[Diagnostic], totals: Counter | None = None, where: str = ""):
        self.diagnostics = diagnostics
        self.numbers: dict[str, int] = {}
        self.count = 0
        self.totals = totals if totals is not None else Counter()
        self.where = where
        self.search = False
        self.constructs: list[Relation] = []

    def error(self, span: Span, message: str) -> None:
        self.diagnostics.append(Diagnostic(span, message))

    # -- terms --------------------------------------------------------------------------------
    def term(self, t: Term) -> Term:
        """Number the variables of `t` (iteratively: terms may be long lists)."""
        if isinstance(t, Var):
            return self.var(t)
        if not isinstance(t, Struct):
            return t
        # Rebuild bottom-up with an explicit stack.
        out: list[Term] = []
        stack: list[tuple[Term, bool]] = [(t, False)]
        while stack:
            node, built = stack.pop()
            if isinstance(node, Struct):
                if built:
                    n = len(node.args)
                    args = tuple(out[len(out) - n:]) if n else ()
                    del out[len(out) - n:]
                    out.append(Struct(node.name, args, node.span))
                else:
                    stack.append((node, True))
                    stack.extend((a, False) for a in reversed(node.args))
            elif isinstance(node, Var):
                out.append(self.var(node))
            else:
                out.append(node)
        return out[0]

    def var(self, v: Var) -> Var:
        if v.name == "_":
            self.count += 1
            return Var("_", self.count - 1, v.span)
        if v.name not in self.numbers:
            self.numbers[v.name] = self.count
            self.count += 1
        return Var(v.name, self.numbers[v.name], v.span)

    # -- goals ------------------------------------------------------------------------------
    def goal(self, t: Term, in_guard: bool) -> Call | None:
        span = t.span
        placement = None
        if isinstance(t, Struct) and t.name == "@" and len(t.args) == 2:
            if in_guard:
                self.error(span, "'@' placement is not allowed in a guard")
                return None
            t, placement = t.args[0], self.term(t.args[1])
            if not self.placement_ok(placement):
                return None
        if isinstance(t, Var):
            return Call("call/1", (self.var(t),), span, placement)
        if isinstance(t, Atom):
            return Call(relation_key(t.name, 0), (), span, placement)
        if isinstance(t, Struct):
            if t.name == "~" and len(t.args) == 1:
                return self.construct("not", None, None, t.args[0], span, placement)
            if t.name in ("set", "subset") and len(t.args) == 3:
                if self.search:
                    self.error(span, f"{t.name}/3 inside an all-solutions relation is not supported")
                    return None
                return self.construct(t.name, t.args[0], t.args[1], t.args[2], span, placement)
            key = relation_key(t.name, len(t.args))
            if key in NOT_YET:
                self.error(span, f"{key} is not supported yet")
                return None
            return Call(key, tuple(self.term(a) for a in t.args), span, placement)
        kind = "number" if isinstance(t, (Int, Float)) else "term"
        self.error(span, f"a {kind} cannot be a goal")
        return None

    def placement_ok(self, where: Term) -> bool:
        """Whether `where` can be a placement; if not, a located error (False)."""
        if isinstance(where, (Var, Int)):
            return True
        if isinstance(where, Atom):
            if where.name in PLACEMENT_ATOMS:
                return True
            self.error(where.span, f"'{where.name}' is not a placement: expected {PLACEMENT_EXPECTED}")
            return False
        if isinstance(where, Struct) and where.name in ("priority", "child") and len(where.args) == 1:
            if isinstance(where.args[0], (Var, Int)):
                return True
            what = "priority(N) needs an integer level N" if where.name == "priority" else \
                "child(I) needs an integer child number I"
            self.error(where.args[0].span, what)
            return False
        if isinstance(where, Struct):
            what = f"'{where.name}/{len(where.args)}'" if where.name != "[|]" else "a list"
        else:
            what = "a floating-point number" if isinstance(where, Float) else "this term"
        self.error(where.span, f"{what} is not a placement: expected {PLACEMENT_EXPECTED}")
        return False

    def construct(self, kind: str, out: Term | None, template: Term | None, conj: Term, span: Span,
                  placement: Term | None) -> Call | None:
        """`set(Out, Template, Conj)`, `subset(...)` or `~ Conj` becomes a call of a new
        all-solutions relation `'$c'(Template, NonLocals...) :- Conj` (spec/parlog.md, "When a
        search starts"): the call passes `Out` and the non-local variables, those of the
        construct that also occur outside it in the clause."""
        inside = Struct("$c", (conj,) if template is None else (template, conj))
        local = _name_counts(inside)
        nonlocals = [v for v in term_vars(inside) if self.totals[v.name] > local[v.name]]
        head = ([template] if template is not None else []) + nonlocals
        name = CONSTRUCT_NAMES[kind]
        key = f"{self.where}{span.line}:{span.col}:{name}/{len(head)}"
        raw = lower_clause(Struct(":-", (Struct("$c", tuple(head), span) if head else Atom("$c", span), conj), span),
                           self.diagnostics, self.where)
        if raw is None or raw.broken:
            return None
        self.constructs += [AllSolutions(key, name, ("?",) * len(head), ((raw.clause,),), span, kind),
                            *raw.constructs]
        args = ([self.term(out)] if out is not None else []) + [self.var(v) for v in nonlocals]
        return Call(key, tuple(args), span, placement)

    def search_body(self, t: Term) -> Body | None:
        """The body of an all-solutions clause: goals joined by `,`, run left to right."""
        self.search = True
        goals: list[Call] = []
        for part in _flatten(t, ","):
            if self.module_qualified(part):
                continue
            if isinstance(part, Struct) and part.name in ("&", ";", "<-", ":", ":-", "@") and len(part.args) == 2:
                self.error(part.span, f"'{part.name}' cannot appear in the body of an all-solutions clause "
                                      "(goals joined by ',')")
                continue
            call = self.goal(part, in_guard=False)
            if call is not None and call.target != "true/0":
                goals.append(call)
        if not goals:
            return None
        return goals[0] if len(goals) == 1 else Conj(ConjOp.PARALLEL, tuple(goals))

    def guard(self, t: Term) -> list[Call]:
        goals: list[Call] = []
        for part in _flatten(t, ","):
            if self.module_qualified(part):
                continue
            if isinstance(part, Struct) and part.name in ("&", ";", "<-", ":") and len(part.args) == 2:
                self.error(part.span, f"'{part.name}' cannot appear in a guard")
                continue
            call = self.goal(part, in_guard=True)
            if call is None:
                continue
            if call.target == "true/0":
                continue
            if call.target in EFFECTS:  # a guard may be abandoned: it must not write or read
                self.error(call.span, f"{call.target} cannot appear in a guard (a guard may be "
                                      "abandoned, so it has no effects)")
                continue
            goals.append(call)  # tests, `=`, `is` and relation calls (a deep guard)
        return goals

    def body(self, t: Term) -> Body | None:
        if isinstance(t, Struct) and len(t.args) == 2 and t.name in (",", "&"):
            parts = [p for p in (self.body(a) for a in _flatten(t, t.name)) if p is not None]
            if t.name == ",":
                parts = _output_in_order(parts)
            if not parts:
                return None
            return parts[0] if len(parts) == 1 else Conj(ConjOp(t.name), tuple(parts))
        if self.module_qualified(t):
            return None
        if isinstance(t, Struct) and len(t.args) == 2 and t.name in (";", ":", "<-", ":-"):
            what = {";": "';' separates clauses; it", ":": "':' ends a guard; it",
                    "<-": "'<-'", ":-": "':-'"}[t.name]
            self.error(t.span, f"{what} cannot appear inside a body")
            return None
        call = self.goal(t, in_guard=False)
        if call is None or (call.target == "true/0" and call.placement is None):
            return None
        return call


    def module_qualified(self, t: Term) -> bool:
        """Report `m:p` where only a goal may stand (a ':' nested in a body, a search body or
        a guard is never a guard's end): True when `t` is one."""
        m = module_qualifier(t)
        if m is not None:
            self.error(t.span, module_message(m.name))
        return m is not None


OUTPUT_GOALS = frozenset({"write/1", "nl/0", "halt/0", "halt/1"})
"""The goals one `,` conjunction runs in written order (a halt after the writes before it)."""


def module_qualifier(t: Term) -> Atom | None:
    """The `m` of a goal read as `m:p`: a ':' term whose left side is an atom or ends in one
    (`a, m:p` reads as `(a, m) : p`, ':' binding more loosely than ',' and '&'); else None."""
    if not (isinstance(t, Struct) and t.name == ":" and len(t.args) == 2):
        return None
    left = t.args[0]
    while isinstance(left, Struct) and left.name in (",", "&") and len(left.args) == 2:
        left = left.args[1]
    return left if isinstance(left, Atom) else None


def module_message(module: str, guard: bool = False) -> str:
    """What an `m:p` goal is told (`guard`: the `m` stood where a clause's guard ends)."""
    hint = f" (if '{module}' is meant as a guard, {module}/0 is defined nowhere)" if guard else ""
    return (f"module-qualified goals (m:p) are not supported: '{module}:' names a module, and hpgrem has one "
            f"name space of relations; call the relation directly (another file's relations come with "
            f"`:- import(File).`){hint}")


def _output_in_order(parts: list[Body]) -> list[Body]:
    """The output goals of one `,` conjunction run in written order (`write(X), nl` prints X
    before the newline even when X is bound late): they become one `&` chain, standing where
    the first of them stood. Other goals are not delayed."""
    outs = [p for p in parts if isinstance(p, Call) and p.target in OUTPUT_GOALS and p.placement is None]
    if len(outs) < 2:
        return parts
    chain = Conj(ConjOp.SEQUENTIAL, tuple(outs))
    first = parts.index(outs[0])
    rest = [p for p in parts if not any(p is o for o in outs)]
    rest.insert(first, chain)
    return rest


def _flatten(t: Term, op: str) -> list[Term]:
    parts: list[Term] = []
    stack = [t]
    while stack:
        x = stack.pop()
        if isinstance(x, Struct) and x.name == op and len(x.args) == 2:
            stack.append(x.args[1])
            stack.append(x.args[0])
        else:
            parts.append(x)
    return parts


def _name_counts(t: Term) -> Counter:
    """How many times each named variable occurs in `t`."""
    counts: Counter = Counter()
    stack = [t]
    while stack:
        x = stack.pop()
        if isinstance(x, Var):
            if x.name != "_":
                counts[x.name] += 1
        elif isinstance(x, Struct):
            stack.extend(x.args)
    return counts


def lower_clause(term: Term, diagnostics: list[Diagnostic], where: str = "") -> RawClause | None:
    """One clause term -> RawClause (None when its head had errors, `broken` when its guard or
    body had: the errors are in `diagnostics`).
    `where` prefixes the keys of the relations its constructs become (the `--goal` apart from
    the program)."""
    before = len(diagnostics)
    low = ClauseLowering(diagnostics, _name_counts(term), where)
    guard_t: Term | None = None
    body_t: Term | None = None
    head = term
    kind = "fact"
    if isinstance(term, Struct) and len(term.args) == 2 and term.name == ":-":
        head, body_t = term.args
        kind = "search"
    if isinstance(term, Struct) and len(term.args) == 2 and term.name == "<-":
        kind = "guarded"
        head, rhs = term.args
        if isinstance(rhs, Struct) and len(rhs.args) == 2 and rhs.name == ":":
            guard_t, body_t = rhs.args
        else:
            body_t = rhs
    if isinstance(head, Atom):
        name, head_args = head.name, ()
    elif isinstance(head, Struct) and head.name not in (",", "&", ":", ";", "<-"):
        name, head_args = head.name, head.args
    else:
        low.error(head.span, "a clause head must be an atom or a compound term")
        return None
    numbered_head = tuple(low.term(a) for a in head_args)
    guard = tuple(low.guard(guard_t)) if guard_t is not None else ()
    if body_t is None:
        body = None
    else:
        body = low.search_body(body_t) if kind == "search" else low.body(body_t)
    if len(diagnostics) > before:
        # the relation still exists (no "unknown relation" for each of its calls); the program
        # has errors, so this clause is checked no further and never runs
        return RawClause(name, len(head_args), Clause(numbered_head, (), None, low.count, term.span),
                         kind, broken=True)
    return RawClause(name, len(head_args), Clause(numbered_head, guard, body, low.count, term.span), kind,
                     low.constructs)
