"""simplify: algebraic clean-ups of both dialects, written as rewrite rules (hpgrem/ir/rewrite.py).

PARLOG: a conjunction inside a conjunction of the same operator is spliced into it (both `,`
and `&` are associative), and `true` is dropped from a conjunction with other goals.
ML: `if` on a constant boolean takes its branch; a sequence inside a sequence is spliced and
statements without effect (a literal, a local) are dropped; `let x = y` of a local or a literal
is substituted into its body (locals are immutable and their names unique within a function).
Each rule's count is kept in `Simplify.fired` (and reported by `hpgrem ir`'s annotations).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hpgrem import ir

from hpgrem.ir import ml

from hpgrem.ir import parlog
from hpgrem.ir.rewrite import Rewriter


def splice_conjunctions(c: parlog.Conj):
    if not any(isinstance(p, parlog.Conj) and p.op == c.op for p in c.parts):
        return None
    parts: list = []
    for p in c.parts:
        parts += p.parts if isinstance(p, parlog.Conj) and p.op == c.op else [p]
    return parlog.Conj(c.op, tuple(parts))


def drop_true(c: parlog.Conj):
    kept = tuple(p for p in c.parts if not (isinstance(p, parlog.Call) and p.target == "true/0" and p.placement is None))
    if len(kept) == len(c.parts) or not kept:
        return None
    return kept[0] if len(kept) == 1 else parlog.Conj(c.op, kept)


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


RULES = [
    (parlog.Conj, splice_conjunctions),
    (parlog.Conj, drop_true),
    (ml.If, constant_if),
    (ml.Sequence, flatten_sequence),
    (ml.Let, propagate_copies),
]


@dataclass
class Simplify:
    name: str = "simplify"
    dialects: tuple[str, ...] = ("parlog", "ml")  # its rules are of these two
    fired: dict = field(default_factory=dict)

    def apply(self, module: ir.Module) -> ir.Module:
        rewriter = Rewriter(RULES)
        rules = {key: rewriter.rewrite(rule) for key, rule in module.rules.items()}
        self.fired = dict(rewriter.fired)
        return replace(module, rules=rules)
