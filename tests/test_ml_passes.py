"""The ML optimizing passes (hpgrem/passes/ml_*.py) and the code shapes they select in
pam/ml/codegen.py: every pass alone and all together print what -O0 prints, on examples and on
random programs (tests/ml_gen.py), and the limits (--timeout, --max-steps) and deep recursion
still hold in the fast shapes."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import time

import pytest
from conftest import ROOT, compile_source, hpgrem
from hypothesis import HealthCheck, given, settings
from ml_gen import programs

from hpgrem import ir

from hpgrem.ir import ml
from pam.errors import Uncaught
from pam.machine import Machine

FIB = "fun fib n = if n < 2 then n else fib (n - 1) + fib (n - 2)\n"
TAK = "fun tak (x, y, z) = if y < x then tak (tak (x - 1, y, z), tak (y - 1, z, x), tak (z - 1, x, y)) else z\n"
LEVELS = ["-O0", "-O1", "-O2"]


# ---- limits hold in direct code (issue #11: fib 38 with --timeout 2 ran its 16 s) -------------

@pytest.mark.parametrize("opt", LEVELS)
def test_timeout_stops_recursion_in_direct_code(tmp_path, opt):
    path = tmp_path / "fib.sml"
    path.write_text(FIB + 'val _ = print (Int.toString (fib 45) ^ "\\n")\n')
    began = time.monotonic()
    r = hpgrem("run", str(path), "--timeout", "1", opt, timeout=60)
    assert time.monotonic() - began < 20  # a generous bound: fib 45 runs for many minutes
    assert r.returncode == 4 and "time limit of 1 s reached (--timeout)" in r.stderr, r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_timeout_stops_direct_code_on_simulated_pes(tmp_path, opt):
    path = tmp_path / "fib.sml"
    path.write_text(FIB + 'val _ = print (Int.toString (fib 45) ^ "\\n")\n')
    began = time.monotonic()
    r = hpgrem("run", str(path), "--pes", "16", "--timeout", "1", opt, timeout=60)
    assert time.monotonic() - began < 20
    assert r.returncode == 4 and "(--timeout)" in r.stderr, r.stderr


@pytest.mark.parametrize("opt", LEVELS)
@pytest.mark.parametrize("program", [FIB + "val _ = fib 45\n",
                                     TAK + "val _ = tak (40, 20, 0)\n",
                                     "fun loop n = if n = 0 then 0 else loop (n - 1)\nval _ = loop 100000000000\n"])
def test_max_steps_stops_recursion_in_direct_code(tmp_path, opt, program):
    path = tmp_path / "p.sml"
    path.write_text(program)
    r = hpgrem("run", str(path), "--max-steps", "2000", opt, timeout=60)
    assert r.returncode == 4 and "step limit reached" in r.stderr, r.stderr


@pytest.mark.parametrize("opt", LEVELS)
def test_a_million_deep_non_tail_recursion_runs(tmp_path, opt):
    path = tmp_path / "deep.sml"
    path.write_text("fun down 0 = 0 | down n = 1 + down (n - 1)\n"
                    "fun sum (0, acc) = acc | sum (n, acc) = sum (n - 1, acc + down 3)\n"
                    'val _ = print (Int.toString (down 1000000) ^ " " ^ Int.toString (sum (10, 0)) ^ "\\n")\n')
    r = hpgrem("run", str(path), opt, timeout=300)
    assert (r.returncode, r.stdout) == (0, "1000000 30\n"), r.stderr


# ---- every pass alone and all together print what -O0 prints -----------------------------------

ML_PASSES = ("ml-flatten", "ml-grain", "ml-inline", "ml-switch", "ml-ranges", "ml-batch-counts")
ALL = ("ml-flatten", "ml-grain", "ml-inline", "simplify", "prune-unreachable", "ml-switch", "ml-ranges",
       "ml-batch-counts")


def outcome(text: str, passes: tuple[str, ...] | None, pes: int = 1, **options) -> tuple[str, str | None]:
    """What a program prints and the exception it ends with, compiled with exactly `passes`
    (None: -O2), run in-process."""
    module = compile_source(text, "t.sml", **({"opt": 2} if passes is None else {"passes": passes}))
    out = io.StringIO()
    try:
        Machine(module, stream=out, pes=pes, topology=None if pes == 1 else "mesh:4x4", **options).run()
    except Uncaught as u:
        return out.getvalue(), u.message
    return out.getvalue(), None


@given(programs(warnings=None))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def test_random_programs_print_the_same_with_each_ml_pass(text):
    base = outcome(text, ())
    for p in ML_PASSES:
        assert outcome(text, (p,)) == base, f"{p}:\n{text}"
    assert outcome(text, ALL) == base, f"all:\n{text}"
    assert outcome(text, None, pes=16) == base, f"-O2 on 16 PEs:\n{text}"


@given(programs(warnings=None, deep=True))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def test_deep_recursion_through_handlers_and_par_tasks_prints_the_same_with_each_ml_pass(text):
    """Recursion past direct code's 200 Python frames, through handlers, effects, exceptions
    caught levels up, a partner and `ForkJoin.par` (tests/ml_gen.py `deep_decl`): what the
    shallow programs above missed (issue 15)."""
    base = outcome(text, ())
    for p in ML_PASSES:
        assert outcome(text, (p,)) == base, f"{p}:\n{text}"
    for passes in (("ml-batch-counts",), ALL, None):
        for pes in (1, 16):
            assert outcome(text, passes, pes=pes) == base, f"{passes or '-O2'} on {pes} PEs:\n{text}"


EXAMPLES = sorted((ROOT / "examples" / "ml").glob("*.sml")) + sorted((ROOT / "benchmarks" / "ml").glob("*.sml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_print_the_same_with_each_ml_pass(path):
    text = path.read_text()
    base = outcome(text, ())
    for p in (*ML_PASSES, ALL):
        assert outcome(text, p if isinstance(p, tuple) else (p,)) == base, p


@pytest.mark.parametrize("path", [p for p in EXAMPLES if p.stem in ("par_fib", "par_tree", "par_mergesort", "msort_par",
                                                               "pfib30")],
                         ids=lambda p: p.name)
def test_parallel_examples_on_sixteen_pes_at_O2(path):
    text = path.read_text()
    assert outcome(text, None, pes=16) == outcome(text, ())


# ---- what each pass does ------------------------------------------------------------------------

def functions(text: str, passes: tuple[str, ...]):
    return compile_source(text, "t.sml", passes=passes)


def test_ml_flatten_passes_tuple_items_and_keeps_a_wrapper():
    m = functions(TAK + "val t = (18, 12, 6)\nval _ = print (Int.toString (tak (18, 12, 6) + tak t))\n",
                  ("ml-flatten",))
    worker = next(f for k, f in m.rules.items() if k.endswith("/flat") and f.name == "tak")
    assert worker.arity == 3
    calls = [x for f in m.rules.values() for x in ir.walk(f.body) if isinstance(x, ml.CallKnown)]
    assert all(not any(isinstance(a, ml.Tuple) for a in c.args) for c in calls if c.function == worker.key)
    wrapper = m.rules[worker.key[: -len("/flat")]]
    assert isinstance(wrapper.body, ml.CallKnown) and wrapper.body.function == worker.key


def test_ml_flatten_keeps_the_evaluation_of_unused_items():
    text = ('fun f (x, _, z) = x + z\n'
            'val _ = print (Int.toString (f (1, (print "a"; 2), (print "b"; 3))) ^ "\\n")\n')
    assert outcome(text, ("ml-flatten",)) == outcome(text, ()) == ("ab4\n", None)


def test_ml_inline_inlines_small_functions_only():
    text = ("fun sq x = x * x\nfun add (a, b) = a + b\n"
            "fun loop (i, acc) = if i = 0 then acc else loop (i - 1, add (acc, sq i))\n"
            'val _ = print (Int.toString (loop (10, 0)) ^ "\\n")\n')
    m = functions(text, ("ml-inline", "prune-unreachable"))
    assert not any(f.name in ("sq", "add") for f in m.rules.values())
    assert any(f.name == "loop" for f in m.rules.values())
    assert outcome(text, ("ml-inline",)) == outcome(text, ()) == ("385\n", None)


def test_ml_ranges_drops_the_checks_a_guard_makes_needless():
    m = functions(FIB + "val _ = fib 10\n" + TAK + "val _ = tak (3, 2, 1)\n", ("ml-ranges",))
    notes = {f.name: m.annotation(k, "ml-ranges.overflow") for k, f in m.rules.items() if f.name in ("fib", "tak")}
    # n - 1, n - 2 with n >= 2; the sum of two results of fib 10 (tests/test_ml_ranges.py): >= 0
    assert notes["fib"][1:] == ("hi0", "", "")
    assert notes["tak"][1:] == ("", "lo", "lo")  # x - 1 with x > y; y - 1 and z - 1 only downwards


@pytest.mark.parametrize("text, expected", [
    ("fun f n = if n > ~4611686018427387904 then n - 1 else 0\nval _ = print (Int.toString (f (~4611686018427387903)))\n",
     ("~4611686018427387904", None)),
    ("fun f n = n - 1\nval _ = print (Int.toString (f (~4611686018427387904)))\n", ("", "uncaught exception Overflow")),
    ("fun f n = if n < 4611686018427387903 then n + 1 else n\nval _ = print (Int.toString (f 4611686018427387902))\n",
     ("4611686018427387903", None)),
    ("fun f n = if n >= 0 then n * 2 else 0\nval _ = print (Int.toString (f 4611686018427387903))\n",
     ("", "uncaught exception Overflow")),
    ("fun f n = ~ n\nval _ = print (Int.toString (f (~4611686018427387904)))\n", ("", "uncaught exception Overflow")),
])
def test_overflow_still_raised_at_the_edges(text, expected):
    assert outcome(text, ("ml-ranges",)) == outcome(text, ()) == expected


def test_a_stale_or_malformed_overflow_note_keeps_every_check():
    from pam.ml.annotations import overflow_checks as _overflow_checks
    m = functions(FIB + "val _ = fib 10\n", ("ml-ranges",))
    key, fn = next((k, f) for k, f in m.rules.items() if f.name == "fib")
    note = m.annotation(key, "ml-ranges.overflow")
    assert len(_overflow_checks(fn, note)) == 3
    assert _overflow_checks(fn, ("0000000000000000",) + note[1:]) == {}
    assert _overflow_checks(fn, note[:1] + ("", "", "x")) == {}
    assert _overflow_checks(fn, "lohi") == {}


def test_ml_grain_runs_small_par_calls_sequentially():
    text = ("fun pfib n = if n < 2 then n else\n"
            "  let val (x, y) = ForkJoin.par (fn () => pfib (n - 1), fn () => pfib (n - 2)) in x + y end\n"
            'val _ = print (Int.toString (pfib 20) ^ "\\n")\n')
    m = functions(text, ("ml-grain",))
    (key, fn), = [(k, f) for k, f in m.rules.items() if f.name == "pfib" and not k.endswith("/seq")]
    (callee, s0), = m.annotation(key, "ml-grain.grain")
    assert callee == key and 5 <= s0 <= 15
    assert any(k.endswith("/seq") for k in m.rules)
    base = outcome(text, ())
    assert base == ("6765\n", None)
    assert outcome(text, ("ml-grain",), pes=16) == base
    before = Machine(compile_source(text, "t.sml", passes=()), stream=io.StringIO(), pes=16).run().stats
    after = Machine(m, stream=io.StringIO(), pes=16).run().stats
    assert after.reductions < before.reductions  # no fork and join below the grain


def test_ml_grain_keeps_the_leftmost_exception():
    text = ("fun p n = if n < 2 then (if n = 0 then raise Fail \"left\" else 1) else\n"
            "  let val (x, y) = ForkJoin.par (fn () => p (n - 1), fn () => p (n - 2)) in x + y end\n"
            'val _ = print (Int.toString (p 14) ^ "\\n")\n')
    assert outcome(text, ("ml-grain",)) == outcome(text, ()) == ("", "uncaught exception Fail: left")


def test_batched_counts_keep_the_reductions_of_code_that_does_not_raise():
    text = FIB + TAK + 'val _ = print (Int.toString (fib 15 + tak (12, 8, 4)) ^ "\\n")\n'
    counts = []
    for passes in ((), ("ml-batch-counts",)):
        counts.append(Machine(compile_source(text, "t.sml", passes=passes), stream=io.StringIO()).run().stats.reductions)
    assert counts[0] == counts[1]


# Issue 21: exceptions everywhere. ML raises (through closures, handlers, a par) and the run
# time's exceptions (Overflow, Div) leave code whose calls are counted per block or one by one;
# either way --stats counts exactly the calls made, with and without batched counts.
RAISING = ("exception No of int\n"
           "fun apply f x = f x\n"
           "fun look k [] = raise No k | look k ((j, v) :: r) = if j = k then v else look k r\n"
           "fun try k = apply (look k) [(1, 10), (2, 20)] handle No j => j\n"
           "fun big n = if n = 0 then 1 else 2 * big (n - 1)\n"
           "fun safe n = (fib 8 + big n) handle Overflow => fib 3\n"
           "fun q n = (fib 5 + 10 div n) handle Div => ~1\n"
           "fun h n = if n = 0 then 0 else 100 div (n - 3) + h (n - 1) + fib 4\n"
           "fun pair n = let val (a, b) = ForkJoin.par (fn () => try n, fn () => safe (60 + n)) in a + b end\n"
           "fun sum 0 acc = acc | sum n acc = sum (n - 1) (acc + try n + safe (30 * n) + q (n mod 3) + pair n + (h (n mod 7) handle Div => 5))\n"
           'val _ = print (Int.toString (sum 40 0) ^ "\\n")\n')


@pytest.mark.parametrize("pes", [1, 16])
def test_raises_keep_reductions_exact_with_and_without_batched_counts(pes):
    text = FIB + RAISING
    counts, outputs = [], []
    for passes in (("ml-ranges",), ("ml-ranges", "ml-batch-counts")):
        out = io.StringIO()
        stats = Machine(compile_source(text, "t.sml", passes=passes), stream=out, pes=pes,
                        topology=None if pes == 1 else "mesh:4x4").run().stats
        counts.append(stats.reductions)
        outputs.append(out.getvalue())
    assert outputs[0] == outputs[1] != ""
    assert counts[0] == counts[1] > 0


def test_closure_calls_that_reach_no_join_run_as_direct_code():
    """ml-kinds: a function that applies closures is direct code unless a closure it may call
    (some function made into a closure) reaches a ForkJoin.par; `raises` follows ML raises."""
    text = ("exception E\n"
            "fun apply f x = f x\n"
            "fun down 0 = 0 | down n = 1 + apply down (n - 1)\n"
            "fun fail n = if n = 0 then raise E else n\n"
            'val _ = print (Int.toString (down 1000 + fail 2) ^ "\\n")\n')
    m = functions(text, ())
    kinds = {f.name: m.annotation(k, "ml-kinds.kind") for k, f in m.rules.items()}
    raises = {f.name: m.annotation(k, "ml-kinds.raises") for k, f in m.rules.items()}
    assert kinds["apply"] == kinds["down"] == "direct"
    assert raises["fail"] and not raises["down"] and not raises["apply"]
    forked = text.replace("fun down 0 = 0 | down n = 1 + apply down (n - 1)",
                          "fun down 0 = 0 | down n = 1 + apply down (n - 1)\n"
                          "fun two n = ForkJoin.par (fn () => n, fn () => n)")
    forked = forked.replace("down 1000 + fail 2", "down 1000 + fail 2 + #1 (apply two 3)")
    m = functions(forked, ())
    kinds = {f.name: m.annotation(k, "ml-kinds.kind") for k, f in m.rules.items()}
    assert kinds["apply"] == kinds["down"] == kinds["two"] == "generator"
    assert outcome(forked, ()) == ("1005\n", None) and outcome(forked, None) == ("1005\n", None)


# Issue 15: a direct call whose block cannot test the countdown at its start (inside a `try`,
# after a call or an effect) picks `f_d` or `f_n` per call; `f_n` existed only for functions
# with a depth-bounded copy, so any other direct recursion past 200 frames ended in NameError.
DEEP_THROUGH_HANDLERS = [
    ("fun loop n = if n = 0 then 0 else 1 + loop (n - 1) handle Fail _ => 0\n"
     'val _ = print (Int.toString (loop 250) ^ "\\n")\n', "250\n"),
    ('fun f n = if n = 0 then raise Fail "bottom" else (print ""; 1 + f (n - 1)) handle Fail _ => n\n'
     'val _ = print (Int.toString (f 5000) ^ "\\n")\n', "5000\n"),
    ("fun even 0 = true | even n = (odd (n - 1) handle Div => false)\n"
     "and odd 0 = false | odd n = (even (n - 1) handle Div => true)\n"
     'val _ = print (Bool.toString (even 1001) ^ " " ^ Bool.toString (odd 777) ^ "\\n")\n', "false true\n"),
    ((ROOT / "examples" / "ml" / "msort_par.sml").read_text(), "1000\n"),
]
EVERY_SHAPE = [(), *((p,) for p in ML_PASSES), ALL, None]  # None: -O2


@pytest.mark.parametrize("pes", [1, 16])
@pytest.mark.parametrize("text, expected", DEEP_THROUGH_HANDLERS, ids=["loop", "raise", "mutual", "msort_par"])
def test_deep_direct_recursion_through_handlers_at_every_level(text, expected, pes):
    for passes in [*EVERY_SHAPE, ("prune-unreachable",)]:  # -O1's pass too
        assert outcome(text, passes, pes=pes) == (expected, None), passes


def test_deep_recursion_under_batched_counts_moves_to_the_heap():
    text = ("fun down 0 = 0 | down n = 1 + down (n - 1)\n"
            'val _ = print (Int.toString (down 300000) ^ "\\n")\n')
    assert outcome(text, ("ml-batch-counts",)) == ("300000\n", None)


MPIEXEC = shutil.which("mpiexec")


@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec is not installed")
@pytest.mark.parametrize("name, opt", [(name, "-O2") for name in ("par_fib", "par_mergesort", "par_tree",
                                                                   "exceptions", "mutual")]
                         + [("msort_par", opt) for opt in LEVELS])
def test_examples_under_mpi(name, opt):
    path = ROOT / "examples" / "ml" / f"{name}.sml"
    r = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "hpgrem.driver.cli", "run", opt, str(path)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    err = path.with_suffix(".err")
    status = int(err.read_text().splitlines()[0].split(":")[1]) if err.exists() else 0
    assert (r.returncode, r.stdout) == (status, path.with_suffix(".out").read_text()), r.stderr


def test_depth_bounded_copy_only_where_the_argument_bounds_the_depth():
    text = ("fun down n = if n <= 0 then 0 else 1 + down (n - 1)\n"
            'val _ = print (Int.toString (down 150) ^ " " ^ Int.toString (down 1000000) ^ "\\n")\n')
    m = functions(text, ("ml-ranges",))
    (key, fn), = [(k, f) for k, f in m.rules.items() if f.name == "down"]
    assert m.annotation(key, "ml-ranges.depth")[1:] == (0, 1)
    for passes in (("ml-ranges",), ("ml-ranges", "ml-batch-counts"), None):
        assert outcome(text, passes) == ("150 1000000\n", None)
    growing = "fun up n = if n <= 0 then 0 else 1 + up (n + 1)\nval _ = up 0\n"
    assert all(m.annotation(k, "ml-ranges.depth") is None for k in functions(growing, ("ml-ranges",)).rules)


def test_ml_switch_decides_known_tests_and_flattens_equality_chains():
    text = ("fun k (0, 0) = 1 | k (_, _) = 2\n"
            "fun g xs = case xs of [] => 0 | _ => (case xs of x :: _ => x | [] => ~1)\n"
            "fun h x = if x = 1 then 10 else if x = 2 then 20 else if x < 0 then (if x < 0 then 1 else 2) else 0\n"
            'val _ = print (Int.toString (k (0, 0) + k (0, 1) + g [5] + g [] + h 2 + h ~3 + h 9) ^ "\\n")\n')
    m = functions(text, ("simplify", "ml-switch"))
    bodies = {f.name: f.body for f in m.rules.values() if f.name in ("k", "g", "h")}
    assert not any(isinstance(x, ml.Let) for x in ir.walk(bodies["k"]))  # no arm number
    assert sum(isinstance(x, ml.Switch) for x in ir.walk(bodies["g"])) == 1  # xs tested once
    h_switch, = [x for x in ir.walk(bodies["h"]) if isinstance(x, ml.Switch)]
    assert [k for k, _ in h_switch.cases] == [1, 2]
    assert sum(isinstance(x, ml.If) for x in ir.walk(bodies["h"])) == 1  # x < 0 tested once
    assert outcome(text, ("simplify", "ml-switch")) == outcome(text, ()) == ("29\n", None)


# ---- .hpg files: the annotations travel, and a hostile one runs nothing --------------------------

@pytest.mark.parametrize("name", ["fib25", "tak", "pfib_fine", "classify", "sumsq"])
def test_O2_hpg_round_trip(tmp_path, name):
    src = ROOT / "benchmarks" / "ml" / f"{name}.sml"
    hpg = tmp_path / f"{name}.hpg"
    assert hpgrem("compile", "-O2", str(src), "-o", str(hpg)).returncode == 0
    a, b = hpgrem("run", str(hpg)), hpgrem("run", "-O0", str(src))
    assert (a.returncode, a.stdout) == (b.returncode, b.stdout) == (0, a.stdout), a.stderr


def test_hostile_ml_annotations_are_ignored(tmp_path):
    import json
    src = ROOT / "benchmarks" / "ml" / "fib25.sml"
    hpg = tmp_path / "fib.hpg"
    assert hpgrem("compile", "-O2", str(src), "-o", str(hpg)).returncode == 0
    doc = json.loads(hpg.read_text())
    marker = tmp_path / "pwned"
    payload = f"__import__('pathlib').Path({str(marker)!r}).write_text('x')"
    for key, notes in doc["annotations"].items():
        if "ml-ranges.overflow" in notes:
            notes["ml-ranges.overflow"] = [notes["ml-ranges.overflow"][0], payload, "", ""]
        if "ml-ranges.depth" in notes:
            notes["ml-ranges.depth"] = [notes["ml-ranges.depth"][0], payload, 2]
        if key == "":
            notes["ml-batch-counts.calls"] = payload
    hpg.write_text(json.dumps(doc))
    r = hpgrem("run", str(hpg))
    assert not marker.exists()
    assert (r.returncode, r.stdout) in ((0, "75025\n"), (2, "")), r.stderr
