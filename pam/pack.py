"""Packing terms for messages: ground parts are copied, unbound variables travel as global names.

A packed term is a flat postfix list (so a million-element list packs and unpacks without
recursion, and pickles for MPI without deep nesting): atoms and numbers stand for themselves;
markers rebuild structures, list cells and tuples from the items before them; `GlobalRef`
names a variable by its owner PE and the owner's export number, carrying a weight for weighted
reference counting (Bevan 1987). Values of other classes (a dialect's closures, exceptions, ...)
travel through the `Codec` its runtime registered for their class; anything else travels as
it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pam.terms import Cons, Struct, Var, mkatom

WORD = 4  # bytes per word on a T800
FLOAT = 8  # bytes of a 64-bit real


class Codec(Protocol):
    """How values of one class travel (a runtime registers it: `Net.add_codec`)."""

    name: str  # names the codec in packed terms
    value_class: type  # the values it packs (exactly this class)

    def flatten(self, value) -> tuple[object, tuple]:
        """(data that travels as it is, the parts that are packed in turn)."""

    def rebuild(self, data, parts: tuple):
        """The value on the receiving PE."""

    def size(self, data) -> int:
        """Bytes the value's marker and `data` take on a link (its parts are counted apart)."""


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
class _Tuple:
    """Pop `arity` items and build a tuple of them."""

    arity: int


@dataclass(frozen=True, slots=True)
class _Coded:
    """Pop `arity` items and let the codec `codec` rebuild the value from them and `data`."""

    codec: str
    arity: int
    data: object
    nbytes: int


def pack(term, export, codecs: dict) -> list:
    """`term` as a postfix list; `export(var)` names each unbound variable met (a GlobalRef);
    `codecs` are the registered codecs by value class."""
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
            stack.append(_Tuple(len(t)))
            stack.extend(reversed(t))
        else:
            codec = codecs.get(tt)
            if codec is None:  # atomic, or a marker pushed above
                code.append(t)
                continue
            data, parts = codec.flatten(t)
            stack.append(_Coded(codec.name, len(parts), data, codec.size(data)))
            stack.extend(reversed(parts))
    return code


def unpack(code: list, resolve, codecs: dict):
    """The term a postfix list describes; `resolve(ref)` turns each GlobalRef into a variable;
    `codecs` are the registered codecs by name."""
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
        elif ti is _Tuple or ti is _Coded:
            n = item.arity
            args = tuple(out[len(out) - n:])
            del out[len(out) - n:]
            out.append(args if ti is _Tuple else codecs[item.codec].rebuild(item.data, args))
        else:
            out.append(item)
    assert len(out) == 1, "malformed packed term"
    return out[0]


def size_bytes(code: list) -> int:
    """What the packed term costs on a link: a word per item (a marker, an atom, a small
    integer), three per reference; a big integer, a string or an array a length word and its
    bytes; a real 8 bytes; a codec's value what the codec says."""
    n = 0
    for item in code:
        ti = type(item)
        if ti is GlobalRef:
            n += 3 * WORD
        elif ti is int and not -(1 << 31) <= item < (1 << 31):
            n += WORD + (item.bit_length() + 8) // 8
        elif ti is str:
            n += WORD + (len(item) if item.isascii() else len(item.encode()))
        elif ti is float:
            n += FLOAT
        elif ti is _Coded:
            n += item.nbytes
        elif ti.__module__ == "numpy":  # an array or a scalar (no import: numpy may be absent)
            n += WORD + item.nbytes
        else:
            n += WORD
    return n
