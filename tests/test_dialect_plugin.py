"""A dialect defined in this file alone: node kinds, a dialect spec with its hooks, a pass with
an option, and a runtime with a task kind and a message kind of its own, registered at import
with no change to any file of the project. The core (verifier, printer, `.hpg` reader and
writer, pass manager, machine, the command line) finds it through the dialect, pass and
runtime tables; docs/ir.md walks through it as "how to add a dialect".

`toy` has numbers, sums and tuples (its `toy.Tuple` beside `ml.Tuple`: kinds are qualified by
their dialect), and one rule kind, `toy.Def`. Its pass `toy-fold` adds two numbers at compile
time when the sum is at most its option `limit`. Its runtime makes one *sum* task per distinct
sum node (a node shared by many places is one value: computed once), each waiting for both its
inputs (a counted wait), charged by the size of its numbers; idle PEs steal sums, and a sum done
on another PE sends its result home by the runtime's own message kind TOY-SUM. The entry's
one output is bound to the value of the definition. Its front end reads `.toy` files: one
expression of numbers, `+` and tuples.
"""

from __future__ import annotations

import ast
import io
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

import pytest

from hpgrem import ir
from hpgrem.ir import NO_SPAN, Node, Rule, Span
from hpgrem.ir.core import node
from hpgrem.ir.dialects import PLUGINS, Dialect, DialectSpec, register_dialect
from hpgrem.printer import module_text
from hpgrem.serialize import HpgFormatError, dumps, loads
from hpgrem.verify import verify
from hpgrem.ir.rewrite import Rewriter
from hpgrem.passes import Option, annotated
from frontend import Compiled
from hpgrem.diagnostics import CompileError, Diagnostic
from pam.step import WaitAll, declare
from pam.task import Task
from pam.terms import Var, deref

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


TOY = DialectSpec("toy", representation=_representation, type_problem=_types)


@dataclass(frozen=True)
class ToyFold:
    """`a + b` of two numbers becomes their sum when it is at most `limit` (an option)."""

    name: ClassVar[str] = "toy-fold"
    dialects: ClassVar[tuple[str, ...]] = ("toy",)
    records: ClassVar[tuple[str, ...]] = ("folded",)
    options: ClassVar[dict[str, Option]] = {"limit": Option("the largest sum folded", minimum=0)}
    limit: int = 1 << 62

    def apply(self, module: ir.Module) -> ir.Module:
        def fold(e: Add):
            if isinstance(e.left, Num) and isinstance(e.right, Num) and e.left.value + e.right.value <= self.limit:
                return Num(e.left.value + e.right.value, e.span)
            return None

        rules, notes = {}, {}
        for key, rule in module.rules.items():
            rewriter = Rewriter([(Add, fold)])
            rules[key] = rewriter.rewrite(rule)
            notes[key] = {"folded": rewriter.fired["fold"]}
        if all(rules[k] is r for k, r in module.rules.items()):
            return module
        return annotated(replace(module, rules=rules), self, notes)



class Sum(Task):
    """A sum node's task: `args` = (left, right, out), the variables of its inputs and result."""

    __slots__ = ("started",)

    def __init__(self, proc, left: Var, right: Var, out: Var, started: bool = False) -> None:
        super().__init__(proc, (left, right, out), None, NO_SPAN)
        self.started = started

    def describe(self, names=None) -> str:
        return "toy sum"


class SumKind:
    """A sum not yet started may go to another PE; it travels as its three variables."""

    name = "toy-sum"
    task_class = Sum

    def spare(self, task: Sum) -> bool:
        return not task.started

    def export(self, task: Sum) -> tuple:
        return task.args

    def arrive(self, step, value: tuple, site) -> Sum:
        return Sum(step, *value)


RESULT = "TOY-SUM"  # a sum done away from PE 0 sends (its packed result variable, the value) home


class ToyRuntime:
    """Loads the sum step on each PE; the entry (on PE 0) makes a variable per distinct node of
    the definition and a task per distinct sum node."""

    batch = 64
    counters = ("sums", "sent_home")

    def __init__(self, module, counting: bool = False):
        self.module = module
        self.counting = counting
        self.steps: dict[int, dict] = {}

    def load(self, pe, timeout=None) -> dict:
        counters = pe.stats.counters

        @declare("sum", 3, 20, key="toy-sum", exportable=True)
        def add(task: Sum):
            left, right, out = (deref(v) for v in task.args)
            if type(left) is Var or type(right) is Var:
                task.started = True
                return WaitAll((left, right))
            value = left + right
            pe.charge(value.bit_length())  # a long number takes longer to add: a cost from the data
            if self.counting:
                counters["sums"] += 1
            if pe.net is None or pe.number == 0:
                pe.bind(out, value)
            else:
                if self.counting:
                    counters["sent_home"] += 1
                pe.net.send(RESULT, 0, (pe.net.pack(out), value))
            return None

        @declare("main", 1, 10, key="toy-main")
        def main(task: Task):
            rule = self.module.rules[self.module.entry.target]
            values: dict[int, object] = {}

            def at(x: Node, kids: list):
                if isinstance(x, Num):
                    return x.value
                if isinstance(x, Tuple):
                    return tuple(kids)
                out = Var()
                pe.push(Sum(add, kids[0], kids[1], out))
                return out

            values = ir.fold(rule.body, at)
            pe.push(Task(gather, (values, task.args[0]), None, NO_SPAN))
            return None

        @declare("gather", 2, 10, key="toy-gather")
        def gather(task: Task):
            values, result = task.args
            unbound = [v for v in _leaves(values) if type(deref(v)) is Var]
            if unbound:
                return WaitAll(unbound)
            pe.bind(result, _resolved(values))
            return None

        if pe.net is not None:
            pe.net.add_kind(SumKind())
            pe.net.add_handler(RESULT, lambda m: pe.bind(pe.net.unpack(m.payload[0]), m.payload[1]))
        steps = self.steps[pe.number] = {"toy-sum": add, "toy-main": main, "toy-gather": gather}
        return steps

    def entry_task(self, pe, outputs: list):
        return Task(self.steps[pe.number]["toy-main"], (outputs[0],), None, NO_SPAN)

    def show(self, value, names: dict) -> str:
        return repr(_resolved(value))


def _leaves(value):
    if type(value) is tuple:
        for v in value:
            yield from _leaves(v)
    else:
        yield value


def _resolved(value):
    value = deref(value)
    return tuple(_resolved(v) for v in value) if type(value) is tuple else value



def compile_program(text: str, file: str, goal: str | None = None) -> Compiled:
    """The toy front end: a `.toy` file is one expression of numbers, `+` and tuples, the value
    of `main`; a mistake is a diagnostic at its line and column."""
    def error(line: int, col: int, message: str) -> Compiled:
        return Compiled(None, error=CompileError([Diagnostic(Span(file, line, col), message)]))

    try:
        tree = ast.parse(text, file, mode="eval")
    except SyntaxError as e:
        return error(e.lineno or 1, e.offset or 1, f"syntax error: {e.msg}")

    def build(x: ast.AST) -> Node:
        span = Span(file, x.lineno, x.col_offset + 1)
        if isinstance(x, ast.Constant) and type(x.value) is int and x.value >= 0:
            return Num(x.value, span)
        if isinstance(x, ast.BinOp) and isinstance(x.op, ast.Add):
            return Add(build(x.left), build(x.right), span)
        if isinstance(x, ast.Tuple) and x.elts:
            return Tuple(tuple(build(e) for e in x.elts), span)
        raise _NotToy(span)

    try:
        body = build(tree.body)
    except _NotToy as e:
        return error(e.span.line, e.span.col, "a toy program has numbers, + and tuples only")
    rule = Def("toy:main", "main", body, body.span)
    module = ir.Module(file, {rule.key: rule}, ir.Entry(rule.key, ("X",)), "toy", {}, {})
    return Compiled(replace(module, source_lines=ir.source_lines(module, text)))


class _NotToy(Exception):
    def __init__(self, span: Span):
        self.span = span


# The dialect registers once: its hooks, front end, pass and runtime in one record.
register_dialect(Dialect("toy", TOY, front_end=__name__, extensions=(".toy",), passes=(("toy-fold", ToyFold),),
                         runtime=ToyRuntime))


def toy_module(n: int = 3, width: int = 0) -> ir.Module:
    """`(1 + 1 ...` doubled `n` times, each sum shared by the next (2^n paths, n sums), then
    with `width` the sum of 1..width as a balanced tree of width - 1 distinct sums, and 7."""
    x: Node = Num(1, S)
    for _ in range(n):
        x = Add(x, x, S)
    items = (x, _balanced(1, width), Num(7, S)) if width else (x, Num(7, S))
    rule = Def("toy:main", "main", Tuple(items, S), S)
    return ir.Module("toy.txt", {rule.key: rule}, ir.Entry(rule.key, ("X",)), "toy", {}, {1: "x = 1 + 1"})


def _balanced(low: int, high: int) -> Node:
    if low == high:
        return Num(low, S)
    mid = (low + high) // 2
    return Add(_balanced(low, mid), _balanced(mid + 1, high), S)


WIDE = toy_module(3, 64)
WIDE_SUMS = 3 + 63  # distinct sum nodes: the machine computes each once
WIDE_VALUE = "X = (8, 2080, 7)"


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


def test_its_pass_runs_in_the_pass_manager_with_an_option():
    from hpgrem.passes import run_passes

    folded = run_passes(WIDE, ["toy-fold"])
    assert module_text(folded).count("+") == 0 and "toy.Tuple(8, 2080, 7)" in module_text(folded)
    assert folded.annotation("toy:main", "toy-fold.folded") == WIDE_SUMS
    some = run_passes(WIDE, ["toy-fold"], options={"toy-fold": {"limit": 4}})
    assert 0 < some.annotation("toy:main", "toy-fold.folded") < WIDE_SUMS
    assert verify(some) == [] and loads(dumps(some)) == some
    ml = ir.Module("m", {}, None, "ml")
    assert run_passes(ml, ["toy-fold"], analyses=False) is ml  # a pass of another dialect is skipped


def run_toy(module: ir.Module, pes: int):
    from pam.machine import Machine
    from pam.runtimes import runtime_for

    return Machine(module, stream=io.StringIO(), pes=pes, runtime=runtime_for(module, counting=True)).run()


def test_it_runs_on_one_pe_through_a_registered_runtime():
    result = run_toy(loads(dumps(WIDE)), 1)
    assert result.bindings == [WIDE_VALUE]
    assert result.stats.per_pe[0].counters == {"sums": WIDE_SUMS, "sent_home": 0}


def test_on_sixteen_pes_sums_are_stolen_and_results_come_home_by_its_own_message_kind():
    result = run_toy(loads(dumps(WIDE)), 16)
    assert result.bindings == [WIDE_VALUE]
    per_pe = result.stats.to_json()["per_pe"]
    assert sum(p["sums"] for p in per_pe) == WIDE_SUMS  # a shared node is one task, wherever it ran
    home = sum(p["sent_home"] for p in per_pe)
    assert home > 0 and per_pe[0]["sums"] < WIDE_SUMS
    assert sum(p["bytes_by_kind"].get(RESULT, 0) for p in per_pe) > 0
    assert sum(p["steals"] for p in per_pe) > 0


def test_a_dialect_without_a_runtime_is_named_clearly():
    from pam.runtimes import UnknownRuntime, runtime_class
    with pytest.raises(UnknownRuntime, match="no runtime for modules of dialect 'nope' .*in its record"):
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


def _launched(command: list[str], launch) -> list[str]:
    """`command` on 2 MPI ranks (launch "mpi") or with the flags `launch`."""
    if launch != "mpi":
        return [*command, *launch]
    if MPIEXEC is None:
        pytest.fail("mpiexec is not installed")
    return [MPIEXEC, "-n", "2", *command]


@pytest.mark.parametrize("launch", [[], ["--pes", "16"], "mpi"], ids=["1pe", "16pes", "mpiexec-n2"])
@pytest.mark.parametrize("passes", [["-O0"], ["--passes", "toy-fold", "--pass-option", "toy-fold.limit=4"]],
                         ids=["as-built", "folded"])
def test_the_command_runs_it_as_a_plugin(launch, passes, tmp_path):
    """Each process (each rank under mpiexec) imports this file through HPGREM_PLUGINS when a
    `.hpg` file names a dialect, or the command a pass, that the tables lack."""
    hpg = tmp_path / "toy.hpg"
    hpg.write_text(dumps(WIDE))
    stats = tmp_path / "stats.json"
    plain = [sys.executable, "-m", "hpgrem.driver.cli", "run", str(hpg)]
    command = [*plain, *passes, "--count", "--stats-json", str(stats)]
    command = _launched(command, launch)
    env = {**os.environ, PLUGINS: str(Path(__file__))}
    r = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert (r.returncode, r.stdout) == (0, WIDE_VALUE + "\n"), r.stderr
    per_pe = json.loads(stats.read_text())["per_pe"]
    sums = sum(p["sums"] for p in per_pe)
    assert sums == WIDE_SUMS if passes == ["-O0"] else 0 < sums < WIDE_SUMS
    printed = subprocess.run([sys.executable, "-m", "hpgrem.driver.cli", "ir", str(hpg), "-O0"],
                             capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert "def toy:main = toy.Tuple((%1 = (%2 = (1 + 1) + %2) + %1), " in printed.stdout, printed.stderr
    alone = subprocess.run(plain, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert alone.returncode == 2 and "unknown dialect 'toy'" in alone.stderr


@pytest.mark.parametrize("launch", [[], ["--pes", "16"], "mpi"], ids=["1pe", "16pes", "mpiexec-n2"])
def test_a_plugin_in_a_folder_outside_the_project_runs_from_its_own_source(launch, tmp_path):
    """This file copied to a folder of its own, outside the project, is a dialect whose front
    end, pass (with an option), runtime, task kind and message kind reach the command through
    HPGREM_PLUGINS alone: `hpgrem run prog.toy` gives the same result on 1 PE, 16 PEs and 2 ranks."""
    plugin = tmp_path / "toy_dialect" / "toy.py"
    plugin.parent.mkdir()
    shutil.copy(__file__, plugin)
    program = tmp_path / "prog.toy"
    program.write_text("((1 + 1) + (1 + 1), " + " + ".join(map(str, range(1, 65))) + ", 7)\n")
    command = [sys.executable, "-m", "hpgrem.driver.cli", "run", str(program), "--passes", "toy-fold",
               "--pass-option", "toy-fold.limit=4"]
    command = _launched(command, launch)
    env = {**os.environ, PLUGINS: str(plugin)}
    r = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert (r.returncode, r.stdout) == (0, "X = (4, 2080, 7)\n"), r.stderr
    if launch == []:
        helped = subprocess.run([sys.executable, "-m", "hpgrem.driver.cli", "ir", "--help"],
                                capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
        assert "toy-fold.limit=INT" in helped.stdout, helped.stderr
        bad = tmp_path / "bad.toy"
        bad.write_text("(1, 2 - 1)\n")
        r = subprocess.run(command[:4] + [str(bad)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
        assert r.returncode == 2 and f"{bad}:1:5: error: a toy program has numbers" in r.stderr, r.stderr
        assert "(1, 2 - 1)\n    ^" in r.stderr
        alone = subprocess.run(command[:5], capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert alone.returncode == 2 and "unknown file type '.toy'" in alone.stderr


def test_one_record_registers_the_dialect_with_its_front_end_pass_and_runtime():
    """The record is the whole registration: its extension finds its front end, -O2 runs its
    pass (on its own modules), its language finds its runtime; a second dialect may not take
    its extension, and a pass registered alone runs only when named."""
    from frontend import front_end_for
    from hpgrem import passes
    from pam.runtimes import runtime_class

    assert front_end_for(".toy").package == __name__
    assert "toy-fold" in passes.level(2) and "toy-fold" not in passes.level(1)
    assert runtime_class("toy") is ToyRuntime
    with pytest.raises(ValueError, match="the file extension '.toy' is taken by dialect 'toy'"):
        register_dialect(Dialect("toy2", DialectSpec("toy2"), front_end=__name__, extensions=(".toy",)))
    with pytest.raises(ValueError, match="other than .hpg"):
        Dialect("toy3", DialectSpec("toy3"), front_end=__name__, extensions=(".hpg",))
    try:
        passes.register_pass("toy-only-named", ToyFold)
        assert "toy-only-named" in passes.passes_table() and "toy-only-named" not in passes.level(2)
    finally:
        passes.PASS_TABLE.pop("toy-only-named", None)
