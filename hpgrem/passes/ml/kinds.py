"""ml-kinds: how the machine may run each ML function (pam/ml/codegen.py compiles by these).
Annotations, per function (`ml-kinds.kind`, ...):

- `kind` (str): "plain" when its calls are only to primitives and other plain functions and the
  plain call graph has no cycles (a self tail call is a loop), so running it directly cannot
  grow Python's stack without bound; "direct" when it is not plain and cannot reach a
  `ForkJoin.par` join (`_reach_par`), so it may run to completion as Python code, recursing in
  Python to a bounded depth; else "generator" (only such code may have to wait for a join);
- `pure` (bool): it cannot print or touch a ref, directly, through known calls, or through
  calls of unknown functions when any function that escapes as a value is impure (only pure
  thunks of `ForkJoin.par` may run as separate tasks, so effects keep program order);
- `loop` (bool): it calls itself in a tail position;
- `raises` (bool): an ML `raise` may leave it: it raises, joins a `ForkJoin.par` (which
  re-raises a thunk's exception), calls a function that raises, or applies an unknown function
  while some function made into a closure raises (exceptions of primitives, such as Overflow,
  are not counted: the run time raises them); its calls are counted one by one, not per block
  (pam/ml/codegen.py), so that a raise needs no settling of counts;
- `reads` (tuple of int): the global slots it reads;
- `refs` (tuple of str): the functions it calls or makes closures of;

and about the module (`MODULE_FACTS`): `globals` (tuple of str), the global names by slot.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpgrem.ir import ml
from hpgrem.ir.call_graph import components
from hpgrem.ir import MODULE_FACTS, Module
from hpgrem.passes import annotated

EFFECTS = ("print", "!", ":=")  # primitives that print or touch a ref


@dataclass(frozen=True)
class MLKinds:
    name: str = "ml-kinds"
    dialects: tuple[str, ...] = ("ml",)
    records: tuple[str, ...] = ("kind", "pure", "loop", "raises", "reads", "refs", "globals")

    def apply(self, module: Module) -> Module:
        functions = module.rules
        entry = module.entry.target if module.entry is not None else ""
        slots: dict[str, int] = {}
        calls: dict[str, set[str]] = {}
        reads: dict[str, set[int]] = {}
        refs: dict[str, set[str]] = {}
        unknown: set[str] = set()  # functions that apply unknown functions (closures, par)
        pars: set[str] = set()  # functions with a ForkJoin.par
        raising: set[str] = set()  # functions with a raise or a par
        escaping: set[str] = set()  # functions made into closures
        effects: set[str] = set()
        for key, fn in functions.items():
            calls[key], reads[key], refs[key] = set(), set(), set()
            for x in _nodes(fn.body):
                if isinstance(x, ml.CallKnown):
                    calls[key].add(x.function)
                    refs[key].add(x.function)
                elif isinstance(x, ml.MakeClosure):
                    escaping.add(x.function)
                    refs[key].add(x.function)
                elif isinstance(x, (ml.Apply, ml.Par)):
                    unknown.add(key)
                    if isinstance(x, ml.Par):
                        pars.add(key)
                        raising.add(key)
                elif isinstance(x, ml.Raise):
                    raising.add(key)
                elif isinstance(x, ml.Prim) and x.op in EFFECTS:
                    effects.add(key)
                elif isinstance(x, (ml.SetGlobal, ml.Global)):
                    slot = slots.setdefault(x.name, len(slots))
                    if isinstance(x, ml.Global):
                        reads[key].add(slot)
        impure = _impure(functions, calls, unknown, escaping, effects)
        raises = _impure(functions, calls, unknown, escaping, raising)  # the same fixpoint
        plain = _plain(functions, calls, unknown, entry)
        direct = set(functions) - plain - _reach_par(functions, calls, unknown, escaping, pars) - {entry}
        notes: dict[str, dict] = {MODULE_FACTS: {"globals": tuple(slots)}}
        for key, fn in functions.items():
            kind = "plain" if key in plain else "direct" if key in direct else "generator"
            notes[key] = {"kind": kind, "pure": key not in impure, "loop": _self_tail_call(fn), "raises": key in raises,
                          "reads": tuple(sorted(reads[key])), "refs": tuple(sorted(refs[key]))}
        return annotated(module, self, notes)


def _nodes(expr):
    """Every distinct node of an expression, iteratively; this order (last child first, a node
    reached by several paths at its first place) numbers the global slots."""
    seen: set[int] = set()
    stack = [expr]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        yield x
        stack.extend(x.children())


def _impure(functions, calls, unknown, escaping, effects) -> set[str]:
    """A fixpoint over known calls, and over unknown calls while any escaping function is impure."""
    impure = set(effects)
    changed = True
    while changed:
        changed = False
        any_escaping_impure = bool(impure & escaping)
        for key in functions:
            if key in impure:
                continue
            if (key in unknown and any_escaping_impure) or calls[key] & impure:
                impure.add(key)
                changed = True
    return impure


def _plain(functions, calls, unknown, entry: str) -> set[str]:
    """No unknown calls, no non-tail self calls, callees plain, no cycles; never the entry."""
    plain = {k for k in functions if k not in unknown and k != entry
             and not _non_tail_self_call(functions[k])}
    changed = True
    while changed:
        changed = False
        for k in list(plain):
            if any(c not in plain for c in calls[k] if c != k):
                plain.discard(k)
                changed = True
        for k in _on_cycles(plain, calls):
            plain.discard(k)
            changed = True
    return plain


def _reach_par(functions, calls, unknown, escaping, pars) -> set[str]:
    """The functions that may reach a `ForkJoin.par` (whose join may have to wait): those with
    a par, those that call one of them, and those that apply an unknown function while some
    function made into a closure (the only targets an application can have) reaches a par.
    A fixpoint, as `_impure`."""
    reach = set(pars)
    changed = True
    while changed:
        changed = False
        any_escaping = bool(reach & escaping)
        for key in functions:
            if key not in reach and ((key in unknown and any_escaping) or calls[key] & reach):
                reach.add(key)
                changed = True
    return reach


def _on_cycles(nodes: set[str], calls: dict[str, set[str]]) -> set[str]:
    """Nodes on a cycle of length > 1 of the call graph restricted to `nodes`."""
    out: set[str] = set()
    for comp in components({a: [b for b in calls[a] if b != a] for a in nodes}):
        if len(comp) > 1:
            out.update(comp)
    return out


def _tail_calls(fn: ml.Function):
    """Yield (call, is_tail) for the known calls of a function body (a node reached by several
    paths once per position, tail or not)."""
    seen: set[tuple[int, bool]] = set()
    stack = [(fn.body, True)]
    while stack:
        x, tail = stack.pop()
        if (id(x), tail) in seen:
            continue
        seen.add((id(x), tail))
        if isinstance(x, ml.CallKnown):
            yield x, tail
            stack.extend((a, False) for a in x.args)
        elif isinstance(x, ml.If):
            stack += [(x.cond, False), (x.then, tail), (x.else_, tail)]
        elif isinstance(x, ml.Let):
            stack += [(x.value, False), (x.body, tail)]
        elif isinstance(x, ml.Sequence):
            stack += [(e, False) for e in x.exprs[:-1]] + [(x.exprs[-1], tail)]
        elif isinstance(x, ml.Handle):  # the handler runs after the handle: in tail position
            stack += [(x.body, False), (x.handler, tail)]
        elif isinstance(x, ml.Switch):
            stack.append((x.subject, False))
            stack += [(e, tail) for _, e in x.cases]
            stack += [(k, False) for k, _ in x.cases if not isinstance(k, (int, str))]
            if x.default is not None:
                stack.append((x.default, tail))
        else:
            stack.extend((node, False) for node in x.children())


def _non_tail_self_call(fn: ml.Function) -> bool:
    return any(c.function == fn.key and not tail for c, tail in _tail_calls(fn))


def _self_tail_call(fn: ml.Function) -> bool:
    return any(c.function == fn.key and tail for c, tail in _tail_calls(fn))
