"""The surface syntax of the ML subset, as the parser builds it (spec/ml.md, "Language").

Every node carries the `Span` of its first character. Derived forms are kept as written
(`andalso`, lists, infix applications, `fun` clauses) so that errors can point at what the user
wrote; `elaborate.py` takes them apart. Identifiers are strings; a long identifier such as
`Int.toString` is one string. Whether a name is a variable or a constructor is decided by
elaboration, not by the parser.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpgrem.ir import Span

# ---------------------------------------------------------------------------------------------
# Types


@dataclass(frozen=True, slots=True)
class TyVar:
    """A type variable `'a`, or an equality type variable `''a` (the name keeps its quotes)."""

    name: str
    span: Span


@dataclass(frozen=True, slots=True)
class TyCon:
    """A type constructor applied to arguments: `int`, `'a list`, `(int, string) t`."""

    name: str
    args: tuple[Ty, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class TyTuple:
    """`t1 * ... * tn`, n >= 2."""

    items: tuple[Ty, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class TyRecord:
    """`{l1: t1, ..., ln: tn}` (`{}` is `unit`)."""

    fields: tuple[tuple[str, Ty], ...]
    span: Span


@dataclass(frozen=True, slots=True)
class TyArrow:
    """`t1 -> t2`."""

    arg: Ty
    result: Ty
    span: Span


Ty = TyVar | TyCon | TyTuple | TyRecord | TyArrow

# ---------------------------------------------------------------------------------------------
# Patterns


@dataclass(frozen=True, slots=True)
class PWild:
    """`_`."""

    span: Span


@dataclass(frozen=True, slots=True)
class PVar:
    """A lone identifier: a variable, or a constructor without argument (`nil`, `NONE`)."""

    name: str
    span: Span


@dataclass(frozen=True, slots=True)
class PConst:
    """An int, real (rejected by elaboration), string or char constant."""

    value: int | float | str
    kind: str
    span: Span


@dataclass(frozen=True, slots=True)
class PCon:
    """A constructor applied to a pattern: `SOME x`, `x :: xs` (argument the pair)."""

    name: str
    arg: Pat
    span: Span


@dataclass(frozen=True, slots=True)
class PTuple:
    """`(p1, ..., pn)`, n != 1; `()` is the empty tuple."""

    items: tuple[Pat, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class PRecord:
    """`{l1 = p1, ..., ln = pn}` with a fixed set of labels (no `...`)."""

    fields: tuple[tuple[str, Pat], ...]
    span: Span


@dataclass(frozen=True, slots=True)
class PList:
    """`[p1, ..., pn]`."""

    items: tuple[Pat, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class PLayer:
    """`x as p` (or `x : ty as p`, where the parser moves the type onto `p`)."""

    name: str
    pat: Pat
    span: Span


@dataclass(frozen=True, slots=True)
class PAnnot:
    """`p : ty`."""

    pat: Pat
    ty: Ty
    span: Span


Pat = PWild | PVar | PConst | PCon | PTuple | PRecord | PList | PLayer | PAnnot

# ---------------------------------------------------------------------------------------------
# Expressions


@dataclass(frozen=True, slots=True)
class EConst:
    """A constant; `kind` is `int`, `real`, `string` or `char` (a char's value is a 1-char str)."""

    value: int | float | str
    kind: str
    span: Span


@dataclass(frozen=True, slots=True)
class EVar:
    """An identifier in an expression (variable, constructor, basis value, `op +`)."""

    name: str
    span: Span


@dataclass(frozen=True, slots=True)
class ESelector:
    """`#label`: the function that selects a record field."""

    label: str
    span: Span


@dataclass(frozen=True, slots=True)
class EApp:
    """`f a`."""

    fn: Exp
    arg: Exp
    span: Span


@dataclass(frozen=True, slots=True)
class EInfix:
    """`l op r` for an operator of the fixed fixity table; `op_span` points at the operator."""

    op: str
    left: Exp
    right: Exp
    span: Span
    op_span: Span


@dataclass(frozen=True, slots=True)
class ETuple:
    """`(e1, ..., en)`, n != 1; `()` is the unit value."""

    items: tuple[Exp, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class ERecord:
    """`{l1 = e1, ..., ln = en}`, fields in source (evaluation) order."""

    fields: tuple[tuple[str, Exp], ...]
    span: Span


@dataclass(frozen=True, slots=True)
class EList:
    """`[e1, ..., en]`."""

    items: tuple[Exp, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class ESeq:
    """`(e1; ...; en)`, n >= 2: evaluate in order, the value of the last."""

    items: tuple[Exp, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class ELet:
    """`let decs in e1; ...; en end` (the body an `ESeq` when n >= 2)."""

    decs: tuple[Dec, ...]
    body: Exp
    span: Span


@dataclass(frozen=True, slots=True)
class EAnnot:
    """`e : ty`."""

    exp: Exp
    ty: Ty
    span: Span


@dataclass(frozen=True, slots=True)
class EAndalso:
    left: Exp
    right: Exp
    span: Span


@dataclass(frozen=True, slots=True)
class EOrelse:
    left: Exp
    right: Exp
    span: Span


@dataclass(frozen=True, slots=True)
class EIf:
    cond: Exp
    then: Exp
    else_: Exp
    span: Span


@dataclass(frozen=True, slots=True)
class EWhile:
    cond: Exp
    body: Exp
    span: Span


@dataclass(frozen=True, slots=True)
class ERaise:
    exp: Exp
    span: Span


@dataclass(frozen=True, slots=True)
class EHandle:
    """`e handle match`; `span` points at `handle`."""

    exp: Exp
    match: Match
    span: Span


@dataclass(frozen=True, slots=True)
class ECase:
    exp: Exp
    match: Match
    span: Span


@dataclass(frozen=True, slots=True)
class EFn:
    match: Match
    span: Span


Exp = (EConst | EVar | ESelector | EApp | EInfix | ETuple | ERecord | EList | ESeq | ELet | EAnnot
       | EAndalso | EOrelse | EIf | EWhile | ERaise | EHandle | ECase | EFn)


@dataclass(frozen=True, slots=True)
class Rule:
    """`pat => exp`."""

    pat: Pat
    exp: Exp
    span: Span


@dataclass(frozen=True, slots=True)
class Match:
    """`rule1 | ... | rulen`."""

    rules: tuple[Rule, ...]
    span: Span


# ---------------------------------------------------------------------------------------------
# Declarations


@dataclass(frozen=True, slots=True)
class ValBind:
    pat: Pat
    exp: Exp
    span: Span


@dataclass(frozen=True, slots=True)
class DVal:
    """`val tyvars pat = exp and ... and rec pat = fn ... and ...`: the bindings from `rec_from`
    on are recursive (`rec` covers the rest of the group), `rec_from` is `len(binds)` when none is."""

    tyvars: tuple[TyVar, ...]
    binds: tuple[ValBind, ...]
    rec_from: int
    span: Span


@dataclass(frozen=True, slots=True)
class FunClause:
    """`f p1 ... pn [: ty] = exp`."""

    name: str
    args: tuple[Pat, ...]
    result: Ty | None
    body: Exp
    span: Span


@dataclass(frozen=True, slots=True)
class FunBind:
    """The clauses of one function, joined by `|`."""

    name: str
    clauses: tuple[FunClause, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class DFun:
    """`fun tyvars funbind and ...`."""

    tyvars: tuple[TyVar, ...]
    binds: tuple[FunBind, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class TypeBind:
    params: tuple[TyVar, ...]
    name: str
    ty: Ty
    span: Span


@dataclass(frozen=True, slots=True)
class DType:
    """`type tyvars t = ty and ...`."""

    binds: tuple[TypeBind, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class ConBind:
    """One constructor of a datatype: `C` or `C of ty`."""

    name: str
    arg: Ty | None
    span: Span


@dataclass(frozen=True, slots=True)
class DataBind:
    params: tuple[TyVar, ...]
    name: str
    cons: tuple[ConBind, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class DDatatype:
    """`datatype ... and ...` (mutually recursive)."""

    binds: tuple[DataBind, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class ExnBind:
    name: str
    arg: Ty | None
    span: Span


@dataclass(frozen=True, slots=True)
class DException:
    binds: tuple[ExnBind, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class DLocal:
    """`local inner in outer end`."""

    inner: tuple[Dec, ...]
    outer: tuple[Dec, ...]
    span: Span


Dec = DVal | DFun | DType | DDatatype | DException | DLocal


@dataclass(frozen=True, slots=True)
class Chunk:
    """The declarations of one part of the program up to a top-level `;` (a top-level
    expression `e` is read as `val it = e`)."""

    decs: tuple[Dec, ...]
    span: Span
