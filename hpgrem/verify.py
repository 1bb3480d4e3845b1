"""The verifier: the invariants every HPGREM module must keep, whoever built it.

Front ends should never produce a module that fails here; a `.hpg` file that was edited, or a
pass with a bug, might. Two layers: the structural checks, generic over the node registry
(every field of every node has its declared type; rules are stored under their keys and are of
the module's dialect; the entry names a rule of the right arity), then each rule's own
`check(module)` (the dialect's scoping and call rules). Returns a list of problems (empty when
the module is well formed).
"""

from __future__ import annotations

import math
import typing

from hpgrem.ir import Module, Node, check_value, schema, walk

MAX_PROBLEMS = 20
MAX_CLAUSE_VARS = 1 << 20
"""The most variables a clause may number: the machine allocates a slot for each."""


def verify(module: Module) -> list[str]:
    problems: list[str] = []
    position = {key: i for i, key in enumerate(module.rules)}
    for key, rule in module.rules.items():
        where = f"{rule.kind.lower()} {key}"
        if not isinstance(rule, Node) or rule.dialect != module.dialect:
            problems.append(f"{key}: not a rule of the module's dialect ({module.dialect})")
            continue
        if rule.key != key:
            problems.append(f"{where}: stored under a different key ({rule.key})")
        structural = _structure(rule)
        problems.extend(f"{where}: {p}" for p in structural)
        if not structural:
            problems.extend(f"{where}: {p}" for p in rule.check(module))
            problems.extend(f"{where}: {p}" for p in _representation(rule, position.get(key, 0), module))
        if len(problems) >= MAX_PROBLEMS:
            return problems[:MAX_PROBLEMS]
    entry = module.entry
    if entry is not None:
        target = module.rules.get(entry.target)
        if target is None:
            problems.append(f"entry {entry.target} is not defined")
        elif target.arity != len(entry.outputs):
            problems.append(f"entry {entry.target} takes {target.arity} arguments, not {len(entry.outputs)}")
        elif hasattr(target, "params") and len(target.params) != target.arity:  # ML code only
            problems.append(f"entry {entry.target} has free variables (a closure's code cannot be the entry)")
    problems.extend(_globals(module))
    return problems[:MAX_PROBLEMS]


def _structure(rule: Node) -> list[str]:
    """Every field of every node below `rule` has its declared type."""
    out: list[str] = []
    for node in walk(rule):
        for name, hint in schema(type(node)).fields.items():
            problem = check_value(getattr(node, name), hint)
            if problem is not None:
                out.append(f"{node.kind}.{name}: {problem}")
                if len(out) >= 5:
                    return out
    return out


# ---------------------------------------------------------------------------------------------
# The data representation: what the machine assumes of well-typed nodes


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


def walk_paths(root: Node, path):
    """(node, JSON path) for every node below and including `root`, parents first; the path
    names the node as the `.hpg` file does (`$.rules[3].body.args[1]`)."""
    stack = [(root, path)]
    while stack:
        x, p = stack.pop()
        yield x, p
        found = []
        for name in schema(type(x)).node_fields:
            _node_paths(getattr(x, name), JsonPath(p, f".{name}"), found)
        stack.extend(reversed(found))


def _node_paths(value, path: JsonPath, out: list) -> None:
    if isinstance(value, Node):
        out.append((value, path))
    elif type(value) is tuple:
        for i, item in enumerate(value):
            _node_paths(item, JsonPath(path, f"[{i}]"), out)


def _representation(rule: Node, index: int, module: Module) -> list[str]:
    """What the machine takes for granted of a well-typed rule and a `.hpg` file could still
    contradict: each problem at the JSON path of the bad field."""
    check = _REPRESENTATION.get(rule.dialect)
    if check is None:
        return []
    out: list[str] = []
    for problem in check(rule, f"$.rules[{index}]", module):
        out.append(problem)
        if len(out) >= 5:
            break
    return out


def _parlog(rule, path: str, module: Module):
    from hpgrem.ir import parlog as pl
    from hpgrem.primitives import TESTS
    if rule.key != f"{rule.name}/{rule.arity}" and not rule.key.endswith(f":{rule.name}/{rule.arity}"):
        yield f"at {path}.key: {rule.key!r} is not the key of {rule.name}/{rule.arity}"
    for gi, group in enumerate(rule.groups):
        for ci, clause in enumerate(group):
            cpath = f"{path}.groups[{gi}][{ci}]"
            if not 0 <= clause.nvars <= MAX_CLAUSE_VARS:
                yield f"at {cpath}.nvars: {clause.nvars} variables (0 to {MAX_CLAUSE_VARS})"
            for k, g in enumerate(clause.guard):
                if g.target not in TESTS and g.target != "=/2":
                    yield f"at {cpath}.guard[{k}].target: {g.target} cannot stand in a guard"
                if g.placement is not None:
                    yield f"at {cpath}.guard[{k}].placement: a guard has no placement"
            for node, p in walk_paths(clause, cpath):
                if isinstance(node, pl.Call) and not node.target.endswith(f"/{len(node.args)}"):
                    yield f"at {p}.args: {len(node.args)} arguments in a call of {node.target}"
                elif isinstance(node, pl.Struct) and not node.args:
                    yield f"at {p}.args: a compound term has arguments (an atom has none)"
                elif isinstance(node, pl.Float) and not math.isfinite(node.value):
                    yield f"at {p}.value: {node.value} is not a finite float"
                elif isinstance(node, pl.Conj) and not node.parts:
                    yield f"at {p}.parts: an empty conjunction"


def _ml(rule, path: str, module: Module):
    from hpgrem.ir import ml
    if len(set(rule.params)) != len(rule.params):
        yield f"at {path}.params: a parameter named twice"
    for node, p in walk_paths(rule.body, f"{path}.body"):
        kind = type(node)
        if kind is ml.Lit:
            if type(node.value) is int and not ml.INT_MIN <= node.value <= ml.INT_MAX:
                yield f"at {p}.value: {node.value} is out of range for int (63 bits)"
        elif kind is ml.Prim:
            arity = ML_PRIMITIVES.get(node.op)
            if arity is None:
                yield f"at {p}.op: unknown primitive {node.op!r}"
            elif len(node.args) != arity:
                yield f"at {p}.args: primitive {node.op!r} takes {arity} arguments, not {len(node.args)}"
        elif kind is ml.Construct:
            if node.tag < 0:
                yield f"at {p}.tag: a constructor tag is not negative"
            elif node.datatype in _BUILTIN_DATATYPES:
                ok = _BUILTIN_DATATYPES[node.datatype].get(node.tag)
                if ok is None:
                    yield f"at {p}.tag: {node.datatype} has no constructor {node.tag}"
                elif ok != (node.arg is not None):
                    yield f"at {p}.arg: constructor {node.tag} of {node.datatype} " + \
                          ("takes an argument" if ok else "takes no argument")
        elif kind is ml.Part:
            if type(node.step) is int and not 0 <= node.step < MAX_TUPLE:
                yield f"at {p}.step: field {node.step} (0 to {MAX_TUPLE - 1})"
        elif kind is ml.Tuple:
            if node.order and sorted(node.order) != list(range(len(node.items))):
                yield f"at {p}.order: not an order of the {len(node.items)} items"
            if len(node.items) > MAX_TUPLE:
                yield f"at {p}.items: more than {MAX_TUPLE} items"
        elif kind is ml.Switch:
            yield from _switch(node, p)


MAX_TUPLE = 1 << 16
_BUILTIN_DATATYPES = {"bool": {0: False, 1: False}, "list": {0: False, 1: True}}
"""The datatypes whose values the machine represents its own way: constructor tag -> whether
it takes an argument."""


def _switch(node, p: str):
    from hpgrem.ir import ml
    test = node.test
    keys = [k for k, _ in node.cases]
    if not keys and node.default is None:
        yield f"at {p}.cases: no case and no default"
    if test == ml.SwitchTest.CON:
        builtin = _BUILTIN_DATATYPES.get(node.datatype)
        if not node.datatype:
            yield f"at {p}.datatype: a constructor switch names its datatype"
        if (node.rep is None) != (builtin is not None):
            yield f"at {p}.rep: " + ("the representation of list and bool is the machine's own"
                                     if builtin is not None else f"datatype {node.datatype} needs its representation")
        want = int
    else:
        if node.datatype or node.rep is not None:
            yield f"at {p}.datatype: only a constructor switch names a datatype and representation"
        want = {ml.SwitchTest.EXN: Node, ml.SwitchTest.INT: int, ml.SwitchTest.STRING: str,
                ml.SwitchTest.CHAR: str}[test]
    seen = set()
    for i, k in enumerate(keys):
        kp = f"{p}.cases[{i}][0]"
        if not isinstance(k, want) or type(k) is bool:
            yield f"at {kp}: a {test} switch cannot test for {_what(k)}"
        elif test == ml.SwitchTest.CON and (k < 0 or (builtin is not None and k not in builtin)):
            yield f"at {kp}: {node.datatype} has no constructor {k}"
        elif test == ml.SwitchTest.INT and not ml.INT_MIN <= k <= ml.INT_MAX:
            yield f"at {kp}: {k} is out of range for int (63 bits)"
        elif test == ml.SwitchTest.CHAR and len(k) != 1:
            yield f"at {kp}: a char is one character"
        elif not isinstance(k, Node):
            if k in seen:
                yield f"at {kp}: case {k!r} twice"
            seen.add(k)


def _what(x) -> str:
    return x.kind if isinstance(x, Node) else type(x).__name__


def _globals(module: Module) -> list[str]:
    """An ML module reads only the globals it sets."""
    from hpgrem.ir import ml
    if module.dialect != "ml":
        return []
    set_, read = set(), {}
    for i, rule in enumerate(module.rules.values()):
        if not isinstance(rule, ml.Function):
            continue
        for node, p in walk_paths(rule, f"$.rules[{i}]"):
            if isinstance(node, ml.SetGlobal):
                set_.add(node.name)
            elif isinstance(node, ml.Global):
                read.setdefault(node.name, p)
    return [f"at {p}.name: global {name!r} is never set" for name, p in read.items() if name not in set_][:5]


_REPRESENTATION = {"parlog": _parlog, "ml": _ml}

ML_PRIMITIVES: dict[str, int] = {
    **{op: 2 for op in ("int.+", "int.-", "int.*", "real.+", "real.-", "real.*", "/", "div", "mod",
                        "=.simple", "<>.simple", "=", "<>", "^", ":=", "before",
                        "String.concatWith", "String.isPrefix", "Real.fmt")},
    **{f"{ty}.{op}": 2 for ty in ("int", "real", "string", "char") for op in ("<", ">", "<=", ">=")},
    **{op: 1 for op in ("int.~", "int.abs", "real.~", "real.abs", "not", "print", "!", "ref", "@",
                        "Int.toString", "Int.fromString", "Int.min", "Int.max", "Int.abs", "Int.quot",
                        "Int.rem", "Bool.toString", "real", "floor", "ceil", "round", "trunc",
                        "Real.fromInt", "Math.sqrt", "size", "str", "ord", "chr", "explode", "implode",
                        "concat", "String.size", "String.sub", "String.concat", "String.explode",
                        "String.implode", "String.substring", "Char.ord", "Char.chr", "Char.isDigit",
                        "Char.isAlpha", "Char.toUpper", "Char.toLower", "hd", "tl", "null", "length", "rev",
                        "List.rev", "List.length", "List.nth", "List.take", "List.drop", "List.concat",
                        "Option.valOf", "Option.isSome", "Option.getOpt", "valOf", "isSome", "exnName")},
}
"""The ML primitives (`Prim.op`) the machine implements, with the number of arguments each takes
(pam/ml/codegen.py, pam/ml/basis.py; tests/test_fuzz.py checks that the two agree)."""
