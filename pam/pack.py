"""Packing terms for messages: ground parts are copied, unbound variables travel as global names.

A packed term is a flat postfix list (so a million-element list packs and unpacks without
recursion, and pickles for MPI without deep nesting): atoms and numbers stand for themselves;
`_Build` markers rebuild structures from the items before them; `GlobalRef` names a variable
by its owner PE and the owner's export number, carrying a weight for weighted reference
counting (Bevan 1987).
"""

from __future__ import annotations

from dataclasses import dataclass

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
        else:
            code.append(t)
    return code


def unpack(code: list, resolve):
    """The term a postfix list describes; `resolve(ref)` turns each GlobalRef into a variable."""
    out: list = []
    for item in code:
        ti = type(item)
        if ti is _Build:
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
