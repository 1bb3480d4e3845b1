"""The verifier: the invariants every HPGREM module must keep, whoever built it.

Front ends should never produce a module that fails here; a `.hpg` file that was edited, or a
pass with a bug, might. Three layers: the structural checks, generic over the node registry
(the module's dialect is in the dialect table; every field of every node has its declared type;
rules are stored under their keys and are of the module's dialect; the entry names a rule of
the right arity), then each rule's own `check(module)` (the dialect's scoping and call rules),
then the dialect's hooks (hpgrem/ir/dialects.py: what the machine takes for granted, checks of
the whole module, what may be the entry). Nothing here names a dialect. Every layer visits each
distinct node once: a node shared by many places costs one check. Returns a list of problems
(empty when the module is well formed).
"""

from __future__ import annotations

from itertools import islice

from hpgrem.ir import Module, Node, check_value, schema, walk
from hpgrem.ir.dialects import UnknownDialect, dialect

MAX_PROBLEMS = 20


def verify(module: Module) -> list[str]:
    try:
        spec = dialect(module.dialect)
    except UnknownDialect as e:
        return [str(e)]
    problems: list[str] = []
    for i, (key, rule) in enumerate(module.rules.items()):
        if not isinstance(rule, Node) or rule.dialect != module.dialect:
            problems.append(f"{key}: not a rule of the module's dialect ({module.dialect})")
            continue
        where = f"{type(rule).__name__.lower()} {key}"
        if rule.key != key:
            problems.append(f"{where}: stored under a different key ({rule.key})")
        structural = _structure(rule)
        problems.extend(f"{where}: {p}" for p in structural)
        if not structural:
            problems.extend(f"{where}: {p}" for p in rule.check(module))
            if spec.representation is not None:
                problems.extend(f"{where}: {p}" for p in islice(spec.representation(rule, f"$.rules[{i}]", module), 5))
        if len(problems) >= MAX_PROBLEMS:
            return problems[:MAX_PROBLEMS]
    entry = module.entry
    if entry is not None:
        target = module.rules.get(entry.target)
        if target is None:
            problems.append(f"entry {entry.target} is not defined")
        elif target.arity != len(entry.outputs):
            problems.append(f"entry {entry.target} takes {target.arity} arguments, not {len(entry.outputs)}")
        elif spec.entry_problem is not None and (problem := spec.entry_problem(module, target)) is not None:
            problems.append(problem)
    if spec.module_problems is not None:
        problems.extend(spec.module_problems(module))
    return problems[:MAX_PROBLEMS]


def _structure(rule: Node) -> list[str]:
    """Every field of every node below `rule` has its declared type."""
    out: list[str] = []
    for node in walk(rule):
        for name, hint in schema(type(node)).fields.items():
            problem = check_value(getattr(node, name), hint)
            if problem is not None:
                out.append(f"{node.kind}.{name}: {problem}")
                if len(out) >= 5:
                    return out
    return out
