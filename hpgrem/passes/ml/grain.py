"""ml-grain: granularity of `ForkJoin.par`, estimated at compile time as a function of input
size and tested at run time ("node lifting": only work worth exporting becomes a task).

A `par (fn () => g (n - 2) ...)` forks its right thunk as a task that another PE may steal; a
task is worth that only when its work outweighs the messages of a steal. The pass estimates
the work of a call `g(s)` as a function of the size `s` of one int argument: an abstract
evaluation of g's body with that argument known (conditions on it decided, calls counted,
recursion followed while the size decreases), memoised by size. From it, the smallest size
`s0` whose estimate reaches `threshold` calls (an option, default 100) is the grain. A `par` whose right thunk calls such
a function becomes

    if size < s0 then (left' (), right' ())   (* sequential, inline *)
    else par (left, right)

where `left'` and `right'` are sequential clones (`KEY/seq`): the thunk and the functions it
reaches through par, with every `par` replaced by a sequential pair, so below the grain the
work runs as direct code, with no task, no fork and no join. Sequential evaluation is what par
means (leftmost exception, effects in order), so only speed and the task count change.

Annotation, per function with such a `par`: `ml-grain.grain` = (("callee key", s0), ...).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from hpgrem import ir

from hpgrem.ir import ml
from hpgrem.ir import transform, walk
from hpgrem.passes import Option, annotated

MAX_SIZE = 64  # sizes tried for the grain
SEQ = "/seq"


class Unknown(Exception):
    """The estimate cannot be made (recursion that does not decrease, an unknown shape)."""


@dataclass
class MLGrain:
    name: str = "ml-grain"
    dialects: tuple[str, ...] = ("ml",)
    records: tuple[str, ...] = ("grain",)
    # Estimated calls of a task worth exporting: 100 calls are 3,000 instructions, 300 us of
    # virtual time, against tens of us for a steal's messages (measured on pfib_fine: 300 left
    # 64 PEs short of tasks, 1,000 already 16).
    threshold: int = 100
    options: ClassVar[dict[str, Option]] = {
        "threshold": Option("estimated calls a par's right thunk must reach to run as a task", minimum=1)}
    tested: int = 0  # par sites given a run-time grain test

    def apply(self, module: ir.Module) -> ir.Module:
        functions = module.rules
        costs = _Costs(functions)
        rules = dict(functions)
        notes: dict[str, dict] = {}
        cloner = _Cloner(rules)
        for key, fn in functions.items():
            if key.endswith(SEQ):
                continue
            grains: list[tuple[str, int]] = []

            def at_par(p: ml.Par):
                test = _grain_test(p.right, functions, costs, self.threshold)
                if test is None:
                    return p
                local, bound, callee, s0 = test
                seq = cloner.sequential(p)
                if seq is None:
                    return p
                grains.append((callee, s0))
                self.tested += 1
                return ml.If(ml.Prim("int.<", (local, ml.Lit(bound, p.span)), p.span), seq, p, p.span)
            body = transform(fn.body, lambda n: at_par(n) if isinstance(n, ml.Par) else n)
            if grains:
                rules[key] = replace(fn, body=body)
                notes[key] = {"grain": tuple(grains)}
        if not notes:
            return module
        return annotated(replace(module, rules=rules), self, notes)


def _grain_test(thunk, functions, costs, threshold: int) -> tuple[ml.Local, int, str, int] | None:
    """When `thunk` is a closure whose body calls a function with an int argument its work
    grows with, and that argument is `x`, `x + c` or `x - c` for a local x known at the par
    site: (x, the bound on x below which the call is under the grain, the callee, the grain
    s0). Comparing x itself evaluates nothing that could raise before the thunks run."""
    if not isinstance(thunk, ml.MakeClosure):
        return None
    k = functions.get(thunk.function)
    if k is None or k.arity != 1 or len(thunk.free) != len(k.params) - 1 or not isinstance(k.body, ml.CallKnown):
        return None
    call = k.body
    g = functions.get(call.function)
    if g is None:
        return None
    free = dict(zip(k.params, thunk.free))
    for pos, arg in enumerate(call.args):
        shape = _local_plus(ml.substitute_locals(arg, free))
        if shape is None:
            continue
        local, offset = shape
        try:
            estimates = [costs.call(g.key, pos, s) for s in range(MAX_SIZE)]
        except (Unknown, RecursionError):
            continue
        for s0, c in enumerate(estimates):
            if c >= threshold:  # x + offset < s0  <=>  x < s0 - offset
                bound = s0 - offset
                return (local, bound, g.key, s0) if ml.INT_MIN <= bound <= ml.INT_MAX else None
        return None
    return None


def _local_plus(e) -> tuple[ml.Local, int] | None:
    """(x, c) when `e` is the local x plus the constant c."""
    if isinstance(e, ml.Local):
        return e, 0
    if isinstance(e, ml.Prim) and e.op in ("int.+", "int.-") and len(e.args) == 2:
        x, c = e.args
        if isinstance(x, ml.Local) and isinstance(c, ml.Lit) and type(c.value) is int:
            return x, c.value if e.op == "int.+" else -c.value
    return None


class _Costs:
    """Estimated calls made by a call of a function with one argument's value known."""

    def __init__(self, functions: dict):
        self.functions = functions
        self.memo: dict[tuple[str, int, int], int] = {}
        self.active: dict[tuple[str, int], list[int]] = {}  # calls being estimated, by size
        # A node reached by several paths (the IR is a graph) in the same env costs what it did
        # at its first place (an env is made per call estimated, so what `active` holds is the
        # same there): (env, cost) by (node id, env id), so an estimate visits each distinct
        # node once per env, not once per path.
        self.shared = {i for i, c in ir.use_counts([fn.body for fn in functions.values()]).items() if c > 1}
        self.costs: dict[tuple[int, int], tuple] = {}

    def call(self, key: str, pos: int, size: int) -> int:
        fn = self.functions.get(key)
        if fn is None or pos >= len(fn.params):
            raise Unknown
        memo = self.memo.get((key, pos, size))
        if memo is not None:
            return memo
        sizes = self.active.setdefault((key, pos), [])
        if size < -MAX_SIZE or sizes and size >= min(sizes):
            raise Unknown  # recursion that does not shrink the size, or that no test ends: no estimate
        sizes.append(size)
        try:
            n = self.expr(fn.body, {fn.params[pos]: size})
        finally:
            sizes.pop()
        self.memo[(key, pos, size)] = n
        return n

    def expr(self, e, env: dict[str, int], again: bool = False) -> int:
        if not again and id(e) in self.shared:
            key = (id(e), id(env))
            hit = self.costs.get(key)
            if hit is None:
                hit = self.costs[key] = (env, self.expr(e, env, True))  # env held: its id stays its
            return hit[1]
        if isinstance(e, ml.If):
            c = self.expr(e.cond, env)
            truth = _truth(e.cond, env)
            if truth is None:
                return c + max(self.expr(e.then, env), self.expr(e.else_, env))
            return c + self.expr(e.then if truth else e.else_, env)
        if isinstance(e, ml.Let):
            v = _value(e.value, env)
            inner = env if v is None else {**env, e.name: v}
            return self.expr(e.value, env) + self.expr(e.body, inner)
        if isinstance(e, ml.CallKnown):
            return 1 + sum(self.expr(a, env) for a in e.args) + self.known(e.function, e.args, env)
        if isinstance(e, ml.Par):
            return 2 + sum(self.thunk(t, env) for t in (e.left, e.right))
        if isinstance(e, ml.Switch):
            base = self.expr(e.subject, env)
            arms = [body for _, body in e.cases] + ([e.default] if e.default is not None else [])
            return base + max(self.expr(a, env) for a in arms)
        if isinstance(e, (ml.Apply, ml.While)):
            raise Unknown  # unknown functions, loops: no estimate
        return sum(self.expr(c, env) for c in e.children())

    def known(self, key: str, args, env: dict) -> int:
        """The calls made inside a known call: followed through the first argument whose value
        is known, else through the body with nothing known (recursion then gives up)."""
        for pos, a in enumerate(args):
            v = _value(a, env)
            if v is not None:
                return self.call(key, pos, v)
        fn = self.functions.get(key)
        if fn is None:
            raise Unknown
        sizes = self.active.setdefault((key, -1), [])
        if sizes:
            raise Unknown
        sizes.append(0)
        try:
            return self.expr(fn.body, {})
        finally:
            sizes.pop()

    def thunk(self, t, env: dict) -> int:
        if not isinstance(t, ml.MakeClosure):
            raise Unknown
        k = self.functions.get(t.function)
        if k is None:
            raise Unknown
        inner = {p: v for p, v in zip(k.params, (_value(x, env) for x in t.free)) if v is not None}
        return 1 + self.expr(k.body, inner)


def _value(e, env: dict) -> int | None:
    """The int value of `e` when the known sizes determine it."""
    if isinstance(e, ml.Lit) and type(e.value) is int:
        return e.value
    if isinstance(e, ml.Local):
        return env.get(e.name)
    if isinstance(e, ml.Prim) and e.op in ("int.+", "int.-") and len(e.args) == 2:
        a, b = (_value(x, env) for x in e.args)
        if a is None or b is None:
            return None
        return a + b if e.op == "int.+" else a - b
    return None


_COMPARE = {"int.<": int.__lt__, "int.<=": int.__le__, "int.>": int.__gt__, "int.>=": int.__ge__,
            "=.simple": int.__eq__, "<>.simple": int.__ne__}


def _truth(cond, env: dict) -> bool | None:
    if isinstance(cond, ml.Prim) and cond.op in _COMPARE and len(cond.args) == 2:
        a, b = (_value(x, env) for x in cond.args)
        if a is not None and b is not None:
            return _COMPARE[cond.op](a, b)
    return None


class _Cloner:
    """Sequential clones (`KEY/seq`) of thunks and of the functions they reach through par:
    every par in them becomes a sequential pair of calls. Adds them to `rules`."""

    def __init__(self, rules: dict):
        self.rules = rules

    def sequential(self, p: ml.Par) -> ml.Expr | None:
        """The par's two thunks applied in order, through sequential clones; None when a thunk
        is not a closure of a known function (then the par stays as it is)."""
        try:
            return ml.Tuple((self.thunk_call(p.left, p.span), self.thunk_call(p.right, p.span)), (), p.span)
        except Unknown:
            return None

    def thunk_call(self, t, span) -> ml.Expr:
        if not isinstance(t, ml.MakeClosure):
            raise Unknown
        k = self.rules.get(t.function)
        if k is None or k.arity != 1 or len(t.free) != len(k.params) - 1:
            raise Unknown
        return ml.CallKnown(self.clone(k.key), (*t.free, ml.Lit(None, span)), span)

    def clone(self, key: str) -> str:
        """The key of `key`'s sequential clone, made (with what it reaches) when first needed."""
        new = key + SEQ
        if key.endswith(SEQ) or new in self.rules:
            return key if key.endswith(SEQ) else new
        fn = self.rules[key]
        self.rules[new] = fn  # a placeholder: recursion reaches the clone by its key

        def seq(n):
            if isinstance(n, ml.Par):
                return ml.Tuple((self.thunk_call(n.left, n.span), self.thunk_call(n.right, n.span)), (), n.span)
            if isinstance(n, ml.CallKnown) and self._has_par(n.function):
                return ml.CallKnown(self.clone(n.function), n.args, n.span)
            return n
        try:
            self.rules[new] = replace(fn, key=new, body=transform(fn.body, seq))
        except Unknown:
            del self.rules[new]
            raise
        return new

    def _has_par(self, key: str) -> bool:
        """Does `key` (a function, or a thunk calling one) lead to a par? Its clone is needed."""
        seen, todo = set(), [key]
        while todo:
            k = todo.pop()
            if k in seen or k not in self.rules:
                continue
            seen.add(k)
            for x in walk(self.rules[k].body):
                if isinstance(x, ml.Par):
                    return True
                if isinstance(x, ml.CallKnown):
                    todo.append(x.function)
        return False
