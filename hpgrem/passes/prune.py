"""prune-unreachable: drop relations and functions the entry can never reach (most of the
prelude, usually, PARLOG's or ML's).

A reachable `call/1` or `call/3` can reach any relation by name at run time, so then no relation is dropped.
An ML function is reached by a call or by making a closure of it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, replace

from hpgrem.ir import Module

# dialect -> "module:function": the rules the entry reaches (None: any may be reached); the pass
# names no dialect
REACHABLE: dict[str, str] = {
    "parlog": "hpgrem.passes.parlog.reach:reachable",
    "ml": "hpgrem.passes.ml.reach:reachable",
}


@dataclass(frozen=True)
class PruneUnreachable:
    name: str = "prune-unreachable"
    dialects: tuple[str, ...] = tuple(REACHABLE)
    # PARLOG estimates stay true (a relation's recursive group is reachable whenever the
    # relation is), and so does what each kept body's goals feed; slots of ML globals are
    # numbered over the functions kept (ml-kinds is not preserved).
    preserves: tuple[str, ...] = ("granularity", "flow")

    def apply(self, module: Module) -> Module:
        if module.entry is None:
            return module
        where, function = REACHABLE[module.dialect].split(":")
        kept = getattr(importlib.import_module(where), function)(module)
        return module if kept is None or len(kept) == len(module.rules) else replace(module, rules=kept)
