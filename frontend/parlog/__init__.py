"""The PARLOG front end: parse, check modes and guards, lower to an HPGREM module."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from frontend import Compiled
from hpgrem.diagnostics import CompileError, Diagnostic
from frontend.parlog.check import PRELUDE_PREFIX, collect_relations, resolve
from frontend.parlog.lower import lower_clause
from frontend.parlog.search_check import check_searches
from frontend.parlog.parser import parse_goal, parse_program
from hpgrem.ir import Entry, Module
from hpgrem.ir.parlog import Atom, Relation, Struct, Term, term_vars

PRELUDE_FILE = Path(__file__).parent / "prelude.par"


@lru_cache(maxsize=1)
def prelude() -> dict[str, Relation]:
    """The prelude's relations, keyed `prelude:name/arity`, calling each other."""
    diagnostics: list[Diagnostic] = []
    text = PRELUDE_FILE.read_text()
    rels = collect_relations(parse_program(text, "<prelude>"), PRELUDE_PREFIX, diagnostics)
    visible = {k[len(PRELUDE_PREFIX):]: k for k in rels}
    rels = resolve(rels, visible, diagnostics)
    assert not diagnostics, diagnostics
    return rels


def compile_program(text: str, file: str, goal: str | None = None) -> Compiled:
    """Source text -> checked HPGREM module, or the CompileError with every error found (the
    program is checked whole: an error leaves no module). `goal` replaces `main`."""
    try:
        return Compiled(_lower_program(text, file, goal))
    except CompileError as error:
        return Compiled(None, error=error)


def _lower_program(text: str, file: str, goal: str | None) -> Module:
    diagnostics: list[Diagnostic] = []
    user = collect_relations(parse_program(text, file), "", diagnostics)
    lib = prelude()
    visible = {k[len(PRELUDE_PREFIX):]: k for k in lib}
    visible.update({k: k for k in user})
    entry = None
    if goal is not None:
        goal_rel, constructs = _goal_relation(goal, diagnostics)
        if goal_rel is not None:
            user[goal_rel.key] = goal_rel
            user.update((c.key, c) for c in constructs)
            visible.update((c.key, c.key) for c in constructs)
            entry = Entry(goal_rel.key, tuple(_goal_outputs(goal_rel)))
    elif "main/0" in user:
        entry = Entry("main/0", ())
    user = resolve(user, visible, diagnostics, {k: r.modes for k, r in lib.items()})
    check_searches(user, diagnostics)
    if diagnostics:
        raise CompileError(sorted(diagnostics, key=lambda d: (d.span.file != file, d.span.line, d.span.col)))
    return Module(file, {**lib, **user}, entry, "parlog")


def _goal_relation(goal: str, diagnostics: list[Diagnostic]) -> tuple[Relation | None, list[Relation]]:
    """`--goal 'Conj'` becomes `'$goal'(V1..Vn) <- Conj` with every Vi an output; with it come
    the relations its constructs (set/3, subset/3, ~) became."""
    body = parse_goal(goal)
    names = [v for v in term_vars(Struct("$goal", tuple(_outside_constructs(body))))
             if not v.name.startswith("_")]
    raw = lower_clause(Struct("<-", (Struct("$goal", tuple(names)) if names else Atom("$goal"), body),
                              body.span), diagnostics, "goal:")
    if raw is None:
        return None, []
    key = f"$goal/{len(names)}"
    return Relation(key, "$goal", ("^",) * len(names), ((raw.clause,),), body.span), raw.constructs


def _outside_constructs(goal: Term) -> list[Term]:
    """The goal's goals with its set/3, subset/3 and ~ cut down to their lists: the variables
    that occur only in a construct are its own, not the goal's outputs."""
    out: list[Term] = []
    stack = [goal]
    while stack:
        g = stack.pop()
        if isinstance(g, Struct) and g.name in (",", "&") and len(g.args) == 2:
            stack.extend(reversed(g.args))
        elif isinstance(g, Struct) and g.name in ("set", "subset") and len(g.args) == 3:
            out.append(g.args[0])
        elif not (isinstance(g, Struct) and g.name == "~" and len(g.args) == 1):
            out.append(g)
    return out


def _goal_outputs(rel: Relation) -> list[str]:
    clause = rel.groups[0][0]
    return [v.name for a in clause.head for v in term_vars(a)]


__all__ = ["CompileError", "Compiled", "compile_program", "prelude"]
