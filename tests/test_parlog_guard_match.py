"""Guard unification is one-way matching of call terms against a pattern (spec/parlog.md,
"Guard"): `_` and the clause's other new variables are pattern variables, the call's variables
in the pattern are equality tests, and `==` is only for two call terms. Checked against
SWI-Prolog's `subsumes_term/2` on generated patterns."""

from __future__ import annotations

import random
import subprocess

import pytest

from conftest import SWIPL, hpgrem, needs_swipl, run_program

CASES = 1000

U = """
mode u(?, ^).
u(B, R) <- B = f(v, _) : R = yes {sep}
u(_, R) <- R = no.
main <- u(f(v, w), U), write(U) & nl.
"""


@pytest.mark.parametrize("sep", [";", "."])
@pytest.mark.parametrize("opt", [0, 1, 2])
def test_anonymous_variable_is_a_pattern_variable(sep, opt):
    """`B = f(v, _)` matches `f(v, w)`: `_` is new, so this is matching, not `==` (which waits
    for ever on `_`, or lets the other clause of a `.` group commit)."""
    assert run_program(U.format(sep=sep), opt=opt)[0] == "yes\n"
    assert run_program(U.format(sep=sep), opt=opt, pes=16, topology="mesh:4x4")[0] == "yes\n"


def test_anonymous_pattern_under_mpi(tmp_path):
    import shutil
    if shutil.which("mpiexec") is None:
        pytest.skip("mpiexec is not installed")
    for sep in ";.":
        path = tmp_path / f"u{sep == '.'}.par"
        path.write_text(U.format(sep=sep))
        r = subprocess.run(["mpiexec", "-n", "2", "hpgrem", "run", str(path)], capture_output=True, text=True,
                           timeout=120)
        assert (r.returncode, r.stdout) == (0, "yes\n"), r.stderr


MIXED = """
mode pick(?, ?, ^).
pick(J, [C|_], R) <- card(J, A, _, A, _D) = C : R = C ;
pick(J, [_|Cs], R) <- pick(J, Cs, R).
main <- pick(3, [card(2, x, y, x, z), card(3, a, b, c, d), card(3, q, r, q, s)], R), write(R) & nl.
"""


@pytest.mark.parametrize("opt", [0, 2])
def test_pattern_mixing_call_and_new_variables(opt):
    """`J` comes from the head (an equality test inside the pattern), `A` twice (the two places
    must be equal), `_` and `_D` new: the first card with 3 and equal 2nd and 4th fields."""
    assert run_program(MIXED, opt=opt)[0] == "card(3,q,r,q,s)\n"


def test_new_variables_on_both_sides_still_refused(tmp_path):
    path = tmp_path / "both.par"
    path.write_text("mode p(?, ^).\np(X, R) <- f(X, A) = f(B, _) : R = A - B.\nmain <- p(1, R), write(R).\n")
    r = hpgrem("check", str(path))
    assert r.returncode == 2 and "new variables on both sides" in r.stderr and "Traceback" not in r.stderr


# -- generated patterns against SWI-Prolog ---------------------------------------------------------

ATOMS = ["a", "b", "[]"]


def _term(rng: random.Random, depth: int):
    """A ground term as (functor, args): atoms and small integers have no args; `[|]` is a list cell."""
    kind = rng.randrange(5 if depth > 0 else 2)
    if kind == 0:
        return rng.choice(ATOMS), ()
    if kind == 1:
        return str(rng.randrange(3)), ()
    if kind == 2:
        return "f", (_term(rng, depth - 1),)
    if kind == 3:
        return "g", (_term(rng, depth - 1), _term(rng, depth - 1))
    return "[|]", (_term(rng, depth - 1), _term(rng, depth - 1))


def _text(t) -> str:
    if isinstance(t, str):  # a variable of the pattern
        return t
    name, args = t
    if not args:
        return name
    if name == "[|]":
        return f"[{_text(args[0])}|{_text(args[1])}]"
    return f"{name}({', '.join(map(_text, args))})"


def _pattern(rng: random.Random, t):
    """A pattern that `t` may or may not match: each subterm is kept, replaced by `_`, a new
    variable (shared between places when drawn twice), the call's variable `Y`, or another term."""
    r = rng.random()
    if r < 0.15:
        return "_"
    if r < 0.30:
        return rng.choice(["N0", "N1", "N2"])
    if r < 0.40:
        return "Y"
    if r < 0.48:
        return _term(rng, 2)
    name, args = t
    return name, tuple(_pattern(rng, a) for a in args)


def _cases(seed: int, n: int) -> list[tuple[str, str, str, bool]]:
    """(call term, Y's value, pattern, pattern written on the left), as text."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        call = _term(rng, 3)
        y = rng.choice([_term(rng, 2), call, *call[1]]) if rng.random() < 0.6 else _term(rng, 1)
        out.append((_text(call), _text(y), _text(_pattern(rng, call)), rng.random() < 0.5))
    return out


def _parlog_program(cases) -> str:
    lines = []
    for k, (_, _, pattern, left) in enumerate(cases):
        test = f"{pattern} = X" if left else f"X = {pattern}"
        lines.append(f"mode t{k}(?, ?, ^).")
        lines.append(f"t{k}(X, Y, R) <- {test} : R = yes ;\nt{k}(_, _, R) <- R = no.")
    chunks = [range(i, min(i + 50, len(cases))) for i in range(0, len(cases), 50)]
    for c, ks in enumerate(chunks):
        goals = " & ".join(f"t{k}({cases[k][0]}, {cases[k][1]}, R{k}) & write(R{k}) & nl" for k in ks)
        lines.append(f"m{c} <- {goals}.")
    lines.append("main <- " + " & ".join(f"m{c}" for c in range(len(chunks))) + ".")
    return "\n".join(lines) + "\n"


def _prolog_program(cases) -> str:
    lines = [":- style_check(-singleton)."]
    for k, (call, y, pattern, _) in enumerate(cases):
        lines.append(f"case({k}) :- Y = {y}, X = {call}, (subsumes_term({pattern}, X) -> R = yes ; R = no), "
                     f"write(R), nl.")
    lines.append(f"main :- forall(between(0, {len(cases) - 1}, K), case(K)).")
    return "\n".join(lines) + "\n"


@needs_swipl
def test_generated_patterns_agree_with_subsumes_term(tmp_path):
    cases = _cases(2026, CASES)
    pl = tmp_path / "m.pl"
    pl.write_text(_prolog_program(cases))
    swi = subprocess.run([SWIPL, "-q", "-g", "main", "-t", "halt", str(pl)], capture_output=True, text=True,
                         timeout=120)
    assert swi.returncode == 0, swi.stderr
    expected = swi.stdout
    assert expected.count("yes") > CASES // 10 and expected.count("no") > CASES // 10  # both outcomes tested
    par = tmp_path / "m.par"
    par.write_text(_parlog_program(cases))
    for opt in ("-O0", "-O2"):
        r = hpgrem("run", opt, str(par), timeout=300)
        assert r.returncode == 0, r.stderr
        got = r.stdout.splitlines()
        for k, (want, have) in enumerate(zip(expected.splitlines(), got)):
            assert want == have, f"{opt} case {k}: {cases[k]}: SWI-Prolog {want}, hpgrem {have}"
        assert len(got) == CASES
