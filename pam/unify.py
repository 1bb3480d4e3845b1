"""Unification (body `=` and output arguments) and the equality test of guards (`==`).

Both walk terms with an explicit stack: long lists must not reach Python's recursion limit.
Terms may be cyclic (no occurs check), so a walk may not end by itself. Each runs as a plain loop
for its first CHECK_AFTER pairs (what every ordinary unification needs, and it pays nothing for
cycles); a longer one goes on in a careful loop that checks what is left for cycles
(pam.terms.walk_budget) and, when it is cyclic or outlasts twice its size (shared parts walked
over and over), remembers the pairs of compound terms it meets: a pair met again is skipped (it
is being made equal, or compared, already). So it ends on cyclic
terms, as in SWI-Prolog: `X = f(X), Y = f(Y), X = Y` succeeds.
"""

from __future__ import annotations

from pam.terms import CHECK_AFTER, Cons, Struct, Var, walk_budget

_PLAIN = range(CHECK_AFTER)  # the steps of the plain loops


def unify(a, b, bind) -> bool:
    """Make `a` and `b` equal, binding variables with `bind(var, value)`; False on a clash."""
    stack = [a, b]
    pop = stack.pop
    for _ in _PLAIN:
        if not stack:
            return True
        y = pop()
        x = pop()
        while type(x) is Var:
            v = x.val
            if v is None:
                break
            x = v
        while type(y) is Var:
            v = y.val
            if v is None:
                break
            y = v
        if x is y:
            continue
        tx = type(x)
        if tx is Var:
            bind(x, y)
            continue
        ty = type(y)
        if ty is Var:
            bind(y, x)
            continue
        if tx is not ty:
            return False
        if tx is Cons:
            stack.extend((x.tail, y.tail, x.head, y.head))
        elif tx is Struct:
            if x.name != y.name or len(x.args) != len(y.args):
                return False
            for i in range(len(x.args) - 1, -1, -1):
                stack.append(x.args[i])
                stack.append(y.args[i])
        elif x != y:
            return False
    return _unify_rest(stack, bind)


class _PairWatch:
    """The cycle watch of a walk over pairs of terms past its plain loop (unify, match_eq)."""

    __slots__ = ("budget", "checked", "met")

    def __init__(self):
        self.budget = 1  # compound pairs until the rest is checked for cycles
        self.checked = False
        self.met = None  # the pairs of compound terms met, once the rest is cyclic

    def met_before(self, x, y, stack: list) -> bool:
        """Whether the pair (x, y) was met already (only remembered once needed)."""
        met = self.met
        if met is None:
            self.budget -= 1
            if self.budget > 0:
                return False
            # Checked once: a rest that is cyclic, or that outlasts twice its size (parts
            # shared, or made cyclic by bindings since), is walked remembering pairs.
            self.budget = None if self.checked else walk_budget(stack + [x, y])
            self.checked = True
            if self.budget is not None:
                return False
            met = self.met = set()
        key = id(x) << 64 | id(y)
        if key in met:
            return True
        met.add(key)
        return False


def _unify_rest(stack: list, bind) -> bool:
    """`unify` past its plain loop: the same, with the cycle watch."""
    pop = stack.pop
    watch = _PairWatch()
    while stack:
        y = pop()
        x = pop()
        while type(x) is Var:
            v = x.val
            if v is None:
                break
            x = v
        while type(y) is Var:
            v = y.val
            if v is None:
                break
            y = v
        if x is y:
            continue
        tx = type(x)
        if tx is Var:
            bind(x, y)
            continue
        ty = type(y)
        if ty is Var:
            bind(y, x)
            continue
        if tx is not ty:
            return False
        if tx is not Cons and tx is not Struct:
            if x != y:
                return False
            continue
        if watch.met_before(x, y, stack):
            continue
        if tx is Cons:
            stack.extend((x.tail, y.tail, x.head, y.head))
        else:
            if x.name != y.name or len(x.args) != len(y.args):
                return False
            for i in range(len(x.args) - 1, -1, -1):
                stack.append(x.args[i])
                stack.append(y.args[i])
    return True


def match_eq(a, b):
    """`a == b` without binding anything: True, False, or the list of unbound variables that
    keep it undecided (the caller suspends on them)."""
    stack = [a, b]
    pop = stack.pop
    waits = None
    for _ in _PLAIN:
        if not stack:
            return True if waits is None else waits
        y = pop()
        x = pop()
        while type(x) is Var:
            v = x.val
            if v is None:
                break
            x = v
        while type(y) is Var:
            v = y.val
            if v is None:
                break
            y = v
        if x is y:
            continue
        tx = type(x)
        ty = type(y)
        if tx is Var or ty is Var:
            if waits is None:
                waits = []
            waits.append(x if tx is Var else y)
            continue
        if tx is not ty:
            return False
        if tx is Cons:
            stack.extend((x.tail, y.tail, x.head, y.head))
        elif tx is Struct:
            if x.name != y.name or len(x.args) != len(y.args):
                return False
            for i in range(len(x.args) - 1, -1, -1):
                stack.append(x.args[i])
                stack.append(y.args[i])
        elif x != y:
            return False
    return _match_rest(stack, waits or [])


def _match_rest(stack: list, waits: list):
    """`match_eq` past its plain loop: the same, with the cycle watch."""
    pop = stack.pop
    watch = _PairWatch()
    while stack:
        y = pop()
        x = pop()
        while type(x) is Var:
            v = x.val
            if v is None:
                break
            x = v
        while type(y) is Var:
            v = y.val
            if v is None:
                break
            y = v
        if x is y:
            continue
        tx = type(x)
        ty = type(y)
        if tx is Var or ty is Var:
            waits.append(x if tx is Var else y)
            continue
        if tx is not ty:
            return False
        if tx is not Cons and tx is not Struct:
            if x != y:
                return False
            continue
        if watch.met_before(x, y, stack):
            continue
        if tx is Cons:
            stack.extend((x.tail, y.tail, x.head, y.head))
        else:
            if x.name != y.name or len(x.args) != len(y.args):
                return False
            for i in range(len(x.args) - 1, -1, -1):
                stack.append(x.args[i])
                stack.append(y.args[i])
    if not waits:
        return True
    return list({id(v): v for v in waits}.values())  # once each (a cyclic term meets one often)
