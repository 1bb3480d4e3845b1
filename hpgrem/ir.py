"""HPGREM: the heterogeneous graph-rewriting intermediate form.

A `Module` holds definitions and an entry. This issue brings PARLOG's definitions: a `Relation`
(modes and ordered search groups of guarded clauses). Terms are plain immutable trees whose
variables are numbered per clause; every node that came from source carries a `Span`.
Front ends build these; `pam.rules` compiles them once into executable steps.
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


@dataclass(slots=True)
class Module:
    """A compiled program: its definitions by key, and the entry."""

    source: str
    relations: dict[str, Relation]
    entry: Entry | None = None
    language: str = "parlog"


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
