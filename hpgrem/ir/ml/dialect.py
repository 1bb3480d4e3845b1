"""The ML dialect's entry in the dialect table (hpgrem/ir/dialects.py): the primitives of the
basis with their types (the one table the verifier, the type check and the machine's tests
read), what the machine takes for granted of a function beyond its declared field types and
its own `check`, and the type check a `.hpg` file must pass."""

from __future__ import annotations

from typing import Iterator

from hpgrem.ir.core import Module, Node, Rule, walk_paths
from hpgrem.ir.dialects import DialectSpec
from hpgrem.ir.ml import (INT_MAX, INT_MIN, Construct, Function, Global, Lit, Part, Prim, SetGlobal, Switch,
                          SwitchTest, Tuple)

PRIMITIVES: dict[str, str] = {
    **{f"int.{o}": "int, int -> int" for o in "+-*"}, **{f"real.{o}": "real, real -> real" for o in "+-*"},
    "/": "real, real -> real", "div": "int, int -> int", "mod": "int, int -> int",
    **{op: "'a, 'a -> bool" for op in ("=.simple", "<>.simple", "=", "<>")},
    "^": "string, string -> string", ":=": "'a ref, 'a -> unit", "before": "'a, unit -> 'a",
    **{f"{ty}.{o}": f"{ty}, {ty} -> bool" for ty in ("int", "real", "string", "char") for o in ("<", ">", "<=", ">=")},
    "String.concatWith": "string, string list -> string", "String.isPrefix": "string, string -> bool",
    "Real.fmt": "realfmt, real -> string",
    "int.~": "int -> int", "int.abs": "int -> int", "real.~": "real -> real", "real.abs": "real -> real",
    "not": "bool -> bool", "print": "string -> unit", "!": "'a ref -> 'a", "ref": "'a -> 'a ref",
    "@": "'a list * 'a list -> 'a list", "Int.toString": "int -> string", "Int.fromString": "string -> int option",
    "Int.min": "int * int -> int", "Int.max": "int * int -> int", "Int.abs": "int -> int",
    "Int.quot": "int * int -> int", "Int.rem": "int * int -> int", "Bool.toString": "bool -> string",
    "real": "int -> real", "Real.fromInt": "int -> real", "floor": "real -> int", "ceil": "real -> int",
    "round": "real -> int", "trunc": "real -> int", "Math.sqrt": "real -> real",
    "size": "string -> int", "String.size": "string -> int", "str": "char -> string",
    "ord": "char -> int", "Char.ord": "char -> int", "chr": "int -> char", "Char.chr": "int -> char",
    "explode": "string -> char list", "String.explode": "string -> char list",
    "implode": "char list -> string", "String.implode": "char list -> string",
    "concat": "string list -> string", "String.concat": "string list -> string",
    "String.sub": "string * int -> char", "String.substring": "string * int * int -> string",
    "Char.isDigit": "char -> bool", "Char.isAlpha": "char -> bool", "Char.toUpper": "char -> char",
    "Char.toLower": "char -> char", "hd": "'a list -> 'a", "tl": "'a list -> 'a list", "null": "'a list -> bool",
    "length": "'a list -> int", "List.length": "'a list -> int", "rev": "'a list -> 'a list",
    "List.rev": "'a list -> 'a list", "List.nth": "'a list * int -> 'a", "List.take": "'a list * int -> 'a list",
    "List.drop": "'a list * int -> 'a list", "List.concat": "'a list list -> 'a list",
    "Option.valOf": "'a option -> 'a", "valOf": "'a option -> 'a", "Option.isSome": "'a option -> bool",
    "isSome": "'a option -> bool", "Option.getOpt": "'a option * 'a -> 'a", "exnName": "exn -> string",
}
"""Every ML primitive (`Prim.op`) the machine implements (pam/ml/basis.py, pam/ml/codegen.py),
with its type in ML syntax: its arguments (a comma between the two arguments of a two-argument
call) and its result. tests/test_fuzz.py checks it against the basis's types and the machine."""

ARITIES: dict[str, int] = {op: signature.split(" -> ")[0].count(",") + 1 for op, signature in PRIMITIVES.items()}
"""How many arguments each primitive takes (derived from its type)."""

MAX_TUPLE = 1 << 16
BUILTIN_DATATYPES = {"bool": {0: False, 1: False}, "list": {0: False, 1: True}}
"""The datatypes whose values the machine represents its own way: constructor tag -> whether
it takes an argument."""


def representation(rule: Function, path: str, module: Module) -> Iterator[str]:
    """Distinct parameters, ints in range, known primitives with their arities, constructor
    tags and fields that exist, tuple orders that are orders, switches whose keys fit their test."""
    if len(set(rule.params)) != len(rule.params):
        yield f"at {path}.params: a parameter named twice"
    for node, p in walk_paths(rule.body, f"{path}.body"):
        kind = type(node)
        if kind is Lit:
            if type(node.value) is int and not INT_MIN <= node.value <= INT_MAX:
                yield f"at {p}.value: {node.value} is out of range for int (63 bits)"
        elif kind is Prim:
            arity = ARITIES.get(node.op)
            if arity is None:
                yield f"at {p}.op: unknown primitive {node.op!r}"
            elif len(node.args) != arity:
                yield f"at {p}.args: primitive {node.op!r} takes {arity} arguments, not {len(node.args)}"
        elif kind is Construct:
            if node.tag < 0:
                yield f"at {p}.tag: a constructor tag is not negative"
            elif node.datatype in BUILTIN_DATATYPES:
                ok = BUILTIN_DATATYPES[node.datatype].get(node.tag)
                if ok is None:
                    yield f"at {p}.tag: {node.datatype} has no constructor {node.tag}"
                elif ok != (node.arg is not None):
                    yield f"at {p}.arg: constructor {node.tag} of {node.datatype} " + \
                          ("takes an argument" if ok else "takes no argument")
        elif kind is Part:
            if type(node.step) is int and not 0 <= node.step < MAX_TUPLE:
                yield f"at {p}.step: field {node.step} (0 to {MAX_TUPLE - 1})"
        elif kind is Tuple:
            if node.order and sorted(node.order) != list(range(len(node.items))):
                yield f"at {p}.order: not an order of the {len(node.items)} items"
            if len(node.items) > MAX_TUPLE:
                yield f"at {p}.items: more than {MAX_TUPLE} items"
        elif kind is Switch:
            yield from _switch(node, p)


def _switch(node: Switch, p: str) -> Iterator[str]:
    test = node.test
    keys = [k for k, _ in node.cases]
    if not keys and node.default is None:
        yield f"at {p}.cases: no case and no default"
    if test == SwitchTest.CON:
        builtin = BUILTIN_DATATYPES.get(node.datatype)
        if not node.datatype:
            yield f"at {p}.datatype: a constructor switch names its datatype"
        if (node.rep is None) != (builtin is not None):
            yield f"at {p}.rep: " + ("the representation of list and bool is the machine's own"
                                     if builtin is not None else f"datatype {node.datatype} needs its representation")
        want = int
    else:
        if node.datatype or node.rep is not None:
            yield f"at {p}.datatype: only a constructor switch names a datatype and representation"
        want = {SwitchTest.EXN: Node, SwitchTest.INT: int, SwitchTest.STRING: str, SwitchTest.CHAR: str}[test]
    seen = set()
    for i, k in enumerate(keys):
        kp = f"{p}.cases[{i}][0]"
        if not isinstance(k, want) or type(k) is bool:
            yield f"at {kp}: a {test} switch cannot test for {k.kind if isinstance(k, Node) else type(k).__name__}"
        elif test == SwitchTest.CON and (k < 0 or (builtin is not None and k not in builtin)):
            yield f"at {kp}: {node.datatype} has no constructor {k}"
        elif test == SwitchTest.INT and not INT_MIN <= k <= INT_MAX:
            yield f"at {kp}: {k} is out of range for int (63 bits)"
        elif test == SwitchTest.CHAR and len(k) != 1:
            yield f"at {kp}: a char is one character"
        elif not isinstance(k, Node):
            if k in seen:
                yield f"at {kp}: case {k!r} twice"
            seen.add(k)


def module_problems(module: Module) -> list[str]:
    """An ML module reads only the globals it sets."""
    set_, read = set(), {}
    for i, rule in enumerate(module.rules.values()):
        if not isinstance(rule, Function):
            continue
        for node, p in walk_paths(rule, f"$.rules[{i}]"):
            if isinstance(node, SetGlobal):
                set_.add(node.name)
            elif isinstance(node, Global):
                read.setdefault(node.name, p)
    return [f"at {p}.name: global {name!r} is never set" for name, p in read.items() if name not in set_][:5]


def entry_problem(module: Module, target: Rule) -> str | None:
    """A closure's code (a function with free variables) cannot be the entry."""
    if isinstance(target, Function) and len(target.params) != target.arity:
        return f"entry {target.key} has free variables (a closure's code cannot be the entry)"
    return None


def type_problem(module: Module) -> str | None:
    """The ML type check (hpgrem/ir/ml/types.py)."""
    from hpgrem.ir.ml.types import type_problem as check
    return check(module)


DIALECT = DialectSpec("ml", representation=representation, module_problems=module_problems,
                      entry_problem=entry_problem, type_problem=type_problem)
