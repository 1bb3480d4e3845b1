"""ml-switch: ML switches as decision graphs, so that no test runs twice.

Pattern-match compilation (frontend/ml/match.py) tests each part of a value at most once
within one match; this pass works across matches and conditionals:
- *known outcomes*: inside a branch that tested a value (a local or a part of one, through
  fields and constructor arguments, never through a ref), a second test of the same value is
  decided already: a `switch` on it takes its arm, an `if` on the same comparison its branch;
- *equality chains*: `if x = 3 then a else b` on a local x and a literal is a switch on x, and
  a switch in the default of a switch on the same value joins it, so an `else if` chain is one
  flat dispatch (`elif` after `elif`) rather than a nest of tests;
- *shared arms*: a match whose arm is reached from several leaves picks the arm by number and
  then switches on that number, a second test; when every arm is small (SIZE nodes), each leaf
  gets its own copy of the arm (bound locals renamed `name.sN`) and the number goes.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace

from hpgrem import ir

from hpgrem.ir import ml
from hpgrem.ir import walk
from hpgrem.ir.rewrite import Rewriter

SIZE = 24  # nodes of an arm small enough to copy into each leaf that reaches it
BUDGET = 400  # nodes a match may grow by when its arms are copied
_EQUALITY = ("=.simple",)
_COMPARISONS = ("=.simple", "<>.simple", "int.<", "int.<=", "int.>", "int.>=")


@dataclass
class MLSwitch:
    name: str = "ml-switch"
    dialects: tuple[str, ...] = ("ml",)
    decided: int = 0  # tests removed because their outcome was known
    # while `known` rewrites a body: its nodes used in several places, and what each became
    # (by node id and facts id)
    _shared: set = field(default_factory=set, init=False, repr=False, compare=False)
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def apply(self, module: ir.Module) -> ir.Module:
        rewriter = Rewriter([(ml.Let, copy_shared_arms), (ml.If, equality_as_switch), (ml.Switch, join_switches)])
        rules = {}
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, 20000))  # bodies nest as deep as the front end allows
        try:
            for key, fn in module.rules.items():
                body = rewriter.rewrite(fn.body)
                self._shared = {i for i, c in ir.use_counts((body,)).items() if c > 1}
                self._memo = {}
                body = self.known(body, {})
                self._shared, self._memo = set(), {}
                rules[key] = fn if body is fn.body else replace(fn, body=body)
        finally:
            sys.setrecursionlimit(old)
        return replace(module, rules=rules)

    def known(self, e, facts: dict, again: bool = False):
        """`e` with the tests whose outcome `facts` (what enclosing branches tested) decides
        replaced by the branch taken. A node reached by several paths with the same facts (the
        same dict) is rewritten once, and its places share the result."""
        if not again and id(e) in self._shared:
            key = (id(e), id(facts))
            hit = self._memo.get(key)
            if hit is None:
                hit = self._memo[key] = (facts, self.known(e, facts, True))  # facts held: its id stays its
            return hit[1]
        if isinstance(e, ml.Switch) and e.test != ml.SwitchTest.EXN:
            key = _path(e.subject)
            if key is not None and key in facts:
                self.decided += 1
                tag = facts[key]
                body = next((b for k, b in e.cases if k == tag), e.default)
                if body is not None:
                    return self.known(body, facts)
            cases = tuple((k, self.known(b, facts if key is None else {**facts, key: k})) for k, b in e.cases)
            rest = facts
            if key is not None and e.datatype in ("list", "bool") and len(e.cases) == 1:
                rest = {**facts, key: 1 - e.cases[0][0]}  # two constructors: the default is the other
            default = None if e.default is None else self.known(e.default, rest)
            return replace(e, subject=self.known(e.subject, facts), cases=cases, default=default)
        if isinstance(e, ml.If):
            cond = self.known(e.cond, facts)
            path = _path(cond)  # a bool value: its facts are those of a switch on it (tags 1, 0)
            if path is not None:
                if path in facts:
                    self.decided += 1
                    return self.known(e.then if facts[path] else e.else_, facts)
                return replace(e, cond=cond, then=self.known(e.then, {**facts, path: 1}),
                               else_=self.known(e.else_, {**facts, path: 0}))
            key = _condition(cond)
            if key is not None and key in facts:
                self.decided += 1
                return self.known(e.then if facts[key] else e.else_, facts)
            if key is None:
                return replace(e, cond=cond, then=self.known(e.then, facts), else_=self.known(e.else_, facts))
            return replace(e, cond=cond, then=self.known(e.then, {**facts, key: True}),
                           else_=self.known(e.else_, {**facts, key: False}))
        kids = e.children()
        new = [self.known(k, facts) for k in kids]
        return e.rebuild(new) if any(a is not b for a, b in zip(new, kids)) else e


def _path(e) -> tuple | None:
    """A key for a local or a part of one (fields, constructor and exception arguments; never
    a ref's contents, which may change): the same key is the same value."""
    steps = []
    while isinstance(e, ml.Part):
        if e.step == ml.PartStep.DEREF:
            return None
        steps.append(e.step)
        e = e.value
    if not isinstance(e, ml.Local):
        return None
    return ("value", e.name, *reversed(steps))


def _condition(c) -> tuple | None:
    """A key for a comparison of paths and literals (its value depends only on them)."""
    if isinstance(c, ml.Prim) and c.op in _COMPARISONS and len(c.args) == 2:
        sides = []
        for a in c.args:
            k = _path(a) if not isinstance(a, ml.Lit) else ("lit", repr(a.value))
            if k is None:
                return None
            sides.append(k)
        return ("compare", c.op, *sides)
    return None


def equality_as_switch(e: ml.If):
    c = e.cond
    if not (isinstance(c, ml.Prim) and c.op in _EQUALITY and len(c.args) == 2):
        return None
    x, k = c.args
    if isinstance(x, ml.Lit):
        x, k = k, x
    if _path(x) is None or not isinstance(k, ml.Lit) or type(k.value) not in (int, str):
        return None
    test = ml.SwitchTest.INT if type(k.value) is int else ml.SwitchTest.STRING
    return ml.Switch(x, test, "", None, ((k.value, e.then),), e.else_, e.span)


def join_switches(e: ml.Switch):
    inner = e.default
    if not (isinstance(inner, ml.Switch) and e.test in (ml.SwitchTest.INT, ml.SwitchTest.STRING, ml.SwitchTest.CHAR)
            and inner.test == e.test and inner.subject == e.subject and _path(e.subject) is not None):
        return None
    keys = {k for k, _ in e.cases}
    cases = e.cases + tuple((k, b) for k, b in inner.cases if k not in keys)  # the others cannot match
    return replace(e, cases=cases, default=inner.default)


def copy_shared_arms(e: ml.Let):
    """`let arm = <tree choosing a number> in switch arm of ...` -> the tree with each arm in
    its leaves, when every arm is small."""
    body = e.body
    if not (isinstance(body, ml.Switch) and body.test == ml.SwitchTest.INT and body.default is None
            and body.subject == ml.Local(e.name)
            and not any(isinstance(x, ml.Local) and x.name == e.name for _, b in body.cases for x in walk(b))):
        return None
    arms = dict(body.cases)
    if any(_size(b) > SIZE for b in arms.values()):
        return None
    leaves = _leaves(e.value, arms)
    if leaves is None or sum(_size(arms[i]) for i in leaves) > BUDGET:
        return None
    copies = [0]

    def fill(t):
        if isinstance(t, ml.Lit):
            copies[0] += 1
            return _renamed(arms[t.value], f".s{copies[0]}")
        if isinstance(t, ml.Switch):
            return replace(t, cases=tuple((k, fill(b)) for k, b in t.cases),
                           default=None if t.default is None else fill(t.default))
        return t  # a Raise: the match failed
    return fill(e.value)


def _leaves(tree, arms: dict) -> list[int] | None:
    """The arm numbers at the leaves of a choosing tree, or None if it is not one."""
    out: list[int] = []
    stack = [tree]
    while stack:
        t = stack.pop()
        if isinstance(t, ml.Lit) and type(t.value) is int and t.value in arms:
            out.append(t.value)
        elif isinstance(t, ml.Switch):
            stack.extend(b for _, b in t.cases)
            if t.default is not None:
                stack.append(t.default)
        elif not isinstance(t, ml.Raise):
            return None
    return out


def _renamed(e, suffix: str):
    return ml.rename_locals(e, {x.name for x in walk(e) if isinstance(x, (ml.Let, ml.Handle))}, suffix)


def _size(e) -> int:
    return ir.fold(e, lambda n, kids: 1 + sum(kids))  # per path: what copies of it would cost
