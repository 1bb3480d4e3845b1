"""The meaning of PARLOG programs (spec/parlog.md, "Meaning"): matching, guards, commit,
search groups, suspension, conjunctions, primitives and the prelude."""

from __future__ import annotations

import pytest

from conftest import run_program
from pam.errors import Deadlock, ProgramFailure


def run(text, goal=None):
    return run_program(text, goal)


def test_input_matching_suspends_until_the_argument_is_bound():
    out, _ = run("mode w(?).\nw(go) <- write(went).\nmain <- w(X), (write(before) & X = go).\n")
    assert out == "beforewent"


def test_matching_never_binds_the_callers_variable():
    with pytest.raises(Deadlock):
        run("mode p(?).\np(a).\nmain <- p(X).\n")


def test_repeated_input_variable_is_an_equality_test():
    out, _ = run("mode same(?, ?, ^).\nsame(X, X, yes).\nsame(X, Y, no) <- X \\== Y : true.\n"
                 "main <- same(f(1), f(1), A), same(a, b, B), write(A/B).\n")
    assert out == "yes/no"


def test_guard_tests_suspend_until_decidable():
    out, _ = run("mode pos(?, ^).\npos(X, yes) <- X > 0 : true.\npos(X, no) <- X =< 0 : true.\n"
                 "main <- pos(X, R), (write(R) & nl), X = 3.\n")
    assert out == "yes\n"


def test_guard_unification_matches_without_binding_the_call():
    out, _ = run("mode first(?, ^).\nfirst(L, X) <- L = [X|_] : true.\nmain <- first([a,b], X), write(X).\n")
    assert out == "a"


def test_later_group_only_after_every_earlier_clause_failed():
    # `;` is KL1's otherwise: while p's first group is suspended, the second is not tried.
    prog = ("mode p(?, ^).\np(X, small) <- X < 10 : true ;\np(_, other).\n"
            "main <- p(X, R), (write(R) & nl), X = 5.\n")
    out, _ = run(prog)
    assert out == "small\n"
    out, _ = run("mode p(?, ^).\np(X, small) <- X < 10 : true ;\np(_, other).\nmain <- p(50, R), write(R).\n")
    assert out == "other"


def test_clauses_of_one_group_may_commit_in_any_order_but_one_commits():
    out, _ = run("mode m(?, ?, ^).\nm(a, _, left).\nm(_, b, right).\nmain <- m(a, X, R), write(R).\n")
    assert out == "left"  # the second clause suspends on X; the first commits


def test_output_unification_after_commit_can_fail():
    with pytest.raises(ProgramFailure, match="after commitment"):
        run("mode p(?, ^).\np(1, one).\nmain <- p(1, two).\n")


def test_ampersand_waits_for_every_descendant():
    prog = ("mode count(?).\ncount(0).\ncount(N) <- N > 0 : write(N), N1 is N - 1, count(N1).\n"
            "main <- count(3) & write(done).\n")
    out, _ = run(prog)
    assert out == "321done"


def test_output_goals_of_one_conjunction_keep_written_order():
    prog = "mode late(^).\nlate(X) <- X = hello.\nmain <- write(X), write(' '), late(X), write(world), nl.\n"
    out, _ = run(prog)
    assert out == "hello world\n"


def test_goal_bindings_are_printed_in_order_of_appearance():
    _, bindings = run("mode app(?, ?, ^).\napp([], L, L).\napp([H|T], L, [H|R]) <- app(T, L, R).\n",
                      goal="app([1], [2], Z), Y = f(Z), _Hidden = 1")
    assert bindings == ["Z = [1,2]", "Y = f([1,2])"]


@pytest.mark.parametrize("goal,expected", [
    ("X is 7 / 2", "X = 3.5"), ("X is 8 / 2", "X = 4"), ("X is -7 // 2", "X = -3"),
    ("X is -7 mod 2", "X = 1"), ("X is -7 rem 2", "X = -1"), ("X is 2 ** 10", "X = 1024"),
    ("X is 2 ** -1", "X = 0.5"), ("X is 2.0 * 3", "X = 6.0"), ("X is max(1, 2.0)", "X = 2.0"),
    ("X is abs(-3) + sign(-2.5)", "X = 2.0"), ("X is gcd(12, 18)", "X = 6"), ("X is 1 << 70", "X = 1180591620717411303424"),
    ("X is 5 /\\ 3 \\/ 8", "X = 9"), ("X is \\ 5", "X = -6"), ("X is sqrt(16)", "X = 4.0"),
    ("X is integer(2.5)", "X = 3"), ("X is integer(-2.5)", "X = -3"), ("X is truncate(-2.7)", "X = -2"),
    ("X is float(3)", "X = 3.0"), ("X is min(3, 1) - 0'a", "X = -96"), ("X is 10000000000 * 10000000000", "X = 100000000000000000000"),
])
def test_arithmetic_is_swi_prologs(goal, expected):
    _, bindings = run("", goal=goal)
    assert bindings == [expected]


@pytest.mark.parametrize("goal,expected", [
    ("functor(f(a, b), N, A)", ["N = f", "A = 2"]),
    ("functor(T, g, 2)", ["T = g(_G1,_G2)"]),
    ("arg(2, f(a, b), X)", ["X = b"]),
    ("f(a, b) =.. L", ["L = [f,a,b]"]),
    ("T =.. [g, 1]", ["T = g(1)"]),
    ("atom_codes(abc, L)", ["L = [97,98,99]"]),
    ("atom_codes(A, \"hi\")", ["A = hi"]),
    ("number_codes(N, \"-12\")", ["N = -12"]),
    ("number_codes(3.5, L)", ["L = [51,46,53]"]),
    ("length([a, b, c], N)", ["N = 3"]),
    ("X = \"ab\"", ["X = [97,98]"]),
    ("call((X = 1, Y is X + 1))", ["X = 1", "Y = 2"]),
    ("G = write(hi), call(G)", ["G = write(hi)"]),
])
def test_primitives(goal, expected):
    _, bindings = run("", goal=goal)
    assert bindings == expected


def test_type_tests_suspend_until_bound():
    out, _ = run("main <- (atom(X) & write(ok) & nl), X = a.\n")
    assert out == "ok\n"


def test_prelude():
    _, b = run("", goal="append([1], [2, 3], A), reverse([1, 2, 3], R), sum([1, 2, 3], S), "
                        "nth(2, [a, b, c], N), merge([1], [2], M)")
    assert b[:4] == ["A = [1,2,3]", "R = [3,2,1]", "S = 6", "N = b"]
    assert b[4] in ("M = [1,2]", "M = [2,1]")


def test_a_program_relation_replaces_the_preludes_for_its_calls():
    prog = ("mode append(?, ?, ^).\nappend(_, _, mine).\n"
            "main <- append([1], [2], X), reverse([1, 2], R), write(X/R).\n")
    out, _ = run(prog)
    assert out == "mine/[2,1]"  # the prelude's reverse keeps its own helpers


def test_deadlock_reports_goals_and_variables():
    with pytest.raises(Deadlock) as e:
        run("mode w(?, ?).\nw(a, b).\nmain <- w(X, Y), w(Y, X).\n")
    texts = [g[0] for g in e.value.goals]
    assert e.value.total == 2 and all(t.startswith("w(") for t in texts)
    assert all(g[2] and g[3] == 0 for g in e.value.goals)


def test_halt_stops_the_program_after_flushing_output():
    from pam.errors import Halt
    with pytest.raises(Halt):
        run("main <- write(a) & halt & write(b).\n")


def test_placement_is_ignored_on_one_pe():
    out, _ = run("main <- write(here) @ 3.\n")
    assert out == "here"
