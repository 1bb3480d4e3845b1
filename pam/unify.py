"""Unification (body `=` and output arguments) and the equality test of guards (`==`).

Both walk terms with an explicit stack: long lists must not reach Python's recursion limit.
Terms may be cyclic (no occurs check): past PAIRS_BEFORE_MEMO pairs of compound terms, both remember
the pairs they have met, and a pair met again is skipped (it is being made equal, or compared,
already), which ends the walk on cyclic terms as in SWI-Prolog: `X = f(X), Y = f(Y), X = Y`
succeeds. Below that, walks pay nothing for it.
"""

from __future__ import annotations

from pam.terms import CHECK_AFTER, Cons, Struct, Var

# Remembering pairs costs time and memory on every pair (about 70 bytes): only a unification far
# larger than any a program does in passing pays for it.
PAIRS_BEFORE_MEMO = 10 * CHECK_AFTER


def unify(a, b, bind) -> bool:
    """Make `a` and `b` equal, binding variables with `bind(var, value)`; False on a clash."""
    stack = [a, b]
    pop = stack.pop
    budget, met = PAIRS_BEFORE_MEMO, None  # `met`: pairs of compound terms met, once past the budget
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
        if tx is Cons or tx is Struct:
            if met is None:
                budget -= 1
                if not budget:
                    met = set()
            else:
                key = id(x) << 64 | id(y)
                if key in met:
                    continue
                met.add(key)
            if tx is Cons:
                stack.extend((x.tail, y.tail, x.head, y.head))
            else:
                if x.name != y.name or len(x.args) != len(y.args):
                    return False
                for i in range(len(x.args) - 1, -1, -1):
                    stack.append(x.args[i])
                    stack.append(y.args[i])
        elif x != y:
            return False
    return True


def match_eq(a, b):
    """`a == b` without binding anything: True, False, or the list of unbound variables that
    keep it undecided (the caller suspends on them)."""
    stack = [a, b]
    pop = stack.pop
    waits = None
    budget, met = PAIRS_BEFORE_MEMO, None
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
            if waits is None:
                waits = []
            waits.append(x if tx is Var else y)
            continue
        if tx is not ty:
            return False
        if tx is Cons or tx is Struct:
            if met is None:
                budget -= 1
                if not budget:
                    met = set()
            else:
                key = id(x) << 64 | id(y)
                if key in met:
                    continue
                met.add(key)
            if tx is Cons:
                stack.extend((x.tail, y.tail, x.head, y.head))
            else:
                if x.name != y.name or len(x.args) != len(y.args):
                    return False
                for i in range(len(x.args) - 1, -1, -1):
                    stack.append(x.args[i])
                    stack.append(y.args[i])
        elif x != y:
            return False
    if waits is None:
        return True
    return list({id(v): v for v in waits}.values())  # once each (a cyclic term meets one often)
