"""Declarations and the top level: `val` (with the value restriction), `val rec`, `fun`,
`type`, `datatype`, `exception`, `local`; explicit type variables; and what happens at the end
of each top-level declaration (spec/ml.md, "Static semantics"):

1. overloaded operators still unresolved default to int;
2. a top-level value whose type keeps a free type variable (the value restriction kept it from
   being generalised: `val r = ref []`) gets a new, unique type `_a` in its place, with the
   warning `type of r contains a free type variable: setting it to a unique monotype`, as Poly/ML.

A `#label` may find its record type in a later declaration of the same chunk (the text up to a
top-level `;`), as in Poly/ML: `fun f r = #a r  val x = f {a = 1}`. So at the end of the chunk:

3. a `#label` whose record type is still unknown is an error; the variables it waited on get
   their monotypes then (step 2);
4. the types in the elaborated declarations are resolved (`typed.py` promises no links).
"""

from __future__ import annotations

import dataclasses
from itertools import count

from hpgrem.diagnostics import CompileError, Diagnostic
from frontend.ml import basis
from frontend.ml import match as m
from frontend.ml import syntax as s
from frontend.ml import typed as t
from frontend.ml.elaborate import ExpChecker
from frontend.ml.env import ConBinding, ExnBinding, Scope, TypeFun, VarBinding, elaborate_ty
from frontend.ml.types import (REF, Constructor, Scheme, TCon, TGen, TRecord, TRigid, TVar, TyCon, Type,
                               arrow, free_vars, generalize, lower_levels, mono, pinned_vars, prune, resolve)
from hpgrem.ir import Span

_NONREBINDABLE = {"true", "false", "nil", "::", "ref", "="}
# `it` names the value of a top-level expression: never a constructor or an exception (2.9)
_NOT_A_CONSTRUCTOR = {"it"}


class Checker(ExpChecker):
    """Checks declarations (and, through `ExpChecker`, the expressions in them)."""

    def decs(self, decs: tuple[s.Dec, ...], scope: Scope) -> list[t.Dec]:
        out: list[t.Dec] = []
        for d in decs:
            out.extend(self.dec(d, scope))
        return out

    def dec(self, d: s.Dec, scope: Scope) -> list[t.Dec]:
        """Elaborate `d`, adding what it binds to `scope`."""
        if isinstance(d, s.DLocal):
            inner = scope.child()
            first = self.decs(d.inner, inner)
            outer = inner.child()
            second = self.decs(d.outer, outer)
            scope.values.update(outer.values)
            scope.types.update(outer.types)
            return first + second
        if isinstance(d, s.DType):
            self.type_dec(d, scope)
            return []
        if isinstance(d, s.DDatatype):
            return self.datatype_dec(d, scope)
        if isinstance(d, s.DException):
            return self.exception_dec(d, scope)
        # val and fun: explicit type variables are scoped here unless already in scope
        names = [v.name for v in d.tyvars] + _tyvars_in(d)
        new = {n: TRigid(n, next(self.ids)) for n in dict.fromkeys(names) if n not in self.rigids}
        self.rigids.update(new)
        try:
            rigid_ids = {r.id: r for r in new.values()}
            if isinstance(d, s.DFun):
                return self.fun_dec(d, scope, rigid_ids)
            return self.val_dec(d, scope, rigid_ids)
        finally:
            for n in new:
                del self.rigids[n]

    # ---- val and val rec
    def val_dec(self, d: s.DVal, scope: Scope, rigids: dict[int, TRigid]) -> list[t.Dec]:
        """The plain bindings' expressions and the recursive part (`rec`, from `d.rec_from` on)
        are elaborated in the scope before the declaration, then all of it is bound (Definition,
        rules 15, 25 and 26); a name is bound at most once in the group."""
        self.level += 1
        parts = []
        for b in d.binds[:d.rec_from]:
            x = self.exp(b.exp, scope)
            binds: dict[str, tuple[t.Var, Type]] = {}
            pat, pt = self.pat(b.pat, scope, binds)
            self.expect(pt, x.type, b.exp.span)
            parts.append((b, x, pat, binds))
        self.level -= 1
        seen: set[str] = set()
        for _, _, _, binds in parts:
            for name, (var, _) in binds.items():
                self.declare_once(seen, name, var.span)
        recursive = self.val_rec(d.binds[d.rec_from:], scope, rigids, seen, d.span) \
            if d.rec_from < len(d.binds) else []
        out: list[t.Dec] = []
        for b, x, pat, binds in parts:
            value = nonexpansive(b.exp, scope)
            for name, (var, ty) in binds.items():
                scope.values[name] = VarBinding(var, self.scheme(ty, value, rigids, var.span))
            if isinstance(pat, m.MVar):
                out.append(t.ValDec(pat.var, x, t.Leaf(0), (), b.span))
                continue
            root = self.new_var("v", b.span)
            tree, bindings, warnings = m.compile_binding(root, pat, b.pat.span)
            self.warnings.extend(warnings)
            out.append(t.ValDec(root, x, tree, bindings, b.span))
        return out + recursive

    def scheme(self, ty: Type, value: bool, rigids: dict[int, TRigid], span) -> Scheme:
        """Generalise `ty` if its expression is a value (the value restriction)."""
        if value:
            return generalize(ty, self.level, rigids)
        lower_levels(ty, self.level)
        if rigids and _mentions(ty, rigids):
            self.error(span, "an explicit type variable cannot be generalised here: "
                             "the expression is not a value (value restriction)")
        return mono(ty)

    def check_rebind(self, name: str, span) -> None:
        if name in _NONREBINDABLE:
            self.error(span, f"{name} cannot be rebound")

    def check_constructor_name(self, name: str, span, what: str) -> None:
        self.check_rebind(name, span)
        if name in _NOT_A_CONSTRUCTOR:
            self.error(span, f"{name} cannot be bound as {what}")

    def declare_once(self, seen: set[str], name: str, span) -> None:
        """A name bound by a group of `and` bindings: once at most, and never one of the basis's
        fixed names."""
        if name in seen:
            self.error(span, f"{name} is bound twice in this declaration")
        seen.add(name)
        self.check_rebind(name, span)

    def val_rec(self, binds: tuple[s.ValBind, ...], scope: Scope, rigids: dict[int, TRigid],
                seen: set[str], span) -> list[t.Dec]:
        """The recursive part of a `val`: each pattern names its function (`f`, `(f)`,
        `f : ty`, `f as g`, `_`), each expression is a `fn` that sees all of them."""
        self.level += 1
        inner = scope.child()
        entries, group = [], []
        for b in binds:
            shape = _rec_pattern(b.pat)
            if shape is None:
                self.error(b.pat.span, "val rec can only bind a variable to a fn expression")
                continue
            names, annots = shape
            ty = self.fresh()
            for a in annots:
                self.expect(self.ty(a, scope), ty, b.pat.span)
            var = self.new_var(names[0][0], names[0][1]) if names else self.new_var("rec", b.pat.span)
            for name, name_span in names:  # `f as g`: two names of one function
                self.declare_once(seen, name, name_span)
                inner.values[name] = VarBinding(var, mono(ty))
                entries.append((name, var, ty, b))
            group.append((var, ty, b))
        fns = []
        for var, ty, b in group:
            exp = b.exp
            while isinstance(exp, s.EAnnot):
                exp = exp.exp
            if not isinstance(exp, s.EFn):
                self.error(b.exp.span, "val rec needs a fn expression on the right")
                continue
            fn = self.exp(b.exp, inner)
            self.expect(ty, fn.type, b.exp.span)
            fns.append((var, fn))
        self.level -= 1
        return self.bind_recursive(entries, fns, scope, rigids, span)

    def fun_dec(self, d: s.DFun, scope: Scope, rigids: dict[int, TRigid]) -> list[t.Dec]:
        self.level += 1
        inner = scope.child()
        entries, shapes = [], []
        seen: set[str] = set()
        # Every function's curried shape is its type before any clause is checked, so that a
        # misuse of any function of the group, in any clause, is reported where it is used.
        for b in d.binds:
            arity = len(b.clauses[0].args)
            for clause in b.clauses[1:]:
                if len(clause.args) != arity:
                    self.error(clause.span, f"clauses of {b.name} have different numbers of arguments")
            args, result = [self.fresh() for _ in range(arity)], self.fresh()
            curried = result
            for arg in reversed(args):
                curried = arrow(arg, curried)
            var = self.new_var(b.name, b.span)
            self.declare_once(seen, b.name, var.span)
            inner.values[b.name] = VarBinding(var, mono(curried))
            entries.append((b.name, var, curried, b))
            shapes.append((args, result, arity))
        fns = []
        for (_, var, _, b), (args, result, arity) in zip(entries, shapes):
            rules = [self.rule(c.args, tuple(args), c.body, result, inner, c.span, c.result)
                     for c in b.clauses if len(c.args) == arity]
            fns.append((var, self.function(args, result, rules, b.span)))
        self.level -= 1
        return self.bind_recursive(entries, fns, scope, rigids, d.span)

    def bind_recursive(self, entries, fns, scope: Scope, rigids: dict[int, TRigid], span) -> list[t.Dec]:
        for name, var, ty, _ in entries:
            scope.values[name] = VarBinding(var, generalize(ty, self.level, rigids))
        return [t.RecDec(tuple(fns), span)]

    # ---- type, datatype, exception
    def type_dec(self, d: s.DType, scope: Scope) -> None:
        made = {}
        for b in d.binds:
            if b.name in made:
                self.error(b.span, f"type {b.name} is bound twice in this declaration")
            params = self.params(b.params)
            made[b.name] = TypeFun(len(b.params), elaborate_ty(b.ty, scope, params, self.errors, basis.unsupported))
        scope.types.update(made)

    def params(self, params: tuple[s.TyVar, ...]) -> dict[str, Type]:
        out: dict[str, Type] = {}
        for i, p in enumerate(params):
            if p.name in out:
                self.error(p.span, f"type variable {p.name} is a parameter twice")
            out[p.name] = TGen(i)
        return out

    def datatype_dec(self, d: s.DDatatype, scope: Scope) -> list[t.Dec]:
        tycons = []
        for b in d.binds:
            if any(tc.name == b.name for tc in tycons):
                self.error(b.span, f"type {b.name} is bound twice in this declaration")
            tycon = TyCon(b.name, len(b.params), True)
            self.tycons.append(tycon)
            scope.types[b.name] = tycon
            tycons.append(tycon)
        seen: set[str] = set()
        for b, tycon in zip(d.binds, tycons):
            params = self.params(b.params)
            result = TCon(tycon, tuple(TGen(i) for i in range(len(b.params))))
            for tag, c in enumerate(b.cons):
                if c.name in seen:
                    self.error(c.span, f"constructor {c.name} is declared twice")
                seen.add(c.name)
                self.check_constructor_name(c.name, c.span, "a constructor")
                body = result
                if c.arg is not None:
                    body = arrow(elaborate_ty(c.arg, scope, params, self.errors, basis.unsupported), result)
                con = Constructor(c.name, tag, c.arg is not None, tycon, Scheme((False,) * len(b.params), body),
                                  c.span)
                tycon.constructors.append(con)
                scope.values[c.name] = ConBinding(con)
        _settle_equality(tycons)
        return [t.DatatypeDec(tuple(tycons), d.span)]

    def exception_dec(self, d: s.DException, scope: Scope) -> list[t.Dec]:
        out: list[t.Dec] = []
        seen: set[str] = set()
        for b in d.binds:
            if b.name in seen:
                self.error(b.span, f"exception {b.name} is bound twice in this declaration")
            seen.add(b.name)
            self.check_constructor_name(b.name, b.span, "an exception")
            arg = self.ty(b.arg, scope) if b.arg is not None else None
            exn = t.ExnName(b.name, arg, self.new_var(b.name, b.span), b.span)
            scope.values[b.name] = ExnBinding(exn)
            out.append(t.ExceptionDec(exn, b.span))
        return out


def _settle_equality(tycons: list[TyCon]) -> None:
    """A datatype admits equality unless a constructor's argument cannot (greatest fixpoint over
    the mutually recursive group, the type parameters taken as equality variables)."""

    def admits(ty: Type) -> bool:
        ty = prune(ty)
        if isinstance(ty, TCon):
            return ty.con is REF or (ty.con.admits_eq and all(admits(a) for a in ty.args))
        if isinstance(ty, TRecord):
            return all(admits(ft) for _, ft in ty.fields)
        return isinstance(ty, TGen) or (isinstance(ty, TRigid) and ty.eq)

    changed = True
    while changed:
        changed = False
        for tycon in tycons:
            if tycon.admits_eq and any(c.has_arg and not admits(prune(c.scheme.body).args[0])
                                       for c in tycon.constructors):
                tycon.admits_eq = False
                changed = True


def nonexpansive(e: s.Exp, scope: Scope) -> bool:
    """SML's non-expansive expressions: the ones whose types may be generalised."""
    if isinstance(e, (s.EConst, s.EVar, s.ESelector, s.EFn)):
        return True
    if isinstance(e, (s.ETuple, s.EList)):
        return all(nonexpansive(i, scope) for i in e.items)
    if isinstance(e, s.ERecord):
        return all(nonexpansive(x, scope) for _, x in e.fields)
    if isinstance(e, s.EAnnot):
        return nonexpansive(e.exp, scope)
    if isinstance(e, s.EApp) and isinstance(e.fn, s.EVar):
        b = scope.value(e.fn.name)
        constructor = isinstance(b, ExnBinding) or (isinstance(b, ConBinding) and b.con.tycon is not REF)
        return constructor and nonexpansive(e.arg, scope)
    if isinstance(e, s.EInfix) and isinstance(scope.value(e.op), ConBinding):
        return nonexpansive(e.left, scope) and nonexpansive(e.right, scope)
    return False


def _rec_pattern(p: s.Pat) -> tuple[list[tuple[str, Span]], list[s.Ty]] | None:
    """The names (with where each is written) and type annotations of a `val rec` pattern:
    variables layered with `as` and annotated with `:`, ending in a variable or `_`; None for
    any other pattern."""
    names: list[tuple[str, Span]] = []
    annots: list[s.Ty] = []
    while True:
        if isinstance(p, s.PAnnot):
            annots.append(p.ty)
            p = p.pat
        elif isinstance(p, s.PLayer):
            names.append((p.name, p.span))
            p = p.pat
        elif isinstance(p, s.PVar):
            names.append((p.name, p.span))
            return names, annots
        elif isinstance(p, s.PWild):
            return names, annots
        else:
            return None


def _tyvars_in(node) -> list[str]:
    """The explicit type variables written in a declaration's expressions and patterns (not in
    nested `type`/`datatype` declarations, whose parameters are their own)."""
    out: list[str] = []

    def walk(x) -> None:
        if isinstance(x, s.TyVar):
            out.append(x.name)
        elif isinstance(x, (s.DType, s.DDatatype)):
            return
        elif isinstance(x, tuple):
            for i in x:
                walk(i)
        elif dataclasses.is_dataclass(x):
            for f in dataclasses.fields(x):
                if f.name not in ("span", "op_span", "tyvars"):
                    walk(getattr(x, f.name))

    walk(node)
    return out


def _mentions(ty: Type, rigids: dict[int, TRigid]) -> bool:
    ty = prune(ty)
    if isinstance(ty, TRigid):
        return ty.id in rigids
    if isinstance(ty, TCon):
        return any(_mentions(a, rigids) for a in ty.args)
    if isinstance(ty, TRecord):
        return any(_mentions(ft, rigids) for _, ft in ty.fields)
    return False


# ---------------------------------------------------------------------------------------------
# The top level


class TopLevel:
    """The top-level environment of one program, carried from chunk to chunk."""

    def __init__(self, file: str):
        self.file = file
        self.scope = basis.initial_scope()
        self.ids = count(1)
        self.monotypes = 0

    def chunk(self, chunk: s.Chunk) -> t.Chunk:
        """Elaborate one chunk; raises CompileError (and binds nothing) if it has errors."""
        scope = self.scope.child()
        decs: list[t.Dec] = []
        errors: list[Diagnostic] = []
        warnings: list[Diagnostic] = []
        selections: list[tuple[TVar, str, Span]] = []
        for d in chunk.decs:
            checker = Checker(self.file, self.ids)
            sub = scope.child()
            decs.extend(checker.decs((d,), sub))
            self.finish(checker, sub, d)
            selections.extend(checker.selections)
            errors.extend(checker.errors)
            warnings.extend(checker.warnings)
            scope.values.update(sub.values)
            scope.types.update(sub.types)
        # A `#label` may find its record type in a later declaration of the chunk (as Poly/ML)
        for var, label, span in selections:
            if isinstance(prune(var), TVar):
                errors.append(Diagnostic(span, f"cannot find a fixed record type for #{label}"))
        if errors:
            raise CompileError(_ordered(errors))
        self.settle_free(scope, chunk.span, warnings, pinned=False)
        self.scope.values.update(scope.values)
        self.scope.types.update(scope.types)
        bindings = tuple((name, b.scheme) for name, b in scope.values.items() if isinstance(b, VarBinding))
        resolved = [resolve_types(x) for x in decs]
        return t.Chunk(tuple(resolved), tuple(_ordered(warnings)), chunk.span, bindings)

    def finish(self, checker: Checker, scope: Scope, d: s.Dec) -> None:
        """The end of a top-level declaration (see the module docstring)."""
        for var in checker.overloads:
            v = prune(var)
            if isinstance(v, TVar) and v.overload is not None:
                v.link = TCon(v.overload[0])
        self.settle_free(scope, d.span, checker.warnings, pinned=True)

    def settle_free(self, scope: Scope, span: Span, warnings: list[Diagnostic], pinned: bool) -> None:
        """Give each free type variable of a value bound in `scope` a new, unique monotype, with
        a warning; with `pinned`, leave out those a `#label` still waits on (the chunk's end
        settles them)."""
        for name, b in scope.values.items():
            if not isinstance(b, VarBinding):
                continue
            waiting = {v.id for v in pinned_vars(b.scheme.body)} if pinned else set()
            free = [v for v in free_vars(b.scheme.body) if v.link is None and v.id not in waiting]
            if free:
                warnings.append(Diagnostic(span, f"type of {name} contains a free type variable: "
                                                 "setting it to a unique monotype", "warning"))
            for v in free:
                v.link = TCon(TyCon(_monotype_name(self.monotypes), 0, False))
                self.monotypes += 1

    def value_type(self, name: str) -> Scheme | None:
        """The type scheme of a top-level value (for tools and tests)."""
        b = self.scope.value(name)
        return b.scheme if isinstance(b, VarBinding) else None


def _monotype_name(n: int) -> str:
    return "_" + chr(ord("a") + n % 26) + (str(n // 26) if n >= 26 else "")


def _ordered(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    return sorted(diagnostics, key=lambda d: (d.span.line, d.span.col))


_NODES = (t.Const, t.VarRef, t.BasisRef, t.ConApp, t.ExnApp, t.App, t.Fn, t.Let, t.Seq, t.Record,
          t.Select, t.If, t.While, t.Raise, t.Match, t.Case, t.Handle, t.ValDec, t.RecDec, t.Switch, t.Arm)


def resolve_types(node, memo: dict | None = None):
    """A copy of an elaborated node with every type resolved (no linked variables left); the
    types shared between its parts are resolved once."""
    if memo is None:
        memo = {}
    if isinstance(node, (TCon, TRecord, TVar)):
        return resolve(node, memo)
    # Loops, not comprehensions: one Python frame per level of the tree, which is as deep as
    # the program's nesting.
    if isinstance(node, tuple):
        items = []
        for x in node:
            items.append(resolve_types(x, memo))
        return tuple(items)
    if isinstance(node, _NODES):
        fields = {}
        for f in dataclasses.fields(node):
            fields[f.name] = resolve_types(getattr(node, f.name), memo)
        return dataclasses.replace(node, **fields)
    return node
