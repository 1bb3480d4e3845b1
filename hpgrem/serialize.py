"""The `.hpg` file format: a module as JSON that round-trips exactly.

`compile` writes it and `run` reads it, so the two can be separate steps. The document is
`{"format": "hpgrem", "version": 2, "dialect", "source", "entry", "rules", "annotations"}`; a
node is `{"kind": KIND, FIELD: VALUE, ...}` with the fields its kind declares, a span is
`[file, line, col]`, an enum is its value, a tuple a list. Everything is generic over the node
registry: a dialect adds node kinds without touching this file.

A `.hpg` file is untrusted input: reading it checks every field against its declared type and
refuses anything else with `HpgFormatError` naming the JSON path of the bad field (a user
error, exit 2, never a traceback). Other versions are refused too.
"""

from __future__ import annotations

import enum
import json
import re
import sys
import threading
import types
import typing

from hpgrem.ir.core import NODE_KINDS, Dialect, Entry, Module, Node, Rule, Span, schema, type_name
from hpgrem.verify import JsonPath

FORMAT = "hpgrem"
VERSION = 2  # 1: the two-IR format before the node registry (no dialect field, spans as nodes)


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


def _encode(x):
    if isinstance(x, Node):
        out = {"kind": x.kind}
        for name in schema(type(x)).fields:
            out[name] = _encode(getattr(x, name))
        return out
    if type(x) is Span:
        return [x.file, x.line, x.col]
    if isinstance(x, enum.Enum):
        return x.value
    if type(x) is tuple:
        items = []
        for i in x:  # a loop, not a comprehension: see _decode_node
            items.append(_encode(i))
        return items
    return x


def dumps(module: Module) -> str:
    """The module as `.hpg` text."""
    return _deep(_dumps, module)


def _dumps(module: Module) -> str:
    doc = {
        "format": FORMAT, "version": VERSION, "dialect": module.dialect.value, "source": module.source,
        "entry": _encode(module.entry),
        "rules": [_encode(r) for r in module.rules.values()],
        "annotations": {k: {n: _encode(v) for n, v in notes.items()} for k, notes in module.annotations.items()},
    }
    return json.dumps(doc, separators=(",", ":")) + "\n"


# ---------------------------------------------------------------------------------------------
# Reading


_SURROGATE = re.compile("[\ud800-\udfff]")


class _Bad(Exception):
    def __init__(self, path: str, problem: str):
        self.path, self.problem = path, problem


def _decode(x, hint, path: str):
    """`x` (parsed JSON) as a value of the declared type `hint`."""
    origin = typing.get_origin(hint)
    if origin is typing.Union or isinstance(hint, types.UnionType):
        alternatives = typing.get_args(hint)
        if isinstance(x, dict):
            return _decode_node(x, alternatives, path)
        for alt in alternatives:
            try:
                return _decode(x, alt, path)
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
            out.append(_decode(i, h, JsonPath(path, f"[{k}]")))
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
            return _decode_node(x, (hint,), path)
    else:
        raise TypeError(f"unsupported field type {hint!r}")
    raise _Bad(path, f"expected {type_name(hint)}, found {_json_name(x)}")


def _decode_node(x: dict, allowed: tuple, path: str) -> Node:
    kind = x.get("kind")
    cls = NODE_KINDS.get(kind) if type(kind) is str else None
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
        values[name] = _decode(x[name], hint, JsonPath(path, f".{name}"))
    return cls(**values)


def _decode_annotation(x, path: str, depth: int = 0):
    if x is None or type(x) in (bool, int, float, str):
        return x
    if isinstance(x, list) and depth < 4:
        return tuple(_decode_annotation(i, f"{path}[{k}]", depth + 1) for k, i in enumerate(x))
    raise _Bad(path, f"an annotation must be a number, string, boolean, null or list, not {_json_name(x)}")


def _json_name(x) -> str:
    if isinstance(x, dict):
        return f"a {x['kind']} node" if type(x.get("kind")) is str else "an object"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            type(None): "null"}.get(type(x), type(x).__name__)


def node_to_json(node: Node):
    """One node as the JSON value `.hpg` stores for it."""
    return _encode(node)


def node_from_json(x, hint=Node) -> Node:
    """The node a JSON value describes, checked against `hint` like any field of a `.hpg` file."""
    try:
        return _decode(x, hint, "$")
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
    """An ML graph that verifies must also have types (hpgrem/typecheck.py): the code the
    machine generates for it takes the representation of every value for granted. (One that
    does not verify is refused by the verifier, which the pipeline runs next.)"""
    if module.dialect != Dialect.ML:
        return
    from hpgrem.typecheck import type_problem
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


def _module(doc: dict) -> Module:
    expected = {"format", "version", "dialect", "source", "entry", "rules", "annotations"}
    if set(doc) != expected:
        raise _Bad("$", f"fields {sorted(doc)}, expected {sorted(expected)}")
    dialect = _decode(doc["dialect"], Dialect, "$.dialect")
    source = _decode(doc["source"], str, "$.source")
    entry = _decode(doc["entry"], Entry | None, "$.entry")
    if not isinstance(doc["rules"], list):
        raise _Bad("$.rules", "expected a list")
    rules: dict[str, Rule] = {}
    for i, r in enumerate(doc["rules"]):
        rule = _decode(r, Rule, f"$.rules[{i}]")
        if rule.dialect != dialect:
            raise _Bad(f"$.rules[{i}]", f"a {rule.dialect} rule in a {dialect} module")
        if rule.key in rules:
            raise _Bad(f"$.rules[{i}].key", f"rule {rule.key!r} is defined twice")
        rules[rule.key] = rule
    notes = doc["annotations"]
    if not isinstance(notes, dict) or any(not isinstance(v, dict) for v in notes.values()):
        raise _Bad("$.annotations", "expected an object of objects")
    annotations = {k: {n: _decode_annotation(v, f"$.annotations[{k!r}][{n!r}]") for n, v in kv.items()}
                   for k, kv in notes.items()}
    return Module(source, rules, entry, dialect, annotations)


