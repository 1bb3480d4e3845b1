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
        if "refs" in notes:
            notes["refs"] = sorted(_unnumbered(r) for r in notes["refs"])
        if "globals" in notes:
            notes["globals"] = [_unnumbered(g) for g in notes["globals"]]
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
    assert all(set(par.annotations[k]) == {"cost", "exportable"} for k in par.rules)
    ml = compile_source('val _ = print "hi"\n', "t.sml", opt=0)
    assert all(set(ml.annotations[k]) == {"kind", "pure", "loop", "reads", "refs"} for k in ml.rules)
    assert set(ml.annotations[MODULE_FACTS]) == {"globals"}


def test_granularity_knows_fan_out_from_linear_recursion():
    module = compile_source(
        "mode fib(?, ^).\nfib(N, N) <- N < 2 : true.\n"
        "fib(N, F) <- N >= 2 : N1 is N - 1, N2 is N - 2, fib(N1, F1), fib(N2, F2), F is F1 + F2.\n"
        "mode count(?, ^).\ncount([], 0).\ncount([_|T], N) <- count(T, M), N is M + 1.\n"
        "main <- fib(10, F), count([a], N), write(F - N).\n", "t.par")
    assert module.annotation("fib/2", "exportable") is True
    assert module.annotation("count/2", "exportable") is False
    # a call and a proceed, no head or guard, 9 nodes built (10, F; [a] is '[|]'(a, []), N; F - N), 3 goals
    assert module.annotation("main/0", "cost") == 2 + 9 + 3 * 3


def test_ml_kinds():
    module = compile_source(
        "val r = ref 0\n"
        "fun loop (i, acc) = if i = 0 then acc else loop (i - 1, acc + i)\n"
        "fun fib n = if n < 2 then n else fib (n - 1) + fib (n - 2)\n"
        "fun bump () = r := !r + 1\n"
        "val _ = (bump (); print (Int.toString (loop (10, 0) + fib 10 + !r)))\n", "t.sml")
    notes = {module.rules[k].name: v for k, v in module.annotations.items() if k != MODULE_FACTS}
    assert notes["loop"]["kind"] == "plain" and notes["loop"]["loop"] and notes["loop"]["pure"]
    assert notes["fib"]["kind"] == "direct" and not notes["fib"]["loop"]
    assert not notes["bump"]["pure"]
    slots = [i for i, name in enumerate(module.annotations[MODULE_FACTS]["globals"]) if name.startswith("r%")]
    assert notes["bump"]["reads"] == tuple(slots)  # the slot of `r` (globals are named `r%N`)


# -- the pass manager -------------------------------------------------------------------------
@dataclass(frozen=True)
class Counted:
    """A test analysis: records how many times it ran."""

    name: str = "counted"
    records: tuple[str, ...] = ("runs",)

    def apply(self, module):
        runs = module.annotation(MODULE_FACTS, "runs", 0) + 1
        return passes.annotated(module, {MODULE_FACTS: {"runs": runs}})


@dataclass(frozen=True)
class NeedsCounted:
    """A test pass that needs `counted` and leaves the module alone."""

    name: str = "needs-counted"
    requires: tuple[str, ...] = ("counted",)
    invalidates: tuple[str, ...] = ()

    def apply(self, module):
        assert module.annotation(MODULE_FACTS, "runs") is not None
        return module


@dataclass(frozen=True)
class Rewrites:
    """A test pass that declares nothing, so invalidates every analysis; drops `main/0`'s
    callee `p/0`."""

    name: str = "rewrites"

    def apply(self, module):
        return replace(module, rules={k: r for k, r in module.rules.items() if k != "p/0"})


@pytest.fixture
def test_passes(monkeypatch):
    here = __name__
    monkeypatch.setitem(passes.ANALYSIS_TABLE, "counted", f"{here}:Counted")
    monkeypatch.setitem(passes.PASS_TABLE, "needs-counted", f"{here}:NeedsCounted")
    monkeypatch.setitem(passes.PASS_TABLE, "rewrites", f"{here}:Rewrites")


def _parlog_module():
    return compile_source("p.\nmain <- true.\n", "t.par", opt=0)


def test_a_required_analysis_runs_once_while_current(test_passes):
    module = passes.run_passes(_parlog_module(), ["needs-counted", "needs-counted"])
    assert module.annotation(MODULE_FACTS, "runs") == 1


def test_an_invalidated_analysis_is_forgotten_and_the_machines_run_again(test_passes):
    before = _parlog_module()
    module = passes.run_passes(before, ["needs-counted", "rewrites"])
    assert module.annotation(MODULE_FACTS, "runs") is None  # invalidated by `rewrites`, not rerun
    assert "p/0" not in module.annotations  # a removed rule's annotations go with it
    assert set(module.annotations["main/0"]) == {"cost", "exportable"}
    assert before.annotations.get(MODULE_FACTS) is None  # the input module is left as it was


def test_the_machine_analyses_run_even_at_O0_and_not_when_asked_to_stop():
    module = compile_source("main <- true.\n", "t.par", opt=0)
    assert module.annotation("main/0", "cost") is not None
    stopped = compile_source("main <- true.\n", "t.par", passes=(), after="prune-unreachable")
    assert "main/0" not in stopped.annotations


def test_levels():
    assert passes.level(0) == ()
    assert passes.level(1) == ("prune-unreachable",)
    assert passes.level(2) == tuple(passes.PASS_TABLE) and "simplify" in passes.level(2)
    assert all(name in passes.ANALYSIS_TABLE for name in passes.MACHINE_ANALYSES)


def test_prune_invalidates_only_what_it_changes():
    """Pruning keeps every relation's recursive group, so PARLOG estimates stay true; it
    renumbers ML global slots."""
    prune = passes.get_pass("prune-unreachable")
    assert prune.invalidates == ("ml-kinds",)
    source = (ROOT / "examples" / "parlog" / "queens.par").read_text()
    whole = compile_source(source, "q.par", opt=0)
    pruned = compile_source(source, "q.par", opt=1)
    assert len(pruned.rules) < len(whole.rules)
    assert all(whole.annotations[k] == pruned.annotations[k] for k in pruned.rules)


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
