"""Static environments: what a name means where it is used.

A `Scope` maps value names to their binding (a variable with its type scheme, a constructor, an
exception, a basis value) and type names to a type constructor or an abbreviation; scopes
chain to their parent. Long names (`Int.toString`) are plain keys: the basis is the only place
they come from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hpgrem.diagnostics import Diagnostic
from frontend.ml import syntax as s
from frontend.ml.typed import ExnName, Var
from frontend.ml.types import (Constructor, Scheme, TCon, TyCon, Type, arrow, record_type, substitute,
                               tuple_type)


@dataclass(frozen=True, slots=True)
class VarBinding:
    var: Var
    scheme: Scheme


@dataclass(frozen=True, slots=True)
class ConBinding:
    con: Constructor


@dataclass(frozen=True, slots=True)
class ExnBinding:
    exn: ExnName


@dataclass(frozen=True, slots=True)
class BasisBinding:
    name: str
    scheme: Scheme


ValueBinding = VarBinding | ConBinding | ExnBinding | BasisBinding


@dataclass(frozen=True, slots=True)
class TypeFun:
    """A `type` abbreviation: `body` with `TGen(i)` for its i-th parameter."""

    arity: int
    body: Type


TypeBinding = TyCon | TypeFun


@dataclass(slots=True)
class Scope:
    values: dict[str, ValueBinding] = field(default_factory=dict)
    types: dict[str, TypeBinding] = field(default_factory=dict)
    parent: Scope | None = None

    def value(self, name: str) -> ValueBinding | None:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.values:
                return scope.values[name]
            scope = scope.parent
        return None

    def type(self, name: str) -> TypeBinding | None:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.types:
                return scope.types[name]
            scope = scope.parent
        return None

    def child(self) -> Scope:
        return Scope(parent=self)


def elaborate_ty(ty: s.Ty, scope: Scope, tyvars: dict[str, Type], errors: list[Diagnostic],
                 unsupported=None, placeholder=None) -> Type:
    """The type a type expression denotes. `tyvars` gives the meaning of its type variables;
    an unknown one, an unbound type constructor or a wrong number of arguments is reported in
    `errors` (the result then has `placeholder()`, by default `unit`, in its place).
    `unsupported(name)` may explain an unbound name."""
    stand_in = placeholder or (lambda: record_type({}))

    def go(t: s.Ty) -> Type:
        if isinstance(t, s.TyVar):
            if t.name not in tyvars:
                errors.append(Diagnostic(t.span, f"unbound type variable {t.name}"))
                return stand_in()
            return tyvars[t.name]
        if isinstance(t, s.TyTuple):
            return tuple_type([go(i) for i in t.items])
        if isinstance(t, s.TyRecord):
            return record_type({label: go(ft) for label, ft in t.fields})
        if isinstance(t, s.TyArrow):
            return arrow(go(t.arg), go(t.result))
        args = tuple(go(a) for a in t.args)
        binding = scope.type(t.name)
        if binding is None:
            reason = unsupported(t.name) if unsupported else None
            errors.append(Diagnostic(t.span, reason or f"unbound type constructor: {t.name}"))
            return stand_in()
        if binding.arity != len(args):
            errors.append(Diagnostic(t.span, f"type constructor {t.name} takes {binding.arity} "
                                             f"type argument(s), but is given {len(args)}"))
            return stand_in()
        if isinstance(binding, TypeFun):
            return substitute(binding.body, list(args))
        return TCon(binding, args)

    return go(ty)
