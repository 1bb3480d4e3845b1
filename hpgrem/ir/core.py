"""The core of HPGREM: source spans, the node protocol, rules, annotations and the module.

Every IR node is a frozen, slotted dataclass registered once with `@node(dialect)`. Its
declared field types are its schema: from them alone come its children (the fields that can
hold nodes), the generic walk and transform, the `.hpg` encoding and the type checks that the
loader and the verifier make. A dialect (`parlog`, `ml`, later `tensor`) is a module that
registers its node kinds under names qualified by the dialect (`parlog.Call`, `ml.Let`), and
describes itself in the dialect table (hpgrem/ir/dialects.py); nothing here names one.

The IR is a graph, not a tree: nodes are immutable, so one node object used in several places
is one value, named once. Its meaning is exactly that of copies in each place (sharing changes
cost, never meaning). The walk, the transform and every structural consumer built on them visit
each distinct node once (`walk_tree` is the per-path walk, for the few that count occurrences).

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


# ---------------------------------------------------------------------------------------------
# The node protocol

NODE_KINDS: dict[str, type[Node]] = {}
"""Every registered node kind by its qualified name, `dialect.Class` (`parlog.Call`, `ml.Tuple`):
two dialects may each have a kind of the same class name."""


class Node:
    """The protocol every IR node follows: `kind` (qualified: `parlog.Call`), `dialect`,
    `children()`, `attributes()`, `span`, `rebuild(children)`. Subclasses are dataclasses
    registered with `@node`."""

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
    """Register a node class of `dialect` under its qualified name `dialect.Class` (its `kind`)."""
    def register(cls):
        kind = f"{dialect}.{cls.__name__}"
        if kind in NODE_KINDS:
            raise ValueError(f"node kind {kind} is registered twice")
        cls.kind = kind
        cls.dialect = dialect
        cls.__eq__, cls.__hash__ = _equal, _hash  # the dataclass's own recurse once per path
        NODE_KINDS[kind] = cls
        return cls
    return register


def _compared(cls: type) -> tuple[str, ...]:
    s = _COMPARED.get(cls)
    if s is None:
        s = _COMPARED[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.compare)
    return s


_COMPARED: dict[type, tuple[str, ...]] = {}


def _equal(a: Node, b) -> bool:
    """Structural equality as the dataclass defines it (fields with `compare`, so not spans),
    over the graph: each pair of nodes is compared once, however many paths reach it."""
    if a is b:
        return True
    if type(a) is not type(b):
        return NotImplemented
    done: set[tuple[int, int]] = set()
    stack: list = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x is y:
            continue
        if isinstance(x, Node):
            if type(x) is not type(y):
                return False
            if (id(x), id(y)) in done:
                continue
            done.add((id(x), id(y)))
            stack.extend((getattr(x, f), getattr(y, f)) for f in _compared(type(x)))
        elif type(x) is tuple:
            if type(y) is not tuple or len(x) != len(y):
                return False
            stack.extend(zip(x, y))
        elif isinstance(y, Node) or not x == y:
            return False
    return True


def _hash(node: Node) -> int:
    """A hash that agrees with `_equal`, computed once per distinct node."""
    def value(v, memo: dict):
        if isinstance(v, Node):
            return memo[id(v)]
        if type(v) is tuple:
            return tuple(value(i, memo) for i in v)
        return v
    memo: dict[int, int] = {}

    def at(x: Node, _children: list) -> int:
        h = hash((x.kind, *(value(getattr(x, f), memo) for f in _compared(type(x)))))
        memo[id(x)] = h
        return h
    return fold(node, at)


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
# Generic walk and transform (iterative: programs nest thousands deep; linear in distinct nodes)


def walk(root: Node) -> Iterator[Node]:
    """Every distinct node below and including `root`, parents before children, left to right:
    a node reached by several paths is visited once, at its first place (the order is the
    per-path order with the repeats left out)."""
    return walk_all((root,))


def walk_all(roots) -> Iterator[Node]:
    """Every distinct node below the nodes of `roots` (a node shared by two roots once)."""
    seen: set[int] = set()
    stack = list(reversed(tuple(roots)))
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        yield x
        stack.extend(reversed(x.children()))


def walk_tree(root: Node) -> Iterator[Node]:
    """Every node below and including `root` once per path that reaches it, as if shared nodes
    were copies: for counting occurrences (of a variable, of code that a copy duplicates). Its
    work grows with the paths, which a graph may have exponentially many of."""
    stack = [root]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(reversed(x.children()))


def use_counts(roots) -> dict[int, int]:
    """How many references each distinct node below `roots` has (by `id`): one per field or item
    of a parent that holds it, one per place among `roots`. A count above one is a shared node."""
    counts: dict[int, int] = {}
    for r in roots:
        counts[id(r)] = counts.get(id(r), 0) + 1
    for x in walk_all(roots):
        for c in x.children():
            counts[id(c)] = counts.get(id(c), 0) + 1
    return counts


def fold(root: Node, fn):
    """`fn(node, results)` bottom up, once per distinct node, where `results` are the values
    `fn` gave for the node's children (in `children()` order): a node used in several places is
    computed once, so the work is linear in distinct nodes."""
    done: dict[int, object] = {}
    stack: list = [(root, None)]
    while stack:
        x, kids = stack[-1]
        if kids is None:
            if id(x) in done:  # reached before by another path
                stack.pop()
                continue
            kids = x.children()
            stack[-1] = (x, kids)
            pending = [(k, None) for k in reversed(kids) if id(k) not in done]
            if pending:
                stack.extend(pending)
                continue
        stack.pop()
        if id(x) not in done:
            done[id(x)] = fn(x, [done[id(k)] for k in kids])
    return done[id(root)]


def transform(root: Node, fn) -> Node:
    """Rebuild `root` bottom up: `fn(node)` sees each distinct node once, with its children
    already transformed, and returns its replacement (or the node itself). Unchanged subgraphs
    are kept, and so is sharing: a node used in several places is replaced by one result."""
    def at(x: Node, new: list) -> Node:
        return fn(x.rebuild(new) if any(a is not b for a, b in zip(new, x.children())) else x)
    return fold(root, at)


# ---------------------------------------------------------------------------------------------
# JSON paths: where a node stands, as `.hpg` names it


class JsonPath:
    """A JSON path (`$.rules[3].body.args[1]`) built only when shown: a parent and a step, so
    walking a graph nested 100,000 deep costs no more than walking it."""

    __slots__ = ("parent", "step")

    def __init__(self, parent: JsonPath | str, step: str = ""):
        self.parent, self.step = parent, step

    def __truediv__(self, step: str) -> JsonPath:
        return JsonPath(self, step)

    def __str__(self) -> str:
        steps, p = [], self
        while isinstance(p, JsonPath):
            steps.append(p.step)
            p = p.parent
        return p + "".join(reversed(steps))

    __format__ = lambda self, spec: format(str(self), spec)  # noqa: E731


def walk_paths(root: Node, path) -> Iterator[tuple[Node, JsonPath | str]]:
    """(node, JSON path) for every distinct node below and including `root`, parents first; the
    path names the node's first place as the `.hpg` file's tree would (`$.rules[3].body.args[1]`)."""
    seen: set[int] = set()
    stack = [(root, path)]
    while stack:
        x, p = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        yield x, p
        found: list = []
        for name in schema(type(x)).node_fields:
            _node_paths(getattr(x, name), JsonPath(p, f".{name}"), found)
        stack.extend(reversed(found))


def _node_paths(value, path: JsonPath, out: list) -> None:
    if isinstance(value, Node):
        out.append((value, path))
    elif type(value) is tuple:
        for i, item in enumerate(value):
            _node_paths(item, JsonPath(path, f"[{i}]"), out)


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
    """A compiled program: its rules by key (all of one dialect, named as in the dialect table,
    hpgrem/ir/dialects.py), the entry, and the annotations passes recorded:
    `annotations[rule key]["OWNER.name"]`, each name in the namespace of the pass that owns it
    (`annotations[""]` holds facts about the whole module). Annotation values are JSON-like:
    bool, int, float, str, None and tuples of them. `source_lines` holds the lines of the source file that the rules' spans name (by line
    number), so a message about a compiled module can quote its source without the file."""

    source: str
    rules: dict[str, Rule]
    entry: Entry | None
    dialect: str  # no default: the core assumes no language
    annotations: dict[str, dict[str, AnnotationValue]] = field(default_factory=dict)
    source_lines: dict[int, str] = field(default_factory=dict)

    @property
    def language(self) -> str:
        """The name the module's runtime is found by (pam/runtimes.py): its dialect."""
        return self.dialect

    def annotation(self, key: str, name: str, default=None):
        """The note `name` ("OWNER.name": `granularity.cost`) of rule `key` (`MODULE_FACTS`: of
        the module), or `default`. Passes write notes through the pass manager
        (hpgrem.passes.annotated), which keeps each owner to its own namespace."""
        return self.annotations.get(key, {}).get(name, default)


MAX_SOURCE_LINE = 400
"""The most characters of a source line a module keeps (`Module.source_lines`)."""


def named_lines(module: Module) -> set[int]:
    """The line numbers of the module's own source file that spans of its nodes name."""
    roots = [*([module.entry] if module.entry is not None else []), *module.rules.values()]
    return {x.span.line for x in walk_all(roots)
            if type(getattr(x, "span", None)) is Span and x.span.file == module.source}


def source_lines(module: Module, text: str) -> dict[int, str]:
    """The lines of `text` (the module's source file) that spans of the module's nodes name,
    each cut to MAX_SOURCE_LINE characters: what `Module.source_lines` keeps."""
    named = named_lines(module)
    out: dict[int, str] = {}
    # lines end at "\n", as the front ends count them (hpgrem/diagnostics.py): splitlines()
    # would also break at \f, \v and U+2028 and number every later line wrong
    for number, line in enumerate(text.split("\n"), 1):
        if number in named:
            out[number] = line.removesuffix("\r")[:MAX_SOURCE_LINE]
    return out
