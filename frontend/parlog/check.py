"""Program-level checks of PARLOG: modes, contiguity, call resolution and guard safety.

Builds `Relation`s from items: clauses joined by `.` share a search group, and each `;` starts
a new one (spec/parlog.md, "Clause search").
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hpgrem.diagnostics import Diagnostic
from frontend.parlog.lower import lower_clause
from frontend.parlog.parser import Directive, Item, ModeDecl
from hpgrem.ir import Span
from hpgrem.ir.parlog import AllSolutions, Body, Call, Clause, Conj, Relation, Struct, Var, term_vars
from hpgrem.ir.parlog import deep_guard
from hpgrem.ir.parlog.primitives import PRIMITIVES, SEARCH_PRIMITIVES

PRELUDE_PREFIX = "prelude:"


@dataclass(slots=True)
class _Pending:
    """A relation being collected from the items."""

    name: str
    arity: int
    span: Span
    groups: list[list[Clause]] = field(default_factory=list)
    kinds: set[str] = field(default_factory=set)  # of its clauses: "guarded", "search", "fact"


def collect_relations(items: list[Item], key_prefix: str, diagnostics: list[Diagnostic]) -> dict[str, Relation]:
    """Items -> relations with unresolved call targets (keys get `key_prefix`)."""
    modes: dict[str, ModeDecl] = {}
    pending: dict[str, _Pending] = {}
    constructs: dict[str, Relation] = {}  # the relations set/3, subset/3 and ~ became
    last_key: str | None = None
    for item in items:
        if isinstance(item, Directive):
            diagnostics.append(Diagnostic(item.span, "directives (':- ...') are reserved and not accepted"))
            continue
        if isinstance(item, ModeDecl):
            key = f"{item.name}/{len(item.modes)}"
            if key in modes:
                first = modes[key].span
                same = modes[key].modes == item.modes
                what = "duplicate" if same else "conflicting"
                diagnostics.append(Diagnostic(item.span, f"{what} mode declaration for {key} "
                                                         f"(first declared at {first.line}:{first.col})"))
            else:
                modes[key] = item
            continue
        raws = [r for r in (lower_clause(c, diagnostics) for c in item.clauses) if r is not None]
        if not raws:
            continue
        constructs.update((c.key, c) for r in raws for c in r.constructs)
        key = f"{raws[0].name}/{raws[0].arity}"
        mixed = [r for r in raws if (r.name, r.arity) != (raws[0].name, raws[0].arity)]
        for r in mixed:
            diagnostics.append(Diagnostic(r.clause.span, f"clauses joined by ';' must belong to one relation: "
                                                         f"{r.name}/{r.arity} follows {key}"))
        if key in PRIMITIVES:
            diagnostics.append(Diagnostic(item.span, f"{key} is a primitive and cannot be redefined"))
            continue
        rel = pending.get(key)
        if rel is None:
            rel = pending[key] = _Pending(raws[0].name, raws[0].arity, item.span)
            rel.groups.append([])
        elif last_key != key:
            diagnostics.append(Diagnostic(item.span, f"clauses of {key} are not contiguous (the relation "
                                                     f"starts at {rel.span.line}:{rel.span.col})"))
        last_key = key
        rel.groups[-1].append(raws[0].clause)
        rel.kinds.update(r.kind for r in raws)
        for r in raws[1:]:
            if (r.name, r.arity) == (raws[0].name, raws[0].arity):
                rel.groups.append([r.clause])

    relations: dict[str, Relation] = {}
    for key, rel in pending.items():
        decl = modes.get(key)
        if decl is None and "guarded" not in rel.kinds and ("search" in rel.kinds or rel.arity > 0):
            # an all-solutions relation: one search group, clauses in written order
            clauses = tuple(c for g in rel.groups for c in g)
            relations[key_prefix + key] = AllSolutions(key_prefix + key, rel.name, ("?",) * rel.arity,
                                                       (clauses,), rel.span)
            continue
        if "search" in rel.kinds:
            why = "it has a mode declaration" if decl is not None else "it has '<-' clauses"
            diagnostics.append(Diagnostic(rel.span, f"{key} mixes ':-' clauses with a committed-choice "
                                                    f"relation ({why}); an all-solutions relation has no mode "
                                                    "declaration and only ':-' clauses and facts"))
            continue
        if decl is None and rel.arity > 0:
            others = [k for k in modes if k.split("/")[0] == rel.name]
            hint = f" (there is a mode for {others[0]}: the arities differ)" if others else ""
            diagnostics.append(Diagnostic(rel.span, f"missing mode declaration for {key}{hint}"))
            continue
        relations[key_prefix + key] = Relation(key_prefix + key, rel.name, decl.modes if decl else (),
                                               tuple(tuple(g) for g in rel.groups), rel.span)
    for key, decl in modes.items():
        if key not in pending and decl.modes:
            others = [k for k in pending if k.split("/")[0] == decl.name]
            why = (f"{decl.name} is defined with arity {others[0].split('/')[1]}" if others
                   else f"no clauses define {key}")
            diagnostics.append(Diagnostic(decl.span, f"mode declaration for {key} but {why}"))
    relations.update(constructs)
    return relations


def resolve(relations: dict[str, Relation], visible: dict[str, str], diagnostics: list[Diagnostic],
            modes: dict[str, tuple[str, ...]] | None = None) -> dict[str, Relation]:
    """Point every call at a relation key of `visible` (name/arity -> key) or a primitive, and
    check guards; returns the relations rewritten. `modes` (relation key -> modes) adds to the
    modes of `relations` for the guard analysis (the prelude's)."""
    modes = {**(modes or {}), **{k: r.modes for k, r in relations.items()}}
    out: dict[str, Relation] = {}
    for key, rel in relations.items():
        groups = tuple(tuple(_check_clause(rel, c, visible, diagnostics, modes) for c in g) for g in rel.groups)
        out[key] = replace(rel, groups=groups)
    return out


def _resolve_call(call: Call, visible: dict[str, str], diagnostics: list[Diagnostic]) -> Call:
    if call.target in PRIMITIVES or call.target in SEARCH_PRIMITIVES:  # search_check.py says where
        return call
    key = visible.get(call.target)
    if key is None:
        name = call.target.rsplit("/", 1)[0]
        near = sorted(k for k in visible if k.rsplit("/", 1)[0] == name)
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        diagnostics.append(Diagnostic(call.span, f"unknown relation {call.target}{hint}"))
        return call
    return replace(call, target=key)


def _resolve_body(body: Body | None, visible: dict[str, str], diagnostics: list[Diagnostic]) -> Body | None:
    if body is None:
        return None
    if isinstance(body, Call):
        return _resolve_call(body, visible, diagnostics)
    return Conj(body.op, tuple(_resolve_body(p, visible, diagnostics) for p in body.parts))


def _check_clause(rel: Relation, clause: Clause, visible: dict[str, str], diagnostics: list[Diagnostic],
                  modes: dict[str, tuple[str, ...]]) -> Clause:
    """Guard safety. Variables of `?` positions name parts of the call; every other variable,
    `^` positions included (they are unified only after commitment), is the clause's own. A
    guard unification matches call terms against a pattern of the clause's own variables, or
    tests two call terms for equality; either way it never binds a call variable. A guard that
    tests `var(X)` and then needs X bound can only succeed by binding it: an error."""
    known = {v.index for m, a in zip(rel.modes, clause.head) if m == "?" for v in term_vars(a)}
    if deep_guard(clause.guard):
        guard = tuple(_resolve_call(g, visible, diagnostics) for g in clause.guard)
        _check_deep_guard(guard, known, modes, diagnostics)
        return replace(clause, guard=guard, body=_resolve_body(clause.body, visible, diagnostics))
    unbound_tested: dict[int, str] = {}
    guard: list[Call] = []
    for g in clause.guard:
        gvars = {v.index for v in term_vars(_as_struct(g))}
        if g.target == "var/1" and isinstance(g.args[0], Var) and g.args[0].index in known:
            unbound_tested[g.args[0].index] = g.args[0].name
        elif g.target == "is/2" and isinstance(g.args[0], Var) and g.args[0].index in unbound_tested:
            name = g.args[0].name
            diagnostics.append(Diagnostic(g.span, f"this guard can only succeed by binding {name}, a variable "
                                                  f"of the call (var({name}) holds before it); a guard must "
                                                  f"not bind the call's variables"))
            continue
        elif g.target in ("=/2", "==/2"):
            sides = [a for a in g.args if isinstance(a, Var) and a.index in unbound_tested]
            others = [a for a in g.args if not (isinstance(a, Var) and a.index in unbound_tested)]
            if sides and others and not (isinstance(others[0], Var) and others[0].index not in known):
                diagnostics.append(Diagnostic(g.span, f"this guard can only succeed by binding {sides[0].name}, "
                                                      f"a variable of the call (var({sides[0].name}) holds "
                                                      f"before it); a guard must not bind the call's variables"))
                continue
        if g.target == "=/2":
            # One-way matching of call terms against a pattern; the pattern may mix the call's
            # variables (equality tests) with new ones, `_` included (each a new variable).
            left, right = g.args
            left_new = bool(_var_indices(left) - known)
            right_new = bool(_var_indices(right) - known)
            if not left_new and not right_new:
                g = replace(g, target="==/2")
            elif not left_new:
                pass  # match `left` (call terms) against the pattern `right`
            elif not right_new:
                g = replace(g, args=(right, left))
            else:
                diagnostics.append(Diagnostic(g.span, "guard unification with new variables on both sides "
                                                      "is not supported; match one side against known terms"))
                continue
        known |= gvars
        guard.append(g)
    return replace(clause, guard=tuple(guard), body=_resolve_body(clause.body, visible, diagnostics))


def _check_deep_guard(guard: tuple[Call, ...], call_vars: set[int], modes: dict[str, tuple[str, ...]],
                      diagnostics: list[Diagnostic]) -> None:
    """Mode analysis of a deep guard: after `var(X)` holds for a variable X of the call, a goal
    that needs X bound (X given to a `^` argument, or `=` or `is` of X and a non-variable or
    another call term) can only succeed by binding X."""
    tested: dict[int, str] = {}
    for g in guard:
        if g.target == "var/1" and isinstance(g.args[0], Var) and g.args[0].index in call_vars:
            tested[g.args[0].index] = g.args[0].name
            continue
        if g.target in ("=/2", "is/2"):
            binds = [(a, b) for a, b in (g.args, g.args[::-1]) if isinstance(a, Var) and a.index in tested
                     and not (isinstance(b, Var) and b.index not in call_vars)]
            if g.target == "is/2":
                binds = binds[:1] if binds and binds[0][0] is g.args[0] else []
        else:
            outputs = [a for m, a in zip(modes.get(g.target, ()), g.args) if m == "^"]
            binds = [(a, None) for a in outputs if isinstance(a, Var) and a.index in tested]
        if binds:
            name = binds[0][0].name
            diagnostics.append(Diagnostic(g.span, f"this guard can only succeed by binding {name}, a variable "
                                                  f"of the call (var({name}) holds before it); a guard must "
                                                  f"not bind the call's variables"))


def _var_indices(term) -> set[int]:
    """The numbers of every variable in `term`, each `_` (a variable of its own) included."""
    found: set[int] = set()
    looked: set[int] = set()  # structures looked into (a shared one once)
    stack = [term]
    while stack:
        t = stack.pop()
        if isinstance(t, Var):
            found.add(t.index)
        elif isinstance(t, Struct) and id(t) not in looked:
            looked.add(id(t))
            stack.extend(t.args)
    return found


def _as_struct(call: Call) -> Struct:
    return Struct("g", call.args)



