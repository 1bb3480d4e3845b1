"""Packing terms for messages: ground parts are copied, unbound variables travel as global names.

A packed term is a flat postfix list (so a million-element list packs and unpacks without
recursion, and pickles for MPI without deep nesting): atoms and numbers stand for themselves;
markers rebuild structures, list cells and tuples from the items before them; `GlobalRef`
names a variable by its owner PE and the owner's export number, carrying a weight for weighted
reference counting (Bevan 1987). Values of other classes (a dialect's closures, exceptions, ...)
travel through the `Codec` its runtime registered for their class; anything else travels as
it is.

Terms may be cyclic or share parts (`X = f(X)`; `T = node(S, S)` built n times over is 2**n
nodes as a tree). Packing counts what it walks: past CHECK_AFTER compound values it measures the
term (pam.terms.measure); a cyclic term, or one whose tree outgrows twice its size as a graph,
is packed again as a graph: prefix order, each compound value once, numbered in that order, and
`_Ref(k)` for the k-th met again, so the receiver rebuilds the same cycles and sharing. (Tuples
and codec values are rebuilt only once complete, so a cycle through one of them, an ML ref
holding a closure over itself, cannot travel: a program failure, not a hang.) Unbound variables
are exported only once the packing is final, so a packing given up costs no reference weight.

Packing snapshots: an atomic value of a mutable class (a numpy array, ...) is copied as it is
packed, so the receiver owns a value nobody else changes, in simulation as under MPI (where
pickling copies), and an in-place change on either side is not seen by the other.
"""

from __future__ import annotations

from copy import deepcopy
from dataclasses import dataclass
from typing import Protocol

from pam.errors import ProgramFailure
from pam.terms import CHECK_AFTER, Cons, Struct, Var, measure, mkatom

WORD = 4  # bytes per word on a T800
FLOAT = 8  # bytes of a 64-bit real
HEADER = 2 * WORD  # what every message carries besides its payload: its kind and destination


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


@dataclass(frozen=True, slots=True)
class _Open:
    """Graph code: a structure `name(...)` of `arity` items that follow."""

    name: str | None
    arity: int


_OPEN_CONS = _Open(None, 2)


@dataclass(frozen=True, slots=True)
class _Ref:
    """Graph code: the compound value numbered `k` (in the order they were opened)."""

    k: int


@dataclass(frozen=True, slots=True)
class _Done:
    """On the graph packer's stack: the parts of tuple or codec value `ident` are packed."""

    ident: int


class _Graph:
    """First item of graph code."""

    def __reduce__(self):
        return "_GRAPH"  # one instance, also after pickling (MPI)


_GRAPH = _Graph()

# Classes whose values travel as they are: immutable, so sharing them is copying them. An
# atomic value of any other class is copied as it is packed (`_own`).
_SHARED = frozenset({int, float, str, bool, complex, bytes, type(None), GlobalRef, _Build, _Tuple, _Coded})


def _own(value):
    """A copy of a mutable atomic value, made as it is packed."""
    return deepcopy(value)


def pack(term, export, codecs: dict) -> list:
    """`term` as a flat list; `export(var)` names each unbound variable met (a GlobalRef);
    `codecs` are the registered codecs by value class."""
    code, var_at = _pack_tree(term, codecs)
    if code is None:
        code, var_at = _pack_graph(term, codecs)
    for i in var_at:
        code[i] = export(code[i])
    return code


def _pack_tree(term, codecs: dict):
    """(postfix code, positions of its unbound variables), or (None, None) when the term must
    travel as a graph."""
    code: list = []
    var_at: list = []
    budget = CHECK_AFTER  # compound values to walk before measuring the term
    measured = False
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
            var_at.append(len(code))
            code.append(t)
            continue
        if tt is Cons:
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
                code.append(t if tt in _SHARED else _own(t))
                continue
            data, parts = codec.flatten(t)
            stack.append(_Coded(codec.name, len(parts), data, codec.size(data)))
            stack.extend(reversed(parts))
        budget -= 1
        if not budget:
            if measured:
                return None, None  # shared parts walked over and over
            measured = True
            size = measure(term, lambda x: _parts(x, codecs))
            if size is None:
                return None, None  # cyclic
            # Sharing can make the tree exponentially larger than the graph: the tree may
            # have twice the graph's size, beyond that the graph travels.
            budget = 2 * size + 1
    return code, var_at


def _parts(x, codecs: dict):
    if type(x) is tuple:
        return x
    codec = codecs.get(type(x))
    return codec.flatten(x)[1] if codec is not None else None


def _pack_graph(term, codecs: dict):
    """(prefix code of `term` as a graph, positions of its unbound variables)."""
    code: list = [_GRAPH]
    var_at: list = []
    number: dict[int, tuple] = {}  # id of each compound value met -> (its number, the value)
    unfinished: set[int] = set()  # ids of tuples and codec values whose parts are being packed
    stack: list = [term]
    while stack:
        t = stack.pop()
        if type(t) is _Done:
            unfinished.discard(t.ident)
            continue
        while type(t) is Var:
            v = t.val
            if v is None:
                break
            t = v
        tt = type(t)
        if tt is Var:
            var_at.append(len(code))
            code.append(t)
            continue
        codec = codecs.get(tt) if tt is not Cons and tt is not Struct and tt is not tuple else None
        if tt is not Cons and tt is not Struct and tt is not tuple and codec is None:
            code.append(t if tt in _SHARED else _own(t))  # atomic
            continue
        k = number.get(id(t))
        if k is not None:
            k = k[0]
            if k in unfinished:
                raise ProgramFailure("a cyclic value (through a tuple or an ML value) cannot be "
                                     "sent to another PE")
            code.append(_Ref(k))
            continue
        k = len(number)
        number[id(t)] = (k, t)  # holding `t`: a codec's parts may be new objects, ids reused
        if tt is Cons:
            code.append(_OPEN_CONS)
            stack.append(t.tail)
            stack.append(t.head)
        elif tt is Struct:
            code.append(_Open(t.name, len(t.args)))
            stack.extend(reversed(t.args))
        else:
            unfinished.add(k)
            stack.append(_Done(k))
            if tt is tuple:
                code.append(_Tuple(len(t)))
                stack.extend(reversed(t))
            else:
                data, parts = codec.flatten(t)
                code.append(_Coded(codec.name, len(parts), data, codec.size(data)))
                stack.extend(reversed(parts))
    return code, var_at


def unpack(code: list, resolve, codecs: dict):
    """The term a packed list describes; `resolve(ref)` turns each GlobalRef into a variable;
    `codecs` are the registered codecs by name."""
    if code and type(code[0]) is _Graph:
        return _unpack_graph(code, resolve, codecs)
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


def _unpack_graph(code: list, resolve, codecs: dict):
    """Rebuild graph code: a structure or list cell exists from its opening (so a `_Ref` to it
    from inside is the cycle); a tuple or codec value from its last part."""
    nodes: list = []  # by number
    frames: list = []  # values being rebuilt: (opening item, number, parts so far)
    result = None
    for item in code[1:]:
        ti = type(item)
        if ti is _Open or ti is _Tuple or ti is _Coded:
            k = len(nodes)
            if ti is _Open:
                nodes.append(Cons(None, None) if item.name is None else Struct(mkatom(item.name), ()))
            else:
                nodes.append(None)  # never referred to before it is complete (pack sees to it)
            if item.arity:
                frames.append((item, k, []))
                continue
            value = _finish(item, k, [], nodes, codecs)
        elif ti is _Ref:
            value = nodes[item.k]
        elif ti is GlobalRef:
            value = resolve(item)
        elif ti is str:
            value = mkatom(item)
        else:
            value = item
        # `value` is the next part of the innermost value being rebuilt; each one it completes
        # is in turn the next part of its parent.
        while frames:
            opening, k, parts = frames[-1]
            parts.append(value)
            if len(parts) < opening.arity:
                break
            frames.pop()
            value = _finish(opening, k, parts, nodes, codecs)
        else:
            result = value
    assert not frames, "malformed packed graph"
    return result


def _finish(opening, k: int, parts: list, nodes: list, codecs: dict):
    """The value numbered `k`, now that all its parts are there."""
    if type(opening) is _Open:
        node = nodes[k]
        if opening.name is None:
            node.head, node.tail = parts
        else:
            node.args = tuple(parts)
        return node
    if type(opening) is _Tuple:
        node = tuple(parts)
    else:
        node = codecs[opening.codec].rebuild(opening.data, tuple(parts))
    nodes[k] = node
    return node


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
            n += WORD + (len(item) if item.isascii() else len(item.encode("utf-8", "surrogatepass")))
        elif ti is float:
            n += FLOAT
        elif ti is _Coded:
            n += item.nbytes
        elif ti.__module__ == "numpy":  # an array or a scalar (no import: numpy may be absent)
            n += WORD + item.nbytes
        else:
            n += WORD
    return n


def payload_bytes(payload) -> int:
    """What a message's payload costs on a link: a packed term (a list) by `size_bytes`, the
    fields of a tuple each by this rule, nothing for None, any other value as one packed item."""
    if payload is None:
        return 0
    tp = type(payload)
    if tp is list:
        return size_bytes(payload)
    if tp is tuple:
        return sum(payload_bytes(x) for x in payload)
    return size_bytes([payload])
