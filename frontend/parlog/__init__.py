"""The PARLOG front end: parse, check modes and guards, lower to an HPGREM module."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from frontend import Compiled
from frontend.diagnostics import CompileError, Diagnostic
from frontend.parlog.check import PRELUDE_PREFIX, collect_relations, resolve
from frontend.parlog.lower import lower_clause
from frontend.parlog.parser import parse_goal, parse_program
from hpgrem.ir import Atom, Entry, Module, Relation, Struct, term_vars

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
        goal_rel = _goal_relation(goal, diagnostics)
        if goal_rel is not None:
            user[goal_rel.key] = goal_rel
            entry = Entry(goal_rel.key, tuple(_goal_outputs(goal_rel)))
    elif "main/0" in user:
        entry = Entry("main/0", ())
    user = resolve(user, visible, diagnostics, {k: r.modes for k, r in lib.items()})
    if diagnostics:
        raise CompileError(sorted(diagnostics, key=lambda d: (d.span.file != file, d.span.line, d.span.col)))
    return Module(file, {**lib, **user}, entry)


def _goal_relation(goal: str, diagnostics: list[Diagnostic]) -> Relation | None:
    """`--goal 'Conj'` becomes `'$goal'(V1..Vn) <- Conj` with every Vi an output."""
    body = parse_goal(goal)
    names = [v for v in term_vars(body) if not v.name.startswith("_")]
    raw = lower_clause(Struct("<-", (Struct("$goal", tuple(names)) if names else Atom("$goal"), body),
                              body.span), diagnostics)
    if raw is None:
        return None
    key = f"$goal/{len(names)}"
    return Relation(key, "$goal", ("^",) * len(names), ((raw.clause,),), body.span)


def _goal_outputs(rel: Relation) -> list[str]:
    clause = rel.groups[0][0]
    return [v.name for a in clause.head for v in term_vars(a)]


__all__ = ["CompileError", "Compiled", "compile_program", "prelude"]
