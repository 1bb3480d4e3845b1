"""index-rules: one shared test graph per PARLOG relation (rule indexing, a decision graph).

Records, per relation, `switch`: the input position that the machine switches on (the first
`?` position where some clause's head pattern has a principal functor), so each clause's test
of that argument runs once for all clauses of a search group. A variable there suspends only
the clauses that need structure; `;` groups keep their order (spec/parlog.md, "Clause search").
It also records `share`: clauses next to each other in a group whose input patterns are the same
match once, and a pair whose one-test guards are complements (`X mod P =:= 0` / `=\\= 0`) tests
once (pam/parlog/rules.py reads both).
"""

from __future__ import annotations

from dataclasses import dataclass

from hpgrem.ir import Module
from hpgrem.ir.parlog import Relation, Var
from hpgrem.passes import annotated


def switch_position(rel: Relation) -> int | None:
    """The first input position where some clause looks into the argument, if any."""
    for i, mode in enumerate(rel.modes):
        if mode == "?" and any(not isinstance(c.head[i], Var) for g in rel.groups for c in g):
            return i
    return None


@dataclass(frozen=True)
class IndexRules:
    name: str = "index-rules"
    dialects: tuple[str, ...] = ("parlog",)
    records: tuple[str, ...] = ("switch", "share")

    def apply(self, module: Module) -> Module:
        notes = {}
        for key, rel in module.rules.items():
            k = switch_position(rel)
            if k is not None and sum(len(g) for g in rel.groups) > 1:
                notes[key] = {"switch": k, "share": True}
        return annotated(module, self, notes)
