"""Lowering: the typed, match-compiled ML program -> HPGREM functions (supercombinators).

Closure conversion and lambda lifting, in one walk:
- a function bound by `fun`/`val rec`/`val f = fn` is *known*: it becomes a `Function` whose
  leading parameters are the local variables it needs from enclosing functions (its free
  variables, those of the known functions it calls included), followed by its curried arguments
  (`fun f a b = ...` takes both at once). A saturated call is a `CallKnown`; using it as a value
  makes a closure (of a chain of curry wrappers when it takes several arguments).
- an anonymous `fn` becomes a `Function` of its free variables and its argument, and the
  expression a `MakeClosure`.
- top-level values are module globals (`SetGlobal` in the entry function, `Global` elsewhere);
  top-level functions are known functions with no free variables.
- decision trees become `Switch`es over `Part` paths; an arm reached from several leaves is
  selected by number so that its code is made once.
- basis values become primitives (`Prim`, typed for the overloaded operators), the higher-order
  list functions come from the ML prelude (`prelude.sml`), compiled with every program (the
  prune-unreachable pass drops what a program does not use).

Variable ids are unique in a program, so a variable's name in the IR is `name%id` everywhere.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path as FilePath

from frontend.ml import basis as B
from frontend.ml import typed as t
from frontend.ml.types import TCon, TRecord, prune
from hpgrem import ir

from hpgrem.ir import ml
ENTRY = "ml:main"

# Basis names implemented by the prelude (ML source), by the prelude's function name.
PRELUDE_NAMES = {
    "map": "map", "List.map": "map", "app": "app", "List.app": "app",
    "foldl": "foldl", "List.foldl": "foldl", "foldr": "foldr", "List.foldr": "foldr",
    "List.filter": "filter", "List.exists": "exists", "List.all": "all", "List.find": "find",
    "List.partition": "partition", "List.tabulate": "tabulate", "o": "compose",
}
# Basis functions of two curried arguments: a full application is one primitive call.
CURRIED = {"String.concatWith", "String.isPrefix", "Real.fmt"}
# Operators whose meaning depends on the type of their operands (`int.+`, `real.<`, ...).
OVERLOADED = {"+", "-", "*", "<", ">", "<=", ">=", "~", "abs"}
SIMPLE_EQ = {"int", "string", "char", "bool", "real"}


@dataclass(slots=True)
class Known:
    key: str
    arity: int
    free: tuple[int, ...]  # variable ids, passed first
    value_key: str | None = None  # the function a closure of it runs (made when first needed)


class _Scan:
    """Free variables of typed expressions: every variable met minus every variable bound."""

    BINDERS = (t.Fn, t.Arm, t.ValDec, t.RecDec, t.ExceptionDec, t.Case, t.Handle)

    @staticmethod
    def free(node, names: dict[int, str]) -> set[int]:
        """The ids of the free variables of `node`; `names` learns the local name of each."""
        met: set[int] = set()
        bound: set[int] = set()
        stack = [node]
        while stack:
            x = stack.pop()
            if isinstance(x, t.Var):
                met.add(x.id)
                names.setdefault(x.id, local_name(x))
                continue
            if isinstance(x, tuple):
                stack.extend(x)
                continue
            if not dataclasses.is_dataclass(x) or isinstance(x, ir.Span):
                continue
            if isinstance(x, t.Fn):
                bound.add(x.param.id)
            elif isinstance(x, t.Arm):
                bound.update(v.id for v, _ in x.bindings)
            elif isinstance(x, t.ValDec):
                bound.add(x.root.id)
                bound.update(v.id for v, _ in x.bindings)
            elif isinstance(x, t.RecDec):
                bound.update(v.id for v, _ in x.binds)
            elif isinstance(x, t.ExceptionDec):
                if x.exn.var is not None:
                    bound.add(x.exn.var.id)
                continue
            elif isinstance(x, (t.Case, t.Handle)):
                bound.update(v.id for v in x.match.roots)
            elif isinstance(x, t.Switch):
                stack.append(x.path)
                for key, sub in x.cases:
                    if isinstance(key, t.ExnName) and key.var is not None:
                        stack.append(key.var)
                    stack.append(sub)
                if x.default is not None:
                    stack.append(x.default)
                continue
            elif isinstance(x, t.ExnApp):
                if x.exn.var is not None:
                    stack.append(x.exn.var)
                if x.arg is not None:
                    stack.append(x.arg)
                continue
            for f in dataclasses.fields(x):
                if f.name not in ("type", "span", "con", "tycons"):
                    stack.append(getattr(x, f.name))
        return met - bound


def local_name(v: t.Var) -> str:
    return f"{v.name}%{v.id}"


class Lowerer:
    """Lowers the prelude and then the program's chunks into one module."""

    def __init__(self):
        self.functions: dict[str, ml.Function] = {}
        self.known: dict[int, Known] = {}
        self.globals: set[int] = set()
        self.names: dict[int, str] = {}  # var id -> local name, of every variable a free-variable scan met
        self.prelude: dict[str, Known] = {}
        self.counter = 0
        self.arm_counter = 0

    # ---- the program ------------------------------------------------------------------------
    def prelude_decs(self, decs: tuple[t.Dec, ...]) -> None:
        """Lower the prelude's functions (top-level `fun`s only) and remember them by name."""
        for d in decs:
            assert isinstance(d, t.RecDec)
            self.rec_dec(d, prefix="basis:")
            for var, _ in d.binds:
                self.prelude[var.name] = self.known[var.id]

    def forget_prelude_ids(self) -> None:
        """The prelude's variable ids come from its own elaboration and may equal the program's:
        its functions are reached by basis name only (`self.prelude`)."""
        self.known.clear()
        self.names.clear()

    def top_decs(self, decs: tuple[t.Dec, ...]) -> list[ml.Expr]:
        """The statements of the entry function for top-level declarations."""
        out: list[ml.Expr] = []
        for d in decs:
            out.extend(self.top_dec(d))
        return out

    def module(self, source: str, statements: list[ml.Expr], span: ir.Span) -> ir.Module:
        body = ml.Sequence(tuple(statements) + (ml.Lit(None),), span)
        self.functions[ENTRY] = ml.Function(ENTRY, "main", (), 0, body, span)
        return ir.Module(source, dict(self.functions), ir.Entry(ENTRY, ()), "ml")

    def top_dec(self, d: t.Dec) -> list[ml.Expr]:
        if isinstance(d, t.ValDec):
            if self.known_val(d):
                return []
            self.globals.add(d.root.id)
            self.globals.update(v.id for v, _ in d.bindings)
            out: list[ml.Expr] = [ml.SetGlobal(local_name(d.root), self.expr(d.expr), d.span)]
            check = self.tree(d.tree, lambda arm: ml.Lit(None), "Bind", None, d.span)
            if not (isinstance(check, ml.Lit)):
                out.append(check)
            out.extend(ml.SetGlobal(local_name(v), self.path(p), d.span) for v, p in d.bindings)
            return out
        if isinstance(d, t.RecDec):
            self.rec_dec(d)
            return []
        if isinstance(d, t.ExceptionDec):
            self.globals.add(d.exn.var.id)
            return [ml.SetGlobal(local_name(d.exn.var), ml.NewException(d.exn.name, d.exn.arg is not None, d.span),
                                 d.span)]
        return []

    # ---- functions --------------------------------------------------------------------------
    def new_key(self, name: str, span: ir.Span, prefix: str = "") -> str:
        self.counter += 1
        return f"{prefix}{name}" if prefix else f"{name}@{span.line}:{span.col}#{self.counter}"

    def free_of(self, node, exclude: set[int]) -> tuple[int, ...]:
        """The local variables of enclosing functions that `node` needs (known functions it
        mentions contribute their own free variables)."""
        out: set[int] = set()
        todo = list(_Scan.free(node, self.names) - exclude)
        while todo:
            v = todo.pop()
            if v in out or v in self.globals or v in exclude:
                continue
            k = self.known.get(v)
            if k is not None:
                todo.extend(k.free)
                continue
            out.add(v)
        return tuple(sorted(out))

    def known_val(self, d: t.ValDec) -> bool:
        """`val f = fn ...` binds a known function."""
        if not (isinstance(d.expr, t.Fn) and isinstance(d.tree, t.Leaf) and not d.bindings):
            return False
        self.rec_dec(t.RecDec(((d.root, d.expr),), d.span))
        return True

    def rec_dec(self, d: t.RecDec, prefix: str = "") -> None:
        group = {v.id for v, _ in d.binds}
        free: set[int] = set()
        for _, fn in d.binds:
            free.update(self.free_of(fn, group))
        free_ids = tuple(sorted(free))
        for v, fn in d.binds:
            arity, _, _ = _uncurry(fn)
            self.known[v.id] = Known(self.new_key(v.name, fn.span, prefix), arity, free_ids)
        for v, fn in d.binds:
            k = self.known[v.id]
            _, params, body = _uncurry(fn)
            names = tuple(self.names[i] for i in free_ids) + tuple(local_name(p) for p in params)
            self.functions[k.key] = ml.Function(k.key, v.name, names, len(params), self.expr(body), fn.span)

    def closure_of_known(self, k: Known, name: str, span: ir.Span) -> ml.Expr:
        if k.value_key is None:
            if k.arity == 1:
                k.value_key = k.key
            else:
                free = tuple(self.names[i] for i in k.free)
                args = tuple(f"a{i}" for i in range(1, k.arity + 1))
                keys = [f"{k.key}/curry{j}" for j in range(1, k.arity + 1)]
                for j in range(1, k.arity + 1):
                    params = free + args[:j]
                    locals_ = tuple(ml.Local(p, span) for p in params)
                    body = ml.CallKnown(k.key, locals_, span) if j == k.arity else \
                        ml.MakeClosure(keys[j], locals_, span)
                    self.functions[keys[j - 1]] = ml.Function(keys[j - 1], name, params, 1, body, span)
                k.value_key = keys[0]
        return ml.MakeClosure(k.value_key, tuple(ml.Local(self.names[i], span) for i in k.free), span)

    # ---- expressions ------------------------------------------------------------------------
    def var(self, v: t.Var, span: ir.Span) -> ml.Expr:
        k = self.known.get(v.id)
        if k is not None:
            return self.closure_of_known(k, v.name, span)
        if v.id in self.globals:
            return ml.Global(local_name(v), span)
        return ml.Local(local_name(v), span)

    def exn_con(self, exn: t.ExnName, span: ir.Span) -> ml.Expr:
        if exn.var is None:
            return ml.BasisException(exn.name, span)
        return self.var(exn.var, span)

    def expr(self, e: t.Expr) -> ml.Expr:
        method = getattr(self, "_" + type(e).__name__)
        return method(e)

    def _Const(self, e: t.Const) -> ml.Expr:
        return ml.Lit(e.value, e.span)

    def _VarRef(self, e: t.VarRef) -> ml.Expr:
        return self.var(e.var, e.span)

    def _BasisRef(self, e: t.BasisRef) -> ml.Expr:
        """A basis value used as a value: a closure of a wrapper function."""
        name = e.name
        if name in PRELUDE_NAMES:
            return self.closure_of_known(self.prelude[PRELUDE_NAMES[name]], name, e.span)
        op = _op_name(name, e.type)
        key = f"basis:{op}"
        if key not in self.functions:
            x = ml.Local("x", e.span)
            if name in CURRIED:
                inner = f"{key}/2"
                self.functions[inner] = ml.Function(inner, name, ("x", "y"), 1,
                                                    ml.Prim(op, (x, ml.Local("y", e.span)), e.span), e.span)
                body: ml.Expr = ml.MakeClosure(inner, (x,), e.span)
            else:
                body = self.apply_basis(name, op, x, e.span)
            self.functions[key] = ml.Function(key, name, ("x",), 1, body, e.span)
        return ml.MakeClosure(key, (), e.span)

    def apply_basis(self, name: str, op: str, arg: ml.Expr, span: ir.Span) -> ml.Expr:
        """The basis function `name` applied to one (lowered) argument."""
        if name == "ForkJoin.par":
            if isinstance(arg, ml.Tuple) and len(arg.items) == 2 and arg.order in ((), (0, 1)):
                return ml.Par(arg.items[0], arg.items[1], span)
            tmp = self.temp()
            return ml.Let(tmp, arg, ml.Par(ml.Part(ml.Local(tmp), 0), ml.Part(ml.Local(tmp), 1), span), span)
        if _binary(op) and isinstance(arg, ml.Tuple) and len(arg.items) == 2 and arg.order in ((), (0, 1)):
            return ml.Prim(op, arg.items, span)
        if _binary(op):
            tmp = self.temp()
            return ml.Let(tmp, arg, ml.Prim(op, (ml.Part(ml.Local(tmp), 0), ml.Part(ml.Local(tmp), 1)), span), span)
        return ml.Prim(op, (arg,), span)

    def temp(self) -> str:
        self.counter += 1
        return f"t%{self.counter}"

    def _App(self, e: t.App) -> ml.Expr:
        args: list[t.Expr] = []
        head: t.Expr = e
        while isinstance(head, t.App):
            args.append(head.arg)
            head = head.fn
        args.reverse()
        if isinstance(head, t.VarRef) and head.var.id in self.known:
            k = self.known[head.var.id]
            if len(args) >= k.arity:
                free = tuple(ml.Local(self.names[i], e.span) for i in k.free)
                call: ml.Expr = ml.CallKnown(k.key, free + tuple(self.expr(a) for a in args[:k.arity]), e.span)
                return self.apply_rest(call, args[k.arity:], e.span)
        if isinstance(head, t.BasisRef):
            name = head.name
            if name in PRELUDE_NAMES:
                k = self.prelude[PRELUDE_NAMES[name]]
                if len(args) >= k.arity:
                    call = ml.CallKnown(k.key, tuple(self.expr(a) for a in args[:k.arity]), e.span)
                    return self.apply_rest(call, args[k.arity:], e.span)
            else:
                op = _op_name(name, head.type)
                if name in CURRIED and len(args) >= 2:
                    call = ml.Prim(op, (self.expr(args[0]), self.expr(args[1])), e.span)
                    return self.apply_rest(call, args[2:], e.span)
                if name not in CURRIED:
                    call = self.apply_basis(name, op, self.expr(args[0]), e.span)
                    return self.apply_rest(call, args[1:], e.span)
        return self.apply_rest(self.expr(head), args, e.span)

    def apply_rest(self, fn: ml.Expr, args: list[t.Expr], span: ir.Span) -> ml.Expr:
        for a in args:
            fn = ml.Apply(fn, self.expr(a), span)
        return fn

    def _ConApp(self, e: t.ConApp) -> ml.Expr:
        con = e.con
        arg = self.expr(e.arg) if e.arg is not None else None
        if con.name == "ref" and con.tycon.name == "ref":
            return ml.Prim("ref", (arg,), e.span)
        return ml.Construct(_datatype(con.tycon), con.tag, arg, e.span)

    def _ExnApp(self, e: t.ExnApp) -> ml.Expr:
        arg = self.expr(e.arg) if e.arg is not None else None
        return ml.Packet(self.exn_con(e.exn, e.span), arg, e.span)

    def _Fn(self, e: t.Fn) -> ml.Expr:
        free = self.free_of(e, set())
        key = self.new_key("fn", e.span)
        params = tuple(self.names[i] for i in free)
        self.functions[key] = ml.Function(key, "fn", params + (local_name(e.param),), 1, self.expr(e.body),
                                          e.span)
        return ml.MakeClosure(key, tuple(ml.Local(p, e.span) for p in params), e.span)

    def _Let(self, e: t.Let) -> ml.Expr:
        return self.decs(list(e.decs), lambda: self.expr(e.body))

    def decs(self, decs: list[t.Dec], body) -> ml.Expr:
        """Declarations in order, then `body()`; built inside out."""
        wrappers = []
        for d in decs:
            if isinstance(d, t.ValDec):
                if self.known_val(d):
                    continue
                wrappers.append(("val", d, self.expr(d.expr)))
            elif isinstance(d, t.RecDec):
                self.rec_dec(d)
            elif isinstance(d, t.ExceptionDec):
                wrappers.append(("exn", d, None))
        result = body()
        for kind, d, value in reversed(wrappers):
            if kind == "exn":
                result = ml.Let(local_name(d.exn.var), ml.NewException(d.exn.name, d.exn.arg is not None, d.span),
                                result, d.span)
                continue
            inner = result
            for v, p in reversed(d.bindings):
                inner = ml.Let(local_name(v), self.path(p), inner, d.span)
            checked = self.tree(d.tree, lambda arm, inner=inner: inner, "Bind", None, d.span)
            result = ml.Let(local_name(d.root), value, checked, d.span)
        return result

    def _Seq(self, e: t.Seq) -> ml.Expr:
        return ml.Sequence(tuple(self.expr(x) for x in e.exprs), e.span)

    def _Record(self, e: t.Record) -> ml.Expr:
        rt = prune(e.type)
        assert isinstance(rt, TRecord)
        labels = [lbl for lbl, _ in rt.fields]
        items: list[ml.Expr | None] = [None] * len(labels)
        order = []
        for lbl, x in e.fields:
            i = labels.index(lbl)
            items[i] = self.expr(x)
            order.append(i)
        order_t = tuple(order) if order != sorted(order) else ()
        return ml.Tuple(tuple(items), order_t, e.span)

    def _Select(self, e: t.Select) -> ml.Expr:
        from frontend.ml.types import field_index
        return ml.Part(self.expr(e.record), field_index(e.record.type, e.label), e.span)

    def _If(self, e: t.If) -> ml.Expr:
        return ml.If(self.expr(e.cond), self.expr(e.then), self.expr(e.else_), e.span)

    def _While(self, e: t.While) -> ml.Expr:
        return ml.While(self.expr(e.cond), self.expr(e.body), e.span)

    def _Raise(self, e: t.Raise) -> ml.Expr:
        return ml.Raise(self.expr(e.exn), e.span)

    def _Match(self, e: t.Match) -> ml.Expr:
        leaves: dict[int, int] = {}
        _count_leaves(e.tree, leaves)
        shared = any(n > 1 for n in leaves.values())

        def arm_body(i: int) -> ml.Expr:
            arm = e.arms[i]
            body = self.expr(arm.body)
            for v, p in reversed(arm.bindings):
                body = ml.Let(local_name(v), self.path(p), body, arm.span)
            return body

        reraise = ml.Local(local_name(e.roots[0]), e.span) if e.failure == "reraise" else None
        if not shared:
            return self.tree(e.tree, arm_body, e.failure, reraise, e.span)
        self.arm_counter += 1
        which = f"arm%{self.arm_counter}"
        choose = self.tree(e.tree, lambda i: ml.Lit(i, e.span), e.failure, reraise, e.span)
        cases = tuple((i, arm_body(i)) for i in sorted(leaves))
        switch = ml.Switch(ml.Local(which, e.span), ml.SwitchTest.INT, "", None, cases, None, e.span)
        return ml.Let(which, choose, switch, e.span)

    def _Case(self, e: t.Case) -> ml.Expr:
        root = e.match.roots[0]
        return ml.Let(local_name(root), self.expr(e.scrutinee), self._Match(e.match), e.span)

    def _Handle(self, e: t.Handle) -> ml.Expr:
        root = e.match.roots[0]
        return ml.Handle(self.expr(e.body), local_name(root), self._Match(e.match), e.span)

    # ---- decision trees ---------------------------------------------------------------------
    def path(self, p: t.Path) -> ml.Expr:
        x = self.var(p.root, p.root.span)
        for step in p.steps:
            x = ml.Part(x, step if isinstance(step, int) else ml.PartStep(step))
        return x

    def tree(self, tree: t.Tree, leaf, failure: str, reraise: ml.Expr | None, span: ir.Span) -> ml.Expr:
        if isinstance(tree, t.Leaf):
            return leaf(tree.arm)
        if isinstance(tree, t.Fail):
            if failure == "reraise":
                return ml.Raise(reraise, span)
            return ml.Raise(ml.Packet(ml.BasisException(failure, span), None, span), span)
        subject = self.path(tree.path)
        datatype = ""
        cases = []
        for key, sub in tree.cases:
            if tree.kind == "con":
                datatype = _datatype(key.tycon)
                k = key.tag
            elif tree.kind == "exn":
                k = self.exn_con(key, span)
            else:
                k = key
            cases.append((k, self.tree(sub, leaf, failure, reraise, span)))
        default = None if tree.default is None else self.tree(tree.default, leaf, failure, reraise, span)
        rep = None
        if tree.kind == "con" and datatype not in ("list", "bool"):
            con = tree.cases[0][0]
            kinds = {c.has_arg for c in con.tycon.constructors}
            rep = ml.ConRep.ARGS if kinds == {True} else ml.ConRep.TAGS if kinds == {False} else ml.ConRep.MIXED
        return ml.Switch(subject, ml.SwitchTest(tree.kind), datatype, rep, tuple(cases), default, span)


def _uncurry(fn: t.Fn) -> tuple[int, list[t.Var], t.Expr]:
    params = [fn.param]
    body = fn.body
    while isinstance(body, t.Fn):
        params.append(body.param)
        body = body.body
    return len(params), params, body


def _count_leaves(tree: t.Tree, counts: dict[int, int]) -> None:
    stack = [tree]
    while stack:
        x = stack.pop()
        if isinstance(x, t.Leaf):
            counts[x.arm] = counts.get(x.arm, 0) + 1
        elif isinstance(x, t.Switch):
            stack.extend(sub for _, sub in x.cases)
            if x.default is not None:
                stack.append(x.default)


def _datatype(tycon) -> str:
    if tycon is B.TYCONS["list"]:
        return "list"
    if tycon is B.TYCONS["bool"]:
        return "bool"
    return tycon.name


def _tycon_name(ty) -> str:
    ty = prune(ty)
    if isinstance(ty, TCon):
        if ty.con is B.TYCONS["bool"]:
            return "bool"
        return ty.con.name
    return "?"


def _op_name(name: str, ty) -> str:
    """`int.+` for an overloaded operator at int, `eq` / `eq.simple` for equality, else `name`."""
    if name in OVERLOADED or name in ("=", "<>"):
        ty = prune(ty)
        dom = prune(ty.args[0]) if isinstance(ty, TCon) else None
        if isinstance(dom, TRecord):
            dom = dom.fields[0][1]
        base = _tycon_name(dom) if dom is not None else "?"
        if name in ("=", "<>"):
            return name + (".simple" if base in SIMPLE_EQ else "")
        return f"{base}.{name}"
    return name


def _binary(op: str) -> bool:
    return "." in op and op.split(".")[0] in ("int", "real", "string", "char") and not op.endswith(("~", "abs")) \
        or op in ("=", "<>", "=.simple", "<>.simple", "^", "/", "div", "mod", ":=", "before")


PRELUDE_FILE = FilePath(__file__).with_name("prelude.sml")
