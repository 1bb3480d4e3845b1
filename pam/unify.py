"""Unification (body `=` and output arguments) and the equality test of guards (`==`).

Both walk terms with an explicit stack: long lists must not reach Python's recursion limit.
"""

from __future__ import annotations

from pam.terms import Cons, Struct, Var


def unify(a, b, bind) -> bool:
    """Make `a` and `b` equal, binding variables with `bind(var, value)`; False on a clash."""
    stack = [a, b]
    pop = stack.pop
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
    return True


def match_eq(a, b):
    """`a == b` without binding anything: True, False, or the list of unbound variables that
    keep it undecided (the caller suspends on them)."""
    stack = [a, b]
    pop = stack.pop
    waits = None
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
    return True if waits is None else waits
