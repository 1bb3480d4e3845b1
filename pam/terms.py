"""Run-time nodes of the graph: values and write-once variables.

Value nodes: atoms are interned Python `str`, numbers are `int` and `float`, structures are
`Struct`, list cells are `Cons` (the functor `'[|]'/2`). A `Var` is a write-once cell: `val` is
None until bound; `susp` lists the tasks suspended on it. A bound variable may point to another
variable; `deref` follows such chains.

Terms may be cyclic: unification has no occurs check (as in PARLOG systems and SWI-Prolog), so
`X = f(X)` makes a rational tree. Every walk over terms must end on one. The walks here and in
pam.unify, pam.parlog.write, pam.parlog.arith and pam.pack run as plain loops on the common, acyclic path and
only after CHECK_AFTER compound terms check what they have left for cycles (`measure`, which
costs no memory along lists); only on a cyclic term do they then remember the terms they meet.
Small terms never pay for it, large acyclic ones pay a walk of the same size.
"""

from __future__ import annotations

import sys

NIL = sys.intern("[]")
CONS_NAME = sys.intern("[|]")

# Compound terms (or list cells) a walk meets before it looks out for cycles.
CHECK_AFTER = 10_000


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
    """The elements of a (partial) list and what ends it (NIL, an unbound Var, or junk). A cyclic
    list ends in itself: its end is the cell where the walk found the cycle (a Cons)."""
    items = []
    t = deref(t)
    # Brent's cycle detection along the tail: `mark` is a cell met before, moved at powers of two.
    mark, power, steps = None, 1, 0
    while type(t) is Cons:
        items.append(t.head)
        t = deref(t.tail)
        if t is mark:
            return items, t
        steps += 1
        if steps == power:
            mark, power, steps = t, power * 2, 0
    return items, t


class GroundCheck:
    """Whether a term is ground yet, resumable: `first_unbound()` walks the term until an unbound
    variable, which stays on top of the stack, so the next call resumes there instead of
    starting over (a writer waiting on a growing stream would otherwise walk it again at every
    element). Its budget of steps (`walk_budget`) spent on a cyclic term, it remembers the
    compound terms it has walked, so it walks each once more at most."""

    __slots__ = ("stack", "budget", "seen")

    def __init__(self, term) -> None:
        self.stack = [term]
        self.budget = CHECK_AFTER
        self.seen: set | None = None

    def first_unbound(self):
        """The first unbound variable (depth first, left to right) left, or None when ground."""
        stack = self.stack
        while stack:
            x = stack.pop()
            while type(x) is Var:
                v = x.val
                if v is None:
                    stack.append(x)
                    return x
                x = v
            tx = type(x)
            if tx is Cons or tx is Struct:
                if self.seen is None:
                    self.budget -= 1
                    if self.budget <= 0:
                        self.budget = walk_budget(stack + [x])
                        if self.budget is None:
                            self.seen = set()
                elif id(x) in self.seen:
                    continue
                else:
                    self.seen.add(id(x))
                if tx is Cons:
                    stack.append(x.tail)
                    stack.append(x.head)
                else:
                    stack.extend(reversed(x.args))
        return None


def is_acyclic(term) -> bool:
    """Whether no compound term of `term` contains itself."""
    return measure(term) is not None


def measure(term, parts=None) -> int | None:
    """None when some compound term of `term` contains itself; else how many compound terms (and
    list cells) the check walked: the size of the term as a graph, each shared part counted once
    (lists along a tail may count more than once). `parts(x)`, when given, names the parts of
    values of other classes (a tuple, or None for a leaf); pam.pack passes it.

    A depth-first walk that keeps the compound terms on the current path and those finished. List
    cells along a tail are not kept: each list is walked along its tail with Brent's cycle
    detection, so a long acyclic list costs no memory. Any other cycle goes through an argument
    (or a head), and the term that argument leads to is kept, so meeting it again on the path
    is the cycle."""
    on_path: set = set()
    done: set = set()
    keep: list = []
    size = 0
    stack = [deref(term)]
    while stack:
        x = stack.pop()
        tx = type(x)
        if tx is _Leave:  # the compound term of that id and all its parts are finished
            on_path.discard(x.ident)
            done.add(x.ident)
            continue
        i = id(x)
        if i in on_path:
            return None
        if i in done:
            continue
        size += 1
        kids: list = []
        if tx is Struct:
            for a in x.args:
                a = deref(a)
                if type(a) not in _LEAVES:
                    kids.append(a)
        elif tx is Cons:
            mark, power, steps = None, 1, 0
            t = x
            while True:
                h = t.head
                if type(h) is Var:
                    h = deref(h)
                if type(h) not in _LEAVES:
                    kids.append(h)
                t = t.tail
                if type(t) is not Cons:
                    t = deref(t)
                    if type(t) is not Cons:
                        break
                if t is mark:
                    return None  # a cycle along the tail
                size += 1
                steps += 1
                if steps == power:
                    mark, power, steps = t, power * 2, 0
            if type(t) not in _LEAVES:
                kids.append(t)
        elif parts is not None:
            p = parts(x) or ()
            keep.append(p)  # a codec's parts may be new objects: their ids must not be reused
            for a in p:
                a = deref(a)
                if type(a) not in _LEAVES:
                    kids.append(a)
        if not kids and tx is not Cons:
            continue  # nothing below it can lead back to it (a list is kept: its tail may be long)
        on_path.add(i)
        stack.append(_Leave(i))
        stack.extend(kids)
    return size


class _Leave:
    """On `is_acyclic`'s stack: the walk leaves the compound term `ident` here."""

    __slots__ = ("ident",)

    def __init__(self, ident: int) -> None:
        self.ident = ident


_LEAVES = frozenset({str, int, float, bool, Var, type(None)})


def walk_budget(items) -> int | None:
    """For a walk that has spent its budget of steps: None when what it has left to walk
    (`items`) is cyclic, so it must remember what it meets from now on; else the steps it may
    take before it checks again, twice the size of the rest (so checking costs less than
    walking, and a cycle that later bindings make is found in time)."""
    size = measure(Struct("$", tuple(items)))
    return None if size is None else max(2 * size, CHECK_AFTER)


def subterms(terms):
    """Every subterm of `terms`, dereferenced, depth first. On a cyclic term, once its budget of
    steps is spent (`walk_budget`), it skips the compound terms already met."""
    stack = list(reversed(terms))
    budget, seen, checks = CHECK_AFTER, None, 0
    while stack:
        x = deref(stack.pop())
        yield x
        tx = type(x)
        if tx is Cons or tx is Struct:
            if seen is None:
                budget -= 1
                if budget <= 0:
                    # Checked once: a rest that is cyclic, or that outlasts twice its size (shared
                    # parts), is walked remembering what it met.
                    budget = walk_budget(stack + [x]) if checks == 0 else None
                    checks += 1
                    if budget is None:
                        seen = set()
            elif id(x) in seen:
                continue
            else:
                seen.add(id(x))
            if tx is Cons:
                stack.append(x.tail)
                stack.append(x.head)
            else:
                stack.extend(reversed(x.args))


def var_name(var: Var, names: dict[int, str]) -> str:
    """The name of an unbound variable in a report: from `names`, else the next `_G<n>`."""
    name = names.get(id(var))
    if name is None:
        name = names[id(var)] = f"_G{len(names) + 1}"
    return name


def unbound_vars(terms) -> list:
    """The unbound variables of `terms`, in order of first appearance."""
    found: dict[int, Var] = {}
    for x in subterms(terms):
        if type(x) is Var:
            found.setdefault(id(x), x)
    return list(found.values())
