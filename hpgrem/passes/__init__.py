"""The pass table and the pass manager.

Each pass is a module of this package with a class whose `name` is its table key and whose
`apply(module)` returns the rewritten module. The table imports lazily, so the driver can list
and select passes without loading them all. `-O0` runs none, `-O1` the default list, `-O2` all.
"""

from __future__ import annotations

import importlib
from typing import Protocol

from hpgrem.ir import Module

# name -> "module:Class"; order is the order `-O2` runs them in.
PASS_TABLE: dict[str, str] = {
    "prune-unreachable": "hpgrem.passes.prune:PruneUnreachable",
}

LEVELS: dict[int, tuple[str, ...]] = {
    0: (),
    1: ("prune-unreachable",),
    2: tuple(PASS_TABLE),
}


class Pass(Protocol):
    name: str

    def apply(self, module: Module) -> Module: ...


def get_pass(name: str) -> Pass:
    if name not in PASS_TABLE:
        raise KeyError(f"unknown pass {name!r} (passes: {', '.join(PASS_TABLE)})")
    module_name, cls = PASS_TABLE[name].split(":")
    return getattr(importlib.import_module(module_name), cls)()


def pipeline(level: int) -> tuple[str, ...]:
    return LEVELS[max(0, min(level, 2))]


def run_passes(module: Module, names: tuple[str, ...] | list[str], *, verify: bool = False) -> Module:
    """Apply `names` in order; with `verify`, check the module after each pass."""
    for name in names:
        module = get_pass(name).apply(module)
        if verify:
            from hpgrem.verify import verify as check
            problems = check(module)
            if problems:
                raise AssertionError(f"after pass {name}: " + "; ".join(problems))
    return module
