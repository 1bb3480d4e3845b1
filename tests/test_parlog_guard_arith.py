"""Arithmetic in a guard (`N1 is N - 1`, KL1's `:=`) is a flat guard test run inline by the
clause's code, as the tests are (spec/parlog.md, "Guard"), not a deep guard run as a local
computation."""

from __future__ import annotations

import pytest

from conftest import compile_source, hpgrem, run_program

PROGRAM = """
mode count(?, ?, ^).
mode chk(?, ?, ^).
mode half(?, ^).
mode late(?, ^).
count(N, A, R) <- N > 0, N1 is N - 1, A1 is A + N : count(N1, A1, R) ;
count(0, A, R) <- R = A.
chk(X, Y, R) <- Y is X * 2 : R = double ;
chk(_, _, R) <- R = other.
half(X, R) <- Y is X / 2, Y > 1.0 : R = Y ;
half(_, R) <- R = small.
late(X, W) <- Y is X + 1 : W = Y.
main <- count(100, 0, R), write(R) & nl
      & chk(3, 6, A), chk(3, 7, B), chk(3, 6.0, C), write([A, B, C]) & nl
      & half(5, D), half(2, E), write([D, E]) & nl
      & late(X, W), write(W), X = 4 & nl.
"""
EXPECTED = "5050\n[double,other,other]\n[2.5,small]\n5\n"


@pytest.mark.parametrize("opt", [0, 1, 2])
def test_guard_arithmetic_results(opt):
    """A new variable names the value; a known one must equal it (6.0 is not 3 * 2, as in
    SWI-Prolog's `6.0 is 3 * 2`); a guard whose operand is unbound waits for it."""
    assert run_program(PROGRAM, opt=opt)[0] == EXPECTED
    assert run_program(PROGRAM, opt=opt, pes=16, topology="mesh:4x4")[0] == EXPECTED


def test_guard_arithmetic_is_flat():
    from hpgrem.ir.parlog import deep_guard
    module = compile_source(PROGRAM, "t.par", opt=0)
    guards = [c.guard for rel in module.rules.values() if hasattr(rel, "clauses") for c in rel.clauses() if c.guard]
    assert any(any(g.target == "is/2" for g in guard) for guard in guards)
    assert not any(deep_guard(guard) for guard in guards)


GUARD_LOOP = """
mode loop(?, ?, ^).
loop(N, A, R) <- N > 0, N1 is N - 1, A1 is A + N mod 7 : loop(N1, A1, R) ;
loop(0, A, R) <- R = A.
main <- loop(3000, 0, R), write(R) & nl.
"""
BODY_LOOP = """
mode loop(?, ?, ^).
loop(N, A, R) <- N > 0 : N1 is N - 1, A1 is A + N mod 7, loop(N1, A1, R) ;
loop(0, A, R) <- R = A.
main <- loop(3000, 0, R), write(R) & nl.
"""


def test_guard_arithmetic_costs_what_body_arithmetic_costs(tmp_path):
    """The same loop with its arithmetic in the guard and in the body: the same output and no
    more reductions or suspensions (a deep guard would add a local computation per step)."""
    import json
    stats = {}
    for name, text in (("guard", GUARD_LOOP), ("body", BODY_LOOP)):
        path = tmp_path / f"{name}.par"
        path.write_text(text)
        out = tmp_path / f"{name}.json"
        r = hpgrem("run", str(path), "--stats-json", str(out))
        assert r.returncode == 0, r.stderr
        stats[name] = (r.stdout, json.loads(out.read_text()))
    assert stats["guard"][0] == stats["body"][0] == f"{sum(n % 7 for n in range(1, 3001))}\n"
    g, b = stats["guard"][1], stats["body"][1]
    assert g["reductions"] <= b["reductions"]
    assert g["per_pe"][0]["suspensions"] <= b["per_pe"][0]["suspensions"]


def test_guard_is_of_a_tested_unbound_call_variable_is_an_error(tmp_path):
    path = tmp_path / "bad.par"
    path.write_text("mode p(?, ^).\np(X, R) <- var(X), X is 1 : R = yes.\nmain <- p(_, R), write(R).\n")
    r = hpgrem("check", str(path))
    assert r.returncode == 2 and "can only succeed by binding X" in r.stderr and "Traceback" not in r.stderr


def test_guard_arithmetic_error_is_a_located_failure(tmp_path):
    path = tmp_path / "div.par"
    path.write_text("mode p(?, ^).\np(X, R) <- Y is 1 // X : R = Y.\nmain <- p(0, R), write(R).\n")
    r = hpgrem("run", str(path))
    assert r.returncode == 1 and "division by zero" in r.stderr and "Traceback" not in r.stderr


DIVISION = """
mode body(?, ?, ^).
body(A, B, Q) <- Q1 is A // B, R is A mod B, Q = [Q1, R].
mode guard(?, ?, ^).
guard(A, B, Q) <- Q1 is A // B, R is A mod B : Q = [Q1, R].
mode cell(?, ?, ^).
cell(A, B, [Q, R]) <- Q is A // B, R is A mod B.
mode all(?, ^).
all([A-B|Ps], [X, Y, Z|Rs]) <- body(A, B, X), guard(A, B, Y), cell(A, B, Z), all(Ps, Rs) ;
all([], []).
main <- all([PAIRS], Rs), write(Rs), nl & cell(7, 2, [3, W]), write(W), nl & wait(V), cell(9, 2, [V, _]).
mode wait(?).
wait(V) <- data(V) : write(V), nl.
"""


@pytest.mark.parametrize("opt", [0, 2])
def test_integer_division_inline_is_the_evaluators(opt):
    """`//` truncates toward zero and `mod` takes the divisor's sign (SWI-Prolog's defaults),
    whichever path computes them: the inline int code (non-negative operands) or the evaluator
    (a negative one), in a body, a guard and into an output cell made at commit."""
    pairs = [(7, 2), (-7, 2), (7, -2), (-7, -2), (0, 5), (6, 3), (10 ** 30 + 1, 7)]
    text = DIVISION.replace("PAIRS", ", ".join(f"{a}-({b})" for a, b in pairs))

    def trunc(a, b):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b > 0) else -q
    want = []
    for a, b in pairs:
        q, r = trunc(a, b), a % b
        want += [f"[{q},{r}]"] * 3
    # a known quotient is compared, not bound; a waiting reader of the cell is woken
    assert run_program(text, opt=opt)[0] == "[" + ",".join(want) + "]\n1\n4\n"
