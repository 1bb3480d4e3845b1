"""ml-inline: calls of small known functions replaced by their bodies.

A function is inlined where it is called when it is small (at most `size` nodes, an option, default 16), is not on a
cycle of the call graph (so inlining ends), and is not the entry. `f(a1, ..., an)` becomes
`let p1' = a1 in ... let pn' = an in body'`, where body' is the body with its parameters and
every local it binds renamed to fresh names (`name.iN`: `.` is in no ML identifier), so names
stay unique within the caller. Arguments are still evaluated once, left to right, before the
body; a call in tail position leaves the body's tail calls in tail position. Inlined bodies
may call other small functions: up to ROUNDS levels are inlined. The `simplify` pass then
removes `let`s of locals and literals, and `prune-unreachable` the functions no one calls.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from hpgrem import ir

from hpgrem.ir import ml
from hpgrem.ir import transform, walk, walk_tree
from hpgrem.passes import Option
from hpgrem.ir.call_graph import components

ROUNDS = 3


@dataclass
class MLInline:
    name: str = "ml-inline"
    dialects: tuple[str, ...] = ("ml",)
    size: int = 16  # nodes of a body small enough to inline
    options: ClassVar[dict[str, Option]] = {"size": Option("nodes of a body small enough to inline", minimum=0)}
    inlined: int = 0  # calls replaced

    def apply(self, module: ir.Module) -> ir.Module:
        functions = module.rules
        entry = module.entry.target if module.entry is not None else None
        graph = {key: {x.function for x in walk(fn.body) if isinstance(x, (ml.CallKnown, ml.MakeClosure))}
                 for key, fn in functions.items()}
        recursive = {k for comp in components(graph) for k in comp if len(comp) > 1 or k in graph[k]}
        small = {k: fn for k, fn in functions.items()
                 if k != entry and k not in recursive and _size(fn.body, self.size + 1) <= self.size}
        if not small:
            return module
        fresh = [0]
        rules = dict(functions)
        for key, fn in functions.items():
            if graph[key].isdisjoint(small):
                continue  # no call to inline: no rebuild of the body (start-up)
            body = fn.body
            for _ in range(ROUNDS):
                new = transform(body, lambda n: self._inline(n, small, fresh)
                                if isinstance(n, ml.CallKnown) and n.function in small else n)
                if new is body:
                    break
                body = new
            if body is not fn.body:
                rules[key] = replace(fn, body=body)
        return replace(module, rules=rules)

    def _inline(self, call: ml.CallKnown, small: dict, fresh: list) -> ml.Expr:
        fn = small[call.function]
        fresh[0] += 1
        suffix = f".i{fresh[0]}"
        bound = set(fn.params) | {x.name for x in walk(fn.body) if isinstance(x, (ml.Let, ml.Handle))}
        out = ml.rename_locals(fn.body, bound, suffix)
        for p, a in reversed(list(zip(fn.params, call.args))):
            out = ml.Let(p + suffix, a, out, call.span)
        self.inlined += 1
        return out


def _size(e, cap: int) -> int:
    """The number of nodes of `e`, counting up to `cap`."""
    n = 0
    for _ in walk_tree(e):  # per path: a copy of the body copies every place
        n += 1
        if n >= cap:
            break
    return n
