"""The verifier: the invariants every HPGREM module must keep, whoever built it.

Front ends should never produce a module that fails here; a `.hpg` file that was edited, or a
pass with a bug, might. Two layers: the structural checks, generic over the node registry
(every field of every node has its declared type; rules are stored under their keys and are of
the module's dialect; the entry names a rule of the right arity), then each rule's own
`check(module)` (the dialect's scoping and call rules). Returns a list of problems (empty when
the module is well formed).
"""

from __future__ import annotations

from hpgrem.ir import Module, Node, check_value, schema, walk

MAX_PROBLEMS = 20


def verify(module: Module) -> list[str]:
    problems: list[str] = []
    for key, rule in module.rules.items():
        where = f"{rule.kind.lower()} {key}"
        if not isinstance(rule, Node) or rule.dialect != module.dialect:
            problems.append(f"{key}: not a rule of the module's dialect ({module.dialect})")
            continue
        if rule.key != key:
            problems.append(f"{where}: stored under a different key ({rule.key})")
        structural = _structure(rule)
        problems.extend(f"{where}: {p}" for p in structural)
        if not structural:
            problems.extend(f"{where}: {p}" for p in rule.check(module))
        if len(problems) >= MAX_PROBLEMS:
            return problems[:MAX_PROBLEMS]
    entry = module.entry
    if entry is not None:
        target = module.rules.get(entry.target)
        if target is None:
            problems.append(f"entry {entry.target} is not defined")
        elif target.arity != len(entry.outputs):
            problems.append(f"entry {entry.target} takes {target.arity} arguments, not {len(entry.outputs)}")
    return problems


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
