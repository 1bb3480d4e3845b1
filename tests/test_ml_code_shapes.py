"""Shapes of the ML code that make real programs fast (pam/ml/codegen.py), with the same output:
- code that counts no reductions, for a run that reads none (Machine's `count_reductions`);
- raises returned, not raised, by direct functions called by name (FunctionInfo.returns_raise),
  taken by a handler in the caller's frame without a Python raise;
- overflow checks that test a 30-bit result first.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess

import pytest

from conftest import ROOT, compile_source, hpgrem

# Raises returned through every kind of place: a tail raise caught a frame up, a non-tail call
# in a sum (the left part's effect stays), nested handlers in one function, a retry loop with
# a handler in tail position, 100,000 frames (past the Python-recursion depth, on the heap
# stack), closures (map, foldl, a lambda) around code that returns its raises, and an uncaught
# one. Poly/ML prints the same (checked when it is installed).
RAISES = """exception NoMatch
exception Bad of int
fun find (k, []) = raise NoMatch
  | find (k, (a, b) :: rest) = if k = a then b else find (k, rest)
fun look (k, table) = find (k, table) handle NoMatch => ~1
fun sum (k, table) = (print "s"; find (k, table)) + find (k + 1, table)
fun twice (k, table) = (sum (k, table) handle NoMatch => 100) + 1
fun deep 0 = raise Bad 7
  | deep n = 1 + deep (n - 1)
fun nested k = ((if k > 2 then raise Bad k else k) handle NoMatch => 0) handle Bad x => x * 10
fun retry (f, 0) = f 0
  | retry (f, n) = f n handle Bad m => retry (f, n - 1)
fun inner (k, t) = (find (k, t) handle NoMatch => raise Bad k)
fun loop (i, acc) = if i = 0 then acc else loop (i - 1, acc + (inner (i, [(2, 20), (4, 40)]) handle Bad x => x))
val t = [(1, 10), (2, 20), (3, 30)]
val _ = print (Int.toString (look (2, t)) ^ " " ^ Int.toString (look (9, t)) ^ "\\n")
val _ = print (Int.toString (twice (1, t)) ^ " " ^ Int.toString (twice (3, t)) ^ "\\n")
val _ = print (Int.toString (deep 100000 handle Bad x => x) ^ "\\n")
val _ = print (Int.toString (nested 1 + nested 5) ^ "\\n")
val _ = print (Int.toString (retry (fn n => if n > 3 then raise Bad n else n * 2, 9)) ^ "\\n")
val _ = print (Int.toString (loop (5, 0)) ^ "\\n")
val _ = print (String.concatWith "," (map (fn k => Int.toString (look (k, t))) [3, 4]) ^ "\\n")
val _ = print (Int.toString (List.foldl (fn (k, a) => a + (find (k, t) handle NoMatch => 0)) 0 [1, 5, 3]) ^ "\\n")
val _ = find (42, t)
"""
RAISES_OUT = "20 ~1\nss31 101\n7\n51\n6\n69\n30,~1\n40\n"


def _machine(text: str, **options):
    from pam.machine import Machine

    out = io.StringIO()
    machine = Machine(compile_source(text, "shapes.sml", opt=options.pop("opt", 2)), stream=out, **options)
    return machine, out


@pytest.mark.parametrize("opt, pes, counts", [(0, 1, False), (2, 1, False), (2, 1, True), (2, 16, False)])
def test_returned_raises_behave_as_raised_ones(opt, pes, counts):
    from pam.ml.values import Packet

    machine, out = _machine(RAISES, opt=opt, pes=pes, count_reductions=counts)
    with pytest.raises(Exception) as stop:
        machine.run()
    assert out.getvalue() == RAISES_OUT
    assert "NoMatch" in str(stop.value) or isinstance(stop.value, Packet)


def test_find_returns_its_raise_and_inner_takes_it_without_a_python_raise():
    machine, _ = _machine(RAISES, count_reductions=False)
    source = machine.runtime.build(poll=False, counts=False)[0]
    find = next(i for k, i in machine.runtime.analysis.info.items() if k.startswith("find"))
    assert find.returns_raise
    body = source.split(f"def {find.py}(", 1)[1].split("\ndef ", 1)[0]  # a plain loop
    assert ".raised" in body and "raise " not in body  # NoMatch's one Raised, returned
    inner = next(i for k, i in machine.runtime.analysis.info.items() if k.startswith("inner"))
    body = source.split(f"def {inner.py}(", 1)[1].split("\ndef ", 1)[0]
    assert ".__class__ is Raised: v" in body  # the handler's variable gets the packet


def test_a_function_made_into_a_closure_raises_as_python_does():
    machine, _ = _machine(RAISES, count_reductions=False)
    lambdas = [i for k, i in machine.runtime.analysis.info.items() if k.startswith("fn@")]
    assert len(lambdas) == 3 and not any(i.returns_raise for i in lambdas)


@pytest.mark.skipif(shutil.which("poly") is None, reason="Poly/ML is not installed")
def test_poly_ml_prints_the_same(tmp_path):
    path = tmp_path / "raises.sml"
    path.write_text(RAISES)
    r = subprocess.run(["poly", "--script", str(path)], capture_output=True, text=True, timeout=120)
    assert r.stdout.startswith(RAISES_OUT) and "NoMatch" in r.stdout + r.stderr


def test_a_run_that_reads_no_reductions_builds_code_that_counts_none():
    machine, out = _machine("fun fib n = if n < 2 then n else fib (n - 1) + fib (n - 2)\n"
                            "val _ = print (Int.toString (fib 20) ^ \"\\n\")\n", count_reductions=False)
    machine.run()
    assert out.getvalue() == "6765\n"
    assert set(machine.runtime.built) == {(False, False)}
    assert "calls[0]" not in machine.runtime.built[(False, False)][0]


@pytest.mark.parametrize("options", [{"pes": 4}, {"max_steps": 10**9}, {"timeout": 600.0}])
def test_limits_and_several_pes_count_all_the_same(options):
    machine, _ = _machine("fun fib n = if n < 2 then n else fib (n - 1) + fib (n - 2)\n"
                          "val _ = print (Int.toString (fib 15) ^ \"\\n\")\n", count_reductions=False, **options)
    stats = machine.run().stats
    assert all(counts for _, counts in machine.runtime.built)
    assert stats.reductions >= 1973  # fib 15 makes 1,973 calls: each is a reduction


def test_cli_counts_exactly_with_stats_and_prints_the_same_without(tmp_path):
    path = tmp_path / "fib.sml"
    path.write_text("fun fib n = if n < 2 then n else fib (n - 1) + fib (n - 2)\n"
                    "val _ = print (Int.toString (fib 15) ^ \"\\n\")\n")
    plain = hpgrem("run", str(path))
    stats = tmp_path / "stats.json"
    counted = hpgrem("run", str(path), "--stats-json", str(stats))
    assert plain.returncode == counted.returncode == 0
    assert plain.stdout == counted.stdout == "610\n"
    one = json.loads(stats.read_text())
    again = hpgrem("run", str(path), "--stats-json", str(stats), "--max-steps", "1000000000")
    assert again.returncode == 0 and json.loads(stats.read_text())["reductions"] == one["reductions"]
    assert one["reductions"] >= 1973


@pytest.mark.parametrize("a, op, b, out", [
    (1073741823, "+", 1, "1073741824"), (-1073741823, "-", 1, "~1073741824"),
    (4611686018427387902, "+", 1, "4611686018427387903"), (-4611686018427387903, "-", 1, "~4611686018427387904"),
    (4611686018427387903, "+", 1, "Overflow"), (-4611686018427387904, "-", 1, "Overflow"),
    (2147483648, "*", 2147483648, "Overflow"), (2147483648, "*", 2147483647, "4611686016279904256"),
    (-2147483648, "*", 2147483648, "~4611686018427387904"),
])
def test_overflow_checks_past_thirty_bits(a, op, b, out):
    # the operands in refs: no pass can fold the operation away
    text = (f"val a = ref ({a}) val b = ref ({b})\n"
            f"val _ = print ((Int.toString (!a {op} !b) handle Overflow => \"Overflow\") ^ \"\\n\")\n")
    machine, stream = _machine(text.replace("(-", "(~"), count_reductions=False)
    machine.run()
    assert stream.getvalue() == out + "\n"


FIB = "fun fib n = if n < 2 then n else fib (n - 1) + fib (n - 2)\n"


def _info(machine, name: str):
    return next(i for k, i in machine.runtime.analysis.info.items() if k.startswith(name + "@"))


def test_a_bounded_sum_of_its_own_results_is_checked_once_by_its_caller():
    machine, out = _machine(FIB + 'val _ = print (Int.toString (fib 20) ^ "\\n")\n', count_reductions=False)
    machine.run()
    assert out.getvalue() == "6765\n"
    fib = _info(machine, "fib")
    assert fib.checks_once
    source = machine.runtime.built[(False, False)][0]
    bounded = source.split(f"def {fib.py}_b(", 1)[1].split("\ndef ", 1)[0]
    assert "ovf()" not in bounded
    direct = source.split(f"def {fib.py}_d(", 1)[1].split("\ndef ", 1)[0]
    assert "ovf()" in direct  # past the bound the twin checks each sum


@pytest.mark.parametrize("text, checked_once, out", [
    # the sums overflow deep inside: the result, larger still, is found out where it leaves
    ("fun f n = if n < 2 then 4611686018427387000 + n else f (n - 1) + f (n - 2)\n"
     "val _ = print ((Int.toString (f 5) handle Overflow => \"Overflow\") ^ \"\\n\")\n", True, "Overflow"),
    ("fun f n = if n < 2 then 1125899906842624 else f (n - 1) + f (n - 2)\n"
     "val _ = print ((Int.toString (f 20) handle Overflow => \"Overflow\") ^ \"\\n\")\n", True, "Overflow"),
    ("fun f n = if n < 2 then 1125899906842624 else f (n - 1) + f (n - 2)\n"
     "val _ = print ((Int.toString (f 3) handle Overflow => \"Overflow\") ^ \"\\n\")\n", True, "3377699720527872"),
    # a sum that a later subtraction would bring back in range: each is checked where it is made
    ("fun g n = if n < 2 then 4611686018427387903 else (g (n - 1) + g (n - 2)) - 4611686018427387903\n"
     "val _ = print ((Int.toString (g 3) handle Overflow => \"Overflow\") ^ \"\\n\")\n", False, "Overflow"),
    # a result compared inside: checked where it is made
    ("fun h n = if n < 2 then 4611686018427387903 else if h (n - 1) + h (n - 2) > 0 then 1 else 0\n"
     "val _ = print ((Int.toString (h 3) handle Overflow => \"Overflow\") ^ \"\\n\")\n", False, "Overflow"),
])
def test_sums_checked_once_overflow_as_ml_says(text, checked_once, out):
    for counts in (False, True):
        machine, stream = _machine(text, count_reductions=counts)
        machine.run()
        assert stream.getvalue() == out + "\n"
        name = text.split()[1]
        assert _info(machine, name).checks_once == checked_once
