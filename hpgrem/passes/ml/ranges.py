"""ml-ranges: overflow checks only where the range of an int operation's result is not known.

An interval analysis over the module's ML functions. Literals are exact; the result of a
checked operation lies within ML's int range (INT_MIN..INT_MAX: it raised Overflow otherwise);
a comparison of locals (`n < 2`, `y < x`, `x = 5`, and such tests joined by `andalso`) narrows
their intervals in the branch it guards (a branch it rules out is never taken: it returns
nothing); a `case` on an int local fixes it in each arm, and its default leaves out the arms'
keys at the interval's ends; `size`, `length`, `ord` and `mod` by a positive constant have
known ranges. So in `if n < 2 then n else fib (n - 1) + fib (n - 2)` neither subtraction can
overflow (n >= 2), and `x - 1` can only overflow downwards.

Across calls: a parameter's interval is the join of the arguments of every call of its function
(`CallKnown`, free variables included), each computed in its caller, under the caller's guards;
a known call's value is its callee's result, the join of what the body can return (a `raise`
returns nothing, a handler's result joins in). The entry's parameters, and the arguments of a
function made into a closure, are unknown (FULL); a closure's free variables join the values
of the closures' `free` and those of its known calls. A function no call or closure reaches
never runs: its parameters have no value (EMPTY), and an operation on them keeps both checks.

The intervals are a fixpoint over the module, from EMPTY up: a function is walked again when
its parameters or its callees' results grew, callees first (their results settle before their
callers are walked again). A bound that moved EXACT_MOVES times jumps from then on to the
nearest constant beyond it (the module's int literals, one either side of them, 0), and after
CONSTANT_MOVES more to INT_MIN or INT_MAX, so few walks reach the fixpoint. Widening to INT_MIN
or INT_MAX is sound: a value that exists is a literal or the result of a checked operation, so
it lies in ML's range (the exact result of an operation, `_exact`, which its check decides on,
may not). So `fib 25` gives n in [0, 25] (its lower bound moves from 25 down by two, eight
times, then to the constants 3, 1, 0) and results in [0, INT_MAX] (1, 2, 4, ..., 128, then no
constant above): `fib (n - 1) + fib (n - 2)` can only overflow upwards.

The notes come from the fixpoint's last walk of each function; should a walk's parameters or
callees' results not be the fixpoint's, or what it passes or returns lie outside it (a bug),
every note is made from each body alone (parameters and results FULL) instead.

The notes rest on the calls the module makes: a later pass may rewrite a body (the pass
manager then drops these notes: each rule's notes carry its fingerprint, hpgrem/passes), but
must not call a function with values the program never passed it.

Annotation, per function with int arithmetic: `ml-ranges.overflow` = (fingerprint of the body, one entry
per `int.+ int.- int.* int.~ int.abs` in walk order: "" no check, "lo" below INT_MIN only, "hi"
above INT_MAX only, "lohi" both). pam/ml/codegen.py reads it, and checks both ways wherever
the body no longer has that fingerprint (a later pass rewrote it) or the entry is unknown.

And `ml-ranges.depth` = (fingerprint, argument position, L) when every call the function makes of itself
passes that argument decreased by at least one (`n - 1`, `n - 2`) and only where it is at
least L (`fib`: L = 2): a call with n then nests at most n - L + 2 frames deep, so the code
generator may run a call with a small enough n in a copy without the depth test. And
`ml-ranges.once` = fingerprint when that copy may leave its sums of non-negative ints ("hi0")
unchecked and its caller check the result once (`checked_once`).
"""

from __future__ import annotations

import heapq
import sys
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from hpgrem import ir

from hpgrem.ir import ml
from hpgrem.ir.call_graph import components
from hpgrem.ir.ml import INT_ARITHMETIC, fingerprint
from hpgrem.passes import annotated

FULL = (ml.INT_MIN, ml.INT_MAX)
EMPTY = (ml.INT_MAX + 1, ml.INT_MIN - 1)  # no value: what a raise returns, a branch never taken
EXACT_MOVES = 8  # a bound's moves taken as they are in the fixpoint; then to the next constant
CONSTANT_MOVES = 8  # moves to the next constant; then to INT_MIN or INT_MAX
_FLIP = {"int.<": "int.>", "int.>": "int.<", "int.<=": "int.>=", "int.>=": "int.<="}
_NEGATE = {"int.<": "int.>=", "int.>=": "int.<", "int.>": "int.<=", "int.<=": "int.>"}


@dataclass(frozen=True)
class MLRanges:
    name: str = "ml-ranges"
    dialects: tuple[str, ...] = ("ml",)
    records: tuple[str, ...] = ("overflow", "depth", "once")

    def apply(self, module: ir.Module) -> ir.Module:
        notes = {}
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, 20000))  # bodies nest as deep as the front end allows
        try:
            walks = Ranges(module).final_walks() or Ranges(module, calls=False).final_walks()
        finally:
            sys.setrecursionlimit(old)
        for key, fn in module.rules.items():
            intervals = walks[key]
            note = {}
            if intervals.checks:
                note["overflow"] = (fingerprint(fn.body), *intervals.checks)
            depth = intervals.depth_bound()
            if depth is not None:
                note["depth"] = (fingerprint(fn.body), *depth)
                if checked_once(fn, key, intervals.checks):
                    note["once"] = fingerprint(fn.body)
            if note:
                notes[key] = note
        return annotated(module, self, notes)


# What a body whose result is checked once, where it leaves (`checked_once`), may hold besides
# int arithmetic, literals, locals, `if`, `let`, a `case` on an int and calls of itself.
_CHECKED_ONCE_OPS = frozenset({"int.<", "int.>", "int.<=", "int.>=", "=.simple", "<>.simple", "not"})


def checked_once(fn: ml.Function, key: str, checks: list[str]) -> bool:
    """Whether a copy of `fn` that its depth bound lets run without depth test may skip the
    checks of its sums of two non-negative ints ("hi0") and have its result checked once by its
    caller: every such sum and every self call's result flows only into such sums or the
    function's result, and the body does nothing else but compute (int tests, arithmetic,
    literals, locals, `if`, `let`, a `case` on an int, calls of itself). Then a sum that
    overflowed leaves a result at least as large, which the caller's check finds; the recursion
    in between, bounded by its decreasing argument, ends, and nothing it does can be seen or
    raise anything else. `checks`: the body's checks in walk order (one per place)."""
    if "hi0" not in checks:
        return False
    check_of: dict[int, str] = {}
    for x, c in zip([x for x in ir.walk_tree(fn.body) if isinstance(x, ml.Prim) and x.op in INT_ARITHMETIC], checks):
        check_of[id(x)] = c if check_of.get(id(x), c) == c else "lohi"  # a node met twice: both places

    done: dict[tuple[int, bool], bool] = {}  # a node reached by several paths: once per `flows`

    def ok(e, flows: bool) -> bool:
        key = (id(e), flows)
        r = done.get(key)
        if r is None:
            r = done[key] = _ok(e, flows)
        return r

    def _ok(e, flows: bool) -> bool:  # `flows`: e's value goes only into such a sum or the result
        if isinstance(e, (ml.Lit, ml.Local)):
            return True
        if isinstance(e, ml.If):
            return ok(e.cond, False) and ok(e.then, flows) and ok(e.else_, flows)
        if isinstance(e, ml.Let):
            return ok(e.value, False) and ok(e.body, flows)
        if isinstance(e, ml.Switch):
            return (e.test == ml.SwitchTest.INT and ok(e.subject, False)
                    and all(type(k) is int and ok(body, flows) for k, body in e.cases)
                    and (e.default is None or ok(e.default, flows)))
        if isinstance(e, ml.CallKnown):
            return flows and e.function == key and all(ok(a, False) for a in e.args)
        if isinstance(e, ml.Prim) and e.op in INT_ARITHMETIC:
            if check_of.get(id(e)) == "hi0":
                return flows and all(ok(a, True) for a in e.args)
            return all(ok(a, False) for a in e.args)
        if isinstance(e, ml.Prim) and e.op in _CHECKED_ONCE_OPS:
            return all(ok(a, False) for a in e.args)
        return False

    return "hi0" in check_of.values() and ok(fn.body, True)


def check_needed(lo: int, hi: int) -> str:
    """The checks an exact result in [lo, hi] needs."""
    return ("lo" if lo < ml.INT_MIN else "") + ("hi" if hi > ml.INT_MAX else "")


class Ranges:
    """The module's fixpoint: each function's parameter intervals (`params`) and the interval of
    its results (`results`). With `calls=False`, all of them FULL: the analysis of each body alone."""

    def __init__(self, module: ir.Module, calls: bool = True):
        self.functions = module.rules
        self.callers: dict[str, set[str]] = {key: set() for key in module.rules}
        self.params: dict[str, list[tuple[int, int]]] = {}
        self.results: dict[str, tuple[int, int]] = {}
        self.known: dict[str, int] = {}  # parameters before this position come from the calls
        self.moves: dict[tuple, int] = {}
        self.walks: dict[str, _Intervals] = {}  # each function's last walk
        self.shared: dict[str, set[int]] = {}  # by function, its body's nodes used in several places
        if not calls:
            for key, fn in module.rules.items():
                self.params[key], self.results[key], self.known[key] = [FULL] * len(fn.params), FULL, 0
            return
        closed: set[str] = set()
        unknown: set[str] = set() if module.entry is None else {module.entry.target}
        literals = {0}
        edges: dict[str, list[str]] = {}  # the functions each calls or makes into a closure
        for key, fn in module.rules.items():
            out = edges[key] = []
            for x in ir.walk(fn.body):
                if isinstance(x, ml.CallKnown):
                    out.append(x.function)
                    self.callers.setdefault(x.function, set()).add(key)
                    callee = module.rules.get(x.function)
                    if callee is None or len(x.args) != len(callee.params):
                        unknown.add(x.function)  # a module the verifier would refuse: assume nothing
                elif isinstance(x, ml.MakeClosure):
                    out.append(x.function)
                    closed.add(x.function)
                    callee = module.rules.get(x.function)
                    if callee is None or len(x.free) != len(callee.params) - callee.arity:
                        unknown.add(x.function)
                elif isinstance(x, ml.Lit) and type(x.value) is int:
                    literals.add(x.value)
                elif isinstance(x, ml.Switch) and x.test == ml.SwitchTest.INT:
                    literals.update(k for k, _ in x.cases if type(k) is int)
        self.constants = sorted({max(ml.INT_MIN, min(ml.INT_MAX, c + d)) for c in literals for d in (-1, 0, 1)})
        for key, fn in module.rules.items():
            if key in unknown:
                known = 0  # values from outside the module's calls (the entry's)
            elif key in closed:
                known = len(fn.params) - fn.arity  # a closure's free variables
            else:
                known = len(fn.params)
            self.known[key] = known
            self.params[key] = [EMPTY] * known + [FULL] * (len(fn.params) - known)
            self.results[key] = EMPTY
        self._solve({key: list(dict.fromkeys(out)) for key, out in edges.items()})

    def _solve(self, edges: dict[str, list[str]]) -> None:
        """Walk functions until no interval grows: one whose parameters grew, and the callers
        of one whose result grew, are walked again; callees before callers (the call graph's
        components, the deepest first: a result settles before its callers are walked again),
        and none whose parameters have no value yet (no call reached it so far: it would pass
        nothing and return nothing)."""
        rank = {key: i for i, key in enumerate(k for c in reversed(components(edges)) for k in c)}
        queue = [(-i, key) for key, i in rank.items()]
        heapq.heapify(queue)
        queued = set(rank)
        while queue:
            _, key = heapq.heappop(queue)
            queued.discard(key)
            if self.dead(key):
                continue
            walk = self.walks[key] = self.walk(key)
            again = [callee for callee, values in walk.passed.items() if self._grow_params(callee, values)]
            result = self._grown((key,), self.results[key], walk.result)
            if result != self.results[key]:
                self.results[key] = result
                again.extend(self.callers[key])
            for k in again:
                if k not in queued:
                    queued.add(k)
                    heapq.heappush(queue, (-rank[k], k))

    def dead(self, key: str) -> bool:
        """No call so far gave a value to one of its parameters: it has not run."""
        return any(_empty(r) for r in self.params[key])

    def walk(self, key: str) -> _Intervals:
        fn = self.functions[key]
        walk = _Intervals(fn, self, tuple(self.params[key]))
        walk.result = walk.value(fn.body, {p: r for p, r in zip(fn.params, walk.params) if r != FULL})
        return walk

    def final_walks(self) -> dict[str, _Intervals] | None:
        """Each function's walk with the fixpoint's intervals: the last one the fixpoint made
        (a function not called so far is walked now, for its checks). None if a walk's
        parameters or callees' results are not the fixpoint's, or what it passed or returned
        lies outside them: then the fixpoint is wrong, and no note may rest on it."""
        walks = {}
        for key in self.functions:
            walk = walks[key] = self.walks.get(key) or self.walk(key)
            if self.dead(key):
                continue  # never runs: what it would pass or return does not matter
            if walk.params != tuple(self.params[key]) or not _within(walk.result, self.results[key]):
                return None
            if any(self.results.get(callee, FULL) != r for callee, r in walk.read.items()):
                return None
            for callee, values in walk.passed.items():
                if not all(_within(v, r) for v, r in zip(values, self.params[callee])):
                    return None
        return walks

    def _grow_params(self, key: str, values: list[tuple[int, int]]) -> bool:
        params = self.params[key]
        grew = False
        for i, v in enumerate(values):
            r = self._grown((key, i), params[i], v)
            if r != params[i]:
                params[i] = r
                grew = True
        return grew

    def _grown(self, slot: tuple, old: tuple[int, int], new: tuple[int, int]) -> tuple[int, int]:
        """`old` joined with `new`, a bound that keeps moving widened."""
        if _empty(new):
            return old
        lo, hi = max(new[0], ml.INT_MIN), min(new[1], ml.INT_MAX)
        if _empty(old):
            return self._moved((*slot, 0), lo, -1), self._moved((*slot, 1), hi, 1)
        lo = self._moved((*slot, 0), lo, -1) if lo < old[0] else old[0]
        hi = self._moved((*slot, 1), hi, 1) if hi > old[1] else old[1]
        return lo, hi

    def _moved(self, bound: tuple, value: int, direction: int) -> int:
        n = self.moves[bound] = self.moves.get(bound, 0) + 1
        if n <= EXACT_MOVES:
            return value
        if n <= EXACT_MOVES + CONSTANT_MOVES:
            c = self.constants
            if direction < 0:
                i = bisect_right(c, value) - 1
                return c[i] if i >= 0 else ml.INT_MIN
            i = bisect_left(c, value)
            return c[i] if i < len(c) else ml.INT_MAX
        return ml.INT_MIN if direction < 0 else ml.INT_MAX


class _Intervals:
    """Walks a body in `walk` order, appending each int operation's checks to `checks`, and
    noting, per argument position, the lowest value the argument can have where the function
    calls itself with it decreased (None once some self call does not decrease it). `passed`:
    per function called (or made into a closure), the join of the values passed to its
    parameters that come from calls; `read`: the callees' results used; `result`: the join of
    what the body can return."""

    def __init__(self, fn: ml.Function, ranges: Ranges, params: tuple):
        self.fn = fn
        self.ranges = ranges
        self.params = params  # the intervals of fn's parameters it was walked with
        self.checks: list[str] = []
        self.passed: dict[str, list[tuple[int, int]]] = {}
        self.read: dict[str, tuple[int, int]] = {}  # the callees' results it used
        self.result = FULL
        first = len(fn.params) - fn.arity
        self.lowest: dict[int, int | None] = {pos: ml.INT_MAX for pos in range(first, len(fn.params))}
        self.self_calls = 0
        # A shared node (the IR is a graph) met again in the same env has the value and the
        # checks it had at its first place: (env, value, checks) by (node id, env id), so a
        # walk visits each distinct node once per env, not once per path. What else a value
        # records (`passes`, `read`, `self_call`) gives the same again.
        shared = ranges.shared.get(fn.key)
        if shared is None:
            shared = ranges.shared[fn.key] = {i for i, c in ir.use_counts((fn.body,)).items() if c > 1}
        self.shared = shared
        self.memo: dict[tuple[int, int], tuple] = {}

    def depth_bound(self) -> tuple[int, int] | None:
        """(argument position, L) when every self call passes that argument decreased by at
        least one, and only where it is at least L: a call with n then nests at most n - L + 2
        frames of the function deep."""
        if not self.self_calls:
            return None
        for pos, low in self.lowest.items():
            if low is not None and low > ml.INT_MIN:
                return pos, low
        return None

    def self_call(self, call: ml.CallKnown, env: dict) -> None:
        self.self_calls += 1
        for pos, low in self.lowest.items():
            if low is None:
                continue
            p, arg = self.fn.params[pos], call.args[pos]
            step = None
            if isinstance(arg, ml.Prim) and arg.op in ("int.-", "int.+") and len(arg.args) == 2:
                x, c = arg.args
                if isinstance(x, ml.Local) and x.name == p and isinstance(c, ml.Lit) and type(c.value) is int:
                    step = c.value if arg.op == "int.-" else -c.value
            # a call never made (p has no value there) says nothing: its bound is kept in range
            here = min(env.get(p, FULL)[0], ml.INT_MAX)
            self.lowest[pos] = min(low, here) if step is not None and step >= 1 else None

    def passes(self, key: str, values: list[tuple[int, int]]) -> None:
        """Values given to `key`'s leading parameters (a call's arguments, a closure's free values)."""
        known = self.ranges.known.get(key, 0)
        if not known:
            return
        got = self.passed.get(key)
        if got is None:
            self.passed[key] = values[:known]
        else:
            for i in range(known):
                got[i] = _join(got[i], values[i])

    def _shared_value(self, e, env: dict) -> tuple[int, int]:
        key = (id(e), id(env))
        hit = self.memo.get(key)
        if hit is not None:
            self.checks.extend(hit[2])
            return hit[1]
        start = len(self.checks)
        r = self.value(e, env, True)
        self.memo[key] = (env, r, tuple(self.checks[start:]))
        return r

    def value(self, e, env: dict[str, tuple[int, int]], again: bool = False) -> tuple[int, int]:
        """The interval of `e`'s value when it is an int (FULL when unknown, EMPTY when it has
        none); records the checks of the operations inside it, in walk order (parents first,
        left to right), and the values passed to calls."""
        if not again and id(e) in self.shared:
            return self._shared_value(e, env)
        kind = type(e)  # the node kinds are final classes; the commonest first
        if kind is ml.Local:
            return env.get(e.name, FULL)
        if kind is ml.Part:
            return EMPTY if _empty(self.value(e.value, env)) else FULL
        if kind is ml.Let:
            v = self.value(e.value, env)
            r = self.value(e.body, {**env, e.name: v} if v != FULL else env)
            return EMPTY if _empty(v) else r
        if kind is ml.Prim:
            if e.op in INT_ARITHMETIC:
                slot = len(self.checks)
                self.checks.append("lohi")  # its place in walk order: the parent before its arguments
                args = self.values(e.args, env)
                if args is None:
                    return EMPTY  # never computed: its checks stay
                lo, hi = _exact(e.op, args)
                check = check_needed(lo, hi)
                if check == "hi" and e.op == "int.+" and args[0][0] >= 0 and args[1][0] >= 0:
                    check = "hi0"  # a sum of two non-negative ints: at least each of them
                self.checks[slot] = check
                lo, hi = max(lo, ml.INT_MIN), min(hi, ml.INT_MAX)
                return (lo, hi) if lo <= hi else EMPTY  # it always overflows: no value
            args = self.values(e.args, env)
            return EMPTY if args is None else _known_range(e, args)
        if kind is ml.Lit:
            return (e.value, e.value) if type(e.value) is int else FULL
        if kind is ml.CallKnown:
            if e.function == self.fn.key:
                self.self_call(e, env)
            args = self.values(e.args, env)
            if args is None:
                return EMPTY  # the call is never made
            self.passes(e.function, args)
            r = self.read[e.function] = self.ranges.results.get(e.function, FULL)
            return r
        if kind is ml.MakeClosure:
            free = self.values(e.free, env)
            if free is None:
                return EMPTY
            self.passes(e.function, free)
            return FULL
        if kind is ml.If:
            c = self.value(e.cond, env)
            a = self._branch(e.then, _narrow(e.cond, True, env), env)
            b = self._branch(e.else_, _narrow(e.cond, False, env), env)
            return EMPTY if _empty(c) else _join(a, b)
        if kind is ml.Switch:
            return self._switch(e, env)
        if kind is ml.Raise:
            self.value(e.exn, env)
            return EMPTY
        if kind is ml.Handle:
            return _join(self.value(e.body, env), self.value(e.handler, env))
        if kind is ml.Sequence:
            rs = self.values(e.exprs, env)
            return EMPTY if rs is None else rs[-1] if rs else FULL
        # anything else (a tuple, a constructor, apply, a global...): no value known, or none
        # when one of its parts has none
        return FULL if self.values(e.children(), env) is not None else EMPTY

    def values(self, es, env: dict) -> list[tuple[int, int]] | None:
        """The values of `es` in order; None when one of them has none (EMPTY)."""
        out = [self.value(x, env) for x in es]
        return None if any(_empty(r) for r in out) else out

    def _branch(self, e, narrowed: dict | None, env: dict) -> tuple[int, int]:
        """A branch's value; a branch never taken (`narrowed` None) has none, its checks are
        those of the enclosing env."""
        if narrowed is None:
            self.value(e, env)
            return EMPTY
        return self.value(e, narrowed)

    def _switch(self, e: ml.Switch, env: dict) -> tuple[int, int]:
        s = self.value(e.subject, env)
        out = EMPTY
        subject = e.subject.name if e.test == ml.SwitchTest.INT and isinstance(e.subject, ml.Local) else None
        here = env.get(subject, FULL)
        for key, body in e.cases:
            if not isinstance(key, (int, str)):
                self.value(key, env)
            inner = env
            if subject is not None and type(key) is int:
                fixed = _meet(here, (key, key))
                inner = None if _empty(fixed) else {**env, subject: fixed}
            out = _join(out, self._branch(body, inner, env))
        if e.default is not None:
            inner = env
            if subject is not None:  # the arms' keys at the ends of the subject's interval are out
                keys = {k for k, _ in e.cases if type(k) is int}
                lo, hi = here
                while lo <= hi and lo in keys:
                    lo += 1
                while lo <= hi and hi in keys:
                    hi -= 1
                inner = None if lo > hi else env if (lo, hi) == here else {**env, subject: (lo, hi)}
            out = _join(out, self._branch(e.default, inner, env))
        if not e.cases and e.default is None:
            return FULL
        return EMPTY if _empty(s) else out


def _empty(r: tuple[int, int]) -> bool:
    return r[0] > r[1]


def _join(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    if _empty(a):
        return b
    if _empty(b):
        return a
    return min(a[0], b[0]), max(a[1], b[1])


def _meet(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if lo <= hi else EMPTY


def _within(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return _empty(a) or (not _empty(b) and b[0] <= a[0] and a[1] <= b[1])


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


def _known_range(e: ml.Prim, args: list[tuple[int, int]]) -> tuple[int, int]:
    if e.op in ("size", "String.size", "length", "List.length"):
        return 0, ml.INT_MAX
    if e.op in ("ord", "Char.ord"):
        return 0, 255
    if e.op == "mod" and args[1][0] > 0:  # floor semantics: 0 <= r < divisor
        return 0, args[1][1] - 1
    return FULL


def _narrow(cond, truth: bool, env: dict | None) -> dict | None:
    """`env` knowing that `cond` evaluated to `truth`; None where it cannot have (a local's
    interval left empty: the branch is never taken)."""
    if env is None:
        return None
    if isinstance(cond, ml.Prim) and cond.op == "not":
        return _narrow(cond.args[0], not truth, env)
    if isinstance(cond, ml.If) and truth and _is_false(cond.else_):  # `a andalso b` held
        return _narrow(cond.then, True, _narrow(cond.cond, True, env))
    if isinstance(cond, ml.If) and not truth and _is_true(cond.then):  # `a orelse b` failed
        return _narrow(cond.else_, False, _narrow(cond.cond, False, env))
    if not (isinstance(cond, ml.Prim) and len(cond.args) == 2):
        return env
    op = cond.op
    a, b = cond.args
    if op in ("=.simple", "<>.simple"):
        equal = truth == (op == "=.simple")
        for x, y in ((a, b), (b, a)):
            if isinstance(x, ml.Local) and isinstance(y, ml.Lit) and type(y.value) is int:
                k, r = y.value, env.get(x.name, FULL)
                if equal:
                    r = _meet(r, (k, k))
                else:  # not k: an end of the interval at k moves in
                    r = (r[0] + (r[0] == k), r[1] - (r[1] == k))
                return None if _empty(r) else {**env, x.name: r}
        return env
    if op not in _FLIP:
        return env
    if not truth:
        op = _NEGATE[op]
    if op in ("int.>", "int.>="):  # a > b is b < a
        op, a, b = _FLIP[op], b, a
    strict = 1 if op == "int.<" else 0
    ra, rb = _range_of(a, env), _range_of(b, env)
    if ra is None or rb is None or _empty(ra) or _empty(rb):
        return env
    out = dict(env)
    if isinstance(a, ml.Local):  # a <= b.hi - strict
        out[a.name] = (ra[0], min(ra[1], rb[1] - strict))
    if isinstance(b, ml.Local):  # b >= a.lo + strict
        out[b.name] = (max(rb[0], ra[0] + strict), rb[1])
    if ra[0] > rb[1] - strict:  # no a in ra below every b in rb
        return None
    return out


def _range_of(e, env: dict) -> tuple[int, int] | None:
    if isinstance(e, ml.Local):
        return env.get(e.name, FULL)
    if isinstance(e, ml.Lit) and type(e.value) is int:
        return e.value, e.value
    return None


def _is_false(e) -> bool:
    return isinstance(e, ml.Construct) and e.datatype == "bool" and e.tag == 0


def _is_true(e) -> bool:
    return isinstance(e, ml.Construct) and e.datatype == "bool" and e.tag == 1
