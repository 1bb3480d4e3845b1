"""simplify's PARLOG rules (the pass: hpgrem/passes/simplify.py): a conjunction inside a
conjunction of the same operator is spliced into it (both `,` and `&` are associative), and
`true` is dropped from a conjunction with other goals."""

from __future__ import annotations

from hpgrem.ir import parlog


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


RULES = [(parlog.Conj, splice_conjunctions), (parlog.Conj, drop_true)]
