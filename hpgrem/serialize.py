"""The `.hpg` file format: a module as JSON that round-trips exactly, sharing included.

`compile` writes it and `run` reads it, so the two can be separate steps. The document is
`{"format": "hpgrem", "version": 3, "dialect", "source", "lines", "nodes", "entry", "rules",
"annotations"}`. A node is `{"kind": KIND, FIELD: VALUE, ...}` with its qualified kind
(`parlog.Call`, `ml.Let`) and the fields its kind declares; a span is `[file, line, col]`, an
enum is its value, a tuple a list. A node object used in more than one place is written once,
in the `nodes` table (children before the nodes that use them), and each use is `{"ref": N}`,
its index there: the file grows with the distinct nodes, not with the paths to them. `lines`
is `[[line number, text], ...]`: the lines of the module's own source file that its spans name
(`Module.source_lines`), so a message can quote them without the source. Everything is generic
over the dialect table and the node registry: a dialect adds node kinds and hooks without
touching this file.

A `.hpg` file is untrusted input: reading it checks every field against its declared type and
refuses anything else with `HpgFormatError` naming the JSON path of the bad field (a user
error, exit 2, never a traceback). A `{"ref": N}` may stand only where a node may, and must name
an earlier entry of the table of a kind that may stand there (so no cycle, no forward
reference). Other versions are refused too; the dialect's type check (for ML) runs on the result.
"""

from __future__ import annotations

import enum
import json
import re
import sys
import threading
import types
import typing

from hpgrem.ir.core import (MAX_SOURCE_LINE, Entry, JsonPath, Module, Node, Rule, Span, named_lines, schema, type_name,
                            use_counts)
from hpgrem.ir.dialects import UnknownDialect, dialect, node_kind

FORMAT = "hpgrem"
VERSION = 3
"""1: the two-IR format before the node registry (no dialect field, spans as nodes); 2: a tree
with unqualified kinds; 3: a graph (the `nodes` table and refs), qualified kinds, `lines`."""


class HpgFormatError(Exception):
    """The file is not a readable `.hpg` module."""


# ---------------------------------------------------------------------------------------------
# Nesting

DEEP_STACK = 1 << 29
"""The stack of the thread that reads or writes a `.hpg` file (address space: only as much is
touched as the file nests)."""
DEEP_LIMIT = 1_000_000
"""The recursion limit there: a file nested deeper is refused as "nested too deeply"."""


def _deep(fn, arg):
    """`fn(arg)` in a thread with a large stack and recursion limit. The JSON module, the reader,
    the writer and the type check recurse on nesting, and a program's data nests far deeper than
    its syntax: a PARLOG list of 50,000 elements is 100,000 levels of JSON."""
    out: dict = {}

    def run():
        try:
            out["value"] = fn(arg)
        except BaseException as e:  # noqa: BLE001 - raised again in the caller's thread
            out["error"] = e

    worker = threading.Thread(target=run, name="hpgrem-hpg")
    size, limit = threading.stack_size(), sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, DEEP_LIMIT))
    try:
        threading.stack_size(DEEP_STACK)
        try:
            worker.start()
        except RuntimeError:  # no thread of that size here (a limit on address space): nest less
            sys.setrecursionlimit(limit)
            return fn(arg)
        finally:
            threading.stack_size(size)
        worker.join()
    finally:
        sys.setrecursionlimit(limit)
    if "error" in out:
        raise out["error"]
    return out["value"]


# ---------------------------------------------------------------------------------------------
# Writing


class _Writer:
    """Encodes nodes; a node in `table` (by id) is written as a ref to its index there."""

    def __init__(self):
        self.table: dict[int, int] = {}

    def encode(self, x):
        if isinstance(x, Node):
            index = self.table.get(id(x))
            if index is not None:
                return {"ref": index}
            out = {"kind": x.kind}
            for name in schema(type(x)).fields:
                out[name] = self.encode(getattr(x, name))
            return out
        if type(x) is Span:
            return [x.file, x.line, x.col]
        if isinstance(x, enum.Enum):
            return x.value
        if type(x) is tuple:
            items = []
            for i in x:  # a loop, not a comprehension: see _Reader.node
                items.append(self.encode(i))
            return items
        return x

    def shared(self, roots: list[Node]) -> list:
        """The table: each node used in more than one place among `roots`, encoded once,
        children first (a post-order of the graph)."""
        counts = use_counts(roots)
        out: list = []
        done: set[int] = set()
        stack: list[Node] = list(reversed(roots))
        while stack:
            x = stack[-1]
            if id(x) in done:
                stack.pop()
                continue
            pending = [k for k in x.children() if id(k) not in done]
            if pending:
                stack.extend(reversed(pending))
                continue
            stack.pop()
            done.add(id(x))
            if counts[id(x)] > 1:
                out.append(self.encode(x))
                self.table[id(x)] = len(out) - 1
        return out


def dumps(module: Module) -> str:
    """The module as `.hpg` text."""
    return _deep(_dumps, module)


def _dumps(module: Module) -> str:
    writer = _Writer()
    roots = [*([module.entry] if module.entry is not None else []), *module.rules.values()]
    nodes = writer.shared(roots)
    named = named_lines(module)
    doc = {
        "format": FORMAT, "version": VERSION, "dialect": module.dialect, "source": module.source,
        "lines": [[n, t] for n, t in sorted(module.source_lines.items()) if n in named],
        "nodes": nodes,
        "entry": writer.encode(module.entry),
        "rules": [writer.encode(r) for r in module.rules.values()],
        "annotations": {k: {n: writer.encode(v) for n, v in notes.items()} for k, notes in module.annotations.items()},
    }
    return json.dumps(doc, separators=(",", ":")) + "\n"


# ---------------------------------------------------------------------------------------------
# Reading


_SURROGATE = re.compile("[\ud800-\udfff]")


class _Bad(Exception):
    def __init__(self, path: str, problem: str):
        self.path, self.problem = path, problem


class _Reader:
    """Decodes JSON against declared types; `table` holds the shared nodes read so far (the
    only ones a `{"ref": N}` may name)."""

    def __init__(self):
        self.table: list[Node] = []

    def decode(self, x, hint, path: str):
        """`x` (parsed JSON) as a value of the declared type `hint`."""
        origin = typing.get_origin(hint)
        if origin is typing.Union or isinstance(hint, types.UnionType):
            alternatives = typing.get_args(hint)
            if isinstance(x, dict):
                return self.node(x, alternatives, path)
            for alt in alternatives:
                try:
                    return self.decode(x, alt, path)
                except _Bad:
                    continue
            raise _Bad(path, f"expected {type_name(hint)}, found {_json_name(x)}")
        if origin is tuple:
            if not isinstance(x, list):
                raise _Bad(path, f"expected a list, found {_json_name(x)}")
            args = typing.get_args(hint)
            items = args[:1] * len(x) if len(args) == 2 and args[1] is Ellipsis else args
            if len(items) != len(x):
                raise _Bad(path, f"expected a list of {len(items)}, found {len(x)} items")
            out = []
            for k, (i, h) in enumerate(zip(x, items)):
                out.append(self.decode(i, h, JsonPath(path, f"[{k}]")))
            return tuple(out)
        if hint is type(None):
            if x is None:
                return None
        elif hint is Span:
            if (isinstance(x, list) and len(x) == 3 and type(x[0]) is str and type(x[1]) is int
                    and type(x[2]) is int):
                return Span(*x)
        elif hint is str:
            if type(x) is str:
                if not x.isascii() and _SURROGATE.search(x):
                    raise _Bad(path, "a string with a lone surrogate (not Unicode text)")
                return x
        elif hint is int or hint is bool:
            if type(x) is hint:
                return x
        elif hint is float:
            if type(x) is float:
                return x
        elif isinstance(hint, type) and issubclass(hint, enum.Enum):
            try:
                return hint(x)
            except ValueError:
                raise _Bad(path, f"{x!r} is not a {hint.__name__} ({', '.join(repr(m.value) for m in hint)})") from None
        elif isinstance(hint, type) and issubclass(hint, Node):
            if isinstance(x, dict):
                return self.node(x, (hint,), path)
        else:
            raise TypeError(f"unsupported field type {hint!r}")
        raise _Bad(path, f"expected {type_name(hint)}, found {_json_name(x)}")

    def node(self, x: dict, allowed: tuple, path: str) -> Node:
        if "ref" in x and "kind" not in x:
            return self.ref(x, allowed, path)
        kind = x.get("kind")
        cls = node_kind(kind) if type(kind) is str else None
        if cls is None:
            raise _Bad(path, f"unknown node kind {kind!r}")
        if not any(isinstance(a, type) and issubclass(cls, a) for a in allowed):
            raise _Bad(path, f"a {kind} node cannot stand here (expected {' or '.join(type_name(a) for a in allowed)})")
        fields = schema(cls).fields
        if set(x) - {"kind"} != set(fields):
            raise _Bad(path, f"{kind} node has fields {sorted(set(x) - {'kind'})}, expected {sorted(fields)}")
        # Loops, not comprehensions: a comprehension's frame in every level of a file nested
        # thousands deep made reading it quadratic.
        values = {}
        for name, hint in fields.items():
            values[name] = self.decode(x[name], hint, JsonPath(path, f".{name}"))
        return cls(**values)

    def ref(self, x: dict, allowed: tuple, path: str) -> Node:
        """A `{"ref": N}`: entry N of the table, decoded already, of a kind that may stand here."""
        n = x["ref"]
        if set(x) != {"ref"} or type(n) is not int:
            raise _Bad(path, "a reference is {\"ref\": N}, N a number")
        if not 0 <= n < len(self.table):
            raise _Bad(path, f"a reference to node {n}, which is not an earlier entry of the table"
                             f" ({len(self.table)} before it)")
        target = self.table[n]
        if not any(isinstance(a, type) and isinstance(target, a) for a in allowed):
            raise _Bad(path, f"a reference to a {target.kind} node, which cannot stand here "
                             f"(expected {' or '.join(type_name(a) for a in allowed)})")
        return target


def _decode_annotation(x, path: str, depth: int = 0):
    if x is None or type(x) in (bool, int, float, str):
        return x
    if isinstance(x, list) and depth < 4:
        return tuple(_decode_annotation(i, f"{path}[{k}]", depth + 1) for k, i in enumerate(x))
    raise _Bad(path, f"an annotation must be a number, string, boolean, null or list, not {_json_name(x)}")


def _json_name(x) -> str:
    if isinstance(x, dict):
        return f"a {x['kind']} node" if type(x.get("kind")) is str else "a reference" if "ref" in x else "an object"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            type(None): "null"}.get(type(x), type(x).__name__)


def node_to_json(node: Node):
    """One node as the JSON value `.hpg` stores for it (a tree: shared nodes written in place)."""
    return _Writer().encode(node)


def node_from_json(x, hint=Node) -> Node:
    """The node a JSON value describes, checked against `hint` like any field of a `.hpg` file
    (a reference is refused: there is no table)."""
    try:
        return _Reader().decode(x, hint, "$")
    except _Bad as e:
        raise HpgFormatError(f"malformed node at {e.path}: {e.problem}") from None


def loads(text: str) -> Module:
    """A module from `.hpg` text; raises HpgFormatError on anything malformed."""
    return _deep(_loads, text)


def _loads(text: str) -> Module:
    try:
        doc = json.loads(text, parse_int=_parse_int)
    except json.JSONDecodeError as e:
        raise HpgFormatError(f"not an .hpg file (invalid JSON at line {e.lineno}, column {e.colno})") from None
    except _Bad as e:
        raise HpgFormatError(f"not a readable .hpg file ({e.problem})") from None
    except RecursionError:
        raise HpgFormatError("not a readable .hpg file (nested too deeply)") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise HpgFormatError("not an .hpg file (no 'format': 'hpgrem' header)")
    version = doc.get("version")
    if version != VERSION:
        which = "an older" if type(version) is int and version < VERSION else "a newer" \
            if type(version) is int else "an unknown"
        raise HpgFormatError(f".hpg format version {version!r} is {which} format; this hpgrem reads version "
                             f"{VERSION} only: compile the program again with this hpgrem")
    try:
        module = _module(doc)
        _check_types(module)
        return module
    except _Bad as e:
        raise HpgFormatError(f"malformed .hpg file at {e.path}: {e.problem}") from None
    except RecursionError:
        raise HpgFormatError("not a readable .hpg file (nested too deeply)") from None


def _check_types(module: Module) -> None:
    """A graph that verifies must also pass its dialect's type check (ML: hpgrem/ir/ml/types.py):
    the code the machine generates for it takes the representation of every value for granted.
    (One that does not verify is refused by the verifier, which the pipeline runs next.)"""
    type_problem = dialect(module.dialect).type_problem
    if type_problem is None:
        return
    from hpgrem.verify import verify
    if not verify(module):
        problem = type_problem(module)
        if problem is not None:
            raise HpgFormatError(f"ill-typed .hpg file {problem}")


MAX_INT_DIGITS = 4300
"""The longest integer a `.hpg` file may hold (Python's limit on int/str conversion)."""


def _parse_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise _Bad("$", f"an integer of {len(digits.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(digits)


FIELDS = ("format", "version", "dialect", "source", "lines", "nodes", "entry", "rules", "annotations")


def _module(doc: dict) -> Module:
    if set(doc) != set(FIELDS):
        raise _Bad("$", f"fields {sorted(doc)}, expected {sorted(FIELDS)}")
    reader = _Reader()
    name = reader.decode(doc["dialect"], str, "$.dialect")
    try:
        dialect(name)
    except UnknownDialect as e:
        raise _Bad("$.dialect", str(e)) from None
    source = reader.decode(doc["source"], str, "$.source")
    lines = _lines(reader, doc["lines"])
    if not isinstance(doc["nodes"], list):
        raise _Bad("$.nodes", "expected a list")
    for i, x in enumerate(doc["nodes"]):
        if not isinstance(x, dict) or "kind" not in x:
            raise _Bad(f"$.nodes[{i}]", f"expected a node, found {_json_name(x)}")
        reader.table.append(reader.decode(x, Node, f"$.nodes[{i}]"))
    entry = reader.decode(doc["entry"], Entry | None, "$.entry")
    if not isinstance(doc["rules"], list):
        raise _Bad("$.rules", "expected a list")
    rules: dict[str, Rule] = {}
    for i, r in enumerate(doc["rules"]):
        rule = reader.decode(r, Rule, f"$.rules[{i}]")
        if rule.dialect != name:
            raise _Bad(f"$.rules[{i}]", f"a {rule.dialect} rule in a {name} module")
        if rule.key in rules:
            raise _Bad(f"$.rules[{i}].key", f"rule {rule.key!r} is defined twice")
        rules[rule.key] = rule
    notes = doc["annotations"]
    if not isinstance(notes, dict) or any(not isinstance(v, dict) for v in notes.values()):
        raise _Bad("$.annotations", "expected an object of objects")
    annotations = {k: {n: _decode_annotation(v, f"$.annotations[{k!r}][{n!r}]") for n, v in kv.items()}
                   for k, kv in notes.items()}
    return Module(source, rules, entry, name, annotations, lines)


def _lines(reader: _Reader, x) -> dict[int, str]:
    """`lines`: [line number, text] pairs, numbers rising from 1, texts of at most
    MAX_SOURCE_LINE characters."""
    if not isinstance(x, list):
        raise _Bad("$.lines", f"expected a list, found {_json_name(x)}")
    out: dict[int, str] = {}
    last = 0
    for i, pair in enumerate(x):
        number, line = reader.decode(pair, tuple[int, str], f"$.lines[{i}]")
        if number <= last:
            raise _Bad(f"$.lines[{i}][0]", f"line {number} after line {last} (numbers rise from 1)")
        if len(line) > MAX_SOURCE_LINE or "\n" in line:  # a bare \r may stand in a line (lines end at \n)
            raise _Bad(f"$.lines[{i}][1]", f"not one line of at most {MAX_SOURCE_LINE} characters")
        out[number] = line
        last = number
    return out
