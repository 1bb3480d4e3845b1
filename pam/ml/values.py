"""How ML values are represented at run time (the contract between compiled code and the basis).

Types are static, so values carry no type tags beyond what pattern matching needs:

| ML                         | Python                                                        |
|----------------------------|---------------------------------------------------------------|
| int                        | int, kept within 63 bits (MIN_INT..MAX_INT, else `Overflow`)  |
| real                       | float                                                         |
| string, char               | str (a char is a str of length 1)                             |
| bool                       | True / False                                                  |
| unit, tuples, records      | tuple (records in canonical label order; unit is `()`)        |
| list                       | None for nil, a 2-tuple `(head, tail)` for `::`               |
| other datatypes (option, StringCvt.realfmt, user datatypes) | a constructor without argument is its tag (int, the constructor's position in its datatype); one with an argument is `(tag, arg)` |
| 'a ref                     | a one-element Python list `[contents]`                        |
| exn                        | a `Packet` (an exception constructor `ExnCon` and its argument) |
| functions                  | a `Closure`                                                    |

Raising an ML exception raises its `Packet` (a Python exception); `handle` catches `Packet`.
"""

from __future__ import annotations

import uuid

from hpgrem.ir.ml import ML_BASIS_EXCEPTIONS
from hpgrem.ir.ml import INT_MAX as MAX_INT, INT_MIN as MIN_INT  # noqa: F401 (the runtime's names of the IR's one range of int)


NONE = 0


def some(x):
    return (1, x)


class ExnCon:
    """An exception constructor. Identity is what matters: SML exceptions are generative, so a
    declaration evaluated twice makes two different constructors with the same name."""

    __slots__ = ("name", "has_arg", "uid", "packet", "raised")

    def __init__(self, name: str, has_arg: bool = False, uid=None) -> None:
        self.name = name
        self.has_arg = has_arg
        self.uid = uid
        # A constructor without argument has one packet, which ML code raises every time
        # (exception values have no identity in ML; a fresh one per raise cost 0.4 us).
        self.packet = None if has_arg else Packet(self, None, True)
        self.raised = None if has_arg else Raised(self.packet)  # and it, returned (codegen)

    def global_uid(self):
        """A name for this constructor that is the same on every PE (given when it first
        leaves its PE)."""
        if self.uid is None:
            self.uid = uuid.uuid4().hex
            _BY_UID[self.uid] = self
        return self.uid

    def __repr__(self) -> str:
        return f"ExnCon({self.name})"


class Packet(Exception):
    """An exception value (type exn); raising it raises the ML exception. `ml` is true for a
    packet made by the program's code (an ML `raise` of it crosses only functions whose call
    counts are not batched, so its catcher has nothing to settle, pam/ml/loader.py), false for
    one the run time raises (Overflow, Div, a basis function's exception)."""

    __slots__ = ("con", "arg", "ml")

    def __init__(self, con: ExnCon, arg=None, ml: bool = False) -> None:
        self.con = con
        self.arg = arg
        self.ml = ml

    def __str__(self) -> str:
        return self.con.name

    def __repr__(self) -> str:
        return f"Packet({self.con.name}, {self.arg!r})"


class Raised:
    """What the twin of a function that returns its raises (FunctionInfo.returns_raise,
    pam/ml/codegen.py) returns for an ML raise that leaves it: its caller, generated code,
    tests for it after the call. A raise returned this way costs a return and a test; raised as
    a Python exception it cost about four times that, most of it making and freeing the frame
    objects of its traceback."""

    __slots__ = ("packet",)

    def __init__(self, packet: Packet) -> None:
        self.packet = packet


BASIS_EXCEPTIONS: dict[str, ExnCon] = {name: ExnCon(name, name == "Fail", name) for name in ML_BASIS_EXCEPTIONS}
_BY_UID: dict = dict(BASIS_EXCEPTIONS)


def exn_by_uid(name: str, has_arg: bool, uid) -> ExnCon:
    """The exception constructor named `uid` on this PE (made when it first arrives)."""
    con = _BY_UID.get(uid)
    if con is None:
        con = _BY_UID[uid] = ExnCon(name, has_arg, uid)
    return con
DIV = BASIS_EXCEPTIONS["Div"]
OVERFLOW = BASIS_EXCEPTIONS["Overflow"]
SUBSCRIPT = BASIS_EXCEPTIONS["Subscript"]
EMPTY = BASIS_EXCEPTIONS["Empty"]
OPTION = BASIS_EXCEPTIONS["Option"]
CHR = BASIS_EXCEPTIONS["Chr"]
SIZE = BASIS_EXCEPTIONS["Size"]
FAIL = BASIS_EXCEPTIONS["Fail"]


class Closure:
    """A function value: `fn` is the compiled code of a lifted function, `env` the values of
    its free variables (a tuple), `key` the function's name in the module (for packing and
    reports). `gen` is true when `fn` is a generator function (its calls go through the task's
    frame stack) and false when it is plain code that returns its result directly. `d` is the
    Python-recursive twin of a direct function (pam/ml/codegen.py, its depth first), None for
    the others: code that cannot reach a join calls it instead of stepping `fn`'s frames."""

    __slots__ = ("fn", "env", "key", "gen", "pure", "d")

    def __init__(self, fn, env: tuple, key: str, gen: bool, pure: bool, d=None) -> None:
        self.fn = fn
        self.env = env
        self.key = key
        self.gen = gen
        self.pure = pure
        self.d = d

    def __repr__(self) -> str:
        return f"<fn {self.key}>"


def ml_list(items) -> object:
    """A Python iterable as an ML list."""
    out = None
    for x in reversed(list(items)):
        out = (x, out)
    return out


def py_list(xs) -> list:
    """An ML list as a Python list (iteratively: lists may be long)."""
    out = []
    while xs is not None:
        out.append(xs[0])
        xs = xs[1]
    return out
