"""The ML run time on PAM/TGR: deep recursion without Python's stack, fork/join semantics
(leftmost exception, effects in program order), work stealing across simulated PEs, and the
compiled module in the IR tools."""

from __future__ import annotations

import io

import pytest

from conftest import compile_source, hpgrem
from pam.errors import Uncaught
from pam.machine import Machine


def run(text: str, **options) -> tuple[str, str | None, object]:
    module = compile_source(text, "t.sml")
    out = io.StringIO()
    try:
        result = Machine(module, stream=out, **options).run()
    except Uncaught as u:
        return out.getvalue(), u.message, None
    return out.getvalue(), None, result


def test_non_tail_recursion_over_a_million_element_list():
    text = """
    fun upto (i, n) = if i > n then [] else i :: upto (i + 1, n)
    fun sum [] = 0 | sum (x :: r) = x + sum r
    val xs = upto (1, 1000000)
    val _ = print (Int.toString (sum xs) ^ " " ^ Int.toString (length (map (fn x => x) xs)) ^ "\\n")
    val _ = print (Bool.toString (xs = rev (rev xs)) ^ "\\n")
    """
    out, uncaught, _ = run(text)
    assert (out, uncaught) == ("500000500000 1000000\ntrue\n", None)


def test_an_exception_unwinds_a_deep_stack_to_its_handler():
    text = """
    fun down 0 = raise Fail "bottom" | down n = 1 + down (n - 1)
    val _ = print ((Int.toString (down 200000)) handle Fail m => m ^ "\\n")
    """
    assert run(text)[:2] == ("bottom\n", None)


@pytest.mark.parametrize("pes", [1, 16])
def test_par_raises_the_leftmost_exception(pes):
    text = """
    fun spin 0 = 0 | spin n = spin (n - 1)
    val r = (ForkJoin.par (fn () => (spin 20000; 1 div 0), fn () => raise Fail "right"); "none")
            handle Div => "Div" | Fail m => m
    val _ = print (r ^ "\\n")
    val _ = ForkJoin.par (fn () => 1, fn () => raise Fail "x")
    """
    out, uncaught, _ = run(text, pes=pes)
    assert out == "Div\n" and uncaught == "uncaught exception Fail: x"


@pytest.mark.parametrize("pes", [1, 16])
def test_effects_in_par_branches_keep_program_order(pes):
    text = """
    fun work 0 = 0 | work n = 1 + work (n - 1)
    fun show s = print (s ^ "\\n")
    val c = ref 0
    val (a, b) = ForkJoin.par (fn () => (show "left"; c := !c + 1; work 5000),
                               fn () => (show "right"; c := !c * 10; work 10))
    val _ = show (Int.toString (a + b) ^ " " ^ Int.toString (!c))
    """
    assert run(text, pes=pes)[:2] == ("left\nright\n5010 10\n", None)


def test_pure_forked_thunks_are_stolen_and_speed_up_virtual_time():
    text = """
    fun fib n = if n < 2 then n else fib (n - 1) + fib (n - 2)
    fun pfib n = if n < 10 then fib n
      else let val (x, y) = ForkJoin.par (fn () => pfib (n - 1), fn () => pfib (n - 2)) in x + y end
    val _ = print (Int.toString (pfib 22) ^ "\\n")
    """
    out1, _, one = run(text)
    out16, _, many = run(text, pes=16, topology="mesh:4x4")
    assert out1 == out16 == "17711\n"
    assert sum(pe.steals for pe in many.stats.per_pe) > 0
    assert one.stats.time / many.stats.time > 2


def test_integer_overflow_and_division_by_zero():
    assert run("val _ = print (Int.toString (4611686018427387903 + 1))")[1] == "uncaught exception Overflow"
    assert run("val _ = ~4611686018427387903 - 2")[1] == "uncaught exception Overflow"
    assert run("val _ = 7 mod 0")[1] == "uncaught exception Div"
    assert run("val x = ~4611686018427387903 - 1 val _ = print (Int.toString x)")[0] == "~4611686018427387904"


def test_curried_functions_partially_applied_and_as_values():
    text = """
    fun add3 a b c = a + b + c
    val f = add3 1
    val g = f 2
    val h = List.map (add3 10 20) [1, 2]
    val k = foldl (op +) 0 [1, 2, 3]
    val _ = print (Int.toString (g 3) ^ " " ^ String.concatWith "," (map Int.toString h) ^ " " ^ Int.toString k ^ "\\n")
    val p = String.isPrefix "ab"
    val _ = print (Bool.toString (p "abc") ^ "\\n")
    """
    assert run(text)[:2] == ("6 31,32 6\ntrue\n", None)


def test_exceptions_are_generative():
    text = """
    fun mk () = let exception E in (fn () => (raise E; ()), fn (f : unit -> unit) => (f (); "no") handle E => "caught") end
    val (r1, h1) = mk ();
    val (r2, h2) = mk ();
    val _ = print (h1 r1 ^ " " ^ ((h1 r2) handle _ => "escaped") ^ "\\n")
    """
    assert run(text)[:2] == ("caught escaped\n", None)


def test_compiled_ml_round_trips_through_hpg(tmp_path):
    src = tmp_path / "p.sml"
    src.write_text("datatype t = A | B of int\nfun f A = 0 | f (B n) = n\n"
                   "val _ = print (Int.toString (f (B 41) + 1) ^ \"\\n\")\n")
    hpg = tmp_path / "p.hpg"
    assert hpgrem("compile", str(src), "-o", str(hpg)).returncode == 0
    r = hpgrem("run", str(hpg))
    assert (r.returncode, r.stdout) == (0, "42\n")
    ir_text = hpgrem("ir", str(src), "-O1").stdout
    assert "function f@" in ir_text and "switch" in ir_text


def test_a_type_error_in_a_later_chunk_runs_the_earlier_ones(tmp_path):
    src = tmp_path / "p.sml"
    src.write_text('val _ = print "one\\n";\nval x : int = "two";\n')
    r = hpgrem("run", str(src))
    assert r.returncode == 2 and r.stdout == "one\n"
    assert "p.sml:2:" in r.stderr and "expected int, found string" in r.stderr


def test_a_long_list_literal_compiles_runs_and_prints_as_ir(tmp_path):
    src = tmp_path / "long.sml"
    src.write_text("val xs = [" + ", ".join(map(str, range(900))) + "]\n"
                   "val _ = print (Int.toString (foldl (op +) 0 xs) ^ \"\\n\")\n")
    assert hpgrem("run", str(src)).stdout == f"{sum(range(900))}\n"
    assert hpgrem("ir", str(src)).returncode == 0
    hpg = tmp_path / "long.hpg"
    assert hpgrem("compile", str(src), "-o", str(hpg)).returncode == 0
    assert hpgrem("run", str(hpg)).stdout == f"{sum(range(900))}\n"


@pytest.mark.parametrize("program", [
    "fun loop n = loop (n + 1)\nval _ = loop 0\n",                 # a plain function's loop
    "val r = ref 0\nval _ = while true do r := !r + 1\n",          # an ML while
    "fun f x = 1 + f x\nval _ = f 0\n",                            # recursion without end
], ids=["tail-loop", "while", "deep"])
def test_timeout_stops_a_loop_inside_one_function(tmp_path, program):
    src = tmp_path / "loop.sml"
    src.write_text(program)
    r = hpgrem("run", str(src), "--timeout", "0.5")
    assert r.returncode == 4 and "--timeout" in r.stderr


def test_prune_unreachable_drops_unused_prelude_functions(tmp_path):
    src = tmp_path / "p.sml"
    src.write_text('val _ = print (Int.toString (length (map (fn x => x) [1, 2])) ^ "\\n")\n')
    all_functions = hpgrem("ir", str(src), "-O0").stdout
    pruned = hpgrem("ir", str(src), "-O1").stdout  # prune-unreachable alone (-O2 also inlines map)
    assert "function basis:partition" in all_functions and "function basis:partition" not in pruned
    assert "function basis:map" in pruned
    assert hpgrem("run", str(src), "-O0").stdout == hpgrem("run", str(src)).stdout == "2\n"


def test_record_fields_are_evaluated_in_the_order_written():
    text = """
    val r = #b {b = (1 before print "b\\n"), a = ([0] before print "a\\n")}
    val {y, x} = {y = (print "y\\n"; 1), x = (print "x\\n"; 2)}
    """
    assert run(text)[:2] == ("b\na\ny\nx\n", None)


def test_a_left_exception_wins_over_a_right_branch_that_never_ends():
    text = """
    fun loop n = if n < 0 then 0 else loop (n + 1)
    fun work 0 = 0 | work n = 1 + work (n - 1)
    val r = (ForkJoin.par (fn () => (work 20000; raise Fail "left"), fn () => loop 0); "no")
            handle Fail m => m
    val _ = print (r ^ "\\n")
    """
    assert run(text)[:2] == ("left\n", None)
