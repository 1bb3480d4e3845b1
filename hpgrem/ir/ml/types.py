"""The types of an ML graph: a `.hpg` file may not contradict the machine's data representation.

The machine compiles an ML graph into Python that takes the representation of every value for
granted (pam/ml/values.py): `int.+` adds two ints, `.1` takes the second field of a tuple of two
or more, `.arg` takes the argument of a constructor that has one. A graph lowered from a typed
program keeps these promises; a `.hpg` file need not. So the loader infers the graph's types, as
ML would, and refuses a file whose graph has none, at the JSON path of the offending node.

Types are rational trees (a recursive datatype's value type contains itself), unified without
occurs check; functions (rules) are generalized in dependency order (strongly connected
components of calls and closures); `Let`- and `SetGlobal`-bound values are generalized under
the value restriction; a global's every use is an instance of what it is set to. A user
datatype is known by name only: its type carries, per constructor tag, whether the
constructor takes an argument and of what type, which is what the representation depends on.
A constructor's (`.arg`, `.cons`) or an exception's (`.exnarg`) argument is typed only inside
the case of a switch that tested for that constructor.
"""

from __future__ import annotations

import sys

from hpgrem.ir import ml
from hpgrem.ir.call_graph import components
from hpgrem.ir.core import JsonPath, Module, use_counts, walk
from hpgrem.ir.ml.dialect import PRIMITIVES

GENERIC = 1 << 30


class T:
    """A type: a variable (`head` None) or a constructor `head(args...)`; unified by linking."""

    __slots__ = ("head", "args", "link", "level", "fields", "strlit", "sarg")

    def __init__(self, head: str | None = None, args=(), level: int = 0):
        self.head, self.args, self.link, self.level = head, list(args), None, level
        self.fields: dict[int, T] | None = None  # a variable known to be a tuple with these fields
        self.strlit = False  # a variable that is string or char (a one-character literal)
        self.sarg: T | None = None  # a variable known to be a datatype of one constructor, of this argument

    def constrained(self) -> list[T]:
        """The types a variable's constraints mention."""
        return [*(self.fields.values() if self.fields else ()), *((self.sarg,) if self.sarg is not None else ())]


class IllTyped(Exception):
    def __init__(self, path: str, message: str):
        super().__init__(f"at {path}: {message}")


def find(t: T) -> T:
    root = t
    while root.link is not None:
        root = root.link
    while t.link is not None and t.link is not root:
        t.link, t = root, t.link
    return root


def show(t: T, depth: int = 0) -> str:
    t = find(t)
    if depth > 3:
        return "..."
    if t.head is None:
        return "string" if t.strlit else "'a"
    if t.head == "tuple":
        return "(" + " * ".join(show(a, depth + 1) for a in t.args) + ")" if t.args else "unit"
    if t.head == "fn":
        return f"({show(t.args[0], depth + 1)} -> {show(t.args[1], depth + 1)})"
    if t.head.startswith("data:"):
        return t.head[5:]
    if t.head in ("list", "ref", "exncon"):
        return f"{show(t.args[0], depth + 1)} {t.head}"
    if t.head == "arg":
        return f"an argument of type {show(t.args[0], depth + 1)}"
    return "no argument" if t.head == "noarg" else t.head


class _Mismatch(Exception):
    pass


def unify(a: T, b: T) -> None:
    """Make `a` and `b` one type (iteratively; a link is made before the arguments are unified,
    so cyclic types terminate); _Mismatch if they cannot be."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        x, y = find(x), find(y)
        if x is y:
            continue
        if x.head is None:
            _bind(x, y, stack)
        elif y.head is None:
            _bind(y, x, stack)
        else:
            if x.head != y.head or len(x.args) != len(y.args):
                raise _Mismatch(f"{show(x)} and {show(y)}")
            x.link = y
            stack.extend(zip(x.args, y.args))


def _bind(v: T, t: T, stack: list) -> None:
    if t.head is None:
        t.level = min(t.level, v.level)
        t.strlit = t.strlit or v.strlit
        if v.fields:
            if t.fields is None:
                t.fields = {}
            for i, f in v.fields.items():
                if i in t.fields:
                    stack.append((f, t.fields[i]))
                else:
                    t.fields[i] = f
        if v.sarg is not None:
            if t.sarg is None:
                t.sarg = v.sarg
            else:
                stack.append((v.sarg, t.sarg))
        v.link = t
        _check_constraints(t)
        _lower(t, t.level)
        return
    if v.strlit and t.head not in ("string", "char"):
        raise _Mismatch(f"string and {show(t)}")
    if v.fields:
        if t.head != "tuple" or max(v.fields) >= len(t.args):
            raise _Mismatch(f"a tuple with a field {max(v.fields)} and {show(t)}")
        stack.extend((f, t.args[i]) for i, f in v.fields.items())
    if v.sarg is not None:
        if not t.head.startswith("data:") or len(t.args) != 1:
            raise _Mismatch(f"a datatype of one constructor and {show(t)}")
        stack.append((t.args[0], T("arg", [v.sarg])))
    _lower(t, v.level)
    v.link = t


def _check_constraints(v: T) -> None:
    """A variable's constraints must fit one type: a string literal's (string or char), a
    tuple's fields, a one-constructor datatype's argument exclude each other."""
    if v.strlit and v.fields:
        raise _Mismatch(f"string and a tuple with a field {max(v.fields)}")
    if v.strlit and v.sarg is not None:
        raise _Mismatch("string and a datatype of one constructor")
    if v.fields and v.sarg is not None:
        raise _Mismatch(f"a tuple with a field {max(v.fields)} and a datatype of one constructor")


def _variables(t: T):
    """The type variables reachable from `t`, each once (through their constraints too)."""
    seen, stack = set(), [t]
    while stack:
        x = find(stack.pop())
        if id(x) in seen:
            continue
        seen.add(id(x))
        if x.head is None:
            yield x
            stack.extend(x.constrained())
        else:
            stack.extend(x.args)


def _lower(t: T, level: int) -> None:
    """No variable of `t` is generalized beyond `level` (it is now reachable from there)."""
    for x in _variables(t):
        if x.level > level:
            x.level = level


def generalize(t: T, level: int) -> None:
    for x in _variables(t):
        if level < x.level < GENERIC:
            x.level = GENERIC


def instantiate(t: T, level: int) -> T:
    """A copy of `t` with fresh variables for its generalized ones (shared otherwise)."""
    memo: dict[int, T] = {}
    todo: list[tuple[T, T]] = []

    def copy(x: T) -> T:
        x = find(x)
        c = memo.get(id(x))
        if c is not None:
            return c
        if x.head is None:
            if x.level != GENERIC:
                memo[id(x)] = x
                return x
            c = T(None, (), level)
            c.strlit = x.strlit
        else:
            c = T(x.head, (), level)
        memo[id(x)] = c
        todo.append((x, c))
        return c

    root = copy(t)
    while todo:
        x, c = todo.pop()
        if x.head is None:
            if x.fields:
                c.fields = {i: copy(f) for i, f in x.fields.items()}
            if x.sarg is not None:
                c.sarg = copy(x.sarg)
        else:
            c.args = [copy(a) for a in x.args]
    return root


# ---------------------------------------------------------------------------------------------
# The primitives' types, in ML syntax (hpgrem/ir/ml/dialect.py's table; frontend/ml/basis.py
# writes the same ones)

_DATATYPE_TAGS = {"option": 2, "StringCvt.realfmt": 4}
"""The basis datatypes with their own names: how many constructors they have."""

def _parse_signature(text: str, level: int) -> tuple[list[T], T]:
    args, result = text.split(" -> ")
    names: dict[str, T] = {}
    return [_parse_type(a.strip(), names, level) for a in args.split(",")], _parse_type(result, names, level)


def _parse_type(text: str, names: dict, level: int) -> T:
    parts = [p.strip() for p in text.split(" * ")]
    if len(parts) > 1:
        return T("tuple", [_parse_type(p, names, level) for p in parts], level)
    words = text.split()
    t = names.setdefault(words[0], T(None, (), level)) if words[0].startswith("'") else _named(words[0], level)
    for w in words[1:]:
        t = _named(w, level, t)
    return t


def _named(name: str, level: int, arg: T | None = None) -> T:
    if name == "unit":
        return T("tuple", (), level)
    if name == "option":
        return T("data:option", [T("noarg"), T("arg", [arg])], level)
    if name == "realfmt":
        opt = _named("option", level, T("int"))
        return T("data:StringCvt.realfmt", [T("noarg")] + [T("arg", [opt]) for _ in range(3)], level)
    return T(name, [arg] if arg is not None else [], level)


# ---------------------------------------------------------------------------------------------
# Inference


def type_problem(module: Module) -> str | None:
    """None when the ML module has types, else where and why it has none (one line). The
    module must verify (hpgrem/verify.py) first."""
    try:
        _Checker(module).run()
    except IllTyped as e:
        return str(e)
    except RecursionError:
        return "nested too deeply to check its types"
    return None


def _stable(e) -> bool:
    """An expression that names the same value wherever it is evaluated in its function (a local
    or a path of immutable parts of one), so a switch's test of it holds inside the case."""
    while isinstance(e, ml.Part):
        if e.step == ml.PartStep.DEREF:
            return False
        e = e.value
    return isinstance(e, ml.Local)


def _nonexpansive(e) -> bool:
    """A value whose type may be generalized (the value restriction)."""
    stack, seen = [e], set()
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, (ml.Lit, ml.Local, ml.Global, ml.MakeClosure, ml.BasisException)):
            continue
        if isinstance(x, ml.Construct):
            if x.arg is not None:
                stack.append(x.arg)
        elif isinstance(x, ml.Tuple):
            stack.extend(x.items)
        elif isinstance(x, ml.Part) and x.step != ml.PartStep.DEREF:
            stack.append(x.value)
        else:
            return False
    return True


class _Checker:
    def __init__(self, module: Module):
        self.module = module
        self.position = {key: i for i, key in enumerate(module.rules)}
        self.level = 1
        self.signatures: dict[str, tuple[list[T], T]] = {}
        self.global_uses: list[tuple[str, T, str]] = []
        self.global_types: dict[str, list[T]] = {}
        self.tags: dict[str, int] = dict(_DATATYPE_TAGS)
        self.case_facts: dict[tuple[int, int], tuple] = {}  # (switch, case) -> (subject, what its test found)
        self.arms: dict[str, dict[int, dict]] = {}  # a local numbering the arm of a match -> facts per arm
        self.shared: set[int] = set()  # the expressions of the function being checked used in several places
        self.schemes: dict[tuple[int, int], tuple[dict, T, bool]] = {}  # (shared node, refine) -> (refine, type, generic)
        for rule in module.rules.values():
            for node in walk(rule.body):
                if isinstance(node, ml.Construct):
                    self._count(node.datatype, node.tag + 1)
                elif isinstance(node, ml.Switch) and node.test == ml.SwitchTest.CON:
                    for k, _ in node.cases:
                        self._count(node.datatype, k + 1)

    def _count(self, datatype: str, n: int) -> None:
        if datatype in _DATATYPE_TAGS:
            return
        self.tags[datatype] = max(self.tags.get(datatype, 0), n)

    def fresh(self) -> T:
        return T(None, (), self.level)

    def unify(self, a: T, b: T, path: str, what: str = "") -> None:
        try:
            unify(a, b)
        except _Mismatch as e:
            raise IllTyped(path, f"{what}type mismatch: {e}") from None

    def run(self) -> None:
        for scc in _components(self.module):
            self.level += 1
            for key in scc:
                fn = self.module.rules[key]
                self.signatures[key] = ([self.fresh() for _ in fn.params], self.fresh())
            for key in scc:
                fn = self.module.rules[key]
                params, result = self.signatures[key]
                env = dict(zip(fn.params, params))
                self.arms = {}
                self.shared = {i for i, n in use_counts((fn.body,)).items() if n > 1}
                self.schemes = {}
                path = f"$.rules[{self.position[key]}].body"
                self.unify(self.expr(fn.body, env, {}, path), result, path)
            self.level -= 1
            for key in scc:
                params, result = self.signatures[key]
                for t in (*params, result):
                    generalize(t, self.level)
        for name, use, path in self.global_uses:
            for t in self.global_types.get(name, ()):
                self.unify(use, instantiate(t, 0), path, f"global {name}: ")

    def datatype(self, name: str) -> T:
        if name == "bool":
            return T("bool")
        if name == "list":
            return T("list", [self.fresh()], self.level)
        return T(f"data:{name}", [self.fresh() for _ in range(self.tags[name])], self.level)

    def bind(self, value, path: str, env: dict, refine: dict) -> T:
        """The type of a value being bound (generalized when the value restriction allows)."""
        self.level += 1
        t = self.expr(value, env, refine, path)
        self.level -= 1
        if _nonexpansive(value):
            generalize(t, self.level)
        return t

    def expr(self, e, env: dict, refine: dict, path: str) -> T:
        """The type of `e`. A node used in several places means what copies of it would: its
        type is found once (per set of facts known there), generalized over the variables found
        inside it, and each place takes an instance, so the work is linear in distinct nodes."""
        if id(e) not in self.shared:
            return self._expr(e, env, refine, path)
        known = self.schemes.get((id(e), id(refine)))
        if known is None or known[0] is not refine:
            self.level += 1
            t = self._expr(e, env, refine, path)
            self.level -= 1
            generalize(t, self.level)
            generic = any(v.level == GENERIC for v in _variables(t))
            known = self.schemes[id(e), id(refine)] = (refine, t, generic)  # keeps refine alive: its id stays its own
        # a type without generic variables is its only instance: shared, it stays as small as the graph
        return instantiate(known[1], self.level) if known[2] else known[1]

    def _expr(self, e, env: dict, refine: dict, path: str) -> T:
        kind = type(e)
        if kind is ml.Lit:
            v = e.value
            if v is None:
                return T("tuple")
            if type(v) is int:
                return T("int")
            if type(v) is float:
                return T("real")
            if len(v) == 1:
                t = self.fresh()
                t.strlit = True
                return t
            return T("string")
        if kind is ml.Local:
            return instantiate(env[e.name], self.level)
        if kind is ml.Global:
            t = T(None, (), 0)
            self.global_uses.append((e.name, t, path))
            return t
        if kind is ml.MakeClosure or kind is ml.CallKnown:
            params, result = self.signatures[e.function]
            callee = self.module.rules[e.function]
            sig = instantiate(T("sig", [*params, result]), self.level)
            params, result = sig.args[:-1], sig.args[-1]
            given = e.free if kind is ml.MakeClosure else e.args
            field = "free" if kind is ml.MakeClosure else "args"
            for i, (p, a) in enumerate(zip(params, given)):
                self.unify(p, self.expr(a, env, refine, JsonPath(path, f".{field}[{i}]")), JsonPath(path, f".{field}[{i}]"))
            if kind is ml.CallKnown:
                return result
            if callee.arity != 1:
                raise IllTyped(JsonPath(path, ".function"), f"a closure of {e.function}, which takes {callee.arity} "
                                                   "arguments (a function value takes one)")
            return T("fn", [params[-1], result], self.level)
        if kind is ml.Apply:
            f = self.expr(e.fn, env, refine, JsonPath(path, ".fn"))
            a = self.expr(e.arg, env, refine, JsonPath(path, ".arg"))
            r = self.fresh()
            self.unify(f, T("fn", [a, r], self.level), path, "applied: ")
            return r
        if kind is ml.Prim:
            args, result = _parse_signature(PRIMITIVES[e.op], self.level)
            for i, (p, a) in enumerate(zip(args, e.args)):
                self.unify(p, self.expr(a, env, refine, JsonPath(path, f".args[{i}]")), JsonPath(path, f".args[{i}]"), f"{e.op}: ")
            return result
        if kind is ml.Construct:
            t = self.datatype(e.datatype)
            if e.datatype == "bool":
                return t
            arg = None if e.arg is None else self.expr(e.arg, env, refine, JsonPath(path, ".arg"))
            if e.datatype == "list":
                if arg is not None:
                    self.unify(arg, T("tuple", [t.args[0], t]), JsonPath(path, ".arg"), "::")
                return t
            if e.tag >= len(t.args):
                raise IllTyped(JsonPath(path, ".tag"), f"{e.datatype} has no constructor {e.tag}")
            self.unify(t.args[e.tag], T("noarg") if arg is None else T("arg", [arg]), path,
                       f"constructor {e.tag} of {e.datatype}: ")
            return t
        if kind is ml.Tuple:
            items = []
            for i, x in enumerate(e.items):  # a loop: a comprehension per level is quadratic in nesting
                items.append(self.expr(x, env, refine, JsonPath(path, f".items[{i}]")))
            return T("tuple", items, self.level)
        if kind is ml.Part:
            v = self.expr(e.value, env, refine, JsonPath(path, ".value"))
            step = e.step
            if type(step) is int:
                r = find(v)
                if r.head is None:
                    if r.strlit or r.sarg is not None:
                        raise IllTyped(JsonPath(path, ".step"), f"no field {step} in a value of type {show(r)}")
                    r.fields = r.fields or {}
                    if step not in r.fields:
                        r.fields[step] = T(None, (), r.level)
                    return r.fields[step]
                if r.head != "tuple" or step >= len(r.args):
                    raise IllTyped(JsonPath(path, ".step"), f"no field {step} in a value of type {show(r)}")
                return r.args[step]
            if step == ml.PartStep.DEREF:
                t = self.fresh()
                self.unify(v, T("ref", [t]), path, "!")
                return t
            known = refine.get(e.value) if _stable(e.value) else None
            if (known is None or known[0] != step) and step == ml.PartStep.ARG:
                r = find(v)
                if r.head is None:  # a datatype of one constructor, known later
                    if r.strlit or r.fields:
                        raise IllTyped(JsonPath(path, ".step"), f"the {step} of a value of type {show(r)}")
                    if r.sarg is None:
                        r.sarg = T(None, (), r.level)
                    return r.sarg
                if r.head.startswith("data:") and len(r.args) == 1:
                    known = (step, r.args[0])
            if known is None or known[0] != step:
                raise IllTyped(JsonPath(path, ".step"), f"the {step} of a value no switch has tested for it")
            t = self.fresh()
            if step == ml.PartStep.CONS:
                self.unify(v, T("list", [t]), path)
                return T("tuple", [t, v])
            self.unify(known[1], T("arg", [t]), path, f"the {step} of a constructor without one: ")
            return t
        if kind is ml.Let:
            t = self.bind(e.value, JsonPath(path, ".value"), env, refine)
            env[e.name] = t
            if isinstance(e.value, ml.Switch):
                self.arms[e.name] = self.arm_facts(e.value)
            return self.expr(e.body, env, refine, JsonPath(path, ".body"))
        if kind is ml.SetGlobal:
            t = self.bind(e.value, JsonPath(path, ".value"), env, refine)
            self.global_types.setdefault(e.name, []).append(t)
            return T("tuple")
        if kind is ml.Sequence:
            t = T("tuple")
            for i, x in enumerate(e.exprs):
                t = self.expr(x, env, refine, JsonPath(path, f".exprs[{i}]"))
            return t
        if kind is ml.If:
            self.unify(self.expr(e.cond, env, refine, JsonPath(path, ".cond")), T("bool"), JsonPath(path, ".cond"))
            t = self.expr(e.then, env, refine, JsonPath(path, ".then"))
            self.unify(t, self.expr(e.else_, env, refine, JsonPath(path, ".else_")), JsonPath(path, ".else_"))
            return t
        if kind is ml.Switch:
            return self.switch(e, env, refine, path)
        if kind is ml.Raise:
            self.unify(self.expr(e.exn, env, refine, JsonPath(path, ".exn")), T("exn"), JsonPath(path, ".exn"))
            return self.fresh()
        if kind is ml.Handle:
            t = self.expr(e.body, env, refine, JsonPath(path, ".body"))
            env[e.name] = T("exn")
            self.unify(t, self.expr(e.handler, env, refine, JsonPath(path, ".handler")), JsonPath(path, ".handler"))
            return t
        if kind is ml.While:
            self.unify(self.expr(e.cond, env, refine, JsonPath(path, ".cond")), T("bool"), JsonPath(path, ".cond"))
            self.expr(e.body, env, refine, JsonPath(path, ".body"))
            return T("tuple")
        if kind is ml.NewException:
            return T("exncon", [T("arg", [self.fresh()]) if e.has_arg else T("noarg")], self.level)
        if kind is ml.BasisException:
            return T("exncon", [T("arg", [T("string")]) if e.name == "Fail" else T("noarg")])
        if kind is ml.Packet:
            c = self.expr(e.con, env, refine, JsonPath(path, ".con"))
            arg = T("noarg") if e.arg is None else T("arg", [self.expr(e.arg, env, refine, JsonPath(path, ".arg"))])
            self.unify(c, T("exncon", [arg]), path, "exception: ")
            return T("exn")
        if kind is ml.Par:
            a, b = self.fresh(), self.fresh()
            self.unify(self.expr(e.left, env, refine, JsonPath(path, ".left")), T("fn", [T("tuple"), a]), JsonPath(path, ".left"))
            self.unify(self.expr(e.right, env, refine, JsonPath(path, ".right")), T("fn", [T("tuple"), b]), JsonPath(path, ".right"))
            return T("tuple", [a, b])
        raise IllTyped(path, f"a {e.kind} node cannot stand in an expression")

    def arm_facts(self, decision) -> dict[int, dict]:
        """For a decision tree whose leaves are arm numbers (a match compiled to a switch on its
        arm), what the tests on the way to arm n found, on every way there."""
        arms: dict[int, dict] = {}
        stack = [(decision, {})]
        while stack:
            x, facts = stack.pop()
            if isinstance(x, ml.Switch):
                for i, (_, body) in enumerate(x.cases):
                    found = self.case_facts.get((id(x), i))
                    stack.append((body, {**facts, found[0]: found[1]} if found else facts))
                if x.default is not None:
                    stack.append((x.default, facts))
            elif isinstance(x, ml.Let):
                stack.append((x.body, facts))
            elif isinstance(x, ml.If):
                stack += [(x.then, facts), (x.else_, facts)]
            elif isinstance(x, ml.Lit) and type(x.value) is int:
                if x.value not in arms:
                    arms[x.value] = dict(facts)
                else:
                    old = arms[x.value]
                    arms[x.value] = {k: v for k, v in old.items() if k in facts and _same(facts[k], v)}
            elif not isinstance(x, ml.Raise):
                return {}  # an arm number computed otherwise: nothing is known of any arm
        return arms

    def switch(self, e: ml.Switch, env: dict, refine: dict, path: str) -> T:
        s = self.expr(e.subject, env, refine, JsonPath(path, ".subject"))
        test = e.test
        slots: list = []
        if test == ml.SwitchTest.CON:
            t = self.datatype(e.datatype)
            self.unify(s, t, JsonPath(path, ".subject"), f"a switch on {e.datatype}: ")
            if e.datatype == "list":
                slots = [None, (ml.PartStep.CONS, None)]
            elif e.datatype != "bool":
                for slot in t.args:
                    if e.rep == ml.ConRep.TAGS:
                        self.unify(slot, T("noarg"), JsonPath(path, ".rep"), "a datatype of bare tags: ")
                    elif e.rep == ml.ConRep.ARGS:
                        self.unify(slot, T("arg", [self.fresh()]), JsonPath(path, ".rep"), "a datatype of (tag, arg) pairs: ")
                slots = [(ml.PartStep.ARG, slot) for slot in t.args]
        elif test == ml.SwitchTest.EXN:
            self.unify(s, T("exn"), JsonPath(path, ".subject"))
        else:
            self.unify(s, T({ml.SwitchTest.INT: "int", ml.SwitchTest.STRING: "string",
                             ml.SwitchTest.CHAR: "char"}[test]), JsonPath(path, ".subject"))
        result = self.fresh()
        stable = _stable(e.subject)
        for i, (key, body) in enumerate(e.cases):
            known = None
            if test == ml.SwitchTest.CON and key < len(slots):
                known = slots[key]
            elif test == ml.SwitchTest.EXN:
                slot = self.fresh()
                self.unify(self.expr(key, env, refine, JsonPath(path, f".cases[{i}][0]")), T("exncon", [slot]),
                           JsonPath(path, f".cases[{i}][0]"), "an exception constructor: ")
                known = (ml.PartStep.EXNARG, slot)
            inner = refine
            if stable and known is not None:
                self.case_facts[id(e), i] = (e.subject, known)
                inner = {**refine, e.subject: known}
            elif test == ml.SwitchTest.INT and isinstance(e.subject, ml.Local) and e.subject.name in self.arms:
                inner = {**refine, **self.arms[e.subject.name].get(key, {})}
            self.unify(result, self.expr(body, env, inner, JsonPath(path, f".cases[{i}][1]")), JsonPath(path, f".cases[{i}][1]"))
        if e.default is not None:
            self.unify(result, self.expr(e.default, env, refine, JsonPath(path, ".default")), JsonPath(path, ".default"))
        return result


def _same(a: tuple, b: tuple) -> bool:
    return a[0] == b[0] and (a[1] is b[1] or (a[1] is not None and b[1] is not None and find(a[1]) is find(b[1])))


def _components(module: Module) -> list[list[str]]:
    """The functions' strongly connected components (calls and closures), callees first."""
    return components({key: sorted({n.function for n in walk(fn.body) if isinstance(n, (ml.CallKnown, ml.MakeClosure))})
                       for key, fn in module.rules.items()})


sys.setrecursionlimit(max(sys.getrecursionlimit(), 12000))
