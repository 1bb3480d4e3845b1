"""The core of HPGREM: source spans, the node protocol, rules, annotations and the module.

Every IR node is a frozen, slotted dataclass registered once with `@node(dialect)`. Its
declared field types are its schema: from them alone come its children (the fields that can
hold nodes), the generic walk and transform, the `.hpg` encoding and the type checks that the
loader and the verifier make. A dialect (`parlog`, `ml`, later `tensor`) is a module that
registers its node kinds; nothing here names one.

A *rule* is what the machine compiles into one step function and what a trace names when it
rewrites: a PARLOG relation with its guarded clauses, an ML supercombinator, later a tensor
operation. A module maps rule keys to rules of one dialect and carries the *annotations* that
passes record about them (docs/ir.md lists them).
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from dataclasses import dataclass, field
from typing import ClassVar, Iterator


@dataclass(frozen=True, slots=True)
class Span:
    """A source location: 1-based line and column of the first character."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NO_SPAN = Span("<none>", 0, 0)


class Dialect(enum.StrEnum):
    """The dialect of a module's rules (a StrEnum: it reads and compares as its name)."""

    PARLOG = "parlog"
    ML = "ml"


# ---------------------------------------------------------------------------------------------
# The node protocol

NODE_KINDS: dict[str, type[Node]] = {}
"""Every registered node kind by name (names are unique across dialects)."""


class Node:
    """The protocol every IR node follows: `kind`, `dialect`, `children()`, `attributes()`,
    `span`, `rebuild(children)`. Subclasses are dataclasses registered with `@node`."""

    __slots__ = ()
    kind: ClassVar[str]
    dialect: ClassVar[str]
    block_form: ClassVar[bool] = False
    """True for nodes that print on lines of their own (in a one-line context: in braces)."""

    def render(self) -> list:
        """How the node prints (hpgrem/printer.py): a list of text pieces, child nodes (printed
        in place), `inline(child)` and the layout marks NL, IN, OUT. This default serves any
        kind: `Kind(attribute, ..., child, ...)`."""
        parts: list = [repr(v) for v in self.attributes().values()] + self.children()
        out: list = [self.kind, "("]
        for i, p in enumerate(parts):
            out += ([", "] if i else []) + [p]
        return out + [")"]

    def children(self) -> list[Node]:
        """The nodes directly below this one, field by field, in field order."""
        out: list[Node] = []
        for name in schema(type(self)).node_fields:
            _collect(getattr(self, name), out)
        return out

    def attributes(self) -> dict[str, object]:
        """The fields that hold no node (names, numbers, enums), by name; the span excluded."""
        s = schema(type(self))
        return {f: getattr(self, f) for f in s.fields if f not in s.node_fields and f != "span"}

    def rebuild(self, children: list[Node]) -> Node:
        """This node with `children` (as `children()` orders them) in place of its own."""
        it = iter(children)
        changes = {name: _replace(getattr(self, name), it) for name in schema(type(self)).node_fields}
        return dataclasses.replace(self, **changes)


class Layout(enum.Enum):
    """Layout marks in a node's rendering: a new line, one indentation level in or out."""

    NL = "newline"
    IN = "indent"
    OUT = "dedent"


NL, IN, OUT = Layout.NL, Layout.IN, Layout.OUT


@dataclass(frozen=True, slots=True)
class Inline:
    """A child printed on the current line even inside a multi-line rendering."""

    node: Node


inline = Inline


def _collect(value, out: list) -> None:
    if isinstance(value, Node):
        out.append(value)
    elif type(value) is tuple:
        for item in value:
            _collect(item, out)


def _replace(value, it):
    if isinstance(value, Node):
        return next(it)
    if type(value) is tuple:
        return tuple(_replace(item, it) for item in value)
    return value


def node(dialect: str):
    """Register a node class of `dialect` under its class name (its `kind`)."""
    def register(cls):
        if cls.__name__ in NODE_KINDS:
            raise ValueError(f"node kind {cls.__name__} is registered twice")
        cls.kind = cls.__name__
        cls.dialect = dialect
        NODE_KINDS[cls.__name__] = cls
        return cls
    return register


@dataclass(frozen=True)
class Schema:
    """What a node kind's declared field types say: each field's type (resolved), and which
    fields can hold nodes."""

    fields: dict[str, object]
    node_fields: tuple[str, ...]


_SCHEMAS: dict[type, Schema] = {}


def schema(cls: type) -> Schema:
    """The schema of a registered node class (computed once, from its type hints)."""
    s = _SCHEMAS.get(cls)
    if s is None:
        hints = typing.get_type_hints(cls)
        fields = {f.name: hints[f.name] for f in dataclasses.fields(cls)}
        s = _SCHEMAS[cls] = Schema(fields, tuple(n for n, t in fields.items() if _holds_nodes(t)))
    return s


def _holds_nodes(hint) -> bool:
    if isinstance(hint, type):
        return issubclass(hint, Node)
    return any(_holds_nodes(a) for a in typing.get_args(hint) if a is not Ellipsis)


def check_value(value, hint) -> str | None:
    """None when `value` has the declared type `hint`, else what is wrong (one line). Nodes
    are checked shallowly: their own fields are checked when the walk reaches them."""
    origin = typing.get_origin(hint)
    if hint is type(None) or hint is None:
        return None if value is None else f"expected nothing, found {_what(value)}"
    if origin is typing.Union or isinstance(hint, types.UnionType):
        if any(check_value(value, a) is None for a in typing.get_args(hint)):
            return None
        return f"expected {type_name(hint)}, found {_what(value)}"
    if origin is tuple:
        if type(value) is not tuple:
            return f"expected a tuple, found {_what(value)}"
        args = typing.get_args(hint)
        items = args[:1] * len(value) if len(args) == 2 and args[1] is Ellipsis else args
        if len(items) != len(value):
            return f"expected a tuple of {len(items)}, found {len(value)} items"
        for i, (item, h) in enumerate(zip(value, items)):
            problem = check_value(item, h)
            if problem is not None:
                return f"item {i}: {problem}"
        return None
    if hint is float:
        ok = type(value) is float
    elif hint is int:
        ok = type(value) is int
    elif isinstance(hint, type) and issubclass(hint, enum.Enum):
        ok = isinstance(value, hint)
    elif isinstance(hint, type):
        ok = isinstance(value, hint)
    else:
        raise TypeError(f"unsupported field type {hint!r}")
    return None if ok else f"expected {type_name(hint)}, found {_what(value)}"


def type_name(hint) -> str:
    """A declared field type as messages name it, the same in the verifier and the `.hpg`
    reader: `str`, `null`, `a span [file, line, col]`, `Var or Atom`, `a list of Term`."""
    if hint is None or hint is type(None):
        return "null"
    if isinstance(hint, type):
        return "a span [file, line, col]" if hint is Span else hint.__name__
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {type_name(args[0])}"
        return "a list [" + ", ".join(type_name(a) for a in args) + "]"
    if args:
        return " or ".join(type_name(a) for a in args)
    return str(hint)


def _what(value) -> str:
    if isinstance(value, Node):
        return value.kind
    return type(value).__name__


# ---------------------------------------------------------------------------------------------
# Generic walk and transform (iterative: programs nest thousands deep)


def walk(root: Node) -> Iterator[Node]:
    """Every node below and including `root`, parents before children, left to right."""
    stack = [root]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(reversed(x.children()))


def transform(root: Node, fn) -> Node:
    """Rebuild `root` bottom up: `fn(node)` sees each node with its children already
    transformed and returns its replacement (or the node itself). Unchanged subtrees are kept."""
    stack: list = [(root, None)]
    done: list[Node] = []
    while stack:
        x, kids = stack.pop()
        if kids is None:
            kids = x.children()
            stack.append((x, kids))
            stack.extend((k, None) for k in reversed(kids))
            continue
        n = len(kids)
        new = done[len(done) - n:] if n else []
        if n:
            del done[len(done) - n:]
        if any(a is not b for a, b in zip(new, kids)):
            x = x.rebuild(new)
        done.append(fn(x))
    return done[0]


# ---------------------------------------------------------------------------------------------
# Rules, the entry, the module


class Rule(Node):
    """The unit the machine compiles into one step function and a trace names when it rewrites.

    Every rule has a stable `key` (unique in its module, kept across passes and in `.hpg`), a
    source `name` for reports, its `arity`, its `span`, and `inputs`: the argument positions a
    call may have to wait for before the rule can commit (PARLOG's `?` arguments that a clause
    looks into; ML calls never wait for their arguments, which are values, so none). A step may
    also suspend on variables the rule itself created (an ML join on a forked child)."""

    __slots__ = ()
    key: str
    name: str
    arity: int
    span: Span
    inputs: tuple[int, ...]


@node("core")
@dataclass(frozen=True, slots=True)
class Entry(Node):
    """What `run` starts: a call of `target` with fresh variables named `outputs`, which are
    printed as `Name = Term` when the computation terminates (empty for `main`)."""

    target: str
    outputs: tuple[str, ...]


AnnotationValue = bool | int | float | str | tuple | None
MODULE_FACTS = ""
"""The annotation key of facts about the whole module rather than one rule."""


@dataclass(slots=True)
class Module:
    """A compiled program: its rules by key (all of one dialect), the entry, and the
    annotations passes recorded: `annotations[rule key][name]` (`annotations[""]` holds facts
    about the whole module). Annotation values are JSON-like: bool, int, float, str, None and
    tuples of them."""

    source: str
    rules: dict[str, Rule]
    entry: Entry | None = None
    dialect: Dialect = Dialect.PARLOG
    annotations: dict[str, dict[str, AnnotationValue]] = field(default_factory=dict)

    @property
    def language(self) -> Dialect:
        return self.dialect

    def annotation(self, key: str, name: str, default=None):
        """The note `name` ("OWNER.name": `granularity.cost`) of rule `key` (`MODULE_FACTS`: of
        the module), or `default`. Passes write notes through the pass manager
        (hpgrem.passes.annotated), which keeps each owner to its own namespace."""
        return self.annotations.get(key, {}).get(name, default)
