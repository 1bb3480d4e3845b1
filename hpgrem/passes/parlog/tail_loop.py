"""tail-loop: a self tail-recursive PARLOG relation runs as a loop inside its step function.

A clause whose body is a `,` of calls, the first relation call being the relation itself,
continues with that call in the same task (depth first); with `tail-loop.loop` recorded, the
step does not return to the PE for it but loops, while the PE's time slice lasts (pam/pe.py's
meter): the reductions, the limits, stealing and the slices' fairness are those of `-O0`.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpgrem.ir import Module
from hpgrem.ir.parlog import Call, Clause, Relation
from hpgrem.passes import annotated
from hpgrem.passes.parlog.flow import flat_calls
from hpgrem.ir.parlog.primitives import INLINE


def first_relation_call(module: Module, clause: Clause) -> Call | None:
    """The call a committing clause continues with in its own task: the first call of a
    relation in a flat `,` body without placements (None for any other body)."""
    calls = flat_calls(clause.body)
    for c in calls or ():
        if c.target in module.rules:
            return c
        if c.target not in INLINE:  # a primitive that becomes a task (write/1, call/1, ...)
            return None
    return None


def loops(module: Module, rel: Relation) -> bool:
    return any((c := first_relation_call(module, cl)) is not None and c.target == rel.key
               for g in rel.groups for cl in g)


@dataclass(frozen=True)
class TailLoop:
    name: str = "tail-loop"
    dialects: tuple[str, ...] = ("parlog",)
    records: tuple[str, ...] = ("loop",)

    def apply(self, module: Module) -> Module:
        return annotated(module, self, {key: {"loop": True} for key, rel in module.rules.items() if loops(module, rel)})
