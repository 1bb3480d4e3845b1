"""The pass manager and the analyses.

The analyses' annotations are compared with recorded ones (tests/golden/annotations.json) for
every example and benchmark program at -O0 and -O1: they were recorded from the estimates the
machine made itself before the analyses moved into passes (pam/grain.py, pam/ml/codegen.py's
`Analysis`), so the machine's behaviour and speed cannot drift unnoticed.

`python tests/test_passes.py` rewrites the recording from the passes (after a deliberate change).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from conftest import ROOT, compile_source
from hpgrem import passes
from hpgrem.ir import MODULE_FACTS

GOLDEN = ROOT / "tests" / "golden" / "annotations.json"
PROGRAMS = [p.relative_to(ROOT) for pattern in ("examples/parlog/*.par", "examples/ml/*.sml",
                                                "benchmarks/parlog/*.par", "benchmarks/ml/*.sml")
            for p in sorted(ROOT.glob(pattern))]
LEVELS = (0, 1)


def annotations(path: Path, opt: int) -> dict:
    """The module's annotations as JSON has them (tuples as lists), without the numbers the ML
    lowering appends to names (`go@7:11#3`, `v%12`): they shift whenever the front end makes one
    fresh name more or less, and say nothing about the analyses."""
    module = compile_source((ROOT / path).read_text(), str(path), opt=opt)
    out: dict = {}
    for key, notes in json.loads(json.dumps(module.annotations)).items():
        if "ml-kinds.refs" in notes:
            notes["ml-kinds.refs"] = sorted(_unnumbered(r) for r in notes["ml-kinds.refs"])
        if "ml-kinds.globals" in notes:
            notes["ml-kinds.globals"] = [_unnumbered(g) for g in notes["ml-kinds.globals"]]
        assert _unnumbered(key) not in out, f"{path}: two rules named {_unnumbered(key)}"
        out[_unnumbered(key)] = notes
    return out


def _unnumbered(name: str) -> str:
    return re.sub(r"[#%]\d+$", "", name)


@pytest.fixture(scope="module")
def recorded() -> dict:
    return json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("path", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_annotations_are_the_recorded_ones(path, recorded):
    for opt in LEVELS:
        assert annotations(path, opt) == recorded[f"{path} -O{opt}"], f"-O{opt}"


def test_every_rule_carries_the_machine_analyses():
    par = compile_source("main <- write(hi).\n", "t.par", opt=0)
    assert all(set(par.annotations[k]) == {"granularity.cost", "granularity.exportable"} for k in par.rules)
    ml = compile_source('val _ = print "hi"\n', "t.sml", opt=0)
    assert all(set(ml.annotations[k]) == {f"ml-kinds.{n}" for n in ("kind", "pure", "loop", "raises", "reads", "refs")}
               for k in ml.rules)
    assert set(ml.annotations[MODULE_FACTS]) == {"ml-kinds.globals"}


def test_granularity_knows_fan_out_from_linear_recursion():
    module = compile_source(
        "mode fib(?, ^).\nfib(N, N) <- N < 2 : true.\n"
        "fib(N, F) <- N >= 2 : N1 is N - 1, N2 is N - 2, fib(N1, F1), fib(N2, F2), F is F1 + F2.\n"
        "mode count(?, ^).\ncount([], 0).\ncount([_|T], N) <- count(T, M), N is M + 1.\n"
        "main <- fib(10, F), count([a], N), write(F - N).\n", "t.par")
    assert module.annotation("fib/2", "granularity.exportable") is True
    assert module.annotation("count/2", "granularity.exportable") is False
    # a call and a proceed, no head or guard, 9 nodes built (10, F; [a] is '[|]'(a, []), N; F - N), 3 goals
    assert module.annotation("main/0", "granularity.cost") == 2 + 9 + 3 * 3


def test_ml_kinds():
    module = compile_source(
        "val r = ref 0\n"
        "fun loop (i, acc) = if i = 0 then acc else loop (i - 1, acc + i)\n"
        "fun fib n = if n < 2 then n else fib (n - 1) + fib (n - 2)\n"
        "fun bump () = r := !r + 1\n"
        "val _ = (bump (); print (Int.toString (loop (10, 0) + fib 10 + !r)))\n", "t.sml", opt=1)
    notes = {module.rules[k].name: {n.removeprefix("ml-kinds."): v for n, v in values.items()}
             for k, values in module.annotations.items() if k != MODULE_FACTS}
    assert notes["loop"]["kind"] == "plain" and notes["loop"]["loop"] and notes["loop"]["pure"]
    assert notes["fib"]["kind"] == "direct" and not notes["fib"]["loop"]
    assert not notes["bump"]["pure"]
    names = module.annotation(MODULE_FACTS, "ml-kinds.globals")
    slots = [i for i, name in enumerate(names) if name.startswith("r%")]
    assert notes["bump"]["reads"] == tuple(slots)  # the slot of `r` (globals are named `r%N`)


def test_flow_records_which_goals_feed_which():
    module = compile_source("mode p(?, ^).\np(X, Y) <- Y is X + 1.\n"
                            "main <- p(1, A), p(A, B), write(B).\n", "t.par", passes=("schedule",))
    # goal 1 (p(A, B)) consumes A, which goal 0 produces; goal 2 (write) consumes B, of goal 1
    assert module.annotation("main/0", "flow.fed") == ((0, 1, 0), (0, 2, 1))
    assert module.annotation("p/2", "flow.fed") == ()


# -- the pass manager -------------------------------------------------------------------------
@dataclass(frozen=True)
class Counted:
    """A test analysis: records how many times it ran."""

    name: str = "counted"
    records: tuple[str, ...] = ("runs",)

    def apply(self, module):
        runs = module.annotation(MODULE_FACTS, "counted.runs", 0) + 1
        return passes.annotated(module, self, {MODULE_FACTS: {"runs": runs}})


@dataclass(frozen=True)
class NeedsCounted:
    """A test pass that needs `counted` and leaves the module alone."""

    name: str = "needs-counted"
    requires: tuple[str, ...] = ("counted",)

    def apply(self, module):
        assert module.annotation(MODULE_FACTS, "counted.runs") is not None
        return module


@dataclass(frozen=True)
class Rewrites:
    """A test pass that declares nothing, so invalidates every analysis when it changes the
    rules: it drops `main/0`'s callee `p/0` (and records, under its own name, a note named as
    one of the granularity analysis's)."""

    name: str = "rewrites"
    records: tuple[str, ...] = ("cost",)

    def apply(self, module):
        module = replace(module, rules={k: r for k, r in module.rules.items() if k != "p/0"})
        return passes.annotated(module, self, {"main/0": {"cost": "mine"}})


@dataclass(frozen=True)
class MLOnlyRewrite:
    """A test pass of the ML dialect that changes every rule it is given."""

    name: str = "ml-only"
    dialects: tuple[str, ...] = ("ml",)

    def apply(self, module):
        return replace(module, rules={k: replace(r) for k, r in module.rules.items()})


@dataclass(frozen=True)
class Copies:
    """A test pass that returns a new module with the very same rules and notes."""

    name: str = "copies"

    def apply(self, module):
        return replace(module, rules=dict(module.rules), annotations=dict(module.annotations))


@dataclass(frozen=True)
class Trespasses:
    """A test pass that writes a note in another owner's namespace."""

    name: str = "trespasses"

    def apply(self, module):
        notes = {k: dict(v) for k, v in module.annotations.items()}
        notes["main/0"]["granularity.cost"] = 0
        return replace(module, annotations=notes)


@dataclass(frozen=True)
class Undeclared:
    """A test pass that records a name it did not declare."""

    name: str = "undeclared"

    def apply(self, module):
        return passes.annotated(module, self, {"main/0": {"secret": 1}})


@pytest.fixture
def test_passes(monkeypatch):
    here = __name__
    monkeypatch.setitem(passes.ANALYSIS_TABLE, "counted", f"{here}:Counted")
    for name, cls in (("needs-counted", "NeedsCounted"), ("rewrites", "Rewrites"), ("ml-only", "MLOnlyRewrite"),
                      ("copies", "Copies"), ("trespasses", "Trespasses"), ("undeclared", "Undeclared")):
        monkeypatch.setitem(passes.PASS_TABLE, name, f"{here}:{cls}")


def _parlog_module():
    return compile_source("p.\nmain <- true.\n", "t.par", opt=0)


def test_a_required_analysis_runs_once_while_current(test_passes):
    module = passes.run_passes(_parlog_module(), ["needs-counted", "needs-counted"])
    assert module.annotation(MODULE_FACTS, "counted.runs") == 1


def test_an_invalidated_analysis_is_forgotten_then_run_again_at_the_end(test_passes):
    before = _parlog_module()
    stopped = passes.run_passes(before, ["needs-counted", "rewrites"], analyses=False)
    assert stopped.annotation(MODULE_FACTS, "counted.runs") is None  # invalidated by `rewrites`
    assert "granularity.cost" not in stopped.annotations["main/0"]
    module = passes.run_passes(before, ["needs-counted", "rewrites"])
    assert module.annotation(MODULE_FACTS, "counted.runs") == 1  # required once: run again, on a module without its notes
    assert "p/0" not in module.annotations  # a removed rule's annotations go with it
    assert before.annotations.get(MODULE_FACTS) is None  # the input module is left as it was


def test_two_owners_may_use_the_same_short_name(test_passes):
    module = passes.run_passes(_parlog_module(), ["rewrites"])
    assert module.annotation("main/0", "rewrites.cost") == "mine"
    assert type(module.annotation("main/0", "granularity.cost")) is int
    ml = compile_source("fun loop i = if i = 0 then 0 else loop (i - 1)\nval _ = loop 3\n", "t.sml", opt=0)
    assert any("ml-kinds.loop" in notes for notes in ml.annotations.values())
    par = compile_source((ROOT / "examples" / "parlog" / "nrev.par").read_text(), "n.par", passes=("tail-loop",))
    assert par.annotation("nrev/2", "tail-loop.loop") is True  # the same short name, another owner


def test_a_pass_of_one_dialect_leaves_another_dialects_notes_alone(test_passes):
    """ml-flatten (ML's) on a PARLOG module: it does not run, and the notes stay, whatever they
    are named (the earlier `pure` incident: ml-flatten dropped a PARLOG note of that name)."""
    module = _parlog_module()
    module.annotations["main/0"]["ml-kinds.pure"] = True  # as a .hpg file may carry
    for name in ("ml-flatten", "ml-inline", "ml-switch", "ml-only"):
        after = passes.run_passes(module, [name], analyses=False)
        assert after is module, name
    ml = compile_source('val _ = print "hi"\n', "t.sml", opt=0)
    for name in ("order-nodes", "index-rules", "schedule"):
        assert passes.run_passes(ml, [name], analyses=False) is ml, name


def test_an_unchanged_module_keeps_its_notes(test_passes):
    ml = compile_source("fun f x = x + 1\nval _ = print (Int.toString (f 2))\n", "t.sml", opt=1)
    for name in ("copies", "ml-flatten", "simplify"):
        after = passes.run_passes(ml, [name], analyses=False)
        assert after.annotations == ml.annotations, name
    changed = passes.run_passes(ml, ["ml-only"], analyses=False)
    assert all(not n.startswith("ml-kinds.") for notes in changed.annotations.values() for n in notes)


def test_a_pass_writes_only_its_own_declared_notes(test_passes):
    with pytest.raises(AssertionError, match="granularity.cost"):
        passes.run_passes(_parlog_module(), ["trespasses"])
    with pytest.raises(ValueError, match="secret"):
        passes.run_passes(_parlog_module(), ["undeclared"])


def test_the_machine_analyses_run_even_at_O0_and_not_when_asked_to_stop():
    module = compile_source("main <- true.\n", "t.par", opt=0)
    assert module.annotation("main/0", "granularity.cost") is not None
    stopped = compile_source("main <- true.\n", "t.par", passes=(), after="prune-unreachable")
    assert "main/0" not in stopped.annotations


def test_levels():
    assert passes.level(0) == ()
    assert passes.level(1) == ("prune-unreachable",)
    from hpgrem.ir.dialects import DIALECTS
    own = tuple(n for n in passes.PASS_TABLE if n not in passes.LOWERINGS)
    assert passes.level(2)[:len(own)] == own  # the manager's passes in their order, then the records' (a plug-in's)
    assert set(passes.level(2)[len(own):]) <= {n for d in DIALECTS.values() for n, _ in d.passes}
    assert "simplify" in passes.level(2)
    # a lowering changes what the module computes: it runs only when named
    assert passes.LOWERINGS <= set(passes.PASS_TABLE) and not passes.LOWERINGS & set(passes.level(2))
    assert all(name in passes.ANALYSIS_TABLE for name in passes.MACHINE_ANALYSES)


def test_every_pass_declares_its_dialects_and_notes():
    from hpgrem.ir.dialects import DIALECTS
    for name in (*passes.passes_table(), *passes.analyses_table()):  # with any a test registered (toy-fold)
        p = passes.get_pass(name)
        assert all(d in DIALECTS for d in getattr(p, "dialects", ())), name
        assert all(a in passes.ANALYSIS_TABLE for a in (*getattr(p, "requires", ()), *getattr(p, "preserves", ())))
        assert not hasattr(p, "invalidates"), name


def test_prune_preserves_only_what_it_keeps_true():
    """Pruning keeps every relation's recursive group, so PARLOG estimates stay true; it
    renumbers ML global slots."""
    prune = passes.get_pass("prune-unreachable")
    assert prune.preserves == ("granularity", "flow")
    source = (ROOT / "examples" / "parlog" / "queens.par").read_text()
    whole = compile_source(source, "q.par", opt=0)
    pruned = compile_source(source, "q.par", opt=1)
    assert len(pruned.rules) < len(whole.rules)
    assert all(whole.annotations[k] == pruned.annotations[k] for k in pruned.rules)


# -- pass options -------------------------------------------------------------------------------
PFIB = ("fun pfib n = if n < 2 then n else\n"
        "  let val (x, y) = ForkJoin.par (fn () => pfib (n - 1), fn () => pfib (n - 2)) in x + y end\n"
        'val _ = print (Int.toString (pfib 15) ^ "\\n")\n')


def _grain(threshold: int | None) -> int:
    options = () if threshold is None else (f"ml-grain.threshold={threshold}",)
    module = compile_source(PFIB, "p.sml", passes=("ml-grain",), pass_options=options)
    (_, s0), = next(v["ml-grain.grain"] for v in module.annotations.values() if "ml-grain.grain" in v)
    return s0


def test_an_option_changes_what_its_pass_does():
    assert _grain(None) == _grain(100)  # the default
    assert _grain(10) < _grain(100) < _grain(1000)
    small = ("fun sq x = x * x\nfun add (a, b) = a + b\n"
             'val _ = print (Int.toString (add (sq 3, sq 4)) ^ "\\n")\n')
    inlined = compile_source(small, "s.sml", passes=("ml-inline", "prune-unreachable"))
    kept = compile_source(small, "s.sml", passes=("ml-inline", "prune-unreachable"), pass_options=("ml-inline.size=0",))
    assert len(inlined.rules) < len(kept.rules)


@pytest.mark.parametrize("text, value", [("ml-grain.threshold=7", 7), ("ml-inline.size=0", 0)])
def test_parse_option(text, value):
    assert passes.parse_option(text)[2] == value


@pytest.mark.parametrize("text, message", [
    ("ml-grain.threshold", "expected PASS.OPTION=VALUE"),
    ("nosuch.x=1", "unknown pass 'nosuch'"),
    ("ml-grain.nosuch=1", "ml-grain has no option 'nosuch' (its options: threshold)"),
    ("simplify.x=1", "simplify has no option 'x' (its options: none)"),
    ("ml-grain.threshold=many", "expected an integer"),
    ("ml-grain.threshold=0", "of at least 1"),
    ("ml-inline.size=inf", "expected an integer"),
])
def test_bad_options_say_what_is_wrong(text, message):
    with pytest.raises(passes.PassError, match=re.escape(message)):
        passes.parse_option(text)


def test_options_on_the_command_line(tmp_path):
    from conftest import hpgrem
    src = ROOT / "examples" / "ml" / "par_fib.sml"
    ok = hpgrem("run", "-O2", "--pass-option", "ml-grain.threshold=10", "--pass-option", "ml-inline.size=4", str(src))
    assert ok.returncode == 0 and ok.stdout == hpgrem("run", "-O0", str(src)).stdout
    for bad in ("ml-grain.threshold=x", "nosuch.a=1", "ml-grain.nope=1"):
        for command in (["run"], ["ir"], ["compile", "-o", str(tmp_path / "x.hpg")]):
            r = hpgrem(*command, "--pass-option", bad, str(src))
            assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
            assert "--pass-option" in r.stderr
    shown = hpgrem("ir", "--help").stdout
    assert "ml-grain.threshold=INT (default 100)" in shown and "ml-inline.size=INT (default 16)" in shown


def record() -> None:
    """Rewrite the recording from the passes: one line per rule, so that a change reads well."""
    programs = []
    for path in PROGRAMS:
        for opt in LEVELS:
            notes = annotations(path, opt)
            rules = ",\n".join(f"  {json.dumps(key)}: {json.dumps(notes[key], sort_keys=True)}" for key in sorted(notes))
            programs.append(f"{json.dumps(f'{path} -O{opt}')}: {{\n{rules}\n}}")
    GOLDEN.write_text("{\n" + ",\n".join(programs) + "\n}\n")


if __name__ == "__main__":
    record()
