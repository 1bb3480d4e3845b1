"""HPGREM: the heterogeneous graph-rewriting intermediate form.

A `Module` holds definitions and an entry. PARLOG brings `Relation`s (modes and ordered search
groups of guarded clauses over terms whose variables are numbered per clause); ML brings
`Function`s: supercombinators after closure conversion and pattern-match compilation, whose
bodies are expression graphs (`Expr`). Every node that came from source carries a `Span`.
Front ends build these; `pam.rules` and `pam.ml` compile them once into executable steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Span:
    """A source location: 1-based line and column of the first character."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NO_SPAN = Span("<none>", 0, 0)


# ---------------------------------------------------------------------------------------------
# Terms


@dataclass(frozen=True, slots=True)
class Var:
    """A clause variable: `index` numbers it within its clause; `name` is the source name."""

    name: str
    index: int = -1
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Atom:
    """An atom such as `foo`, `[]` or `'Hello world'`."""

    name: str
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Int:
    """An unbounded integer."""

    value: int
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Float:
    """A floating-point number."""

    value: float
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Struct:
    """A compound term `name(args...)`; lists use the functor `'[|]'/2` as in SWI-Prolog 7+."""

    name: str
    args: tuple[Term, ...]
    span: Span = field(default=NO_SPAN, compare=False)


Term = Var | Atom | Int | Float | Struct

CONS = "[|]"
NIL = "[]"


def make_list(items: list[Term], tail: Term | None = None, span: Span = NO_SPAN) -> Term:
    """Build `[items... | tail]` from cons cells."""
    result: Term = tail if tail is not None else Atom(NIL, span)
    for item in reversed(items):
        result = Struct(CONS, (item, result), span)
    return result


def term_vars(term: Term) -> list[Var]:
    """The variables of `term` in order of first appearance (no duplicates by name)."""
    seen: dict[str, Var] = {}
    stack = [term]
    while stack:
        t = stack.pop()
        if isinstance(t, Var):
            if t.name != "_" and t.name not in seen:
                seen[t.name] = t
        elif isinstance(t, Struct):
            stack.extend(reversed(t.args))
    return list(seen.values())


# ---------------------------------------------------------------------------------------------
# Goals and clauses


@dataclass(frozen=True, slots=True)
class Call:
    """A goal: a call of the relation or primitive `target` (a key such as `append/3`).

    `placement` is the `Where` of `Goal @ Where`, or None.
    """

    target: str
    args: tuple[Term, ...]
    span: Span = field(compare=False)
    placement: Term | None = None


@dataclass(frozen=True, slots=True)
class Conj:
    """A conjunction: `op` is `,` (all parts start at once) or `&` (each part starts only after
    the previous part and all its descendants have terminated)."""

    op: str
    parts: tuple[Body, ...]


Body = Call | Conj


@dataclass(frozen=True, slots=True)
class Clause:
    """A guarded clause `head <- guard : body`; variables are numbered 0..nvars-1."""

    head: tuple[Term, ...]
    guard: tuple[Call, ...]
    body: Body | None
    nvars: int
    span: Span = field(compare=False)


@dataclass(frozen=True, slots=True)
class Relation:
    """A PARLOG relation: modes (`?` input, `^` output) and clauses cut into search groups by `;`."""

    key: str
    name: str
    modes: tuple[str, ...]
    groups: tuple[tuple[Clause, ...], ...]
    span: Span = field(compare=False)

    @property
    def arity(self) -> int:
        return len(self.modes)


@dataclass(frozen=True, slots=True)
class Entry:
    """What `run` starts: a call of `target` with fresh variables named `outputs`, which are
    printed as `Name = Term` when the computation terminates (empty for `main`)."""

    target: str
    outputs: tuple[str, ...]


# ---------------------------------------------------------------------------------------------
# ML supercombinators
#
# A function's body is an expression over its parameters and `Let`-bound locals (names unique
# within the function), the module's globals (top-level values, set by `SetGlobal` in the entry
# function as the program's declarations run) and other functions by key. Evaluation is strict,
# left to right. Values: see pam/ml/values.py.


@dataclass(frozen=True, slots=True)
class Lit:
    """An int, real, string (a char is a 1-character string) or unit (`None`)."""

    value: int | float | str | None
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Local:
    name: str
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Global:
    name: str
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class MakeClosure:
    """A function value: `function` with its leading parameters bound to `free`."""

    function: str
    free: tuple[Expr, ...]
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class CallKnown:
    """A saturated call of a known function (free variables first, then arguments)."""

    function: str
    args: tuple[Expr, ...]
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Apply:
    """A call of a function value."""

    fn: Expr
    arg: Expr
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Prim:
    """A primitive of the basis (`op` a basis name, or a typed operator such as `int.+`)."""

    op: str
    args: tuple[Expr, ...]
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Construct:
    """A datatype value: constructor `tag` of `datatype` (`list`, `bool`, ... or a user type)."""

    datatype: str
    tag: int
    arg: Expr | None
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Tuple:
    """A tuple or record (canonical label order); items are evaluated in `order` (source order)."""

    items: tuple[Expr, ...]
    order: tuple[int, ...] = ()
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Part:
    """A part of a value: `step` is a field index, `arg` (constructor argument), `cons` (the
    pair of a `::`), `exnarg` (an exception's argument) or `deref` (a ref's contents)."""

    value: Expr
    step: int | str
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Let:
    name: str
    value: Expr
    body: Expr
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class SetGlobal:
    """Bind global `name` (in the entry function: a top-level declaration); the value is unit."""

    name: str
    value: Expr
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Sequence:
    exprs: tuple[Expr, ...]
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class If:
    cond: Expr
    then: Expr
    else_: Expr
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Switch:
    """Test `subject`: `test` is `con` (keys are constructor tags of `datatype`), `exn` (keys
    are expressions giving exception constructors), `int`, `string` or `char` (keys literal).
    `default` is None when the cases are exhaustive."""

    subject: Expr
    test: str
    datatype: str
    cases: tuple[tuple[int | str | Expr, Expr], ...]
    default: Expr | None
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Raise:
    exn: Expr
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Handle:
    """Evaluate `body`; if it raises, bind the packet to `name` and evaluate `handler`."""

    body: Expr
    name: str
    handler: Expr
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class While:
    cond: Expr
    body: Expr
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class NewException:
    """A fresh exception constructor (SML exceptions are generative)."""

    name: str
    has_arg: bool
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class BasisException:
    name: str
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Packet:
    """An exception value: constructor `con` applied to `arg`."""

    con: Expr
    arg: Expr | None
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True, slots=True)
class Par:
    """`ForkJoin.par (left, right)`: apply two thunks, possibly in parallel, giving the pair."""

    left: Expr
    right: Expr
    span: Span = field(default=NO_SPAN, compare=False)


Expr = (Lit | Local | Global | MakeClosure | CallKnown | Apply | Prim | Construct | Tuple | Part | Let
        | SetGlobal | Sequence | If | Switch | Raise | Handle | While | NewException | BasisException
        | Packet | Par)


def ml_children(e) -> list:
    """The sub-expressions of an ML expression node (switch keys that are expressions too)."""
    out = []
    for name in getattr(e, "__dataclass_fields__", ()):
        if name == "span":
            continue
        v = getattr(e, name)
        for item in (v if isinstance(v, tuple) else (v,)):
            if isinstance(item, tuple):  # a switch case: (key, body)
                out.extend(i for i in item if hasattr(i, "__dataclass_fields__"))
            elif hasattr(item, "__dataclass_fields__"):
                out.append(item)
    return out


@dataclass(frozen=True, slots=True)
class Function:
    """A supercombinator: `params` are its free variables (when it is a closure's code) followed
    by its arguments; `arity` counts the arguments. `name` is the source name for reports."""

    key: str
    name: str
    params: tuple[str, ...]
    arity: int
    body: Expr
    span: Span = field(compare=False)


@dataclass(slots=True)
class Module:
    """A compiled program: its definitions by key, and the entry."""

    source: str
    relations: dict[str, Relation]
    entry: Entry | None = None
    language: str = "parlog"
    functions: dict[str, Function] = field(default_factory=dict)


def relation_key(name: str, arity: int) -> str:
    return f"{name}/{arity}"


def calls_in(body: Body | None) -> list[Call]:
    """Every call of a body, left to right."""
    out: list[Call] = []
    stack: list[Body] = [body] if body is not None else []
    while stack:
        b = stack.pop()
        if isinstance(b, Call):
            out.append(b)
        else:
            stack.extend(reversed(b.parts))
    return out
