"""The pass tables and the pass manager.

A pass is a module of this package with a class whose `name` is its table key and whose
`apply(module)` returns the new module. It declares the analyses it `requires` (run before it
when their annotations are not current) and the ones it `invalidates` (their annotations are
dropped after it); a pass that declares nothing invalidates every analysis, the safe default.

An *analysis* is a pass that only records annotations (`module.annotations`, docs/ir.md); it
lists the annotation names it `records`. The analyses the machine reads always run, last, so
the module handed to the machine carries them whatever passes ran.

`-O0` runs no optimizing pass, `-O1` the default list, `-O2` all. The tables import lazily, so
the driver can list and select passes without loading them.
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # the tables are read without loading the IR (`hpgrem ir --help`)
    from hpgrem.ir import Module

# name -> "module:Class"; the optimizing passes, in the order `-O2` runs them.
PASS_TABLE: dict[str, str] = {
    "ml-flatten": "hpgrem.passes.ml_flatten:MLFlatten",
    "ml-grain": "hpgrem.passes.ml_grain:MLGrain",
    "ml-inline": "hpgrem.passes.ml_inline:MLInline",
    "simplify": "hpgrem.passes.simplify:Simplify",
    "prune-unreachable": "hpgrem.passes.prune:PruneUnreachable",
    "order-nodes": "hpgrem.passes.order_nodes:OrderNodes",
    "index-rules": "hpgrem.passes.index_rules:IndexRules",
    "tail-loop": "hpgrem.passes.tail_loop:TailLoop",
    "dest-passing": "hpgrem.passes.dest_passing:DestPassing",
    "lift": "hpgrem.passes.lift:Lift",
    "schedule": "hpgrem.passes.schedule:Schedule",
    "ml-switch": "hpgrem.passes.ml_switch:MLSwitch",
    "ml-ranges": "hpgrem.passes.ml_ranges:MLRanges",
    "ml-batch-counts": "hpgrem.passes.ml_batch_counts:MLBatchCounts",
    "aggregate": "hpgrem.passes.aggregate:Aggregate",
}

ANALYSIS_TABLE: dict[str, str] = {
    "granularity": "hpgrem.passes.granularity:Granularity",
    "ml-kinds": "hpgrem.passes.ml_kinds:MLKinds",
}

LEVELS: dict[int, tuple[str, ...]] = {
    0: (),
    1: ("prune-unreachable",),
    2: tuple(PASS_TABLE),
}

MACHINE_ANALYSES: tuple[str, ...] = ("granularity", "ml-kinds")
"""What the machine reads (pam/parlog/rules.py, pam/ml/codegen.py): it runs no analysis of its own."""


class Pass(Protocol):
    name: str
    requires: tuple[str, ...]  # optional: none when absent
    invalidates: tuple[str, ...]  # optional: every analysis when absent

    def apply(self, module: Module) -> Module: ...


class Analysis(Protocol):
    name: str
    records: tuple[str, ...]

    def apply(self, module: Module) -> Module: ...


def level(opt: int) -> tuple[str, ...]:
    """The optimizing passes of `-O<opt>`."""
    return LEVELS[max(0, min(opt, 2))]


def get_pass(name: str) -> Pass | Analysis:
    """An instance of the optimizing pass or analysis `name` (KeyError if there is none)."""
    module_name, cls = {**PASS_TABLE, **ANALYSIS_TABLE}[name].split(":")
    return getattr(importlib.import_module(module_name), cls)()


def run_passes(module: Module, names: tuple[str, ...] | list[str], *, analyses: bool = True) -> Module:
    """Apply the optimizing passes `names` in order, each after the analyses it requires; then,
    with `analyses`, the analyses the machine reads that are not current."""
    current: set[str] = set()
    for name in names:
        p = get_pass(name)
        for needed in getattr(p, "requires", ()):
            if needed not in current:
                module = get_pass(needed).apply(module)
                current.add(needed)
        module = _drop_removed_rules_annotations(p.apply(module))
        invalidated = set(getattr(p, "invalidates", ANALYSIS_TABLE))
        module = _forget(module, invalidated)
        current -= invalidated
    if analyses:
        for name in MACHINE_ANALYSES:
            if name not in current:
                module = get_pass(name).apply(module)
    return module


def annotated(module: Module, notes: dict[str, dict[str, object]]) -> Module:
    """`module` with `notes` (rule key -> {name: value}) added to a copy of its annotations."""
    merged = {key: dict(values) for key, values in module.annotations.items()}
    for key, values in notes.items():
        merged.setdefault(key, {}).update(values)
    return replace(module, annotations=merged)


def _forget(module: Module, analyses: set[str]) -> Module:
    """`module` without the annotations that `analyses` record (whoever recorded them: a `.hpg`
    file carries annotations too)."""
    names = {n for a in analyses for n in get_pass(a).records}
    if not any(n in names for values in module.annotations.values() for n in values):
        return module
    notes = {key: {n: v for n, v in values.items() if n not in names} for key, values in module.annotations.items()}
    return replace(module, annotations={key: values for key, values in notes.items() if values})


def _drop_removed_rules_annotations(module: Module) -> Module:
    """Annotations of rules a pass removed go with them."""
    from hpgrem.ir import MODULE_FACTS
    if all(key in module.rules or key == MODULE_FACTS for key in module.annotations):
        return module
    return replace(module, annotations={key: values for key, values in module.annotations.items()
                                        if key in module.rules or key == MODULE_FACTS})
