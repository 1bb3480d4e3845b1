"""Run-time robustness of PARLOG terms (issue 11): every walk of a term ends, cyclic ones included;
integers of any length print; arithmetic and text primitives end in a value or a program failure
(exit 1), never an internal error (exit 70). Decisions: docs/parlog.md."""

from __future__ import annotations

import pickle
import shutil
import subprocess
import sys

import pytest

from conftest import SWIPL, hpgrem, needs_swipl, run_program
from pam.errors import ProgramFailure
from pam.pack import GlobalRef, pack, unpack
from pam.parlog.primitives import int_of_digits, parse_number
from pam.terms import CHECK_AFTER, Cons, Struct, Var, from_list, is_acyclic, measure, to_list
from pam.unify import match_eq, unify
from pam.parlog.write import int_text, write_term

MPIEXEC = shutil.which("mpiexec")
needs_mpi = pytest.mark.skipif(MPIEXEC is None, reason="mpiexec is not installed")
TIMEOUT = 120  # a run that loops forever fails the test instead of hanging it


def run_file(tmp_path, text: str, *options: str, mpi: int = 0) -> subprocess.CompletedProcess:
    path = tmp_path / "t.par"
    path.write_text(text)
    if mpi:
        return subprocess.run([MPIEXEC, "-n", str(mpi), sys.executable, "-m", "hpgrem.driver.cli", "run", str(path),
                               *options], capture_output=True, text=True, timeout=TIMEOUT)
    return hpgrem("run", str(path), *options, timeout=TIMEOUT)


def bind(var, value):
    var.val = value


def cyclic(make):
    """A variable bound to `make(itself)`."""
    v = Var()
    v.val = make(v)
    return v


# -- cyclic terms: the walkers, in-process -------------------------------------------------------------
def test_unify_and_identity_of_cyclic_terms_end():
    x = cyclic(lambda v: Struct("f", (v,)))
    y = cyclic(lambda v: Struct("f", (Struct("f", (v,)),)))
    assert unify(x, y, bind) is True
    assert match_eq(x, y) is True  # equal as rational trees (SWI: X = f(X), Y = f(f(Y)), X == Y)
    z = cyclic(lambda v: Struct("f", (v, "a")))
    w = cyclic(lambda v: Struct("f", (v, "b")))
    assert match_eq(z, w) is False
    assert unify(z, w, bind) is False
    u = cyclic(lambda v: Cons(1, Cons(2, v)))
    t = cyclic(lambda v: Cons(1, Cons(2, Cons(1, Cons(2, v)))))
    assert unify(u, t, bind) is True and match_eq(u, t) is True
    # Unbound variables inside a cycle: == waits on them, = binds them.
    a, b = Var(), Var()
    p = cyclic(lambda v: Struct("g", (v, a)))
    q = cyclic(lambda v: Struct("g", (v, b)))
    assert match_eq(p, q) == [a]
    assert unify(p, q, bind) is True and a.val is b


def test_acyclic_check_and_measure():
    assert is_acyclic(from_list(list(range(100_000))))
    assert not is_acyclic(cyclic(lambda v: Cons(1, v)))
    assert not is_acyclic(cyclic(lambda v: Cons(Struct("f", (v,)), "[]")))
    assert not is_acyclic(cyclic(lambda v: Struct("-", (Struct("+", (v, 1)),))))
    # Lists reached through an argument in the middle of another list: a cycle through a head.
    tail = Var()
    lst = Cons("a", Cons("b", tail))
    tail.val = Cons(Struct("f", (tail,)), "[]")
    assert not is_acyclic(lst)
    # Sharing is no cycle, and a shared part is measured once.
    t = "leaf"
    for _ in range(60):
        t = Struct("node", (t, t))
    assert is_acyclic(t) and measure(t) < 200


def test_to_list_ends_on_a_cyclic_list():
    items, end = to_list(cyclic(lambda v: Cons(1, Cons(2, v))))
    assert type(end) is Cons and len(items) < 20


# -- write/1 of cyclic terms: as SWI-Prolog 9 ------------------------------------------------------------
CYCLIC_WRITES = [
    ("X = f(X)", "@(S_1,[S_1=f(S_1)])"),
    ("X = [1|X]", "@(S_1,[S_1=[1|S_1]])"),
    ("X = [1,2|X]", "@(S_1,[S_1=[1,2|S_1]])"),
    ("X = f(X, Y), Y = g(X)", "@(S_1,[S_1=f(S_1,g(S_1))])"),
    ("X = f(X, Y), Y = g(Y)", "@(S_1,[S_1=f(S_1,S_2),S_2=g(S_2)])"),
    ("X = f(Y, X), Y = g(Y)", "@(S_2,[S_1=g(S_1),S_2=f(S_1,S_2)])"),
    ("X = f(Y, Y), Y = g(Y)", "@(f(S_1,S_1),[S_1=g(S_1)])"),
    ("X = f(A, A), A = g(B), B = h(A)", "@(f(S_1,S_1),[S_1=g(h(S_1))])"),
    ("X = f(A, B), A = g(B), B = h(A)", "@(f(g(S_1),S_1),[S_1=h(g(S_1))])"),
    ("X = f(Y), Y = [a|Y]", "@(f(S_1),[S_1=[a|S_1]])"),
    ("X = f(Z, Z, X), Z = g(a)", "@(S_1,[S_1=f(g(a),g(a),S_1)])"),
    ("X = a + X", "@(S_1,[S_1=a+S_1])"),
    ("X = -(X)", "@(S_1,[S_1= -S_1])"),
    ("X = -(Y), Y = Y + 1", "@(-S_1,[S_1=S_1+1])"),
    ("Y = f(Y), X = [Y|X]", "@(S_2,[S_1=f(S_1),S_2=[S_1|S_2]])"),
]


@pytest.mark.parametrize("goal, text", CYCLIC_WRITES)
def test_write_of_a_cyclic_term(goal, text):
    out, _ = run_program(f"main <- {goal}, write(X), nl.")
    assert out == text + "\n"


@needs_swipl
def test_cyclic_writes_agree_with_swipl():
    for goal, text in CYCLIC_WRITES:
        r = subprocess.run([SWIPL, "-g", f"{goal}, write(X), nl, halt"], capture_output=True, text=True,
                           timeout=TIMEOUT)
        assert r.stdout == text + "\n", goal


def test_write_of_a_long_cyclic_list_and_a_long_acyclic_one():
    n = 3 * CHECK_AFTER
    out, _ = run_program(f"mode mk(?, ?, ^).\nmk(0, T, L) <- L = T ;\nmk(N, T, L) <- N > 0 : "
                         f"N1 is N - 1, L = [N|L1], mk(N1, T, L1).\n"
                         f"main <- mk({n}, X, X), write(X), nl & mk({n}, [], Y), write(Y), nl.")
    first, second = out.splitlines()
    assert first.startswith("@(S_1,[S_1=[30000,29999,") and first.endswith(",1|S_1]])")
    assert second == "[" + ",".join(str(i) for i in range(n, 0, -1)) + "]"


def test_cyclic_terms_on_the_command_line(tmp_path):
    r = run_file(tmp_path, "main <- X = f(X), Y = f(Y), X = Y, X == Y, write(X), nl.")
    assert (r.returncode, r.stdout) == (0, "@(S_1,[S_1=f(S_1)])\n")
    r = run_file(tmp_path, "main.", "--goal", "X = f(X), Y = [1|Y]")
    assert (r.returncode, r.stdout) == (0, "X = @(S_1,[S_1=f(S_1)])\nY = @(S_1,[S_1=[1|S_1]])\n")
    # A term that stays non-ground: write/1 waits for it, and the deadlock report prints it.
    r = run_file(tmp_path, "main <- X = f(X, Y), write(X), nl.")
    assert r.returncode == 3 and "@(write(S_1),[S_1=f(S_1,_G" in r.stderr


@pytest.mark.parametrize("goal, why", [
    ("X = [a|X], length(X, N)", "length/2: not a list"),
    ("X = [97|X], atom_codes(A, X)", "atom_codes/2: not a list"),
    ("X = [0'1|X], number_codes(A, X)", "number_codes/2: not a list"),
    ("X = [a|X], T =.. [f|X]", "=..: not a list"),
    ("X = X + 1, Y is X", "arithmetic error: cyclic term"),
    ("X = f(X), Y = f(Y, Y), X = Y", "failed"),
])
def test_cyclic_terms_where_a_list_or_a_number_is_wanted_fail(goal, why):
    with pytest.raises(ProgramFailure) as e:
        run_program(f"main <- {goal}.")
    assert why in e.value.message


def test_cyclic_code_list_of_atom_codes_is_written():
    out, _ = run_program("main <- X = f(X), atom_codes(X, L), atom_codes(A, L), write(A), nl.")
    assert out == "@(S_1,[S_1=f(S_1)])\n"


# -- cyclic terms between PEs ---------------------------------------------------------------------------
FIB = """mode fib(?, ?, ^).
fib(N, _, F) <- N < 2 : F = N ;
fib(N, T, F) <- N1 is N - 1, N2 is N - 2, fib(N1, T, F1), fib(N2, T, F2), F is F1 + F2.
mode mk(^).
mk(X) <- X = f(X, Y), Y = [a|Y].
mode show(?).
show(T) <- write(T), nl.
"""
CROSSING = FIB + "main <- X = [a|X], fib(12, X, F), write(F), nl & mk(Y) @ 2, show(Y) @ 1.\n"
CROSSING_OUT = "144\n@(S_1,[S_1=f(S_1,S_2),S_2=[a|S_2]])\n"


def test_cyclic_terms_travel_between_simulated_pes(tmp_path):
    r = run_file(tmp_path, CROSSING, "--pes", "16")
    assert (r.returncode, r.stdout) == (0, CROSSING_OUT), r.stderr
    r = run_file(tmp_path, FIB, "--pes", "4", "--goal", "mk(X) @ 2")
    assert (r.returncode, r.stdout) == (0, "X = @(S_1,[S_1=f(S_1,S_2),S_2=[a|S_2]])\n"), r.stderr


@needs_mpi
def test_cyclic_terms_travel_between_mpi_ranks(tmp_path):
    r = run_file(tmp_path, CROSSING, mpi=2)
    assert (r.returncode, r.stdout) == (0, CROSSING_OUT), r.stderr
    r = run_file(tmp_path, FIB, "--goal", "mk(X) @ 1", mpi=2)
    assert (r.returncode, r.stdout) == (0, "X = @(S_1,[S_1=f(S_1,S_2),S_2=[a|S_2]])\n"), r.stderr


def roundtrip(term):
    exported = []

    def export(v):
        exported.append(v)
        return GlobalRef(0, len(exported) - 1, 1)

    code = pickle.loads(pickle.dumps(pack(term, export, {})))  # as MPI sends it
    return unpack(code, lambda ref: exported[ref.ident], {}), exported


def test_pack_sends_cycles_and_sharing_as_a_graph():
    a = Var()
    x = cyclic(lambda v: Struct("f", (v, Cons(1, v), a)))
    back, exported = roundtrip(x)
    assert exported == [a]  # exported once: a packing given up costs no reference weight
    assert write_term(back) == write_term(x) == "@(S_1,[S_1=f(S_1,[1|S_1],_G1)])"
    assert match_eq(back, x) is True
    t = "leaf"
    for _ in range(64):  # 2**64 nodes as a tree
        t = Struct("node", (t, t))
    back, _ = roundtrip(t)
    assert back.args[0] is back.args[1] and match_eq(back, t) is True
    long = from_list(list(range(5 * CHECK_AFTER)))
    back, _ = roundtrip(long)
    assert to_list(back) == (list(range(5 * CHECK_AFTER)), "[]")


# -- integers of any length -----------------------------------------------------------------------------
def test_integers_over_4300_digits_print_and_read():
    for n in (10 ** 5000, -(7 ** 9000), 3 ** 200_000 + 1):
        text = int_text(n)
        assert int_of_digits(text.lstrip("-")) == abs(n)
        assert parse_number(text) == n
    previous = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        assert int_text(-(7 ** 9000)) == str(-(7 ** 9000))
    finally:
        sys.set_int_max_str_digits(previous)
    out, _ = run_program("main <- X is 10 ** 5000, write(X), nl, number_codes(X, L), "
                         "number_codes(Y, L), Y =:= X, atom_codes(X, M), length(M, N), write(N), nl.")
    assert out == "1" + "0" * 5000 + "\n5001\n"


# -- arithmetic: a value or a program failure, never an internal error ------------------------------------
ARITHMETIC = [
    # (expression, the value written, or None for an arithmetic error)
    ("1 << -1", "0"), ("1 >> -1", "2"), ("-1 >> 100000000000", "-1"), ("1 << 64", "18446744073709551616"),
    ("1 << 100000000000", None), ("1 >> -100000000000", None), ("1 << 4194304", None),
    ("10 ** 400.0", None), ("10.0 ** 400", None), ("2 ** 10000000000", None), ("3 ** 3000000", None),
    ("2 ** -1", "0.5"), ("(-2) ** -1", "-0.5"), ("0 ** -1", None), ("0.0 ** -1", None),
    ("(-8.0) ** 0.5", None), ("(-8) ** 0.5", None), ("2 ** 1024.0", None), ("10 ** -400", "0.0"),
    ("(-1) ** 10000000000", "1"), ("0 ** 10000000000", "0"),
    ("truncate(1.0e300 * 1.0e300)", None), ("truncate(inf)", None), ("integer(inf)", None),
    ("float(10 ** 400)", None), ("10 ** 400 / 3", None), ("10 ** 400 + 0.5", None), ("sqrt(10 ** 400)", None),
    ("sqrt(-1)", None), ("1 / 0", None), ("1 / 0.0", None), ("0.0 / 0", None), ("1 mod 0", None),
    ("1 rem 0", None), ("1 // 0", None), ("inf - inf", None), ("inf * 0", None), ("1.0e300 * 1.0e300", None),
    ("-(1.0e308) * 10", None), ("e ** 1000", None), ("pi * 10 ** 400", None),
    ("(10 ** 1000000) * (10 ** 1000000)", None), ("(1 << 4194303) + (1 << 4194303)", None),
    ("integer(1.0e20)", "100000000000000000000"), ("gcd(0, 0)", "0"), ("log(0)", None), ("foo + 1", None),
    ("1.5 mod 2", None), ("1 << 1.5", None), ("max(10 ** 30, 1.0)", "1000000000000000000000000000000"),
    *(POWERS := [  # SWI-Prolog 9's exact powers of a float operand (issue 16)
        ("2 ** 0.0", "1"), ("0 ** 0.5", "0"), ("2.5 ** 0", "1"), ("2.5 ** -0.0", "1"), ("inf ** 0", "1"),
        ("1 ** 2.5", "1"), ("1 ** -0.5", "1"), ("1 ** inf", "1"), ("0 ** 1.5", "0"), ("0 ** inf", "0"),
        ("0 ** 0.0", "1"), ("0 ** -0.5", None), ("1.0 ** 0.5", "1.0"), ("0.0 ** 0.5", "0.0"),
        ("(-1) ** 2.0", "1.0"), ("(-1) ** 1.5", None), ("4 ** 0.5", "2.0"), ("2.0 ** 1", "2.0"),
    ]),
]


@pytest.mark.parametrize("expr, value", ARITHMETIC)
def test_arithmetic_ends_in_a_value_or_a_failure(expr, value):
    text = f"main <- X is {expr}, write(X), nl."
    if value is None:
        with pytest.raises(ProgramFailure) as e:
            run_program(text)
        assert "arithmetic error" in e.value.message
    else:
        assert run_program(text)[0] == value + "\n"


@needs_swipl
def test_powers_agree_with_swipl():
    for expr, value in POWERS:
        r = subprocess.run([SWIPL, "-g", f"catch((X is {expr}, write(X)), _, write(error)), halt."],
                           capture_output=True, text=True, timeout=60)
        assert r.stdout == (value or "error"), expr


def test_repeated_squaring_is_refused(tmp_path):
    # The compiled fast path of `*` checks sizes as the evaluator does.
    r = run_file(tmp_path, "mode sq(?, ?, ^).\nsq(0, X, Y) <- Y = X ;\n"
                           "sq(N, X, Y) <- N > 0 : N1 is N - 1, X1 is X * X, sq(N1, X1, Y).\n"
                           "main <- sq(40, 3, Y), write(done), nl.")
    assert r.returncode == 1 and "integer overflow" in r.stderr


def test_functor_of_a_huge_arity_fails():
    with pytest.raises(ProgramFailure, match="arity over"):
        run_program("main <- functor(T, f, 1000000000), write(x), nl.")


@pytest.mark.parametrize("options", [(), ("--pes", "16")])
def test_arithmetic_errors_exit_1_on_the_command_line(tmp_path, options):
    r = run_file(tmp_path, "main <- X is 1 << 100000000000, write(X), nl.", *options)
    assert r.returncode == 1 and "arithmetic error: integer overflow" in r.stderr
    r = run_file(tmp_path, "main <- X is 10 ** 400.0, write(X), nl.", *options)
    assert r.returncode == 1 and "arithmetic error: float overflow" in r.stderr


@needs_mpi
def test_arithmetic_errors_exit_1_under_mpi(tmp_path):
    r = run_file(tmp_path, FIB + "main <- fib(10, x, F), X is F ** 400.0, write(X), nl.", mpi=2)
    assert r.returncode == 1 and "arithmetic error: float overflow" in r.stderr


# -- character codes ------------------------------------------------------------------------------------
@pytest.mark.parametrize("goal", [
    "atom_codes(A, [55296])", "atom_codes(A, [0'a, 57343])", "atom_codes(A, [-1])", "atom_codes(A, [1114112])",
    "atom_codes(A, [1.0])", "atom_codes(A, [97|b])", "number_codes(N, [0'1, 55296])",
])
def test_bad_character_codes_fail(goal):
    with pytest.raises(ProgramFailure):
        run_program(f"main <- {goal}, write(x), nl.")


@pytest.mark.parametrize("options", [(), ("--pes", "16")])
def test_a_surrogate_code_exits_1(tmp_path, options):
    r = run_file(tmp_path, "main <- atom_codes(A, [55296]), write(A), nl.", *options)
    assert r.returncode == 1 and "not a character code: 55296" in r.stderr


def test_highest_code_point_and_number_text():
    out, _ = run_program("main <- atom_codes(A, [1114111, 0'a]), atom_codes(A, L), write(L), nl.")
    assert out == "[1114111,97]\n"
    assert parse_number("1.0e400") is None and parse_number("inf") is None
    assert parse_number("\u0661\u0662") is None  # digits of other scripts are not numbers
    assert parse_number(" 1_000") == 1000 and parse_number("-0x1F") == -31 and parse_number("--1") is None


def test_cycles_made_during_a_walk_are_found():
    # unify(p(X, Y, X), p(f(X), f(Y), Y)) binds X = f(X) and Y = f(Y), then compares X with Y.
    x, y = Var(), Var()
    assert unify(Struct("p", (x, y, x)), Struct("p", (Struct("f", (x,)), Struct("f", (y,)), y)), bind)
    assert write_term(x) == "@(S_1,[S_1=f(S_1)])"
    # write/1 waits for its term to be ground; the binding that grounds it makes it cyclic.
    out, _ = run_program("main <- X = [1,2|T], write(X), nl, T = X.")
    assert out == "@(S_1,[S_1=[1,2|S_1]])\n"
    out, _ = run_program("main <- X = [1,2|T], write(X), nl, T = [3|X].")
    assert out == "@(S_1,[S_1=[1,2,3|S_1]])\n"


class Box:
    """A mutable value that travels through a codec (as an ML ref does)."""

    def __init__(self, item=None):
        self.item = item


class BoxCodec:
    name = "box"
    value_class = Box

    def flatten(self, box):
        return None, (box.item,)

    def rebuild(self, data, parts):
        return Box(parts[0])

    def size(self, data):
        return 4


def test_a_cycle_through_a_codec_value_is_a_failure_not_a_hang():
    box = Box()
    box.item = (1, box)
    with pytest.raises(ProgramFailure, match="cyclic value"):
        pack(box, lambda v: v, {Box: BoxCodec()})
    shared = Box("x")
    back = unpack(pack(Struct("f", tuple([shared] * 3)), lambda v: v, {Box: BoxCodec()}), None,
                  {"box": BoxCodec()})
    assert [b.item for b in back.args] == ["x"] * 3
