"""The initial basis: the one table of the types, constructors, exceptions and values an ML
program starts with (spec/ml.md, "Basis slice").

The run time implements exactly the names of `VALUES` (as `typed.BasisRef(name)`), the
constructors of `DATATYPES` and the exceptions of `EXCEPTIONS`. Types are written in ML syntax
and read by the ML parser; `overload` marks the operators whose type variable ranges over
`NUM` (int, real) or `ORD` (int, real, string, char) and defaults to int.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hpgrem.diagnostics import Diagnostic
from frontend.ml.env import BasisBinding, ConBinding, ExnBinding, Scope, TypeFun, elaborate_ty
from frontend.ml.parser import parse_type
from frontend.ml.typed import ExnName
from frontend.ml.types import (CHAR, EXN, INT, REAL, REF, STRING, UNIT, Constructor, Scheme, TCon, TGen,
                               TyCon, Type, arrow)

NUM = (INT, REAL)
ORD = (INT, REAL, STRING, CHAR)


@dataclass(frozen=True, slots=True)
class BasisValue:
    name: str
    type: str
    overload: tuple[TyCon, ...] | None = None


VALUES: tuple[BasisValue, ...] = (
    # operators of the fixity table (infix application passes the pair)
    BasisValue("+", "'a * 'a -> 'a", NUM), BasisValue("-", "'a * 'a -> 'a", NUM),
    BasisValue("*", "'a * 'a -> 'a", NUM), BasisValue("/", "real * real -> real"),
    BasisValue("div", "int * int -> int"), BasisValue("mod", "int * int -> int"),
    BasisValue("<", "'a * 'a -> bool", ORD), BasisValue(">", "'a * 'a -> bool", ORD),
    BasisValue("<=", "'a * 'a -> bool", ORD), BasisValue(">=", "'a * 'a -> bool", ORD),
    BasisValue("=", "''a * ''a -> bool"), BasisValue("<>", "''a * ''a -> bool"),
    BasisValue("^", "string * string -> string"), BasisValue("@", "'a list * 'a list -> 'a list"),
    BasisValue("o", "('b -> 'c) * ('a -> 'b) -> 'a -> 'c"),
    BasisValue(":=", "'a ref * 'a -> unit"), BasisValue("before", "'a * unit -> 'a"),
    # nonfix
    BasisValue("~", "'a -> 'a", NUM), BasisValue("abs", "'a -> 'a", NUM),
    BasisValue("!", "'a ref -> 'a"), BasisValue("not", "bool -> bool"),
    BasisValue("print", "string -> unit"),
    BasisValue("Int.toString", "int -> string"), BasisValue("Int.fromString", "string -> int option"),
    BasisValue("Int.min", "int * int -> int"), BasisValue("Int.max", "int * int -> int"),
    BasisValue("Int.abs", "int -> int"), BasisValue("Int.quot", "int * int -> int"),
    BasisValue("Int.rem", "int * int -> int"),
    BasisValue("Bool.toString", "bool -> string"),
    BasisValue("real", "int -> real"), BasisValue("floor", "real -> int"),
    BasisValue("ceil", "real -> int"), BasisValue("round", "real -> int"),
    BasisValue("trunc", "real -> int"), BasisValue("Real.fromInt", "int -> real"),
    BasisValue("Real.fmt", "StringCvt.realfmt -> real -> string"),
    BasisValue("Math.sqrt", "real -> real"),
    BasisValue("size", "string -> int"), BasisValue("str", "char -> string"),
    BasisValue("ord", "char -> int"), BasisValue("chr", "int -> char"),
    BasisValue("explode", "string -> char list"), BasisValue("implode", "char list -> string"),
    BasisValue("concat", "string list -> string"),
    BasisValue("String.size", "string -> int"), BasisValue("String.sub", "string * int -> char"),
    BasisValue("String.concat", "string list -> string"),
    BasisValue("String.concatWith", "string -> string list -> string"),
    BasisValue("String.explode", "string -> char list"),
    BasisValue("String.implode", "char list -> string"),
    BasisValue("String.substring", "string * int * int -> string"),
    BasisValue("String.isPrefix", "string -> string -> bool"),
    BasisValue("Char.ord", "char -> int"), BasisValue("Char.chr", "int -> char"),
    BasisValue("Char.isDigit", "char -> bool"), BasisValue("Char.isAlpha", "char -> bool"),
    BasisValue("Char.toUpper", "char -> char"), BasisValue("Char.toLower", "char -> char"),
    BasisValue("hd", "'a list -> 'a"), BasisValue("tl", "'a list -> 'a list"),
    BasisValue("null", "'a list -> bool"), BasisValue("length", "'a list -> int"),
    BasisValue("rev", "'a list -> 'a list"),
    BasisValue("map", "('a -> 'b) -> 'a list -> 'b list"),
    BasisValue("app", "('a -> unit) -> 'a list -> unit"),
    BasisValue("foldl", "('a * 'b -> 'b) -> 'b -> 'a list -> 'b"),
    BasisValue("foldr", "('a * 'b -> 'b) -> 'b -> 'a list -> 'b"),
    BasisValue("List.map", "('a -> 'b) -> 'a list -> 'b list"),
    BasisValue("List.filter", "('a -> bool) -> 'a list -> 'a list"),
    BasisValue("List.foldl", "('a * 'b -> 'b) -> 'b -> 'a list -> 'b"),
    BasisValue("List.foldr", "('a * 'b -> 'b) -> 'b -> 'a list -> 'b"),
    BasisValue("List.rev", "'a list -> 'a list"), BasisValue("List.length", "'a list -> int"),
    BasisValue("List.app", "('a -> unit) -> 'a list -> unit"),
    BasisValue("List.exists", "('a -> bool) -> 'a list -> bool"),
    BasisValue("List.all", "('a -> bool) -> 'a list -> bool"),
    BasisValue("List.find", "('a -> bool) -> 'a list -> 'a option"),
    BasisValue("List.partition", "('a -> bool) -> 'a list -> 'a list * 'a list"),
    BasisValue("List.tabulate", "int * (int -> 'a) -> 'a list"),
    BasisValue("List.nth", "'a list * int -> 'a"), BasisValue("List.take", "'a list * int -> 'a list"),
    BasisValue("List.drop", "'a list * int -> 'a list"),
    BasisValue("List.concat", "'a list list -> 'a list"),
    BasisValue("Option.valOf", "'a option -> 'a"), BasisValue("Option.isSome", "'a option -> bool"),
    BasisValue("Option.getOpt", "'a option * 'a -> 'a"),
    BasisValue("valOf", "'a option -> 'a"), BasisValue("isSome", "'a option -> bool"),
    BasisValue("exnName", "exn -> string"),
    BasisValue("ForkJoin.par", "(unit -> 'a) * (unit -> 'b) -> 'a * 'b"),
)

# (type name, parameters, constructors as (name, argument type or None)), in declaration order
DATATYPES: tuple[tuple[str, tuple[str, ...], tuple[tuple[str, str | None], ...]], ...] = (
    ("bool", (), (("false", None), ("true", None))),
    ("list", ("'a",), (("nil", None), ("::", "'a * 'a list"))),
    ("option", ("'a",), (("NONE", None), ("SOME", "'a"))),
    ("StringCvt.realfmt", (), (("StringCvt.EXACT", None), ("StringCvt.FIX", "int option"),
                               ("StringCvt.GEN", "int option"), ("StringCvt.SCI", "int option"))),
)

EXCEPTIONS: tuple[tuple[str, str | None], ...] = (
    ("Bind", None), ("Match", None), ("Div", None), ("Overflow", None), ("Subscript", None),
    ("Empty", None), ("Option", None), ("Chr", None), ("Size", None), ("Fail", "string"),
)

_UNSUPPORTED_VALUES = {
    "Real.toString": "Real.toString is not supported (use Real.fmt (StringCvt.FIX (SOME k)))",
    "exnMessage": "exnMessage is not supported (use exnName)",
}
_UNSUPPORTED_STRUCTURES = {"Array": "arrays", "Array2": "arrays", "Vector": "vectors",
                           "Word": "words", "Word8": "words", "Word32": "words", "Word64": "words",
                           "IntInf": "IntInf", "LargeInt": "IntInf", "TextIO": "TextIO", "OS": "OS",
                           "CharVector": "vectors", "CharArray": "arrays", "BinIO": "BinIO"}
_UNSUPPORTED_TYPES = {"array": "arrays", "vector": "vectors", "word": "words"}


def unsupported(name: str) -> str | None:
    """Why `name` (unbound) is outside the subset, if it is a known part of the full basis."""
    if name in _UNSUPPORTED_VALUES:
        return _UNSUPPORTED_VALUES[name]
    prefix = name.split(".")[0]
    what = _UNSUPPORTED_STRUCTURES.get(prefix) if "." in name else _UNSUPPORTED_TYPES.get(name)
    return f"{what} are not supported ({name})" if what in ("arrays", "vectors", "words") else \
        (f"{what} is not supported ({name})" if what else None)


def _type(text: str, scope: Scope, params: list[str]) -> Type:
    """The type written `text`, its i-th type variable of `params` being TGen(i)."""
    errors: list[Diagnostic] = []
    body = elaborate_ty(parse_type(text, "<basis>"), scope, {n: TGen(i) for i, n in enumerate(params)}, errors)
    assert not errors, errors
    return body


def _scheme(text: str, scope: Scope, overload: tuple[TyCon, ...] | None = None) -> Scheme:
    names = list(dict.fromkeys(re.findall(r"'+[A-Za-z0-9_]+", text)))
    return Scheme(tuple(n.startswith("''") for n in names), _type(text, scope, names), overload)


def _build() -> tuple[Scope, dict[str, TyCon], dict[str, Constructor], dict[str, ExnName]]:
    scope = Scope()
    for con in (INT, REAL, STRING, CHAR, EXN, REF):
        scope.types[con.name] = con
    scope.types["unit"] = TypeFun(0, UNIT)
    tycons: dict[str, TyCon] = {}
    for name, params, _ in DATATYPES:
        tycons[name] = scope.types[name] = TyCon(name, len(params), True)
    constructors: dict[str, Constructor] = {}
    for name, params, cons in DATATYPES:
        tycon = tycons[name]
        result = TCon(tycon, tuple(TGen(i) for i in range(len(params))))
        for tag, (cname, arg) in enumerate(cons):
            body = result if arg is None else arrow(_type(arg, scope, list(params)), result)
            scheme = Scheme((False,) * len(params), body)
            con = Constructor(cname, tag, arg is not None, tycon, scheme)
            tycon.constructors.append(con)
            constructors[cname] = con
    ref_scheme = Scheme((False,), arrow(TGen(0), TCon(REF, (TGen(0),))))
    constructors["ref"] = Constructor("ref", 0, True, REF, ref_scheme)
    REF.constructors[:] = [constructors["ref"]]
    for cname, con in constructors.items():
        scope.values[cname] = ConBinding(con)
    exceptions: dict[str, ExnName] = {}
    for ename, arg in EXCEPTIONS:
        argty = _type(arg, scope, []) if arg else None
        exceptions[ename] = ExnName(ename, argty, None)
        scope.values[ename] = ExnBinding(exceptions[ename])
    for value in VALUES:
        scope.values[value.name] = BasisBinding(value.name, _scheme(value.type, scope, value.overload))
    return scope, tycons, constructors, exceptions


_SCOPE, TYCONS, CONSTRUCTORS, BASIS_EXCEPTIONS = _build()
BOOL = TYCONS["bool"]
LIST = TYCONS["list"]
BOOL_T = TCon(BOOL)


def initial_scope() -> Scope:
    """A fresh scope whose parent holds the basis (the basis itself is never modified)."""
    return _SCOPE.child()


__all__ = ["BASIS_EXCEPTIONS", "BOOL", "BOOL_T", "CONSTRUCTORS", "DATATYPES", "EXCEPTIONS", "LIST",
           "NUM", "ORD", "TYCONS", "VALUES", "initial_scope", "unsupported"]
