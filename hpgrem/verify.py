"""The verifier: structural invariants every HPGREM module must keep, whoever built it.

Front ends should never produce a module that fails here; a `.hpg` file that was edited or
truncated might. Returns a list of problems (empty when the module is well formed).
"""

from __future__ import annotations

from hpgrem import ir
from hpgrem.primitives import PRIMITIVES


def verify(module: ir.Module) -> list[str]:
    problems: list[str] = []
    for key, rel in module.relations.items():
        where = f"relation {key}"
        if rel.key != key:
            problems.append(f"{where}: stored under a different key ({rel.key})")
        if any(m not in ("?", "^") for m in rel.modes):
            problems.append(f"{where}: modes must be '?' or '^'")
        if not rel.groups or any(not g for g in rel.groups):
            problems.append(f"{where}: empty search group")
        for group in rel.groups:
            for clause in group:
                problems.extend(f"{where}, clause at {clause.span.line}:{clause.span.col}: {p}"
                                for p in _clause(module, rel, clause))
    for key, fn in module.functions.items():
        problems.extend(f"function {key}: {p}" for p in _function(module, fn))
    if module.entry is not None and module.language == "ml":
        if module.entry.target not in module.functions:
            problems.append(f"entry {module.entry.target} is not defined")
    elif module.entry is not None:
        target = module.relations.get(module.entry.target)
        if target is None:
            problems.append(f"entry {module.entry.target} is not defined")
        elif target.arity != len(module.entry.outputs):
            problems.append(f"entry {module.entry.target} takes {target.arity} arguments, "
                            f"not {len(module.entry.outputs)}")
    return problems


def _clause(module: ir.Module, rel: ir.Relation, clause: ir.Clause) -> list[str]:
    out: list[str] = []
    if len(clause.head) != rel.arity:
        out.append(f"head has {len(clause.head)} arguments, modes say {rel.arity}")
    terms: list[ir.Term] = list(clause.head)
    for call in (*clause.guard, *ir.calls_in(clause.body)):
        terms.extend(call.args)
        if call.target not in PRIMITIVES and call.target not in module.relations:
            out.append(f"calls undefined {call.target}")
        elif call.target in module.relations and module.relations[call.target].arity != len(call.args):
            out.append(f"calls {call.target} with {len(call.args)} arguments")
    for t in terms:
        for v in _all_vars(t):
            if not 0 <= v.index < clause.nvars:
                out.append(f"variable {v.name} numbered {v.index}, outside 0..{clause.nvars - 1}")
    return out


def _all_vars(term: ir.Term) -> list[ir.Var]:
    found, stack = [], [term]
    while stack:
        t = stack.pop()
        if isinstance(t, ir.Var):
            found.append(t)
        elif isinstance(t, ir.Struct):
            stack.extend(t.args)
    return found


def _function(module: ir.Module, fn: ir.Function) -> list[str]:
    """Calls and closures name defined functions, with the right number of arguments; locals
    are bound before use."""
    out: list[str] = []
    if not 0 <= fn.arity <= len(fn.params):
        out.append(f"arity {fn.arity} with {len(fn.params)} parameters")
    stack: list = [(fn.body, frozenset(fn.params))]
    while stack:
        e, scope = stack.pop()
        if isinstance(e, ir.Local) and e.name not in scope:
            out.append(f"local {e.name} used outside its scope")
        elif isinstance(e, (ir.CallKnown, ir.MakeClosure)):
            callee = module.functions.get(e.function)
            if callee is None:
                out.append(f"refers to undefined function {e.function}")
            elif isinstance(e, ir.CallKnown) and len(e.args) != len(callee.params):
                out.append(f"calls {e.function} with {len(e.args)} arguments, it takes {len(callee.params)}")
            elif isinstance(e, ir.MakeClosure) and len(e.free) != len(callee.params) - callee.arity:
                out.append(f"closure of {e.function} binds {len(e.free)} free variables, "
                           f"it has {len(callee.params) - callee.arity}")
        if isinstance(e, ir.Let):
            stack.append((e.value, scope))
            stack.append((e.body, scope | {e.name}))
            continue
        if isinstance(e, ir.Handle):
            stack.append((e.body, scope))
            stack.append((e.handler, scope | {e.name}))
            continue
        for child in ir.ml_children(e):
            stack.append((child, scope))
    return out[:5]

