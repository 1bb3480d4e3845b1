"""simplify's ML rules (the pass: hpgrem/passes/simplify.py): `if` on a constant boolean takes
its branch; a sequence inside a sequence is spliced and statements without effect (a literal, a
local) are dropped; `let x = y` of a local or a literal is substituted into its body (locals are
immutable and their names unique within a function)."""

from __future__ import annotations

from hpgrem.ir import ml


def constant_if(e: ml.If):
    c = e.cond
    if isinstance(c, ml.Construct) and c.datatype == "bool" and c.arg is None:
        return e.then if c.tag == 1 else e.else_
    return None


def flatten_sequence(e: ml.Sequence):
    exprs: list = []
    for i, x in enumerate(e.exprs):
        last = i == len(e.exprs) - 1
        if isinstance(x, ml.Sequence):
            exprs += x.exprs if last else [y for y in x.exprs if not _no_effect(y)]
        elif last or not _no_effect(x):
            exprs.append(x)
    if len(exprs) == 1:
        return exprs[0]
    return None if len(exprs) == len(e.exprs) and all(a is b for a, b in zip(exprs, e.exprs)) \
        else ml.Sequence(tuple(exprs), e.span)


def _no_effect(e) -> bool:
    return isinstance(e, (ml.Lit, ml.Local))


def propagate_copies(e: ml.Let):
    if isinstance(e.value, (ml.Local, ml.Lit)):
        return ml.substitute_locals(e.body, {e.name: e.value})
    return None


RULES = [(ml.If, constant_if), (ml.Sequence, flatten_sequence), (ml.Let, propagate_copies)]
