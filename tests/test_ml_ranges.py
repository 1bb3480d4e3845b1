"""The ml-ranges pass across calls (hpgrem/passes/ml/ranges.py): parameters take the intervals
of the arguments at every call, known calls the intervals of their callees' results, so fewer
overflow checks are generated; and none goes missing: programs that overflow through calls,
closures, handlers and loops raise Overflow at every level as at -O0."""

from __future__ import annotations

import io

import pytest
from conftest import ROOT, compile_source, hpgrem
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpgrem import ir

from hpgrem.ir import ml
from hpgrem.passes.ml import ranges as ml_ranges
from hpgrem.passes.ml.ranges import CONSTANT_MOVES, EXACT_MOVES, FULL, Ranges
from pam.errors import Uncaught
from pam.machine import Machine

MAX = ml.INT_MAX
ALL = ("ml-flatten", "ml-grain", "ml-inline", "simplify", "prune-unreachable", "ml-switch", "ml-ranges",
       "ml-batch-counts")
SHAPES = [(), ("ml-ranges",), ALL, None]  # None: -O2
OVERFLOW = "uncaught exception Overflow"


def outcome(text: str, passes: tuple[str, ...] | None) -> tuple[str, str | None]:
    """What a program prints and the exception it ends with, compiled with exactly `passes`
    (None: -O2), run in-process."""
    module = compile_source(text, "t.sml", **({"opt": 2} if passes is None else {"passes": passes}))
    out = io.StringIO()
    try:
        Machine(module, stream=out).run()
    except Uncaught as u:
        return out.getvalue(), u.message
    return out.getvalue(), None


def ranges(text: str, passes: tuple[str, ...] = ("ml-ranges",)) -> tuple[ir.Module, Ranges, dict[str, str]]:
    """The compiled module, the fixpoint over it, and the function keys by source name."""
    module = compile_source(text, "t.sml", passes=passes)
    return module, Ranges(module), {f.name: k for k, f in module.rules.items()}


def overflow_note(module: ir.Module, key: str) -> tuple[str, ...]:
    return module.annotation(key, "ml-ranges.overflow")[1:]


def show(e: str) -> str:
    return f'val _ = print (Int.toString ({e}) ^ "\\n")\n'


# ---- what the analysis knows across calls ------------------------------------------------------

@pytest.mark.parametrize("passes", [("ml-ranges",), None])
def test_fib25_parameter_and_result_leave_only_the_upward_check(passes):
    text = (ROOT / "benchmarks" / "ml" / "fib25.sml").read_text()
    module = compile_source(text, "fib25.sml", **({"opt": 2} if passes is None else {"passes": passes}))
    (key,) = [k for k, f in module.rules.items() if f.name == "fib"]
    r = Ranges(module)
    assert r.params[key] == [(0, 25)]  # fib 25, and n - 1, n - 2 where n >= 2
    assert r.results[key] == (0, MAX)  # n in [0, 1], or a sum of two results
    # before: ("lohi", "", ""); the sum of two results >= 0 can only overflow upwards
    assert overflow_note(module, key) == ("hi0", "", "")


def test_a_function_made_into_a_closure_keeps_unknown_arguments():
    text = "fun bump n = n * 2\n" + show("bump 1") + show("foldl (op +) 0 (map bump [1, 2])")
    module, r, key = ranges(text)
    assert r.params[key["bump"]] == [FULL]
    assert overflow_note(module, key["bump"]) == ("lohi",)
    module, r, key = ranges("fun bump n = n * 2\n" + show("bump 1"))  # only the known call
    assert r.params[key["bump"]] == [(1, 1)] and overflow_note(module, key["bump"]) == ("",)


def test_a_value_out_of_a_list_is_unknown():
    module, r, key = ranges("fun inc n = n + 1\n" + show("inc (hd [1, 2])"))
    assert r.params[key["inc"]] == [FULL]
    assert overflow_note(module, key["inc"]) == ("hi",)


def test_two_call_sites_join_and_each_caller_narrows_its_arguments():
    text = ("fun scale n = n * 1000000000\n"
            "fun pos k = if k > 0 then scale k else 0\n"
            + show("scale 3 + pos 7 + pos ~5") + show("scale 5000000000"))
    module, r, key = ranges(text)
    assert r.params[key["pos"]] == [(-5, 7)]
    assert r.params[key["scale"]] == [(1, 5000000000)]  # 3, 5000000000, and k in [-5, 7] where k > 0
    assert overflow_note(module, key["scale"]) == ("hi",)


def test_free_variables_come_from_calls_and_closures():
    # a local function called with its free variable n; a thunk of ForkJoin.par that holds n
    text = ("fun go n = let fun inner k = k - n in inner 3 end\n"
            "fun pfib n = if n < 2 then n else\n"
            "  let val (x, y) = ForkJoin.par (fn () => pfib (n - 1), fn () => pfib (n - 2)) in x + y end\n"
            + show("go 10 + pfib 12"))
    module, r, key = ranges(text)
    assert r.params[key["inner"]] == [(10, 10), (3, 3)]
    thunks = [k for k in module.rules if k.startswith("fn@3:")]  # the two thunks on line 3
    assert len(thunks) == 2
    for k in thunks:  # n >= 2 where the closure is made: n - 1, n - 2 cannot overflow
        assert r.params[k][0] == (2, 12)
        assert overflow_note(module, k) == ("",)


def test_a_raise_returns_nothing_and_a_handler_joins_in():
    text = ('fun g n = if n > 10 then raise Fail "big" else n\n'
            'fun h n = g n handle Fail _ => 100\n' + show("h 5 + h 20"))
    module, r, key = ranges(text)
    assert r.results[key["g"]] == (5, 10)
    assert r.results[key["h"]] == (5, 100)


def test_a_function_no_call_reaches_keeps_every_check():
    """`spin` calls only itself and nothing calls `lonely`: neither runs, their parameters have
    no value, and an operation on a value that does not exist keeps both checks."""
    text = "fun spin n = if n > 0 then spin (n * 2) else n\nfun lonely n = n - 1\n" + show("1")
    module, r, key = ranges(text)
    assert r.dead(key["spin"]) and r.dead(key["lonely"])
    assert overflow_note(module, key["spin"]) == ("lohi",) and overflow_note(module, key["lonely"]) == ("lohi",)


def test_a_moving_bound_is_widened_and_the_fixpoint_ends():
    text = ("fun loop (i, acc) = if i = 0 then acc else loop (i - 1, acc * 3 + 1)\n" + show("loop (100, 0)"))
    module, r, key = ranges(text, ("ml-flatten",))
    (k,) = [k for k, f in module.rules.items() if f.name == "loop" and k.endswith("/flat")]
    assert r.params[k] == [(0, 100), (0, MAX)]
    assert max(r.moves.values()) <= EXACT_MOVES + CONSTANT_MOVES + 1
    assert compile_source(text, "t.sml", passes=("ml-flatten", "ml-ranges")).annotation(
        k, "ml-ranges.overflow")[1:] == ("", "hi0", "hi")  # i - 1 with i in [1, 100]; acc * 3 + 1


def test_a_wrong_fixpoint_is_not_used(monkeypatch):
    """The last walks must agree with the fixpoint; where they do not (here: no fixpoint was
    computed at all), every note comes from each body alone, as before the calls were known."""
    text = (ROOT / "benchmarks" / "ml" / "fib25.sml").read_text()
    module, r, key = ranges(text)
    assert r.final_walks() is not None
    r.params[key["fib"]] = [(0, 3)]
    assert r.final_walks() is None
    monkeypatch.setattr(Ranges, "_solve", lambda self, edges: None)
    m = ml_ranges.MLRanges().apply(compile_source(text, "t.sml", passes=()))
    (k,) = [k for k, f in m.rules.items() if f.name == "fib"]
    assert m.annotation(k, "ml-ranges.overflow")[1:] == ("lohi", "", "")


# ---- and every overflow is still raised -------------------------------------------------------

THROUGH_CALLS = [
    # a parameter fed by x * x, doubled in the callee
    ("fun sq x = x * x\nfun dbl y = y + y\n" + show("dbl (sq 1518500249)") + show("dbl (sq 2147483647)"),
     "4611686012426124002\n"),
    # a result that doubles each call
    ("fun pow2 0 = 1 | pow2 n = 2 * pow2 (n - 1)\n" + show("pow2 61") + show("pow2 62"), "2305843009213693952\n"),
    # one function, two call sites with different ranges
    ("fun scale n = n * 1000000000\n" + show("scale 3") + show("scale 5000000000"), "3000000000\n"),
    # known calls and a closure use (map)
    ("fun bump n = n + 4611686018427387900\n" + show("bump 1") + show("foldl (op +) 0 (map bump [1, 2, 3, 4])"),
     "4611686018427387901\n"),
    # a value out of a list
    ("fun inc n = n + 1\n" + show("inc (hd [1])") + show("inc (hd [4611686018427387903])"), "2\n"),
    # a handler's result
    ('fun g n = (if n > 10 then raise Fail "big" else n) handle Fail _ => 4611686018427387903\n'
     "fun h n = g n + 1\n" + show("h 5") + show("h 20"), "6\n"),
    # a free variable passed to a local function, and one held by a closure
    ("fun go n = let fun inner k = k + n in inner 3 end\n" + show("go 1") + show("go 4611686018427387901"), "4\n"),
    ("fun mk n = fn () => n * 2\n" + show("mk 5 ()") + show("mk 3000000000000000000 ()"), "10\n"),
    # mutual recursion multiplying its results
    ("fun even 0 = 1 | even n = 3 * odd (n - 1)\nand odd 0 = 1 | odd n = 3 * even (n - 1)\n"
     + show("even 30") + show("even 40"), "205891132094649\n"),
    # the smallest int, made by a call, negated and decremented in others
    ("fun lowest () = ~4611686018427387903 - 1\nfun neg n = ~ n\nfun down 0 = 0 | down n = down (n - 1)\n"
     + show("neg (lowest () + 1)") + show("down (lowest ())"), "4611686018427387903\n"),
    ("fun lowest () = ~4611686018427387903 - 1\nfun neg n = ~ n\n" + show("neg (lowest ())"), ""),
    # a guard that holds at one call site only
    ("fun f n = if n < 100 then n + 1 else n * n\n" + show("f 5") + show("f 3037000500"), "6\n"),
    # an accumulator widened in the fixpoint
    ("fun loop (i, acc) = if i = 0 then acc else loop (i - 1, acc * 3 + 1)\n"
     + show("loop (30, 0)") + show("loop (100, 0)"), "102945566047324\n"),
    # a result out of a case
    ("fun pick k = case k of 0 => 4611686018427387903 | 1 => 1 | _ => 2\nfun use k = pick k + 1\n"
     + show("use 1") + show("use 0"), "2\n"),
    # through both thunks of a par
    ("fun add1 n = n + 1\n"
     "fun both n = let val (a, b) = ForkJoin.par (fn () => add1 (n - 1), fn () => add1 n) in a + b end\n"
     + show("both 10") + show("both 4611686018427387903"), "21\n"),
]


@pytest.mark.parametrize("text, printed", THROUGH_CALLS, ids=[
    "square", "doubling", "two-sites", "closure", "list", "handler", "free", "closure-free", "mutual",
    "lowest", "negate", "guard", "accumulator", "case", "par"])
def test_overflow_through_calls_is_raised_at_every_level(text, printed):
    for passes in SHAPES:
        assert outcome(text, passes) == (printed, OVERFLOW), f"{passes or '-O2'}:\n{text}"


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_hpgrem_run_reports_the_uncaught_overflow(tmp_path, opt):
    path = tmp_path / "p.sml"
    path.write_text(THROUGH_CALLS[1][0])
    r = hpgrem("run", opt, str(path))
    assert (r.returncode, r.stdout) == (1, "2305843009213693952\n")
    assert OVERFLOW in r.stderr, r.stderr


# ---- random call chains near the limits ------------------------------------------------------

CONSTANTS = [0, 1, 2, 3, -1, -2, 7, 100, 3037000499, 3037000500, 2147483648, 1 << 40, 1 << 61, (1 << 61) + 1,
             MAX // 3, MAX - 1, MAX, -MAX, ml.INT_MIN]


def _lit(c: int) -> str:
    return f"~{-c}" if c < 0 else str(c)


@st.composite
def call_chains(draw) -> str:
    """Functions f0..f3 of one int: arithmetic on the parameter and on calls of later functions
    (f3 calls none), guards, a raise, a closure over a function, self recursion that counts down
    only below 20; the top level calls them with constants near the limits, each print caught
    separately so that one program tests many."""
    n = 4

    def expr(i: int, depth: int) -> str:
        choice = draw(st.integers(0, 7 if depth > 0 else 1))
        if choice == 0:
            return "n"
        if choice == 1:
            return _lit(draw(st.sampled_from(CONSTANTS)))
        if choice in (2, 3):
            op = draw(st.sampled_from(["+", "-", "*"]))
            return f"({expr(i, depth - 1)} {op} {expr(i, depth - 1)})"
        if choice == 4:
            return f"({draw(st.sampled_from(['~', 'abs']))} {expr(i, depth - 1)})"
        if choice == 5 and i + 1 < n:
            j = draw(st.integers(i + 1, n - 1))
            return f"(f{j} {expr(i, depth - 1)})" if draw(st.booleans()) else f"(hd (map f{j} [{expr(i, depth - 1)}]))"
        if choice == 6:
            c = _lit(draw(st.sampled_from(CONSTANTS)))
            cmp = draw(st.sampled_from(["<", "<=", ">", ">=", "="]))
            return f"(if n {cmp} {c} then {expr(i, depth - 1)} else {expr(i, depth - 1)})"
        if choice == 7 and draw(st.booleans()):
            return f'(if n > {_lit(draw(st.sampled_from(CONSTANTS)))} then raise Fail "x" else {expr(i, depth - 1)})'
        return f"(if n > 0 andalso n < 20 then f{i} (n - 1) + {expr(i, depth - 1)} else {expr(i, depth - 1)})"

    lines = [f"fun f{i} n = {expr(i, 3)}\n" for i in reversed(range(n))]
    for _ in range(draw(st.integers(1, 4))):
        call = f"f{draw(st.integers(0, n - 1))} {_lit(draw(st.sampled_from(CONSTANTS)))}"
        lines.append(f'val _ = print (Int.toString ({call}) ^ "\\n") handle Overflow => print "Overflow\\n" '
                     f'| Fail _ => print "Fail\\n"\n')
    return "".join(lines)


@given(call_chains())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def test_random_call_chains_overflow_where_they_overflow_at_O0(text):
    base = outcome(text, ())
    for passes in SHAPES[1:]:
        assert outcome(text, passes) == base, f"{passes or '-O2'}:\n{text}"
