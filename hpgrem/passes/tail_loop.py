"""tail-loop: a self tail-recursive PARLOG relation runs as a loop inside its step function.

A clause whose body is a `,` of calls, the first relation call being the relation itself,
continues with that call in the same task (depth first); with `tail_loop` recorded, the step does
not return to the PE for it but loops, while the PE's time slice lasts (pam/pe.py's meter): the
reductions, the limits, stealing and the slices' fairness are those of `-O0`.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpgrem.ir import Call, Clause, Conj, ConjOp, Dialect, Module, Relation
from hpgrem.passes import annotated


def first_relation_call(module: Module, clause: Clause) -> Call | None:
    """The call a committing clause continues with in its own task: the first call of a
    relation in a flat `,` body without placements (None for any other body)."""
    body = clause.body
    if isinstance(body, Call):
        calls = [body]
    elif isinstance(body, Conj) and body.op == ConjOp.PARALLEL and all(isinstance(p, Call) for p in body.parts):
        calls = list(body.parts)
    else:
        return None
    if any(c.placement is not None for c in calls):
        return None
    for c in calls:
        if c.target in module.relations:
            return c
        if c.target in ("write/1", "nl/0", "call/1", "halt/0"):  # primitives that become tasks
            return None
    return None


def loops(module: Module, rel: Relation) -> bool:
    return any((c := first_relation_call(module, cl)) is not None and c.target == rel.key
               for g in rel.groups for cl in g)


@dataclass(frozen=True)
class TailLoop:
    name: str = "tail-loop"
    requires: tuple[str, ...] = ()
    invalidates: tuple[str, ...] = ()

    def apply(self, module: Module) -> Module:
        if module.dialect != Dialect.PARLOG:
            return module
        return annotated(module, {key: {"tail_loop": True} for key, rel in module.relations.items()
                                  if loops(module, rel)})
