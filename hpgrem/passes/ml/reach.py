"""prune-unreachable's ML side (the pass: hpgrem/passes/prune.py)."""

from __future__ import annotations

from hpgrem.ir import Module, walk
from hpgrem.ir.ml import CallKnown, MakeClosure


def reachable(module: Module) -> dict:
    """The functions the entry reaches, by a call or by making a closure of one."""
    seen = {module.entry.target}
    todo = [module.entry.target]
    while todo:
        fn = module.rules.get(todo.pop())
        for x in walk(fn.body) if fn is not None else ():
            if isinstance(x, (CallKnown, MakeClosure)) and x.function not in seen:
                seen.add(x.function)
                todo.append(x.function)
    return {k: f for k, f in module.rules.items() if k in seen}
