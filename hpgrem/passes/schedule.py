"""schedule: compile-time partial scheduling (PARLOG), a safe restricted form.

King and Soper's condition for running body goals as one thread is that no consumer runs
before its producer. This pass records `schedule` on each relation whose goals may run
directly in their caller's step instead of passing through the ready queue: relations that
reach (through every relation they may call) no primitive with an effect beyond bindings
(write/1, nl/0, call/1, halt/0, ...) and no placement, so running one of their goals earlier
than the queue would can change neither the output's order nor where a goal runs.

The rule compiler (pam/parlog/clause_code.py) decides per call site, in a flat `,` body of a relation
that does not loop (never across `&` or `;`): a goal of the body other than the one the task
continues with runs directly, in order, when its callee is marked and no other goal of the
body produces (by the modes) any of its inputs, so at commit they are bound as far as this
body is concerned. It runs while the PE's time slice lasts (the step limit and the slices
stay exact) and, where the callee is exportable, only on one PE or where the lift threshold
says it is not worth a message (pam/parlog/goal.py). A goal that suspends is parked, one that
continues goes to the queue, as it would have done from the queue.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpgrem.ir import Dialect, Module, calls_in
from hpgrem.passes import annotated


def pure_relations(module: Module) -> set[str]:
    """The relations that reach no effectful primitive and no placement (a fixpoint)."""
    from pam.parlog import primitives  # the machine's list of primitives run at commit

    calls = {}
    impure: set[str] = set()
    for key, rel in module.relations.items():
        cs = [c for cl in rel.clauses() for c in (*cl.guard, *calls_in(cl.body))]
        calls[key] = {c.target for c in cs if c.target in module.relations}
        if any(c.placement is not None or (c.target not in module.relations and c.target not in primitives.INLINE)
               for c in cs):
            impure.add(key)
    changed = True
    while changed:
        changed = False
        for key, targets in calls.items():
            if key not in impure and targets & impure:
                impure.add(key)
                changed = True
    return set(module.relations) - impure


@dataclass(frozen=True)
class Schedule:
    name: str = "schedule"
    requires: tuple[str, ...] = ()
    invalidates: tuple[str, ...] = ()

    def apply(self, module: Module) -> Module:
        if module.dialect != Dialect.PARLOG:
            return module
        return annotated(module, {key: {"schedule": True} for key in sorted(pure_relations(module))})
