"""Types of the ML subset: representation, unification and printing (spec/ml.md, "Static
semantics").

A type is a `TCon` (a type constructor applied to arguments: `int`, `'a list`, `a -> b`), a
`TRecord` (tuples are records labelled 1..n, `unit` is the empty record), a `TVar` (a
unification variable), a `TRigid` (an explicit type variable `'a` inside the declaration that
scopes it) or a `TGen` (a bound variable of a type scheme). `TVar` is the one mutable node:
unification links it. A `TVar` may carry constraints: `eq` (equality type), `overload` (the
type constructors an overloaded operator allows; defaulted to int at the end of each top-level
declaration) and `fields` (a record known only to have these fields, made by `#label`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hpgrem.ir import Span


@dataclass(eq=False, slots=True)
class TyCon:
    """A type constructor: built in (`int`, `list`, `->`) or declared by a datatype (each
    declaration makes a new one, even with a name already used). `constructors` is filled by
    the datatype declaration; `admits_eq` says whether `=` may compare its values."""

    name: str
    arity: int
    admits_eq: bool
    constructors: list[Constructor] = field(default_factory=list)


@dataclass(eq=False, slots=True)
class Constructor:
    """A value constructor of a datatype (`SOME`, `::`, a user's `Node`). `tag` is its index in
    the datatype's declaration order; `scheme` is its type as a function when it takes an
    argument (`'a -> 'a option`), else its type (`'a option`)."""

    name: str
    tag: int
    has_arg: bool
    tycon: TyCon
    scheme: Scheme
    span: Span | None = None


@dataclass(frozen=True, slots=True)
class TCon:
    con: TyCon
    args: tuple[Type, ...] = ()


@dataclass(frozen=True, slots=True)
class TRecord:
    """Fields in canonical order (see `label_key`)."""

    fields: tuple[tuple[str, Type], ...]


@dataclass(eq=False, slots=True)
class TVar:
    id: int
    level: int
    eq: bool = False
    overload: tuple[TyCon, ...] | None = None
    fields: dict[str, Type] | None = None
    link: Type | None = None


@dataclass(frozen=True, slots=True)
class TRigid:
    """An explicit type variable (`'a`, `''a`) within the `val`/`fun` that scopes it."""

    name: str
    id: int

    @property
    def eq(self) -> bool:
        return self.name.startswith("''")


@dataclass(frozen=True, slots=True)
class TGen:
    """The `index`-th bound variable of the enclosing `Scheme`."""

    index: int


Type = TCon | TRecord | TVar | TRigid | TGen


@dataclass(frozen=True, slots=True)
class Scheme:
    """`forall v0..vn-1. body`: `eqs[i]` says whether vi is an equality variable, `overload`
    (for the overloaded basis operators) the type constructors that v0 ranges over."""

    eqs: tuple[bool, ...]
    body: Type
    overload: tuple[TyCon, ...] | None = None


def mono(t: Type) -> Scheme:
    return Scheme((), t)


# Built-in type constructors, shared by every program (never mutated once made).
ARROW = TyCon("->", 2, False)
INT = TyCon("int", 0, True)
REAL = TyCon("real", 0, False)
STRING = TyCon("string", 0, True)
CHAR = TyCon("char", 0, True)
EXN = TyCon("exn", 0, False)
REF = TyCon("ref", 1, True)  # refs compare by identity, whatever they hold

UNIT = TRecord(())
INT_T, REAL_T, STRING_T, CHAR_T, EXN_T = (TCon(c) for c in (INT, REAL, STRING, CHAR, EXN))


def arrow(a: Type, b: Type) -> Type:
    return TCon(ARROW, (a, b))


def tuple_type(items: list[Type] | tuple[Type, ...]) -> Type:
    return TRecord(tuple((str(i + 1), t) for i, t in enumerate(items)))


def label_key(label: str) -> tuple[int, int, str]:
    """SML orders numeric labels numerically, before alphanumeric ones (a numeric label has no
    leading zero, so the shorter is the smaller; no int(): a label may be thousands of digits)."""
    return (0, len(label), label) if label.isdigit() else (1, 0, label)


def record_type(fields: dict[str, Type]) -> TRecord:
    return TRecord(tuple(sorted(fields.items(), key=lambda f: label_key(f[0]))))


def field_index(record: Type, label: str) -> int:
    """The position of `label` in a record value's layout (canonical label order)."""
    rec = prune(record)
    assert isinstance(rec, TRecord), rec
    return [lbl for lbl, _ in rec.fields].index(label)


def prune(t: Type) -> Type:
    """`t` with the links of its outermost variables followed."""
    while isinstance(t, TVar) and t.link is not None:
        t = t.link
    return t


def resolve(t: Type, memo: dict | None = None) -> Type:
    """`t` with every link followed (the result holds only unlinked `TVar`s). With `memo` (a
    dict kept across calls while no variable is bound), a type shared by many is resolved once:
    a curried function of a thousand arguments has a thousand nested types, each holding the
    next."""
    t = prune(t)
    if memo is not None and isinstance(t, (TCon, TRecord)):
        done = memo.get(id(t))
        if done is not None:
            return done[1]
    if isinstance(t, TCon):
        out = TCon(t.con, tuple(resolve(a, memo) for a in t.args)) if t.args else t
    elif isinstance(t, TRecord):
        out = TRecord(tuple((lbl, resolve(ft, memo)) for lbl, ft in t.fields))
    else:
        return t
    if memo is not None:
        memo[id(t)] = (t, out)  # t kept alive, so its id is not reused
    return out


def is_tuple(rec: TRecord) -> bool:
    return len(rec.fields) != 1 and all(lbl == str(i + 1) for i, (lbl, _) in enumerate(rec.fields))


# ---------------------------------------------------------------------------------------------
# Unification


class Mismatch(Exception):
    """Unification failed; `reason` is `clash`, `eq` (not an equality type), `overload`,
    `record` (a `#label` met a non-record) or `circular`."""

    def __init__(self, reason: str, overload: tuple[TyCon, ...] | None = None):
        super().__init__(reason)
        self.reason = reason
        self.overload = overload


def unify(a: Type, b: Type) -> None:
    a, b = prune(a), prune(b)
    if a is b:
        return
    if isinstance(a, TVar):
        _bind(a, b)
    elif isinstance(b, TVar):
        _bind(b, a)
    elif isinstance(a, TCon) and isinstance(b, TCon):
        if a.con is not b.con:
            raise Mismatch("clash")
        for x, y in zip(a.args, b.args):
            unify(x, y)
    elif isinstance(a, TRecord) and isinstance(b, TRecord):
        if [lbl for lbl, _ in a.fields] != [lbl for lbl, _ in b.fields]:
            raise Mismatch("clash")
        for (_, x), (_, y) in zip(a.fields, b.fields):
            unify(x, y)
    elif not (isinstance(a, TRigid) and isinstance(b, TRigid) and a.id == b.id):
        raise Mismatch("clash")


def _bind(v: TVar, t: Type) -> None:
    if isinstance(t, TVar):
        _merge(v, t)
        v.link = t
        return
    _occurs_and_levels(v, t)
    if v.overload is not None and not (isinstance(t, TCon) and t.con in v.overload):
        raise Mismatch("overload", v.overload)
    if v.fields is not None:
        if not isinstance(t, TRecord):
            raise Mismatch("record")
        present = dict(t.fields)
        if any(lbl not in present for lbl in v.fields):
            raise Mismatch("clash")
        v.link = t  # link first: a field's type may mention the record itself only via v
        for lbl, ft in v.fields.items():
            unify(ft, present[lbl])
    if v.eq:
        make_eq(t)
    v.link = t


def _merge(v: TVar, t: TVar) -> None:
    """Move `v`'s constraints onto `t` before `v` is linked to it."""
    t.level = min(t.level, v.level)
    if v.overload is not None or t.overload is not None:
        if v.fields is not None or t.fields is not None:
            raise Mismatch("record")
        if v.overload is None or t.overload is None:
            allowed = v.overload or t.overload
        else:
            allowed = tuple(c for c in v.overload if c in t.overload)
        if not allowed:
            raise Mismatch("overload", v.overload or t.overload)
        t.overload = allowed
    if v.fields is not None:
        if t.fields is None:
            t.fields = dict(v.fields)
        else:
            for lbl, ft in v.fields.items():
                if lbl in t.fields:
                    unify(ft, t.fields[lbl])
                else:
                    t.fields[lbl] = ft
    if v.eq and not t.eq:
        make_eq(t)


def _occurs_and_levels(v: TVar, t: Type) -> None:
    t = prune(t)
    if t is v:
        raise Mismatch("circular")
    if isinstance(t, TVar):
        t.level = min(t.level, v.level)
        for ft in (t.fields or {}).values():
            _occurs_and_levels(v, ft)
    elif isinstance(t, TCon):
        for a in t.args:
            _occurs_and_levels(v, a)
    elif isinstance(t, TRecord):
        for _, ft in t.fields:
            _occurs_and_levels(v, ft)


def make_eq(t: Type) -> None:
    """Require `t` to admit equality, turning its variables into equality variables."""
    t = prune(t)
    if isinstance(t, TVar):
        if t.overload is not None:
            allowed = tuple(c for c in t.overload if c.admits_eq)
            if not allowed:
                raise Mismatch("eq")
            t.overload = allowed
        if t.fields is not None:
            for ft in t.fields.values():
                make_eq(ft)
        t.eq = True
    elif isinstance(t, TCon):
        if t.con is REF:
            return
        if not t.con.admits_eq:
            raise Mismatch("eq")
        for a in t.args:
            make_eq(a)
    elif isinstance(t, TRecord):
        for _, ft in t.fields:
            make_eq(ft)
    elif isinstance(t, TRigid) and not t.eq:
        raise Mismatch("eq")


# ---------------------------------------------------------------------------------------------
# Schemes


def instantiate(scheme: Scheme, fresh) -> tuple[Type, list[TVar]]:
    """The scheme's body with fresh variables (made by `fresh(eq)`) for its bound ones."""
    if not scheme.eqs:
        return scheme.body, []
    new = [fresh(eq) for eq in scheme.eqs]
    if scheme.overload is not None:
        new[0].overload = scheme.overload
    return substitute(scheme.body, new), new


def substitute(t: Type, args: list[Type]) -> Type:
    """Replace each `TGen(i)` in `t` with `args[i]`."""
    t = prune(t)
    if isinstance(t, TGen):
        return args[t.index]
    if isinstance(t, TCon):
        return TCon(t.con, tuple(substitute(a, args) for a in t.args)) if t.args else t
    if isinstance(t, TRecord):
        return TRecord(tuple((lbl, substitute(ft, args)) for lbl, ft in t.fields))
    return t


def pinned_vars(t: Type) -> list[TVar]:
    """The record-constrained variables of `t` (made by `#label`) and every variable of their
    fields: none may be generalised or given a monotype before the record type is known."""
    out: list[TVar] = []
    seen: set[int] = set()

    def walk(x: Type, inside: bool) -> None:
        x = prune(x)
        if isinstance(x, TVar):
            if (inside or x.fields is not None) and x.id not in seen:
                seen.add(x.id)
                out.append(x)
            for ft in (x.fields or {}).values():
                walk(ft, True)
        elif isinstance(x, TCon):
            for a in x.args:
                walk(a, inside)
        elif isinstance(x, TRecord):
            for _, ft in x.fields:
                walk(ft, inside)

    walk(t, False)
    return out


def generalize(t: Type, level: int, rigids: dict[int, TRigid]) -> Scheme:
    """Quantify the unconstrained variables of `t` above `level`, and the rigid variables in
    `rigids` (by id). Overloaded and record-constrained variables are never quantified, nor the
    variables of a constrained record's fields (the record, once known, fixes them): they stay
    shared until they are resolved at the end of the top-level declaration or chunk."""
    mapping: dict[int, TGen] = {}
    eqs: list[bool] = []
    pinned = {v.id for v in pinned_vars(t)}

    def gen(x: Type) -> Type:
        x = prune(x)
        if isinstance(x, TVar):
            if x.level > level and x.overload is None and x.fields is None and x.id not in pinned:
                if x.id not in mapping:
                    mapping[x.id] = TGen(len(eqs))
                    eqs.append(x.eq)
                return mapping[x.id]
            return x
        if isinstance(x, TRigid) and x.id in rigids:
            key = -1 - x.id  # rigid ids and TVar ids are separate counters
            if key not in mapping:
                mapping[key] = TGen(len(eqs))
                eqs.append(x.eq)
            return mapping[key]
        if isinstance(x, TCon):
            return TCon(x.con, tuple(gen(a) for a in x.args)) if x.args else x
        if isinstance(x, TRecord):
            return TRecord(tuple((lbl, gen(ft)) for lbl, ft in x.fields))
        return x

    body = gen(t)
    return Scheme(tuple(eqs), body)


def lower_levels(t: Type, level: int) -> None:
    """Keep the variables of a type that is not generalised from being generalised later."""
    t = prune(t)
    if isinstance(t, TVar):
        t.level = min(t.level, level)
        for ft in (t.fields or {}).values():
            lower_levels(ft, level)
    elif isinstance(t, TCon):
        for a in t.args:
            lower_levels(a, level)
    elif isinstance(t, TRecord):
        for _, ft in t.fields:
            lower_levels(ft, level)


def free_vars(t: Type) -> list[TVar]:
    """The unlinked variables of `t`, in order of first appearance."""
    out: dict[int, TVar] = {}

    def walk(x: Type) -> None:
        x = prune(x)
        if isinstance(x, TVar):
            out.setdefault(x.id, x)
            for ft in (x.fields or {}).values():
                walk(ft)
        elif isinstance(x, TCon):
            for a in x.args:
                walk(a)
        elif isinstance(x, TRecord):
            for _, ft in x.fields:
                walk(ft)

    walk(t)
    return list(out.values())


# ---------------------------------------------------------------------------------------------
# Printing, as Poly/ML prints types


class TypeNames:
    """Names type variables `'a`, `'b`, ... in order of first appearance; one instance is
    shared by the types of one message so that the same variable reads the same."""

    def __init__(self, scheme_eqs: tuple[bool, ...] = ()):
        self.names: dict[int, str] = {}
        self.scheme_eqs = scheme_eqs

    def name(self, key: int, eq: bool) -> str:
        if key not in self.names:
            n = len(self.names)
            letters = chr(ord("a") + n % 26) + (str(n // 26) if n >= 26 else "")
            self.names[key] = ("''" if eq else "'") + letters
        return self.names[key]


def show(t: Type, names: TypeNames | None = None) -> str:
    """`t` as Poly/ML prints it: `int list`, `'a -> 'b`, `int * string`, `{x: int, y: int}`."""
    return _show(t, names or TypeNames(), 0)


def show_scheme(scheme: Scheme) -> str:
    return show(scheme.body, TypeNames(scheme.eqs))


# precedence of the context: 0 anywhere, 1 a tuple component or arrow argument, 2 a type argument
def _show(t: Type, names: TypeNames, prec: int) -> str:
    t = prune(t)
    if isinstance(t, TVar):
        if t.overload is not None:  # an operand of an overloaded operator, not yet resolved
            return t.overload[0].name
        if t.fields is not None:
            known = ", ".join(f"{lbl}: {_show(ft, names, 0)}" for lbl, ft in sorted(
                t.fields.items(), key=lambda f: label_key(f[0])))
            return "{" + known + ", ...}"
        return names.name(t.id, t.eq)
    if isinstance(t, TGen):
        eq = t.index < len(names.scheme_eqs) and names.scheme_eqs[t.index]
        return names.name(-1 - t.index, eq)
    if isinstance(t, TRigid):
        return t.name
    if isinstance(t, TRecord):
        if not t.fields:
            return "unit"
        if is_tuple(t):
            text = " * ".join(_show(ft, names, 2) for _, ft in t.fields)
            return f"({text})" if prec >= 2 else text
        return "{" + ", ".join(f"{lbl}: {_show(ft, names, 0)}" for lbl, ft in t.fields) + "}"
    if t.con is ARROW:
        text = f"{_show(t.args[0], names, 1)} -> {_show(t.args[1], names, 0)}"
        return f"({text})" if prec >= 1 else text
    if not t.args:
        return t.con.name
    if len(t.args) == 1:
        return f"{_show(t.args[0], names, 2)} {t.con.name}"
    return "(" + ", ".join(_show(a, names, 0) for a in t.args) + f") {t.con.name}"
