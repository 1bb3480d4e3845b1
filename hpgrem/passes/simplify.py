"""simplify: algebraic clean-ups, written as rewrite rules (hpgrem/ir/rewrite.py), each dialect's in
its own folder (hpgrem/passes/parlog/simplify.py, hpgrem/passes/ml/simplify.py).

PARLOG: a conjunction inside a conjunction of the same operator is spliced into it (both `,`
and `&` are associative), and `true` is dropped from a conjunction with other goals.
ML: `if` on a constant boolean takes its branch; a sequence inside a sequence is spliced and
statements without effect (a literal, a local) are dropped; `let x = y` of a local or a literal
is substituted into its body (locals are immutable and their names unique within a function).
Each rule's count is kept in `Simplify.fired` (and reported by `hpgrem ir`'s annotations).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, replace

from hpgrem import ir
from hpgrem.ir.rewrite import Rewriter

# dialect -> "module:attribute" of its rules, [(node class, rule)]: the pass names no dialect
RULES_OF: dict[str, str] = {
    "parlog": "hpgrem.passes.parlog.simplify:RULES",
    "ml": "hpgrem.passes.ml.simplify:RULES",
}


def rules_of(dialect: str) -> list:
    where, attribute = RULES_OF[dialect].split(":")
    return getattr(importlib.import_module(where), attribute)


@dataclass
class Simplify:
    name: str = "simplify"
    dialects: tuple[str, ...] = tuple(RULES_OF)  # the dialects it has rules of
    fired: dict = field(default_factory=dict)

    def apply(self, module: ir.Module) -> ir.Module:
        rewriter = Rewriter(rules_of(module.dialect))
        rules = {key: rewriter.rewrite(rule) for key, rule in module.rules.items()}
        self.fired = dict(rewriter.fired)
        return replace(module, rules=rules)
