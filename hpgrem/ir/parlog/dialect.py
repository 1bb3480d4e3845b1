"""The PARLOG dialect's entry in the dialect table (hpgrem/ir/dialects.py): what the machine
takes for granted of a relation beyond its declared field types and its own `check`."""

from __future__ import annotations

import math
from typing import Iterator

from hpgrem.ir.core import Module, walk_paths
from hpgrem.ir.dialects import DialectSpec
from hpgrem.ir.parlog import Call, Conj, Float, Relation, Struct

EFFECTS = frozenset({"write/1", "nl/0", "halt/0", "halt/1", "read_stream/1"})
"""Primitives with effects beyond bindings (output, reading stdin, the run's end): a guard (a
deep one included) calls none. `open_read/2` is not one: reading a file twice reads the same."""

MAX_CLAUSE_VARS = 1 << 20
"""The most variables a clause may number: the machine allocates a slot for each."""


def representation(rule: Relation, path: str, module: Module) -> Iterator[str]:
    """Keys that match name and arity, clause sizes, calls whose target
    names their number of arguments (a guard's none with effects), compound terms with arguments, finite floats."""
    if rule.key != f"{rule.name}/{rule.arity}" and not rule.key.endswith(f":{rule.name}/{rule.arity}"):
        yield f"at {path}.key: {rule.key!r} is not the key of {rule.name}/{rule.arity}"
    for gi, group in enumerate(rule.groups):
        for ci, clause in enumerate(group):
            cpath = f"{path}.groups[{gi}][{ci}]"
            if not 0 <= clause.nvars <= MAX_CLAUSE_VARS:
                yield f"at {cpath}.nvars: {clause.nvars} variables (0 to {MAX_CLAUSE_VARS})"
            for k, g in enumerate(clause.guard):
                if g.target in EFFECTS:  # a guard may be abandoned: it has no effects
                    yield f"at {cpath}.guard[{k}].target: {g.target} cannot stand in a guard"
                if g.placement is not None:
                    yield f"at {cpath}.guard[{k}].placement: a guard has no placement"
            for node, p in walk_paths(clause, cpath):
                if isinstance(node, Call) and not node.target.endswith(f"/{len(node.args)}"):
                    yield f"at {p}.args: {len(node.args)} arguments in a call of {node.target}"
                elif isinstance(node, Struct) and not node.args:
                    yield f"at {p}.args: a compound term has arguments (an atom has none)"
                elif isinstance(node, Float) and not math.isfinite(node.value):
                    yield f"at {p}.value: {node.value} is not a finite float"
                elif isinstance(node, Conj) and not node.parts:
                    yield f"at {p}.parts: an empty conjunction"


DIALECT = DialectSpec("parlog", representation=representation)
