"""Type inference for expressions and patterns (Hindley-Milner, algorithm J with levels), and
their translation to the typed, match-compiled form of `typed.py`.

Declarations, generalisation and the top level are in `declarations.py`, which completes the
`ExpChecker` defined here. Errors are collected, not raised: after one, inference goes on with a
fresh type so that one mistake gives one message.

Messages: `type mismatch: expected T1, found T2` at the expression or pattern whose type was
found (the first rule, branch or list element sets what is expected); `type mismatch: expected
an equality type, found T`; `type mismatch: expected int or real, found T` for an overloaded
operator; `unbound variable or constructor: x`; `cannot find a fixed record type for #x`.
"""

from __future__ import annotations

from itertools import count

from hpgrem.diagnostics import Diagnostic
from frontend.ml import basis
from frontend.ml import match as m
from frontend.ml import syntax as s
from frontend.ml import typed as t
from frontend.ml.env import (BasisBinding, ConBinding, ExnBinding, Scope, ValueBinding, VarBinding,
                             elaborate_ty)
from frontend.ml.types import (ARROW, CHAR_T, EXN_T, INT_T, REAL_T, REF, STRING_T, UNIT, Mismatch, Scheme,
                               TCon, TRecord, TRigid, TVar, TyCon, Type, TypeNames, arrow, instantiate, label_key,
                               mono, prune, record_type, show, tuple_type, unify)
from hpgrem.ir import Span

_CONST_TYPES = {"int": INT_T, "real": REAL_T, "string": STRING_T, "char": CHAR_T}
_LIST_CHUNK = 100


class ExpChecker:
    """The state of checking one top-level declaration: the current let-depth (`level`), the
    explicit type variables in scope, the overloaded and `#label` variables still to resolve,
    and the diagnostics so far."""

    def __init__(self, file: str, ids: count):
        self.file = file
        self.ids = ids
        self.level = 0
        self.rigids: dict[str, TRigid] = {}
        self.overloads: list[TVar] = []
        self.selections: list[tuple[TVar, str, Span]] = []
        self.tycons: list[TyCon] = []  # every datatype declared, in order (for `let`'s scope)
        self.errors: list[Diagnostic] = []
        self.warnings: list[Diagnostic] = []

    # ---- helpers
    def fresh(self, eq: bool = False) -> TVar:
        return TVar(next(self.ids), self.level, eq)

    def new_var(self, name: str, span: Span) -> t.Var:
        return t.Var(name, next(self.ids), span)

    def error(self, span: Span, message: str) -> None:
        self.errors.append(Diagnostic(span, message))

    def instance(self, scheme: Scheme) -> Type:
        ty, new = instantiate(scheme, self.fresh)
        if scheme.overload is not None:
            self.overloads.append(new[0])
        return ty

    def ty(self, ty: s.Ty, scope: Scope) -> Type:
        return elaborate_ty(ty, scope, dict(self.rigids), self.errors, basis.unsupported, self.fresh)

    def expect(self, expected: Type, found: Type, span: Span) -> bool:
        """Unify, reporting a failure at `span` in terms of both whole types."""
        try:
            unify(expected, found)
            return True
        except Mismatch as err:
            self.error(span, mismatch_message(err, expected, found))
            return False

    def expect_arg(self, param: Type, arg: t.Expr, syntax: s.Exp) -> None:
        """Check an argument against a parameter type, component by component when both are
        tuples so that the message points at the component that is wrong."""
        p = prune(param)
        if (isinstance(syntax, s.ETuple) and isinstance(p, TRecord) and isinstance(arg, t.Record)
                and [lbl for lbl, _ in p.fields] == [str(i + 1) for i in range(len(syntax.items))]):
            for (_, ft), (_, item), item_syntax in zip(p.fields, arg.fields, syntax.items):
                if not self.expect(ft, item.type, item_syntax.span):
                    break  # the other components would only repeat the same complaint
        else:
            self.expect(param, arg.type, syntax.span)

    def unbound(self, name: str, span: Span) -> None:
        self.error(span, basis.unsupported(name) or f"unbound variable or constructor: {name}")

    # ---- expressions
    def exp(self, e: s.Exp, scope: Scope) -> t.Expr:
        return getattr(self, "_" + type(e).__name__)(e, scope)

    def _EConst(self, e: s.EConst, scope: Scope) -> t.Expr:
        return t.Const(e.value, _CONST_TYPES[e.kind], e.span)

    def _EVar(self, e: s.EVar, scope: Scope) -> t.Expr:
        return self.value(e.name, scope.value(e.name), e.span)

    def value(self, name: str, b: ValueBinding | None, span: Span) -> t.Expr:
        if isinstance(b, VarBinding):
            return t.VarRef(b.var, self.instance(b.scheme), span)
        if isinstance(b, BasisBinding):
            return t.BasisRef(b.name, self.instance(b.scheme), span)
        if isinstance(b, (ConBinding, ExnBinding)):
            ty = self.instance(b.con.scheme) if isinstance(b, ConBinding) else \
                (arrow(b.exn.arg, EXN_T) if b.exn.arg is not None else EXN_T)
            has_arg = b.con.has_arg if isinstance(b, ConBinding) else b.exn.arg is not None
            if not has_arg:
                return self.construct(b, None, ty, span)
            # A constructor used as a value: wrap it so that constructors are always applied.
            param, result = prune(ty).args
            x = self.new_var("x", span)
            return t.Fn(x, self.construct(b, t.VarRef(x, param, span), result, span), ty, span)
        self.unbound(name, span)
        return t.BasisRef(name, self.fresh(), span)

    @staticmethod
    def construct(b: ConBinding | ExnBinding, arg: t.Expr | None, ty: Type, span: Span) -> t.Expr:
        if isinstance(b, ConBinding):
            return t.ConApp(b.con, arg, ty, span)
        return t.ExnApp(b.exn, arg, ty, span)

    def _ESelector(self, e: s.ESelector, scope: Scope) -> t.Expr:
        r = self.fresh()
        x = self.new_var("r", e.span)
        sel = self.select(e.label, t.VarRef(x, r, e.span), e.span)
        return t.Fn(x, sel, arrow(r, sel.type), e.span)

    def select(self, label: str, record: t.Expr, span: Span) -> t.Expr:
        rt = prune(record.type)
        if isinstance(rt, TRecord):
            fields = dict(rt.fields)
            if label not in fields:
                self.error(span, f"type mismatch: #{label} selects a field that {show(rt)} does not have")
                return t.Select(label, record, self.fresh(), span)
            return t.Select(label, record, fields[label], span)
        field_type = self.fresh()
        flexible = self.fresh()
        flexible.fields = {label: field_type}
        self.selections.append((flexible, label, span))
        self.expect(flexible, record.type, span)
        return t.Select(label, record, field_type, span)

    def _EApp(self, e: s.EApp, scope: Scope) -> t.Expr:
        if isinstance(e.fn, s.ESelector):
            return self.select(e.fn.label, self.exp(e.arg, scope), e.fn.span)
        if isinstance(e.fn, s.EVar):
            b = scope.value(e.fn.name)
            if isinstance(b, (ConBinding, ExnBinding)) and (
                    b.con.has_arg if isinstance(b, ConBinding) else b.exn.arg is not None):
                ty = self.instance(b.con.scheme) if isinstance(b, ConBinding) else arrow(b.exn.arg, EXN_T)
                param, result = prune(ty).args
                arg = self.exp(e.arg, scope)
                self.expect_arg(param, arg, e.arg)
                return self.construct(b, arg, result, e.span)
        return self.apply(self.exp(e.fn, scope), self.exp(e.arg, scope), e.fn.span, e.arg, e.span)

    def apply(self, fn: t.Expr, arg: t.Expr, fn_span: Span, arg_syntax: s.Exp, span: Span) -> t.Expr:
        ft = prune(fn.type)
        if isinstance(ft, TCon) and ft.con is ARROW:
            param, result = ft.args
        else:
            param, result = self.fresh(), self.fresh()
            try:
                unify(ft, arrow(param, result))
            except Mismatch:
                self.error(fn_span, f"type mismatch: expected a function, found {show(ft)}")
        self.expect_arg(param, arg, arg_syntax)
        return t.App(fn, arg, result, span)

    def _EInfix(self, e: s.EInfix, scope: Scope) -> t.Expr:
        b = scope.value(e.op)
        fn = None if isinstance(b, ConBinding) else self.value(e.op, b, e.op_span)
        left, right = self.exp(e.left, scope), self.exp(e.right, scope)
        pair = t.Record((("1", left), ("2", right)), tuple_type([left.type, right.type]), e.span)
        syntax = s.ETuple((e.left, e.right), e.span)
        if isinstance(b, ConBinding):  # `::`
            param, result = prune(self.instance(b.con.scheme)).args
            self.expect_arg(param, pair, syntax)
            return t.ConApp(b.con, pair, result, e.span)
        return self.apply(fn, pair, e.op_span, syntax, e.span)

    def _ETuple(self, e: s.ETuple, scope: Scope) -> t.Expr:
        items = [self.exp(i, scope) for i in e.items]
        return t.Record(tuple((str(n + 1), x) for n, x in enumerate(items)),
                        tuple_type([x.type for x in items]), e.span)

    def _ERecord(self, e: s.ERecord, scope: Scope) -> t.Expr:
        fields = tuple((label, self.exp(x, scope)) for label, x in e.fields)
        return t.Record(fields, record_type({label: x.type for label, x in fields}), e.span)

    def _EList(self, e: s.EList, scope: Scope) -> t.Expr:
        items = [self.exp(i, scope) for i in e.items]
        elem = items[0].type if items else self.fresh()
        for item, syntax in zip(items[1:], e.items[1:]):
            self.expect(elem, item.type, syntax.span)
        return _list_value(items, elem, e.span)

    def _ESeq(self, e: s.ESeq, scope: Scope) -> t.Expr:
        items = tuple(self.exp(i, scope) for i in e.items)
        return t.Seq(items, items[-1].type, e.span)

    def _ELet(self, e: s.ELet, scope: Scope) -> t.Expr:
        inner = scope.child()
        before = len(self.tycons)
        decs = self.decs(e.decs, inner)
        body = self.exp(e.body, inner)
        local = _tycon_in(body.type, set(map(id, self.tycons[before:])))
        if local is not None:  # Definition, rule 4: the type of a let has no type name of its own
            self.error(e.span, f"the type of this let expression, {show(body.type)}, contains datatype "
                               f"{local.name} declared inside it (the type escapes its scope)")
        return t.Let(tuple(decs), body, body.type, e.span)

    def _EAnnot(self, e: s.EAnnot, scope: Scope) -> t.Expr:
        x = self.exp(e.exp, scope)
        self.expect(self.ty(e.ty, scope), x.type, e.exp.span)
        return x

    def _bool(self, e: s.Exp, scope: Scope) -> t.Expr:
        x = self.exp(e, scope)
        self.expect(basis.BOOL_T, x.type, e.span)
        return x

    def _truth(self, value: bool, span: Span) -> t.Expr:
        return t.ConApp(basis.CONSTRUCTORS["true" if value else "false"], None, basis.BOOL_T, span)

    def _EAndalso(self, e: s.EAndalso, scope: Scope) -> t.Expr:
        left, right = self._bool(e.left, scope), self._bool(e.right, scope)
        return t.If(left, right, self._truth(False, e.span), basis.BOOL_T, e.span)

    def _EOrelse(self, e: s.EOrelse, scope: Scope) -> t.Expr:
        left, right = self._bool(e.left, scope), self._bool(e.right, scope)
        return t.If(left, self._truth(True, e.span), right, basis.BOOL_T, e.span)

    def _EIf(self, e: s.EIf, scope: Scope) -> t.Expr:
        cond = self._bool(e.cond, scope)
        then, else_ = self.exp(e.then, scope), self.exp(e.else_, scope)
        self.expect(then.type, else_.type, e.else_.span)
        return t.If(cond, then, else_, then.type, e.span)

    def _EWhile(self, e: s.EWhile, scope: Scope) -> t.Expr:
        cond = self._bool(e.cond, scope)
        return t.While(cond, self.exp(e.body, scope), UNIT, e.span)

    def _ERaise(self, e: s.ERaise, scope: Scope) -> t.Expr:
        x = self.exp(e.exp, scope)
        self.expect(EXN_T, x.type, e.exp.span)
        return t.Raise(x, self.fresh(), e.span)

    def _EHandle(self, e: s.EHandle, scope: Scope) -> t.Expr:
        body = self.exp(e.exp, scope)
        match = self.match(e.match, scope, EXN_T, body.type, "reraise", e.span)
        return t.Handle(body, match, body.type, e.span)

    def _ECase(self, e: s.ECase, scope: Scope) -> t.Expr:
        x = self.exp(e.exp, scope)
        match = self.match(e.match, scope, x.type, self.fresh(), "Match", e.span)
        return t.Case(x, match, match.type, e.span)

    def _EFn(self, e: s.EFn, scope: Scope) -> t.Expr:
        arg, result = self.fresh(), self.fresh()
        rules = [self.rule((r.pat,), (arg,), r.exp, result, scope, r.pat.span) for r in e.match.rules]
        return self.function([arg], result, rules, e.span)

    # ---- matches
    def rule(self, pats: tuple[s.Pat, ...], types: tuple[Type, ...], body: s.Exp, result: Type,
             scope: Scope, span: Span, result_ty: s.Ty | None = None) -> m.Rule:
        """Check one rule (or `fun` clause) against the argument and result types."""
        binds: dict[str, tuple[t.Var, Type]] = {}
        mpats = []
        for p, ty in zip(pats, types):
            mp, pt = self.pat(p, scope, binds)
            self.expect(ty, pt, p.span)
            mpats.append(mp)
        inner = scope.child()
        inner.values.update({name: VarBinding(v, mono(vt)) for name, (v, vt) in binds.items()})
        x = self.exp(body, inner)
        if result_ty is not None:
            self.expect(self.ty(result_ty, scope), x.type, body.span)
        self.expect(result, x.type, body.span)
        return m.Rule(tuple(mpats), x, span)

    def match(self, match: s.Match, scope: Scope, arg: Type, result: Type, failure: str, span: Span) -> t.Match:
        rules = [self.rule((r.pat,), (arg,), r.exp, result, scope, r.pat.span) for r in match.rules]
        root = self.new_var("exn" if failure == "reraise" else "v", span)
        compiled, warnings = m.compile_match((root,), rules, failure, result, span)
        self.warnings.extend(warnings)
        return compiled

    def function(self, args: list[Type], result: Type, rules: list[m.Rule], span: Span) -> t.Fn:
        """Curried `Fn`s over `args` whose body matches the rules; one rule of plain variables
        needs no match, its variables are the parameters."""
        if len(rules) == 1 and all(isinstance(p, (m.MVar, m.MWild)) for p in rules[0].pats):
            params = [p.var if isinstance(p, m.MVar) else self.new_var("_", span) for p in rules[0].pats]
            body: t.Expr = rules[0].body
        else:
            params = [self.new_var(f"arg{i + 1}" if len(args) > 1 else "arg", span) for i in range(len(args))]
            body, warnings = m.compile_match(tuple(params), rules, "Match", result, span)
            self.warnings.extend(warnings)
        for param, arg in zip(reversed(params), reversed(args)):
            body = t.Fn(param, body, arrow(arg, body.type), span)
        assert isinstance(body, t.Fn)
        return body

    # ---- patterns
    def pat(self, p: s.Pat, scope: Scope, binds: dict[str, tuple[t.Var, Type]]) -> tuple[m.MPat, Type]:
        """The pattern, its type, and (into `binds`) the variables it binds."""
        if isinstance(p, s.PWild):
            return m.MWild(), self.fresh()
        if isinstance(p, s.PVar):
            b = scope.value(p.name)
            if isinstance(b, (ConBinding, ExnBinding)):
                return self.con_pat(p.name, b, None, scope, binds, p.span)
            if "." in p.name:
                self.unbound(p.name, p.span)
                return m.MWild(), self.fresh()
            return self.bind(p.name, p.span, self.fresh(), binds)
        if isinstance(p, s.PConst):
            if p.kind == "real":
                self.error(p.span, "type mismatch: real constants cannot be matched (real is not an equality type)")
                return m.MWild(), REAL_T
            return m.MConst(p.value, p.kind), _CONST_TYPES[p.kind]
        if isinstance(p, s.PCon):
            b = scope.value(p.name)
            if isinstance(b, (ConBinding, ExnBinding)):
                return self.con_pat(p.name, b, p.arg, scope, binds, p.span)
            self.error(p.span, f"{p.name} is not a constructor" if b is not None else
                       basis.unsupported(p.name) or f"unbound constructor: {p.name}")
            self.pat(p.arg, scope, binds)
            return m.MWild(), self.fresh()
        if isinstance(p, s.PTuple):
            items = [self.pat(i, scope, binds) for i in p.items]
            return m.MRecord(tuple(mp for mp, _ in items)), tuple_type([ty for _, ty in items])
        if isinstance(p, s.PRecord):
            fields = sorted(((label, self.pat(x, scope, binds)) for label, x in p.fields),
                            key=lambda f: label_key(f[0]))
            return (m.MRecord(tuple(mp for _, (mp, _) in fields)),
                    record_type({label: ty for label, (_, ty) in fields}))
        if isinstance(p, s.PList):
            return self.list_pat(p, scope, binds)
        if isinstance(p, s.PLayer):
            b = scope.value(p.name)
            if isinstance(b, (ConBinding, ExnBinding)):
                self.error(p.span, f"{p.name} is a constructor and cannot be bound by 'as'")
            inner, ty = self.pat(p.pat, scope, binds)
            mv, _ = self.bind(p.name, p.span, ty, binds)
            return m.MLayer(mv.var, inner), ty
        assert isinstance(p, s.PAnnot)
        inner, ty = self.pat(p.pat, scope, binds)
        self.expect(self.ty(p.ty, scope), ty, p.pat.span)
        return inner, ty

    def bind(self, name: str, span: Span, ty: Type, binds: dict[str, tuple[t.Var, Type]]) -> tuple[m.MVar, Type]:
        if name in binds:
            self.error(span, f"variable {name} occurs twice in this pattern")
        var = self.new_var(name, span)
        binds[name] = (var, ty)
        return m.MVar(var), ty

    def con_pat(self, name: str, b: ConBinding | ExnBinding, arg: s.Pat | None, scope: Scope,
                binds: dict[str, tuple[t.Var, Type]], span: Span) -> tuple[m.MPat, Type]:
        if isinstance(b, ConBinding):
            has_arg, ty = b.con.has_arg, self.instance(b.con.scheme)
        else:
            has_arg = b.exn.arg is not None
            ty = arrow(b.exn.arg, EXN_T) if has_arg else EXN_T
        if has_arg != (arg is not None):
            self.error(span, f"constructor {name} " + ("needs an argument" if has_arg else "takes no argument"))
            if arg is not None:
                self.pat(arg, scope, binds)
            return m.MWild(), self.fresh()
        if arg is None:
            return (m.MCon(b.con, None) if isinstance(b, ConBinding) else m.MExn(b.exn, None)), ty
        param, result = prune(ty).args
        sub, sub_type = self.pat(arg, scope, binds)
        self.expect(param, sub_type, arg.span)
        if isinstance(b, ExnBinding):
            return m.MExn(b.exn, sub), result
        if b.con.tycon is REF:
            return m.MRef(sub), result
        return m.MCon(b.con, sub), result

    def list_pat(self, p: s.PList, scope: Scope, binds: dict[str, tuple[t.Var, Type]]) -> tuple[m.MPat, Type]:
        elem = self.fresh()
        items = []
        for item in p.items:
            mp, ty = self.pat(item, scope, binds)
            self.expect(elem, ty, item.span)
            items.append(mp)
        result: m.MPat = m.MCon(basis.CONSTRUCTORS["nil"], None)
        for mp in reversed(items):
            result = m.MCon(basis.CONSTRUCTORS["::"], m.MRecord((mp, result)))
        return result, TCon(basis.LIST, (elem,))

    def decs(self, decs: tuple[s.Dec, ...], scope: Scope) -> list[t.Dec]:
        raise NotImplementedError  # declarations.Checker


def _list_value(items: list[t.Expr], elem: Type, span: Span) -> t.Expr:
    """`[items]` as `::` cells; a long list is `List.concat` of lists of at most _LIST_CHUNK
    items (and so on up), so that it nests no deeper than a few hundred cells: a flat list
    of any length is not deep nesting for the stages after this one."""
    nil, cons = basis.CONSTRUCTORS["nil"], basis.CONSTRUCTORS["::"]
    list_t = TCon(basis.LIST, (elem,))
    if len(items) > _LIST_CHUNK:
        chunks = [_list_value(items[i:i + _LIST_CHUNK], elem, items[i].span)
                  for i in range(0, len(items), _LIST_CHUNK)]
        concat = t.BasisRef("List.concat", arrow(TCon(basis.LIST, (list_t,)), list_t), span)
        return t.App(concat, _list_value(chunks, list_t, span), list_t, span)
    result: t.Expr = t.ConApp(nil, None, list_t, span)
    for item in reversed(items):
        pair = t.Record((("1", item), ("2", result)), tuple_type([elem, list_t]), item.span)
        result = t.ConApp(cons, pair, list_t, item.span)
    return result


def mismatch_message(err: Mismatch, expected: Type, found: Type) -> str:
    names = TypeNames()
    if err.reason == "eq":
        culprit = found if not isinstance(prune(found), TVar) else expected
        return f"type mismatch: expected an equality type, found {show(culprit, names)}"
    if err.reason == "overload" and err.overload is not None:
        allowed = [c.name for c in err.overload]
        options = allowed[0] if len(allowed) == 1 else ", ".join(allowed[:-1]) + " or " + allowed[-1]
        pe, pf = prune(expected), prune(found)
        if isinstance(pe, TVar) and pe.overload is not None:
            return f"type mismatch: expected {options}, found {show(found, names)}"
        if isinstance(pf, TVar) and pf.overload is not None:
            return f"type mismatch: expected {show(expected, names)}, found {options}"
    text = f"type mismatch: expected {show(expected, names)}, found {show(found, names)}"
    return text + (" (a type that contains itself)" if err.reason == "circular" else "")


def _tycon_in(ty: Type, tycons: set[int]) -> TyCon | None:
    """A type constructor of `ty` whose id is in `tycons`, if any."""
    ty = prune(ty)
    if isinstance(ty, TCon):
        if id(ty.con) in tycons:
            return ty.con
        return next((c for a in ty.args if (c := _tycon_in(a, tycons)) is not None), None)
    if isinstance(ty, TRecord):
        return next((c for _, ft in ty.fields if (c := _tycon_in(ft, tycons)) is not None), None)
    if isinstance(ty, TVar) and ty.fields:
        return next((c for ft in ty.fields.values() if (c := _tycon_in(ft, tycons)) is not None), None)
    return None
