"""ml-ranges: overflow checks only where the range of an int operation's result is not known.

An interval analysis over each ML function body. Literals are exact; the result of a checked
operation lies within ML's int range (INT_MIN..INT_MAX: it raised Overflow otherwise); a
comparison of locals (`n < 2`, `y < x`, `x = 5`, and such tests joined by `andalso`) narrows
their intervals in the branch it guards; a `case` on an int local fixes it in each arm; `size`,
`length`, `ord` and `mod` by a positive constant have known ranges. Parameters and the results
of calls are unknown. So in `if n < 2 then n else fib (n - 1) + fib (n - 2)` neither
subtraction can overflow (n >= 2), and `x - 1` can only overflow downwards.

Annotation, per function with int arithmetic: `ml-ranges.overflow` = (fingerprint of the body, one entry
per `int.+ int.- int.* int.~ int.abs` in walk order: "" no check, "lo" below INT_MIN only, "hi"
above INT_MAX only, "lohi" both). pam/ml/codegen.py reads it, and checks both ways wherever
the body no longer has that fingerprint (a later pass rewrote it) or the entry is unknown.

And `ml-ranges.depth` = (fingerprint, argument position, L) when every call the function makes of itself
passes that argument decreased by at least one (`n - 1`, `n - 2`) and only where it is at
least L (`fib`: L = 2): a call with n then nests at most n - L + 2 frames deep, so the code
generator may run a call with a small enough n in a copy without the depth test.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from hpgrem import ir
from hpgrem.ir.ml import INT_ARITHMETIC, fingerprint
from hpgrem.passes import annotated

FULL = (ir.INT_MIN, ir.INT_MAX)
_FLIP = {"int.<": "int.>", "int.>": "int.<", "int.<=": "int.>=", "int.>=": "int.<="}
_NEGATE = {"int.<": "int.>=", "int.>=": "int.<", "int.>": "int.<=", "int.<=": "int.>"}


@dataclass(frozen=True)
class MLRanges:
    name: str = "ml-ranges"
    dialects: tuple[str, ...] = ("ml",)
    records: tuple[str, ...] = ("overflow", "depth")

    def apply(self, module: ir.Module) -> ir.Module:
        notes = {}
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, 20000))  # bodies nest as deep as the front end allows
        try:
            for key, fn in module.rules.items():
                intervals = _Intervals(fn)
                intervals.value(fn.body, {})
                note = {}
                if intervals.checks:
                    note["overflow"] = (fingerprint(fn.body), *intervals.checks)
                depth = intervals.depth_bound()
                if depth is not None:
                    note["depth"] = (fingerprint(fn.body), *depth)
                if note:
                    notes[key] = note
        finally:
            sys.setrecursionlimit(old)
        return annotated(module, self, notes)


def check_needed(lo: int, hi: int) -> str:
    """The checks an exact result in [lo, hi] needs."""
    return ("lo" if lo < ir.INT_MIN else "") + ("hi" if hi > ir.INT_MAX else "")


class _Intervals:
    """Walks a body in `walk` order, appending each int operation's checks to `checks`, and
    noting, per argument position, the lowest value the argument can have where the function
    calls itself with it decreased (None once some self call does not decrease it)."""

    def __init__(self, fn: ir.Function):
        self.fn = fn
        self.checks: list[str] = []
        first = len(fn.params) - fn.arity
        self.lowest: dict[int, int | None] = {pos: ir.INT_MAX for pos in range(first, len(fn.params))}
        self.self_calls = 0

    def depth_bound(self) -> tuple[int, int] | None:
        """(argument position, L) when every self call passes that argument decreased by at
        least one, and only where it is at least L: a call with n then nests at most n - L + 2
        frames of the function deep."""
        if not self.self_calls:
            return None
        for pos, low in self.lowest.items():
            if low is not None and low > ir.INT_MIN:
                return pos, low
        return None

    def self_call(self, call: ir.CallKnown, env: dict) -> None:
        self.self_calls += 1
        for pos, low in self.lowest.items():
            if low is None:
                continue
            p, arg = self.fn.params[pos], call.args[pos]
            step = None
            if isinstance(arg, ir.Prim) and arg.op in ("int.-", "int.+") and len(arg.args) == 2:
                x, c = arg.args
                if isinstance(x, ir.Local) and x.name == p and isinstance(c, ir.Lit) and type(c.value) is int:
                    step = c.value if arg.op == "int.-" else -c.value
            self.lowest[pos] = min(low, env.get(p, FULL)[0]) if step is not None and step >= 1 else None

    def value(self, e, env: dict[str, tuple[int, int]]) -> tuple[int, int]:
        """The interval of `e`'s value when it is an int (FULL when unknown); records the
        checks of the operations inside it, in walk order (parents first, left to right)."""
        if isinstance(e, ir.Lit):
            return (e.value, e.value) if type(e.value) is int else FULL
        if isinstance(e, ir.Local):
            return env.get(e.name, FULL)
        if isinstance(e, ir.Prim) and e.op in INT_ARITHMETIC:
            slot = len(self.checks)
            self.checks.append("lohi")  # its place in walk order: the parent before its arguments
            args = [self.value(a, env) for a in e.args]
            lo, hi = _exact(e.op, args)
            self.checks[slot] = check_needed(lo, hi)
            return max(lo, ir.INT_MIN), min(hi, ir.INT_MAX)
        if isinstance(e, ir.Prim):
            args = [self.value(a, env) for a in e.args]
            return _known_range(e, args)
        if isinstance(e, ir.CallKnown) and e.function == self.fn.key:
            self.self_call(e, env)
        if isinstance(e, ir.Let):
            v = self.value(e.value, env)
            return self.value(e.body, {**env, e.name: v} if v != FULL else env)
        if isinstance(e, ir.If):
            self.value(e.cond, env)
            a = self.value(e.then, _narrow(e.cond, True, env))
            b = self.value(e.else_, _narrow(e.cond, False, env))
            return min(a[0], b[0]), max(a[1], b[1])
        if isinstance(e, ir.Switch):
            self.value(e.subject, env)
            out = None
            for key, body in e.cases:
                if not isinstance(key, (int, str)):
                    self.value(key, env)
                inner = env
                if e.test == ir.SwitchTest.INT and isinstance(e.subject, ir.Local) and type(key) is int:
                    inner = {**env, e.subject.name: (key, key)}
                r = self.value(body, inner)
                out = r if out is None else (min(out[0], r[0]), max(out[1], r[1]))
            if e.default is not None:
                r = self.value(e.default, env)
                out = r if out is None else (min(out[0], r[0]), max(out[1], r[1]))
            return out or FULL
        if isinstance(e, ir.Sequence):
            r = FULL
            for x in e.exprs:
                r = self.value(x, env)
            return r
        for child in e.children():
            self.value(child, env)
        return FULL


def _exact(op: str, args: list[tuple[int, int]]) -> tuple[int, int]:
    """The exact (unbounded) interval of an int operation's result."""
    if op == "int.+":
        (a, b), (c, d) = args
        return a + c, b + d
    if op == "int.-":
        (a, b), (c, d) = args
        return a - d, b - c
    if op == "int.*":
        (a, b), (c, d) = args
        products = (a * c, a * d, b * c, b * d)
        return min(products), max(products)
    (a, b), = args
    if op == "int.~":
        return -b, -a
    # int.abs
    if a >= 0:
        return a, b
    if b <= 0:
        return -b, -a
    return 0, max(-a, b)


def _known_range(e: ir.Prim, args: list[tuple[int, int]]) -> tuple[int, int]:
    if e.op in ("size", "String.size", "length", "List.length"):
        return 0, ir.INT_MAX
    if e.op in ("ord", "Char.ord"):
        return 0, 255
    if e.op == "mod" and args[1][0] > 0:  # floor semantics: 0 <= r < divisor
        return 0, args[1][1] - 1
    return FULL


def _narrow(cond, truth: bool, env: dict) -> dict:
    """`env` knowing that `cond` evaluated to `truth`."""
    if isinstance(cond, ir.Prim) and cond.op == "not":
        return _narrow(cond.args[0], not truth, env)
    if isinstance(cond, ir.If) and truth and _is_false(cond.else_):  # `a andalso b` held
        return _narrow(cond.then, True, _narrow(cond.cond, True, env))
    if isinstance(cond, ir.If) and not truth and _is_true(cond.then):  # `a orelse b` failed
        return _narrow(cond.else_, False, _narrow(cond.cond, False, env))
    if not (isinstance(cond, ir.Prim) and len(cond.args) == 2):
        return env
    op = cond.op
    a, b = cond.args
    if op == "=.simple" and truth:
        for x, y in ((a, b), (b, a)):
            if isinstance(x, ir.Local) and isinstance(y, ir.Lit) and type(y.value) is int:
                return {**env, x.name: (y.value, y.value)}
        return env
    if op not in _FLIP:
        return env
    if not truth:
        op = _NEGATE[op]
    if op in ("int.>", "int.>="):  # a > b is b < a
        op, a, b = _FLIP[op], b, a
    strict = 1 if op == "int.<" else 0
    ra, rb = _range_of(a, env), _range_of(b, env)
    if ra is None or rb is None:
        return env
    out = dict(env)
    if isinstance(a, ir.Local):  # a <= b.hi - strict
        out[a.name] = (ra[0], min(ra[1], rb[1] - strict))
    if isinstance(b, ir.Local):  # b >= a.lo + strict
        out[b.name] = (max(rb[0], ra[0] + strict), rb[1])
    return out


def _range_of(e, env: dict) -> tuple[int, int] | None:
    if isinstance(e, ir.Local):
        return env.get(e.name, FULL)
    if isinstance(e, ir.Lit) and type(e.value) is int:
        return e.value, e.value
    return None


def _is_false(e) -> bool:
    return isinstance(e, ir.Construct) and e.datatype == "bool" and e.tag == 0


def _is_true(e) -> bool:
    return isinstance(e, ir.Construct) and e.datatype == "bool" and e.tag == 1
