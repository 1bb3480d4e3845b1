"""The ML dialect of HPGREM: supercombinators and their expression graphs.

A `Function` is a rule: a supercombinator after closure conversion, lambda lifting and
pattern-match compilation. Its body is an expression over its parameters and `Let`-bound locals
(names unique within the function), the module's globals (top-level values, set by `SetGlobal`
in the entry function as the program's declarations run) and other functions by key. Evaluation
is strict, left to right. Values: see pam/ml/values.py. Each node says how it prints (`render`,
see hpgrem/printer.py); everything else comes from its declared fields.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field, replace

from hpgrem.ir.core import IN, NL, NO_SPAN, OUT, Node, Rule, Span, fold, inline, node, transform, walk

# The exceptions of the ML basis that compiled code names (`BasisException`); their values are
# in pam/ml/values.py.
ML_BASIS_EXCEPTIONS = ("Bind", "Match", "Div", "Overflow", "Subscript", "Empty", "Option", "Chr", "Size", "Fail")

INT_MIN, INT_MAX = -(1 << 62), (1 << 62) - 1
"""The range of ML's `int` (63 bits, as Poly/ML's fixed-precision ints)."""


def _join(items, sep: str = ", ") -> list:
    out: list = []
    for i, a in enumerate(items):
        out += ([sep] if i else []) + [a]
    return out


@node("ml")
@dataclass(frozen=True, slots=True)
class Lit(Node):
    """An int, real, string (a char is a 1-character string) or unit (`None`)."""

    value: int | float | str | None
    span: Span = field(default=NO_SPAN, compare=False)

    def render(self) -> list:
        return ["()" if self.value is None else repr(self.value)]


@node("ml")
@dataclass(frozen=True, slots=True)
class Local(Node):
    """A parameter or `Let`-bound local of the enclosing function."""

    name: str
    span: Span = field(default=NO_SPAN, compare=False)

    def render(self) -> list:
        return [self.name]


@node("ml")
@dataclass(frozen=True, slots=True)
class Global(Node):
    """A top-level value of the module."""

    name: str
    span: Span = field(default=NO_SPAN, compare=False)

    def render(self) -> list:
        return [f"global {self.name}"]


@node("ml")
@dataclass(frozen=True, slots=True)
class MakeClosure(Node):
    """A function value: `function` with its leading parameters bound to `free`."""

    function: str
    free: tuple[Expr, ...]
    span: Span = field(default=NO_SPAN, compare=False)

    def render(self) -> list:
        return [f"closure {self.function}[", *_join(self.free), "]"]


@node("ml")
@dataclass(frozen=True, slots=True)
class CallKnown(Node):
    """A saturated call of a known function (free variables first, then arguments)."""

    function: str
    args: tuple[Expr, ...]
    span: Span = field(default=NO_SPAN, compare=False)

    def render(self) -> list:
        return [f"{self.function}(", *_join(self.args), ")"]


@node("ml")
@dataclass(frozen=True, slots=True)
class Apply(Node):
    """A call of a function value."""

    fn: Expr
    arg: Expr
    span: Span = field(default=NO_SPAN, compare=False)

    def render(self) -> list:
        return ["apply(", self.fn, ", ", self.arg, ")"]


@node("ml")
@dataclass(frozen=True, slots=True)
class Prim(Node):
    """A primitive of the basis (`op` a basis name, or a typed operator such as `int.+`)."""

    op: str
    args: tuple[Expr, ...]
    span: Span = field(default=NO_SPAN, compare=False)

    def render(self) -> list:
        return [f"{self.op}(", *_join(self.args), ")"]


@node("ml")
@dataclass(frozen=True, slots=True)
class Construct(Node):
    """A datatype value: constructor `tag` of `datatype` (`list`, `bool`, ... or a user type)."""

    datatype: str
    tag: int
    arg: Expr | None
    span: Span = field(default=NO_SPAN, compare=False)

    def render(self) -> list:
        return [f"{self.datatype}#{self.tag}", *([] if self.arg is None else ["(", self.arg, ")"])]


@node("ml")
@dataclass(frozen=True, slots=True)
class Tuple(Node):
    """A tuple or record (canonical label order); items are evaluated in `order` (source order;
    empty for left to right)."""

    items: tuple[Expr, ...]
    order: tuple[int, ...] = ()
    span: Span = field(default=NO_SPAN, compare=False)

    def render(self) -> list:
        return ["(", *_join(self.items), ")"]


class PartStep(enum.StrEnum):
    """A step into a value other than a field index."""

    ARG = "arg"        # a constructor's argument
    CONS = "cons"      # the pair of a `::`
    EXNARG = "exnarg"  # an exception's argument
    DEREF = "deref"    # a ref's contents


@node("ml")
@dataclass(frozen=True, slots=True)
class Part(Node):
    """A part of a value: `step` is a field index or a `PartStep`."""

    value: Expr
    step: int | PartStep
    span: Span = field(default=NO_SPAN, compare=False)

    def render(self) -> list:
        return [self.value, f".{self.step}"]


@node("ml")
@dataclass(frozen=True, slots=True)
class Let(Node):
    """`name` = `value` in `body`."""

    name: str
    value: Expr
    body: Expr
    span: Span = field(default=NO_SPAN, compare=False)
    block_form = True

    def render(self) -> list:
        return [f"let {self.name} = ", inline(self.value), NL, self.body]


@node("ml")
@dataclass(frozen=True, slots=True)
class SetGlobal(Node):
    """Bind global `name` (in the entry function: a top-level declaration); the value is unit."""

    name: str
    value: Expr
    span: Span = field(default=NO_SPAN, compare=False)

    def render(self) -> list:
        return [f"global {self.name} := ", self.value]


@node("ml")
@dataclass(frozen=True, slots=True)
class Sequence(Node):
    """Evaluate `exprs` in order; the value is the last one's."""

    exprs: tuple[Expr, ...]
    span: Span = field(default=NO_SPAN, compare=False)
    block_form = True

    def render(self) -> list:
        return _join(self.exprs, NL)


@node("ml")
@dataclass(frozen=True, slots=True)
class If(Node):
    cond: Expr
    then: Expr
    else_: Expr
    span: Span = field(default=NO_SPAN, compare=False)
    block_form = True

    def render(self) -> list:
        return ["if ", inline(self.cond), " then", IN, NL, self.then, OUT, NL, "else", IN, NL, self.else_, OUT]


class SwitchTest(enum.StrEnum):
    """What a `Switch` tests its subject for."""

    CON = "con"        # keys are constructor tags of the switch's datatype
    EXN = "exn"        # keys are expressions giving exception constructors
    INT = "int"        # keys are literals
    STRING = "string"
    CHAR = "char"


class ConRep(enum.StrEnum):
    """How values of a user datatype are represented (pam/ml/values.py): bare tags (no
    constructor has an argument), `(tag, arg)` pairs (all have one), or a mix of both."""

    TAGS = "tags"
    ARGS = "args"
    MIXED = "mixed"


@node("ml")
@dataclass(frozen=True, slots=True)
class Switch(Node):
    """Test `subject` (see `SwitchTest`); for a constructor test of a user datatype, `rep` says
    how its values look (None for `list` and `bool` and for other tests). `default` is None when
    the cases are exhaustive."""

    subject: Expr
    test: SwitchTest
    datatype: str
    rep: ConRep | None
    cases: tuple[tuple[int | str | Expr, Expr], ...]
    default: Expr | None
    span: Span = field(default=NO_SPAN, compare=False)
    block_form = True

    def render(self) -> list:
        kind = " ".join(x for x in (self.test, self.datatype, self.rep or "") if x)
        out: list = ["switch ", inline(self.subject), f" ({kind})"]
        for k, body in self.cases:
            key = [repr(k)] if isinstance(k, (int, str)) else [inline(k)]
            out += [NL, "case ", *key, ":", IN, NL, body, OUT]
        if self.default is not None:
            out += [NL, "default:", IN, NL, self.default, OUT]
        return out


@node("ml")
@dataclass(frozen=True, slots=True)
class Raise(Node):
    exn: Expr
    span: Span = field(default=NO_SPAN, compare=False)

    def render(self) -> list:
        return ["raise ", self.exn]


@node("ml")
@dataclass(frozen=True, slots=True)
class Handle(Node):
    """Evaluate `body`; if it raises, bind the packet to `name` and evaluate `handler`."""

    body: Expr
    name: str
    handler: Expr
    span: Span = field(default=NO_SPAN, compare=False)
    block_form = True

    def render(self) -> list:
        return ["try", IN, NL, self.body, OUT, NL, f"handle {self.name} =>", IN, NL, self.handler, OUT]


@node("ml")
@dataclass(frozen=True, slots=True)
class While(Node):
    cond: Expr
    body: Expr
    span: Span = field(default=NO_SPAN, compare=False)
    block_form = True

    def render(self) -> list:
        return ["while ", inline(self.cond), " do", IN, NL, self.body, OUT]


@node("ml")
@dataclass(frozen=True, slots=True)
class NewException(Node):
    """A fresh exception constructor (SML exceptions are generative)."""

    name: str
    has_arg: bool
    span: Span = field(default=NO_SPAN, compare=False)

    def render(self) -> list:
        return [f"new exception {self.name}"]


@node("ml")
@dataclass(frozen=True, slots=True)
class BasisException(Node):
    """An exception constructor of the basis (`Match`, `Div`, ...)."""

    name: str
    span: Span = field(default=NO_SPAN, compare=False)

    def render(self) -> list:
        return [self.name]


@node("ml")
@dataclass(frozen=True, slots=True)
class Packet(Node):
    """An exception value: constructor `con` applied to `arg`."""

    con: Expr
    arg: Expr | None
    span: Span = field(default=NO_SPAN, compare=False)

    def render(self) -> list:
        return [self.con, *([] if self.arg is None else ["(", self.arg, ")"])]


@node("ml")
@dataclass(frozen=True, slots=True)
class Par(Node):
    """`ForkJoin.par (left, right)`: apply two thunks, possibly in parallel, giving the pair."""

    left: Expr
    right: Expr
    span: Span = field(default=NO_SPAN, compare=False)

    def render(self) -> list:
        return ["par(", self.left, ", ", self.right, ")"]


Expr = (Lit | Local | Global | MakeClosure | CallKnown | Apply | Prim | Construct | Tuple | Part | Let
        | SetGlobal | Sequence | If | Switch | Raise | Handle | While | NewException | BasisException
        | Packet | Par)


def fingerprint(expr: Node) -> str:
    """A digest of an expression's structure (kinds and attributes, not spans): an annotation
    about particular nodes of a body records it, and applies only to the body it was made for.
    A shared node digests as its copies would, once."""
    def digest(x: Node, children: list[bytes]) -> bytes:
        h = hashlib.blake2b(f"{x.kind}{tuple(x.attributes().values())!r}{len(children)};".encode(), digest_size=8)
        for c in children:
            h.update(c)
        return h.digest()
    return fold(expr, digest).hex()


INT_ARITHMETIC = ("int.+", "int.-", "int.*", "int.~", "int.abs")
"""The primitives whose result may overflow (Overflow): the `ml-ranges` pass says which of
them need which check, in the order `walk_tree` meets them (once per place)."""


def substitute_locals(expr: Node, mapping: dict[str, Expr]) -> Node:
    """`expr` with each use of a local named in `mapping` replaced by its expression. Local
    names are unique within a function, so nothing can be captured."""
    return transform(expr, lambda n: mapping.get(n.name, n) if isinstance(n, Local) else n)


def rename_locals(expr: Node, names: set[str], suffix: str) -> Node:
    """`expr` with the locals in `names` (their binders and uses) renamed with `suffix`: a copy
    of code placed beside the original keeps local names unique within the function."""
    if not names:
        return expr

    def rename(n):
        if isinstance(n, Local) and n.name in names:
            return Local(n.name + suffix, n.span)
        if isinstance(n, (Let, Handle)) and n.name in names:
            return replace(n, name=n.name + suffix)
        return n
    return transform(expr, rename)

def free_locals(expr: Node) -> frozenset[str]:
    """The locals `expr` uses that it does not bind (a `Let` binds its name in its body, a
    `Handle` in its handler)."""
    def free(x: Node, children: list[frozenset[str]]) -> frozenset[str]:
        if isinstance(x, Local):
            return frozenset((x.name,))
        if isinstance(x, (Let, Handle)):
            return children[0] | (children[1] - {x.name})
        if len(children) == 1:
            return children[0]
        return frozenset().union(*children)
    return fold(expr, free)


@node("ml")
@dataclass(frozen=True, slots=True)
class Function(Rule):
    """A supercombinator: `params` are its free variables (when it is a closure's code) followed
    by its arguments; `arity` counts the arguments. `name` is the source name for reports."""

    key: str
    name: str
    params: tuple[str, ...]
    arity: int
    body: Expr
    span: Span = field(compare=False)
    block_form = True

    @property
    def inputs(self) -> tuple[int, ...]:
        return ()  # arguments are values: a call never waits for them

    def check(self, module) -> list[str]:
        """The dialect's rules (hpgrem/verify.py runs the structural checks first): calls and
        closures name defined functions, with the right number of arguments; locals are bound
        before use."""
        out: list[str] = []
        if not 0 <= self.arity <= len(self.params):
            out.append(f"arity {self.arity} with {len(self.params)} parameters")
        for name in sorted(free_locals(self.body) - set(self.params)):
            out.append(f"local {name} used outside its scope")
        for e in walk(self.body):
            if isinstance(e, BasisException) and e.name not in ML_BASIS_EXCEPTIONS:
                out.append(f"unknown basis exception {e.name!r}")
            elif isinstance(e, (CallKnown, MakeClosure)):
                callee = module.rules.get(e.function)
                if callee is None:
                    out.append(f"refers to undefined function {e.function}")
                elif isinstance(e, CallKnown) and len(e.args) != len(callee.params):
                    out.append(f"calls {e.function} with {len(e.args)} arguments, it takes {len(callee.params)}")
                elif isinstance(e, MakeClosure) and len(e.free) != len(callee.params) - callee.arity:
                    out.append(f"closure of {e.function} binds {len(e.free)} free variables, "
                               f"it has {len(callee.params) - callee.arity}")
            if len(out) >= 5:
                break
        return out[:5]

    def render(self) -> list:
        n = self.arity
        return [f"function {self.key}({', '.join(self.params)})    % {self.span.line}:{self.span.col}, "
                f"{len(self.params) - n} free, {n} argument{'s' if n != 1 else ''}", IN, NL, self.body, OUT]
