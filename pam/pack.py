"""Packing terms for messages: ground parts are copied, unbound variables travel as global names.

A packed term is a flat postfix list (so a million-element list packs and unpacks without
recursion, and pickles for MPI without deep nesting): atoms and numbers stand for themselves;
`_Build` markers rebuild structures from the items before them; `GlobalRef` names a variable
by its owner PE and the owner's export number, carrying a weight for weighted reference
counting (Bevan 1987).
"""

from __future__ import annotations

from dataclasses import dataclass

from pam.ml.values import Closure, ExnCon, Packet, exn_by_uid
from pam.terms import Cons, Struct, Var, mkatom

WORD = 4  # bytes per word on a T800


@dataclass(frozen=True, slots=True)
class GlobalRef:
    """A variable on another PE: `(owner, ident)`, with `weight` of its reference count."""

    owner: int
    ident: int
    weight: int


@dataclass(frozen=True, slots=True)
class _Build:
    """Pop `arity` items and build `name(...)` (`name` None builds a list cell)."""

    name: str | None
    arity: int


_CONS = _Build(None, 2)


@dataclass(frozen=True, slots=True)
class _MLBuild:
    """Pop `arity` items and build an ML value: a tuple (`what` "tuple"), a ref cell ("ref"),
    an exception packet ("packet": constructor, then argument if `arity` is 2) or a closure
    of function `what` (its environment)."""

    what: str
    arity: int


@dataclass(frozen=True, slots=True)
class _ExnRef:
    """An ML exception constructor, known everywhere by `uid` (basis ones by their name)."""

    name: str
    has_arg: bool
    uid: object


def pack(term, export) -> list:
    """`term` as a postfix list; `export(var)` names each unbound variable met (a GlobalRef)."""
    code: list = []
    stack: list = [term]
    while stack:
        t = stack.pop()
        if type(t) is _Build:
            code.append(t)
            continue
        while type(t) is Var:
            v = t.val
            if v is None:
                break
            t = v
        tt = type(t)
        if tt is Var:
            code.append(export(t))
        elif tt is Cons:
            stack.append(_CONS)
            stack.append(t.tail)
            stack.append(t.head)
        elif tt is Struct:
            stack.append(_Build(t.name, len(t.args)))
            stack.extend(reversed(t.args))
        elif tt is tuple:
            stack.append(_MLBuild("tuple", len(t)))
            stack.extend(reversed(t))
        elif tt is Closure:
            stack.append(_MLBuild(t.key, len(t.env)))
            stack.extend(reversed(t.env))
        elif tt is Packet:
            stack.append(_MLBuild("packet", 1 if t.arg is None and not t.con.has_arg else 2))
            if t.arg is not None or t.con.has_arg:
                stack.append(t.arg)
            stack.append(t.con)
        elif tt is ExnCon:
            code.append(_ExnRef(t.name, t.has_arg, t.global_uid()))
        elif tt is list:  # an ML ref travels as a copy (only pure code, which never reads it, moves)
            stack.append(_MLBuild("ref", 1))
            stack.append(t[0])
        else:
            code.append(t)
    return code


def unpack(code: list, resolve, functions=None):
    """The term a postfix list describes; `resolve(ref)` turns each GlobalRef into a variable;
    `functions(key)` makes the closure of an ML function from its environment."""
    out: list = []
    for item in code:
        ti = type(item)
        if ti is _MLBuild:
            n = item.arity
            args = out[len(out) - n:] if n else []
            del out[len(out) - n:]
            what = item.what
            if what == "tuple":
                out.append(tuple(args))
            elif what == "ref":
                out.append([args[0]])
            elif what == "packet":
                out.append(Packet(args[0], args[1] if n == 2 else None))
            else:
                out.append(functions(what, tuple(args)))
        elif ti is _ExnRef:
            out.append(exn_by_uid(item.name, item.has_arg, item.uid))
        elif ti is _Build:
            n = item.arity
            args = out[len(out) - n:]
            del out[len(out) - n:]
            out.append(Cons(args[0], args[1]) if item.name is None else Struct(mkatom(item.name), tuple(args)))
        elif ti is GlobalRef:
            out.append(resolve(item))
        elif ti is str:
            out.append(mkatom(item))  # rules compare atoms by identity; unpickled text is new
        else:
            out.append(item)
    assert len(out) == 1, "malformed packed term"
    return out[0]


def size_bytes(code: list) -> int:
    """What the packed term costs on a link: a word per item, three per reference."""
    n = 0
    for item in code:
        if type(item) is GlobalRef:
            n += 3 * WORD
        elif type(item) is int and not -(1 << 31) <= item < (1 << 31):
            n += WORD * (1 + item.bit_length() // 32)
        elif type(item) is str:
            n += WORD + len(item)
        else:
            n += WORD
    return n
