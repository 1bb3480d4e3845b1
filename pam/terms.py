"""Run-time nodes of the graph: values and write-once variables.

Value nodes: atoms are interned Python `str`, numbers are `int` and `float`, structures are
`Struct`, list cells are `Cons` (the functor `'[|]'/2`). A `Var` is a write-once cell: `val` is
None until bound; `susp` lists the tasks suspended on it. A bound variable may point to another
variable; `deref` follows such chains.
"""

from __future__ import annotations

import sys

NIL = sys.intern("[]")
CONS_NAME = sys.intern("[|]")


def mkatom(name: str) -> str:
    """Every atom goes through here: rules compare atoms by identity."""
    return sys.intern(name)


class Var:
    """A write-once variable (a logic variable, a future result)."""

    __slots__ = ("val", "susp")

    def __init__(self) -> None:
        self.val = None
        self.susp = None


class Struct:
    """A compound term `name(args...)` other than a list cell."""

    __slots__ = ("name", "args")

    def __init__(self, name: str, args: tuple) -> None:
        self.name = name
        self.args = args

    def __repr__(self) -> str:
        return f"Struct({self.name!r}, {self.args!r})"


class Cons:
    """A list cell `[head|tail]`."""

    __slots__ = ("head", "tail")

    def __init__(self, head, tail) -> None:
        self.head = head
        self.tail = tail

    def __repr__(self) -> str:
        return f"Cons({self.head!r}, {self.tail!r})"


def deref(x):
    """Follow bound variables to a value or to an unbound variable."""
    while type(x) is Var:
        v = x.val
        if v is None:
            return x
        x = v
    return x


def functor_of(t) -> tuple[str, int]:
    """Name and arity of a bound term (atomic terms have arity 0)."""
    if type(t) is Struct:
        return t.name, len(t.args)
    if type(t) is Cons:
        return CONS_NAME, 2
    return t, 0


def args_of(t) -> tuple:
    if type(t) is Struct:
        return t.args
    if type(t) is Cons:
        return (t.head, t.tail)
    return ()


def make_struct(name: str, args: tuple):
    """Build `name(args)`, making list cells `Cons` and 0-ary terms atoms."""
    if not args:
        return mkatom(name)
    if name == CONS_NAME and len(args) == 2:
        return Cons(args[0], args[1])
    return Struct(mkatom(name), tuple(args))


def from_list(items, tail=NIL):
    result = tail
    for x in reversed(items):
        result = Cons(x, result)
    return result


def to_list(t) -> tuple[list, object]:
    """The elements of a (partial) list and what ends it (NIL, an unbound Var, or junk)."""
    items = []
    t = deref(t)
    while type(t) is Cons:
        items.append(t.head)
        t = deref(t.tail)
    return items, t


def first_unbound_from(stack: list):
    """The first unbound variable (depth first, left to right) of what the stack holds, or None
    when it is all ground. A variable found stays on top, so a later call resumes there instead
    of starting over (a writer waiting on a growing stream would otherwise walk it again at every
    element)."""
    while stack:
        x = stack.pop()
        while type(x) is Var:
            v = x.val
            if v is None:
                stack.append(x)
                return x
            x = v
        tx = type(x)
        if tx is Cons:
            stack.append(x.tail)
            stack.append(x.head)
        elif tx is Struct:
            stack.extend(reversed(x.args))
    return None


def var_name(var: Var, names: dict[int, str]) -> str:
    """The name of an unbound variable in a report: from `names`, else the next `_G<n>`."""
    name = names.get(id(var))
    if name is None:
        name = names[id(var)] = f"_G{len(names) + 1}"
    return name


def unbound_vars(terms) -> list:
    """The unbound variables of `terms`, in order of first appearance."""
    found: dict[int, Var] = {}
    stack = list(reversed(terms))
    while stack:
        x = deref(stack.pop())
        if type(x) is Var:
            found.setdefault(id(x), x)
        elif type(x) is Cons:
            stack += [x.tail, x.head]
        elif type(x) is Struct:
            stack.extend(reversed(x.args))
    return list(found.values())
