"""The typed, match-compiled program: what elaboration hands to the lowering.

Names are resolved: every variable the program binds is a `Var` (unique `id` in the program), a
basis value is a `BasisRef` naming an entry of `basis.VALUES`, a constructor is a `Constructor`,
an exception an `ExnName`. Every expression carries its `type` (a resolved `types.Type`: no
linked `TVar`s; an unlinked `TVar`, or a `TRigid` written `'a` by the user, is a type variable
the value is polymorphic in) and the `span` it came from. Derived forms are gone: `andalso`/`orelse` are `If`s, lists are `::`/`nil`
constructor applications, infix operators are applications of their value to a pair, `e : ty` is
`e`, `local` and `val ... and ...` are flattened into declarations in order. Every match (`fn`,
`case`, `handle`, `fun` clauses, `val` patterns) is a decision `Tree` over `Path`s.

Evaluation order is SML's: call-by-value, left to right; record fields in the order of `fields`
(source order), declarations in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hpgrem.diagnostics import Diagnostic
from frontend.ml.types import Constructor, Scheme, TyCon, Type
from hpgrem.ir import Span


@dataclass(frozen=True, slots=True)
class Var:
    """A variable bound by the program (a pattern variable, a function, a parameter made by
    match compilation, or the run-time name of an exception)."""

    name: str
    id: int
    span: Span = field(compare=False)


@dataclass(frozen=True, slots=True)
class ExnName:
    """An exception constructor. A basis exception (`Div`, `Fail`, ...) has `var` None and is
    known by `name`; a declared one is made fresh each time its `ExceptionDec` is evaluated
    (SML exceptions are generative) and held in `var`. `arg` is its argument type, or None."""

    name: str
    arg: Type | None
    var: Var | None
    span: Span | None = field(default=None, compare=False)


# ---------------------------------------------------------------------------------------------
# Decision trees


@dataclass(frozen=True, slots=True)
class Path:
    """A part of the values being matched: start at `root`, then take each step in turn: an int
    is a record field by position in the record's layout (canonical label order, see
    `types.field_index`), `"arg"` the argument of a constructor, `"cons"` the argument of `::`
    (the head and tail pair), `"exnarg"` the argument of an exception, `"deref"` the contents of a
    ref cell (read when the match runs)."""

    root: Var
    steps: tuple[int | str, ...] = ()

    def then(self, step: int | str) -> Path:
        return Path(self.root, self.steps + (step,))


@dataclass(frozen=True, slots=True)
class Leaf:
    """The match succeeded with arm `arm` (bind its variables, evaluate its body)."""

    arm: int


@dataclass(frozen=True, slots=True)
class Fail:
    """No arm matches: the enclosing `Match`'s `failure` says what happens."""


@dataclass(frozen=True, slots=True)
class Switch:
    """Test the value at `path`. `kind` is `con` (keys are `Constructor`s of one datatype),
    `exn` (keys are `ExnName`s), `int`, `string` or `char` (keys are Python values: int, str,
    str of length 1). `default` is taken when no key matches; it is None only when the keys
    are every constructor of the datatype."""

    path: Path
    kind: str
    cases: tuple[tuple[Constructor | ExnName | int | str, Tree], ...]
    default: Tree | None


Tree = Leaf | Fail | Switch


@dataclass(frozen=True, slots=True)
class Arm:
    """One rule of a match: its pattern variables, each bound to the value at a path, and its
    body. An arm may be reached from several leaves; its code should be made once."""

    bindings: tuple[tuple[Var, Path], ...]
    body: Expr
    span: Span


# ---------------------------------------------------------------------------------------------
# Expressions


@dataclass(frozen=True, slots=True)
class Const:
    """An int, real, string or char constant (`type` says which; a char is a 1-char str)."""

    value: int | float | str
    type: Type
    span: Span


@dataclass(frozen=True, slots=True)
class VarRef:
    var: Var
    type: Type
    span: Span


@dataclass(frozen=True, slots=True)
class BasisRef:
    """A value of the initial basis, by its name in `basis.VALUES` (`+`, `print`, `List.map`).
    The overloaded operators (`+ - * ~ abs < > <= >=`) are told apart by `type`:
    `int * int -> int` or `real * real -> real`, and so on."""

    name: str
    type: Type
    span: Span


@dataclass(frozen=True, slots=True)
class ConApp:
    """A datatype value: `con` applied to `arg` (None for a constructor without argument).
    Constructors are always fully applied here: a constructor used as a function value has been
    wrapped in a `Fn`. `ref e` is `ConApp` of the `ref` constructor (it allocates a cell)."""

    con: Constructor
    arg: Expr | None
    type: Type
    span: Span


@dataclass(frozen=True, slots=True)
class ExnApp:
    """An exception value (of type exn): `exn` applied to `arg`, or None."""

    exn: ExnName
    arg: Expr | None
    type: Type
    span: Span


@dataclass(frozen=True, slots=True)
class App:
    fn: Expr
    arg: Expr
    type: Type
    span: Span


@dataclass(frozen=True, slots=True)
class Fn:
    """A one-argument function; a curried `fun` is nested `Fn`s."""

    param: Var
    body: Expr
    type: Type
    span: Span


@dataclass(frozen=True, slots=True)
class Let:
    decs: tuple[Dec, ...]
    body: Expr
    type: Type
    span: Span


@dataclass(frozen=True, slots=True)
class Seq:
    """Evaluate every expression in order; the value is the last one's."""

    exprs: tuple[Expr, ...]
    type: Type
    span: Span


@dataclass(frozen=True, slots=True)
class Record:
    """A record or tuple (tuples are labelled "1".."n", `()` has no fields). `fields` are in
    source order, which is evaluation order; the value's layout is canonical label order, as in
    `type`."""

    fields: tuple[tuple[str, Expr], ...]
    type: Type
    span: Span


@dataclass(frozen=True, slots=True)
class Select:
    """`#label record` (the position is `types.field_index(record.type, label)`)."""

    label: str
    record: Expr
    type: Type
    span: Span


@dataclass(frozen=True, slots=True)
class If:
    cond: Expr
    then: Expr
    else_: Expr
    type: Type
    span: Span


@dataclass(frozen=True, slots=True)
class While:
    cond: Expr
    body: Expr
    type: Type
    span: Span


@dataclass(frozen=True, slots=True)
class Raise:
    exn: Expr
    type: Type
    span: Span


@dataclass(frozen=True, slots=True)
class Match:
    """Run `tree` over values already bound to `roots` (a `fn`'s parameter, a `fun`'s
    parameters, a `case` scrutinee, a handled exception), then evaluate the arm reached.
    `failure` says what `Fail` does: `Match` or `Bind` (raise that basis exception) or
    `reraise` (raise the handled exception again, for `handle`)."""

    roots: tuple[Var, ...]
    tree: Tree
    arms: tuple[Arm, ...]
    failure: str
    type: Type
    span: Span


@dataclass(frozen=True, slots=True)
class Case:
    """Evaluate `scrutinee`, bind it to `match.roots[0]`, run `match`."""

    scrutinee: Expr
    match: Match
    type: Type
    span: Span


@dataclass(frozen=True, slots=True)
class Handle:
    """Evaluate `body`; if it raises, bind the exception to `match.roots[0]` and run `match`
    (whose `Fail` re-raises)."""

    body: Expr
    match: Match
    type: Type
    span: Span


Expr = (Const | VarRef | BasisRef | ConApp | ExnApp | App | Fn | Let | Seq | Record | Select | If
        | While | Raise | Match | Case | Handle)


# ---------------------------------------------------------------------------------------------
# Declarations


@dataclass(frozen=True, slots=True)
class ValDec:
    """`val pat = expr`: evaluate `expr`, bind it to `root`, run `tree` (`Leaf(0)` or `Fail`,
    which raises `Bind`), then bind each variable of `bindings` to the value at its path. A plain
    `val x = e` has `root` x, `tree` Leaf(0) and no bindings."""

    root: Var
    expr: Expr
    tree: Tree
    bindings: tuple[tuple[Var, Path], ...]
    span: Span


@dataclass(frozen=True, slots=True)
class RecDec:
    """`fun` or `val rec`: the functions, each in the scope of all of them."""

    binds: tuple[tuple[Var, Fn], ...]
    span: Span


@dataclass(frozen=True, slots=True)
class ExceptionDec:
    """Make a new exception name and bind it to `exn.var`."""

    exn: ExnName
    span: Span


@dataclass(frozen=True, slots=True)
class DatatypeDec:
    """A datatype declaration (no run-time effect; the constructors are in `tycons`)."""

    tycons: tuple[TyCon, ...]
    span: Span


Dec = ValDec | RecDec | ExceptionDec | DatatypeDec


@dataclass(frozen=True, slots=True)
class Chunk:
    """One part of the program up to a top-level `;`, checked as a whole before it runs:
    its declarations in order, its warnings, and the values it binds at top level with their
    type schemes (`types.show_scheme` prints one as Poly/ML would)."""

    decs: tuple[Dec, ...]
    warnings: tuple[Diagnostic, ...]
    span: Span
    bindings: tuple[tuple[str, Scheme], ...] = ()


@dataclass(frozen=True, slots=True)
class Program:
    """The whole program: its chunks in order, and every warning (non-exhaustive and redundant
    matches, top-level value-restriction monotypes), in source order."""

    chunks: tuple[Chunk, ...]
    warnings: tuple[Diagnostic, ...]

    @property
    def decs(self) -> tuple[Dec, ...]:
        """Every top-level declaration, in order."""
        return tuple(d for chunk in self.chunks for d in chunk.decs)
