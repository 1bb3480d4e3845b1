"""dest-passing: mode-directed specialisation of outputs (last call modulo constructor).

Where the modes say an output is unbound and a looping clause (tail-loop) gives it as
`[E|V]`, V being new and passed on only as the same output of the self call, the list cell is
built in place: its tail is filled by the next iteration directly, with no `Var` per cell.
Records `dest`: the output position so built (one per relation). The machine still checks at
run time that the caller's argument is an unbound variable nobody waits on, and otherwise takes
the general path; it takes effect only together with tail-loop (`tail-loop.loop`).
"""

from __future__ import annotations

from dataclasses import dataclass

from hpgrem.ir import Module, fold
from hpgrem.ir.parlog import Clause, Relation, Struct, Var
from hpgrem.passes import annotated
from hpgrem.passes.parlog.tail_loop import first_relation_call


def _occurrences(clause: Clause, index: int) -> int:
    """Occurrences of variable `index` in `clause`, once per place (as in copies of its shared
    nodes), computed once per distinct node."""
    return fold(clause, lambda n, kids: sum(kids) + (isinstance(n, Var) and n.index == index))


def dest_position(module: Module, rel: Relation) -> int | None:
    """An output position that every self-looping clause passes on as `V` or builds as `[E|V]`
    (at least one of them), V occurring only there and in the self call's same position."""
    for i, mode in enumerate(rel.modes):
        if mode != "^":
            continue
        shapes = []
        for g in rel.groups:
            for clause in g:
                call = first_relation_call(module, clause)
                if call is None or call.target != rel.key:
                    continue
                out, passed = clause.head[i], call.args[i]
                if not isinstance(passed, Var) or _occurrences(clause, passed.index) != 2:
                    shapes.append(None)
                elif out == passed:
                    shapes.append("pass")
                elif isinstance(out, Struct) and out.name == "[|]" and len(out.args) == 2 and out.args[1] == passed:
                    shapes.append("cons")
                else:
                    shapes.append(None)
        if shapes and None not in shapes and "cons" in shapes:
            return i
    return None


@dataclass(frozen=True)
class DestPassing:
    name: str = "dest-passing"
    dialects: tuple[str, ...] = ("parlog",)
    records: tuple[str, ...] = ("dest",)

    def apply(self, module: Module) -> Module:
        notes = {}
        for key, rel in module.rules.items():
            i = dest_position(module, rel)
            if i is not None:
                notes[key] = {"dest": i}
        return annotated(module, self, notes)
