"""schedule: compile-time partial scheduling (PARLOG), a safe restricted form.

King and Soper's condition for running body goals as one thread is that no consumer runs
before its producer. This pass records `schedule.schedule` on each relation whose goals may
run directly in their caller's step instead of passing through the ready queue: relations that
reach (through every relation they may call) no primitive with an effect beyond bindings
(write/1, nl/0, call/1, halt/0, ...: every primitive outside hpgrem.ir.parlog.primitives.INLINE) and no
placement, so running one of their goals earlier than the queue would can change neither the
output's order nor where a goal runs.

The rule compiler (pam/parlog/clause_code.py) decides per call site, in a flat `,` body of a
relation that does not loop (never across `&` or `;`): a goal of the body other than the one
the task continues with runs directly, in order, when its callee is marked and no other goal
of the body that becomes a task produces (by the modes) any of its inputs, so at commit they
are bound as far as this body is concerned. Which goals feed which is the `flow` analysis's
note `flow.fed`, which this pass requires (and the pass manager keeps current to the end). It
runs while the PE's time slice lasts (the step limit and the slices stay exact) and, where the
callee is exportable, only on one PE or where the lift threshold says it is not worth a
message (pam/parlog/goal.py). A goal that suspends is parked, one that continues goes to the
queue, as it would have done from the queue.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpgrem.ir import Module
from hpgrem.ir.parlog import calls_in
from hpgrem.passes import annotated
from hpgrem.ir.parlog.primitives import INLINE


def pure_relations(module: Module) -> set[str]:
    """The relations that reach no effectful primitive and no placement (a fixpoint)."""
    calls = {}
    impure: set[str] = set()
    for key, rel in module.rules.items():
        cs = [c for cl in rel.clauses() for c in (*cl.guard, *calls_in(cl.body))]
        calls[key] = {c.target for c in cs if c.target in module.rules}
        if any(c.placement is not None or (c.target not in module.rules and c.target not in INLINE) for c in cs):
            impure.add(key)
    changed = True
    while changed:
        changed = False
        for key, targets in calls.items():
            if key not in impure and targets & impure:
                impure.add(key)
                changed = True
    return set(module.rules) - impure


@dataclass(frozen=True)
class Schedule:
    name: str = "schedule"
    dialects: tuple[str, ...] = ("parlog",)
    records: tuple[str, ...] = ("schedule",)
    requires: tuple[str, ...] = ("flow",)  # the rule compiler reads what feeds each goal (`flow.fed`)

    def apply(self, module: Module) -> Module:
        return annotated(module, self, {key: {"schedule": True} for key in sorted(pure_relations(module))})
