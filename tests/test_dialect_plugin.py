"""A dialect defined in this file alone: node kinds, a dialect spec with its hooks and a runtime,
registered at import, with no change to any file of the project. The core (verifier, printer,
`.hpg` reader and writer, machine) finds it through the dialect and runtime tables.

`toy` has numbers, sums and tuples (its `toy.Tuple` beside `ml.Tuple`: kinds are qualified by
their dialect), and one rule kind, `toy.Def`; its runtime evaluates the entry's definition and
binds the entry's one output to the value.
"""

from __future__ import annotations

import ast
import io
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hpgrem import ir
from hpgrem.ir import NO_SPAN, Node, Rule, Span
from hpgrem.ir.core import node
from hpgrem.ir.dialects import PLUGINS, DialectSpec, register_dialect
from hpgrem.printer import module_text
from hpgrem.serialize import HpgFormatError, dumps, loads
from hpgrem.verify import verify
from pam.runtimes import register_runtime

ROOT = Path(__file__).resolve().parents[1]
S = Span("toy.txt", 1, 1)


@node("toy")
@dataclass(frozen=True, slots=True)
class Num(Node):
    value: int
    span: Span = field(default=NO_SPAN, compare=False)

    def render(self) -> list:
        return [str(self.value)]


@node("toy")
@dataclass(frozen=True, slots=True)
class Add(Node):
    left: ToyExpr
    right: ToyExpr
    span: Span = field(default=NO_SPAN, compare=False)

    def render(self) -> list:
        return ["(", self.left, " + ", self.right, ")"]


@node("toy")
@dataclass(frozen=True, slots=True)
class Tuple(Node):
    items: tuple[ToyExpr, ...]
    span: Span = field(default=NO_SPAN, compare=False)


ToyExpr = Num | Add | Tuple


@node("toy")
@dataclass(frozen=True, slots=True)
class Def(Rule):
    key: str
    name: str
    body: ToyExpr
    span: Span = field(default=NO_SPAN, compare=False)
    arity = 1
    inputs = ()

    def check(self, module) -> list[str]:
        return []

    def render(self) -> list:
        return [f"def {self.key} = ", self.body]


def _representation(rule: Def, path: str, module):
    for x, p in ir.walk_paths(rule.body, f"{path}.body"):
        if isinstance(x, Num) and x.value < 0:
            yield f"at {p}.value: a toy number is not negative"


MAX_ITEMS = 100


def _types(module) -> str | None:
    for rule in module.rules.values():
        if any(isinstance(x, Tuple) and len(x.items) > MAX_ITEMS for x in ir.walk(rule)):
            return f"at $.rules: a toy tuple of more than {MAX_ITEMS} items has no type"
    return None


register_dialect(DialectSpec("toy", representation=_representation, type_problem=_types))


def evaluate(e: Node):
    """A toy expression's value, once per distinct node (a shared node is one value)."""
    def at(x: Node, kids: list):
        if isinstance(x, Num):
            return x.value
        if isinstance(x, Add):
            return kids[0] + kids[1]
        return tuple(kids)
    return ir.fold(e, at)


class ToyRuntime:
    """Evaluates the entry's definition in one step and binds the entry's output to it."""

    batch = 64

    def __init__(self, module):
        self.module = module

    def load(self, pe, timeout=None) -> dict:
        from pam.step import declare

        rule = self.module.rules[self.module.entry.target]

        @declare(rule.name, 1, 10, key="toy")
        def step(task):
            pe.bind(task.args[0], evaluate(rule.body))
            return None
        self.step = step
        return {"toy": step}

    def entry_task(self, pe, outputs: list):
        from pam.task import Task
        return Task(self.step, (outputs[0],), None, NO_SPAN)

    def show(self, value, names: dict) -> str:
        from pam.terms import deref
        return repr(deref(value))


register_runtime("toy", ToyRuntime)


def toy_module(n: int = 3) -> ir.Module:
    x: Node = Num(1, S)
    for _ in range(n):
        x = Add(x, x, S)
    rule = Def("toy:main", "main", Tuple((x, Num(7, S)), S), S)
    return ir.Module("toy.txt", {rule.key: rule}, ir.Entry(rule.key, ("X",)), "toy", {}, {1: "x = 1 + 1"})


def test_a_dialect_from_outside_prints_verifies_and_round_trips():
    module = toy_module()
    assert verify(module) == []
    text = module_text(module)
    assert "def toy:main = toy.Tuple((%1 = (%2 = (1 + 1) + %2) + %1), 7)" in text
    hpg = dumps(module)
    doc = json.loads(hpg)
    assert doc["dialect"] == "toy" and doc["rules"][0]["kind"] == "toy.Def"
    assert doc["rules"][0]["body"]["kind"] == "toy.Tuple"
    back = loads(hpg)
    assert back == module and dumps(back) == hpg and module_text(back) == text


def test_its_hooks_are_called():
    bad = ir.Module("t", {"k": Def("k", "k", Add(Num(-1), Num(2)))}, ir.Entry("k", ("X",)), "toy")
    assert verify(bad) == ["def k: at $.rules[0].body.left.value: a toy number is not negative"]
    untyped = ir.Module("t", {"k": Def("k", "k", Tuple((Num(1),) * 101))}, None, "toy")
    with pytest.raises(HpgFormatError, match="ill-typed .hpg file at \\$.rules: a toy tuple of more than 100"):
        loads(dumps(untyped))


def test_a_kind_of_another_dialect_cannot_stand_in_it():
    doc = json.loads(dumps(toy_module(0)))
    doc["rules"][0]["body"]["items"][1] = {"kind": "ml.Lit", "value": 7, "span": ["f", 1, 1]}
    with pytest.raises(HpgFormatError, match="a ml.Lit node cannot stand here"):
        loads(json.dumps(doc))


@pytest.mark.parametrize("pes", [1, 16])
def test_it_runs_on_the_machine_through_a_registered_runtime(pes):
    from pam.machine import Machine

    result = Machine(loads(dumps(toy_module(3))), stream=io.StringIO(), pes=pes).run()
    assert result.bindings == ["X = (8, 7)"]


def test_a_dialect_without_a_runtime_is_named_clearly():
    from pam.runtimes import UnknownRuntime, runtime_class
    with pytest.raises(UnknownRuntime, match="no runtime for modules of dialect 'nope' .*register_runtime"):
        runtime_class("nope")


@pytest.mark.parametrize("path", ["hpgrem/verify.py", "hpgrem/serialize.py", "hpgrem/printer.py"])
def test_the_core_consumers_name_no_dialect(path):
    """No import of a dialect module, no dialect name as a string."""
    tree = ast.parse((ROOT / path).read_text())
    for x in ast.walk(tree):
        if isinstance(x, (ast.Import, ast.ImportFrom)):
            names = [getattr(x, "module", None) or ""] + [a.name for a in x.names]
            assert not any(n.split(".")[-1] in ("ml", "parlog", "ml_dialect", "parlog_dialect", "ml_types")
                           for n in names), (path, names)
        if isinstance(x, ast.Constant) and isinstance(x.value, str):
            assert x.value not in ("ml", "parlog"), path


MPIEXEC = shutil.which("mpiexec")


@pytest.mark.parametrize("launch", [[], ["--pes", "16"], "mpi"], ids=["1pe", "16pes", "mpiexec-n2"])
def test_the_command_runs_it_as_a_plugin(launch, tmp_path):
    """Each process (each rank under mpiexec) imports this file through HPGREM_PLUGINS when a
    `.hpg` file names a dialect the table lacks."""
    hpg = tmp_path / "toy.hpg"
    hpg.write_text(dumps(toy_module(3)))
    plain = command = [sys.executable, "-m", "hpgrem.driver.cli", "run", str(hpg)]
    if launch == "mpi":
        if MPIEXEC is None:
            pytest.fail("mpiexec is not installed")
        command = [MPIEXEC, "-n", "2", *command]
    else:
        command += launch
    env = {**os.environ, PLUGINS: str(Path(__file__))}
    r = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert (r.returncode, r.stdout) == (0, "X = (8, 7)\n"), r.stderr
    printed = subprocess.run([sys.executable, "-m", "hpgrem.driver.cli", "ir", str(hpg)], capture_output=True,
                             text=True, cwd=ROOT, env=env, timeout=300)
    assert "def toy:main = toy.Tuple((%1 = (%2 = (1 + 1) + %2) + %1), 7)" in printed.stdout, printed.stderr
    alone = subprocess.run(plain, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert alone.returncode == 2 and "unknown dialect 'toy'" in alone.stderr
