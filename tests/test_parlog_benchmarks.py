"""The committed-choice benchmarks in the style of the KL1 suites (benchmarks/parlog/sieve.par,
pascal.par, mastermind.par, mastermind_body.par, life.par; `hpgrem bench sieve120k pascal
mastermind mastermind_body life`), each run at a reduced size through its `run(...)` relation,
on one PE and on four, against answers computed independently (Python, or the SWI-Prolog peer
of benchmarks/prolog/)."""

from __future__ import annotations

import subprocess

import pytest

from conftest import ROOT, SWIPL, compile_source, needs_swipl, run_program

PARLOG = ROOT / "benchmarks" / "parlog"
PROLOG = ROOT / "benchmarks" / "prolog"


def _digits(n: int) -> str:
    """n in base-100,000 digits, most significant first, as write/1 prints the list."""
    ds = []
    while n:
        ds.append(n % 100000)
        n //= 100000
    return "[" + ",".join(map(str, reversed(ds))) + "]"


def _life(rows: int, cols: int, gens: int) -> str:
    """The live counts life.par prints, from a plain simulation of the same torus and seed."""
    g = [[1 if (i * 1103 + j * 7919 + i * j * 31) % 97 < 35 else 0 for j in range(cols)] for i in range(rows)]
    counts = [sum(map(sum, g))]
    for _ in range(gens):
        n = [[sum(g[(i + a) % rows][(j + b) % cols] for a in (-1, 0, 1) for b in (-1, 0, 1) if a or b)
              for j in range(cols)] for i in range(rows)]
        g = [[1 if n[i][j] == 3 or (g[i][j] and n[i][j] == 2) else 0 for j in range(cols)] for i in range(rows)]
        counts.append(sum(map(sum, g)))
    return "[" + ",".join(map(str, counts)) + "]"


CASES = [
    ("sieve", "run(1000)", "168"),
    ("sieve", "run(2)", "1"),
    ("pascal", "run(40)", _digits(2 ** 40)),
    ("pascal", "run(1)", "[2]"),
    ("pascal", "run(0)", "[1]"),
    ("mastermind", "run(650)", "[2,6,5]"),
    ("mastermind_body", "run(650)", "[2,6,5]"),
    ("life", "run(7, 9, 12)", _life(7, 9, 12)),
    ("life", "run(5, 4, 6)", _life(5, 4, 6)),
]


@pytest.mark.parametrize("pes", [1, 4])
@pytest.mark.parametrize("name,goal,answer", CASES)
def test_benchmark_answer(name, goal, answer, pes):
    text = (PARLOG / f"{name}.par").read_text()
    out, _ = run_program(text, goal=goal, file=f"{name}.par", opt=2, pes=pes)
    assert out == answer + "\n"


@pytest.mark.parametrize("goal,sum_", [
    ("add([99999, 99999], [1], 0, Z)", [0, 0, 1]),
    ("add([1], [99999, 99999, 7], 0, Z)", [0, 0, 8]),
    ("add([50000, 3], [50000, 99996], 1, Z)", [1, 0, 1]),
    ("add([], [], 1, Z)", [1]),
    ("add([4], [], 0, Z)", [4]),
])
def test_pascal_digit_addition(goal, sum_):
    """pascal.par's add/4: the carry out of a digit, through a run of 99,999s of the longer
    number, and out of the last digit."""
    _, bindings = run_program((PARLOG / "pascal.par").read_text(), goal=goal, file="pascal.par", opt=2)
    assert bindings == [f"Z = [{','.join(map(str, sum_))}]"]


def test_mastermind_versions_differ_only_in_guard_arithmetic():
    """mastermind_body.par is mastermind.par with every guard `is` moved into its body: the
    same relations, the guard version's guards compute and the body version's do not, and both
    print the same."""
    def guards(name):
        module = compile_source((PARLOG / f"{name}.par").read_text(), f"{name}.par", opt=0)
        return {key: [[g.target for g in c.guard or ()] for c in rel.clauses()]
                for key, rel in module.rules.items() if hasattr(rel, "clauses")}
    with_is, without = guards("mastermind"), guards("mastermind_body")
    assert with_is.keys() == without.keys()
    assert any("is/2" in g for clauses in with_is.values() for g in clauses)
    assert not any("is/2" in g for clauses in without.values() for g in clauses)
    goal = "run(400)"
    outs = {run_program((PARLOG / f"{name}.par").read_text(), goal=goal, file=f"{name}.par", opt=2)[0]
            for name in ("mastermind", "mastermind_body")}
    assert outs == {"[4,21,7]\n"}


@needs_swipl
@pytest.mark.parametrize("name,goal,answer", [
    ("sieve", "run(1000, R)", "168"),
    ("pascal", "run(40, R)", _digits(2 ** 40)),
    ("mastermind", "run(650, R)", "[2,6,5]"),
])
def test_prolog_peer_agrees(name, goal, answer):
    """The SWI-Prolog peers compute the same answers at the same reduced sizes."""
    r = subprocess.run([SWIPL, "-q", "-g", f"{goal}, write(R), nl", "-t", "halt", str(PROLOG / f"{name}.pl")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == answer + "\n"
