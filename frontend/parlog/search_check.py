"""Checks of all-solutions relations and of the calls between the two kinds of relation
(spec/parlog.md, "All-solutions relations"), on resolved relations.

A search may call all-solutions relations and the pure primitives only; a committed-choice
clause may reach a search only through `set/3`, `subset/3` and `~` (the relations they were
lowered to).
"""

from __future__ import annotations

from hpgrem.diagnostics import Diagnostic
from frontend.parlog.check import PRELUDE_PREFIX
from hpgrem.ir.parlog import SEARCH, AllSolutions, Relation, calls_in
from hpgrem.ir.parlog.primitives import PRIMITIVES, SEARCH_PRIMITIVES


def check_searches(relations: dict[str, Relation], diagnostics: list[Diagnostic]) -> None:
    """Report calls across the two kinds of relation that the spec forbids. Calls of relations
    not in `relations` (the prelude's) are calls of committed-choice relations."""
    reported: set[str] = set()
    for rel in relations.values():
        search = isinstance(rel, AllSolutions)
        for clause in rel.clauses():
            for call in (*clause.guard, *calls_in(clause.body)):
                callee = relations.get(call.target)
                if search:
                    _check_search_call(call, callee, diagnostics)
                elif call.target in SEARCH_PRIMITIVES and call.target not in PRIMITIVES:
                    diagnostics.append(Diagnostic(call.span, f"{call.target} may be called only in an "
                                                             "all-solutions relation"))
                elif isinstance(callee, AllSolutions) and callee.construct == SEARCH \
                        and call.target not in reported:
                    reported.add(call.target)
                    diagnostics.append(Diagnostic(callee.span, (
                        f"missing mode declaration for {call.target}: without one it is an all-solutions "
                        f"relation, which only set/3, subset/3, ~ and all-solutions relations may call "
                        f"(called at {call.span.line}:{call.span.col})")))


def _check_search_call(call, callee: Relation | None, diagnostics: list[Diagnostic]) -> None:
    if call.target in PRIMITIVES or call.target in SEARCH_PRIMITIVES:
        if call.target not in SEARCH_PRIMITIVES:
            diagnostics.append(Diagnostic(call.span, f"{call.target} cannot be called in an all-solutions "
                                                     "relation (only tests, =, \\=, is, comparisons and the "
                                                     "pure term primitives)"))
    elif callee is not None and not isinstance(callee, AllSolutions) or call.target.startswith(PRELUDE_PREFIX):
        name = call.target.split(":")[-1]
        diagnostics.append(Diagnostic(call.span, f"an all-solutions relation cannot call {name}, a "
                                                 "committed-choice relation (a search calls only "
                                                 "all-solutions relations and pure primitives)"))
