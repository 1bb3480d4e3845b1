"""The PARLOG optimizing passes (docs/passes.md): each alone and all together give the output
of -O0 (examples, benchmarks, random programs, streams bound one cell at a time), on one PE,
16 simulated PEs and two MPI ranks; the counters they change move as they should; reduction
counts stay those of -O0; annotations a .hpg file brings are validated before use."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import EXAMPLES, ROOT, compile_source, expected_output
from test_properties import RELS
from test_properties import programs as random_programs
from pam.errors import LimitExceeded, MachineStop
from pam.machine import Machine
from pam.parlog.rules import ParlogRuntime, RuleCompiler

PARLOG_PASSES = ("order-nodes", "index-rules", "tail-loop", "dest-passing", "lift", "schedule")
SELECTIONS = [(), *[(p,) for p in PARLOG_PASSES], ("tail-loop", "dest-passing"), ("order-nodes", "schedule"),
              PARLOG_PASSES]
BENCH = ROOT / "benchmarks" / "parlog"
MPIEXEC = shutil.which("mpiexec")


def run(text: str, passes: tuple, file: str = "t.par", counting: bool = False, **options):
    """Output, statistics and the --goal bindings of `text` compiled with exactly `passes`."""
    module = compile_source(text, file, passes=passes)
    out = io.StringIO()
    result = Machine(module, stream=out, runtime=ParlogRuntime(module, counting), **options).run()
    return out.getvalue(), result.stats, result.bindings


def total(stats, name: str) -> int:
    return sum(p.count(name) for p in stats.per_pe)


# -- every example and benchmark --------------------------------------------------------------------
PROGRAMS = sorted(EXAMPLES.glob("*.par"))


# the big board (queens10) takes seconds a run: no passes and all of them are enough for it
EACH_PASS = [pytest.param(path, passes, id=f"{path.stem}-{'+'.join(passes) or 'none'}")
             for path in PROGRAMS for passes in SELECTIONS
             if path.stem != "queens10" or passes in ((), PARLOG_PASSES)]


@pytest.mark.parametrize("path,passes", EACH_PASS)
def test_examples_on_one_pe_with_each_pass(path, passes):
    out, stats, _ = run(path.read_text(), passes, str(path))
    assert out == expected_output(path)


@pytest.mark.parametrize("path", [p for p in PROGRAMS if p.stem != "queens10"], ids=lambda p: p.stem)
def test_examples_on_sixteen_pes_with_all_passes(path):
    out, _, _ = run(path.read_text(), PARLOG_PASSES, str(path), pes=16, topology="mesh:4x4")
    assert out == expected_output(path)


@pytest.mark.parametrize("name", ["nrev30", "primes", "queens", "fib24"])
def test_benchmarks_same_output_and_reductions(name):
    path = BENCH / f"{name}.par"
    plain, s0, _ = run(path.read_text(), (), str(path))
    opt, s2, _ = run(path.read_text(), PARLOG_PASSES, str(path))
    assert plain == opt == expected_output(path)
    assert s0.reductions == s2.reductions  # a loop's iterations are reductions like any other


@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec is not installed")
@pytest.mark.parametrize("path", [p for p in PROGRAMS if p.stem != "queens10"], ids=lambda p: p.stem)
def test_two_mpi_ranks_at_O2(path):
    r = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "hpgrem.driver.cli", "run", "-O2", str(path)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout == expected_output(path)


# -- streams that arrive one cell at a time ------------------------------------------------------------
# The producer binds each cell only when the consumer asks for it (`&`-paced by acknowledgements),
# so every specialised shape meets an unbound input mid-loop and must suspend and resume.
PIECEWISE = """
mode slow(?, ?, ^).
slow(N, Max, []) <- N > Max : true.
slow(N, Max, Out) <- N =< Max : Out = [N|Rest] & N1 is N + 1 & slow(N1, Max, Rest).

mode copy(?, ^).
copy([], []).
copy([X|Xs], [X|Ys]) <- copy(Xs, Ys).

mode evens(?, ^).
evens([], []).
evens([X|Xs], Ys) <- X mod 2 =:= 0 : evens(Xs, Ys).
evens([X|Xs], [X|Ys]) <- X mod 2 =\\= 0 : evens(Xs, Ys).

mode sum(?, ^).
sum([], 0).
sum([X|Xs], S) <- sum(Xs, S1), S is S1 + X.

mode count(?, ?, ^).
count([], N, N).
count([_|Xs], N0, N) <- N1 is N0 + 1, count(Xs, N1, N).

mode firsts(?, ^).
firsts([], []) ;
firsts([X, _|Xs], [X|Ys]) <- firsts(Xs, Ys) ;
firsts([X], [X]).

main <- slow(1, 500, L), copy(L, C), evens(C, E), firsts(E, F), sum(F, S), count(E, 0, N),
        copy(L, [H|_]), write(S/N/H) & nl.
"""


@pytest.mark.parametrize("passes", SELECTIONS, ids=lambda p: "+".join(p) or "none")
def test_stream_bound_piecewise(passes):
    out, stats, _ = run(PIECEWISE, passes)
    assert out == "31125/250/1\n"
    assert total(stats, "suspensions") > 100  # the consumers really waited, cell after cell


def test_stream_bound_piecewise_on_sixteen_pes():
    out, _, _ = run(PIECEWISE, PARLOG_PASSES, pes=16, topology="mesh:4x4")
    assert out == "31125/250/1\n"


ALIAS = """
mode app(?, ?, ^).
app([], Ys, Ys).
app([X|Xs], Ys, [X|Zs]) <- app(Xs, Ys, Zs).
main <- app([1, 2|T], [], T).
"""


@pytest.mark.parametrize("passes", [(), PARLOG_PASSES], ids=["none", "all"])
def test_output_that_is_also_the_input_keeps_plain_semantics(passes):
    """app([1,2|T], [], T) makes T = [1,2,1,2,...] forever at -O0: the list built in place
    must look the same to the call's own input, so both stop at the step limit."""
    with pytest.raises(LimitExceeded):
        run(ALIAS, passes, max_steps=5000)


REPEATED = """
mode p(?, ?).
p(X, X) <- write(same) & nl.
p(_, []) <- write(nil) & nl.
p(_, [_|_]) <- write(cons) & nl.
main <- p([], []) & p(a, []) & p([1], [1]) & p(b, [2]).
"""


@pytest.mark.parametrize("passes", SELECTIONS, ids=lambda p: "+".join(p) or "none")
def test_switch_beside_a_repeated_variable(passes):
    """A clause with a variable at the switched position still tests what it must (here,
    that the two arguments are equal) in each branch of the switch."""
    assert run(REPEATED, passes)[0] == "same\nnil\nsame\ncons\n"


def test_O2_keeps_every_shape_annotation():
    """The passes after them (ML's among them) must not drop what the PARLOG passes record."""
    module = compile_source((BENCH / "primes.par").read_text(), "p.par", opt=2)
    notes = module.annotations["filter/3"]
    assert notes["index-rules.switch"] == 0 and notes["index-rules.share"] and notes["tail-loop.loop"]
    assert notes["dest-passing.dest"] == 2 and notes["order-nodes.arith_tasks"]
    assert compile_source((BENCH / "fib24.par").read_text(), "f.par", opt=2).annotations["fib/2"]["lift.lift"][0] == 0


# -- the counters each pass changes ------------------------------------------------------------------
def test_index_rules_tests_each_guard_once():
    text = (BENCH / "primes.par").read_text().replace("10000", "2000")
    _, before, _ = run(text, (), counting=True)
    _, after, _ = run(text, ("index-rules",), counting=True)
    assert total(after, "guard_tests") < 0.6 * total(before, "guard_tests")
    assert total(after, "clause_tries") < total(before, "clause_tries")


def test_order_nodes_halves_suspensions_of_queens():
    text = (BENCH / "queens.par").read_text()
    _, before, _ = run(text, ())
    _, after, _ = run(text, ("order-nodes",))
    assert total(after, "suspensions") <= total(before, "suspensions") // 2
    assert after.reductions == before.reductions


def test_tail_loop_and_dest_passing_counters():
    text = (BENCH / "nrev30.par").read_text().replace("loop(1000", "loop(20")
    _, loop, _ = run(text, ("tail-loop",), counting=True)
    _, dest, _ = run(text, ("tail-loop", "dest-passing"), counting=True)
    _, plain, _ = run(text, (), counting=True)
    assert total(loop, "looped") > 0.8 * plain.reductions
    assert total(dest, "cells_in_place") > 0
    assert loop.reductions == dest.reductions == plain.reductions


def test_count_option_puts_the_counters_in_stats_json(tmp_path):
    import json
    text = (BENCH / "primes.par").read_text().replace("10000", "500")
    prog = tmp_path / "p.par"
    prog.write_text(text)
    counted = {}
    for level in ("-O0", "-O2"):
        out = tmp_path / f"s{level}.json"
        r = subprocess.run([sys.executable, "-m", "hpgrem.driver.cli", "run", level, "--count", "--stats-json", str(out),
                            str(prog)], capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert r.returncode == 0 and r.stdout == "95\n", r.stderr
        stats = json.loads(out.read_text())
        counted[level] = {k: stats["per_pe"][0][k] for k in ("guard_tests", "clause_tries", "cells_in_place")}
    assert counted["-O2"]["guard_tests"] < counted["-O0"]["guard_tests"]
    assert counted["-O2"]["cells_in_place"] > 0 == counted["-O0"]["cells_in_place"]


def test_limits_see_every_reduction_of_a_loop():
    text = (BENCH / "nrev30.par").read_text()
    for passes in ((), ("tail-loop", "dest-passing")):
        module = compile_source(text, "n.par", passes=passes)
        machine = Machine(module, stream=io.StringIO(), max_steps=12345)
        with pytest.raises(LimitExceeded):
            machine.run()
        assert machine.pes[0].steps == 12345


def test_schedule_runs_independent_goals_in_the_step():
    """queens: `try(Col1, ...)` has no producer in its body; it runs in the committing step, so
    fewer goals go through the queue, with the reductions of -O0; fib (a loop) is unchanged."""
    text = (BENCH / "queens.par").read_text().replace("queens(8", "queens(6")
    _, plain, _ = run(text, (), counting=True)
    _, before, _ = run(text, ("order-nodes",), counting=True)
    _, after, _ = run(text, ("order-nodes", "schedule"), counting=True)
    assert total(after, "enqueues") < 0.75 * total(before, "enqueues")
    assert after.reductions == before.reductions == plain.reductions
    fib = (BENCH / "fib24.par").read_text().replace("24", "12")
    _, b, _ = run(fib, PARLOG_PASSES[:-1], counting=True)
    _, a, _ = run(fib, PARLOG_PASSES, counting=True)
    assert total(a, "enqueues") == total(b, "enqueues") and a.reductions == b.reductions


def test_schedule_marks_only_relations_without_effects():
    text = "mode p(?, ^).\np(X, Y) <- Y is X + 1.\nmode q(?).\nq(X) <- write(X).\nmode r(?).\nr(X) <- q(X).\n" \
           "main <- p(1, Y), r(Y).\n"
    notes = compile_source(text, "s.par", passes=("schedule",)).annotations
    assert notes["p/2"].get("schedule.schedule") is True
    assert not any("schedule.schedule" in notes[k] for k in ("q/1", "r/1", "main/0"))


SUSPENDING = """mode len(?, ^).
len([], 0).
len([_|Xs], N) <- len(Xs, M), N is M + 1.
mode both(?, ?, ^, ^).
both(Xs, Ys, A, B) <- len(Ys, B), len(Xs, A).
mode gen(?, ^).
gen(0, []).
gen(N, [N|Xs]) <- N > 0 : N1 is N - 1, gen(N1, Xs).
mode twice(?, ^).
twice(N, R) <- both(Xs, Ys, A, B), gen(N, Xs), gen(N, Ys), R is A + B.
main <- twice(500, R), both(L, L, X, Y), L = [a,b] & write(R/X/Y) & nl.
"""


@pytest.mark.parametrize("passes", [("schedule",), ("order-nodes", "schedule"), PARLOG_PASSES])
def test_scheduled_goals_that_suspend_are_parked_and_woken(passes):
    out0, s0, _ = run(SUSPENDING, ())
    out, s, _ = run(SUSPENDING, passes, counting=True)
    assert out == out0 == "1000/2/2\n" and s.reductions == s0.reductions
    assert run(SUSPENDING, passes, pes=16, topology="mesh:4x4")[0] == out0


@pytest.mark.parametrize("limit", [1, 2, 3, 7, 200, 201, 5000, 12345])
def test_limits_see_every_reduction_of_scheduled_goals(limit):
    text = (BENCH / "queens.par").read_text()
    module = compile_source(text, "q.par", passes=PARLOG_PASSES)
    machine = Machine(module, stream=io.StringIO(), max_steps=limit)
    with pytest.raises(LimitExceeded):
        machine.run()
    assert machine.pes[0].steps == limit


def test_lift_exports_fewer_bigger_tasks():
    text = (BENCH / "fib24.par").read_text().replace("24", "18")
    _, before, _ = run(text, (), pes=16, topology="mesh:4x4")
    _, after, _ = run(text, ("lift",), pes=16, topology="mesh:4x4")
    assert 0 < total(after, "exported") < total(before, "exported")


# -- a list literal of 20,000 elements ---------------------------------------------------------------
def test_list_literal_of_twenty_thousand_elements():
    ones = ",".join(["1"] * 20000)
    text = (f"mode p(?).\np([{ones}]).\nmode q(^).\nq([{ones}]).\nmode n(?, ?, ^).\n"
            "n([], N, N).\nn([_|Xs], N0, N) <- N1 is N0 + 1, n(Xs, N1, N).\n"
            f"main <- q(L), p(L), n(L, 0, N), p([{ones}]), write(N) & nl.\n")
    for passes in ((), PARLOG_PASSES):
        assert run(text, passes)[0] == "20000\n"


# -- annotations from an untrusted .hpg are never pasted into code --------------------------------------
@pytest.mark.parametrize("note", [{"index-rules.switch": "0) or __import__('os').system('echo pwned') or (0"},
                                  {"index-rules.switch": 7}, {"dest-passing.dest": -1, "tail-loop.loop": True},
                                  {"tail-loop.loop": "yes"}, {"lift.lift": (0, float("nan"))},
                                  {"lift.lift": ("__import__", 2.0)}, {"schedule.schedule": "__import__('os')"},
                                  {"schedule.schedule": True, "flow.fed": ((0, 9, 0),)},
                                  {"schedule.schedule": True, "flow.fed": "__import__('os')"}])
def test_bad_shape_annotations_are_ignored(note):
    module = compile_source((EXAMPLES / "nrev.par").read_text(), "n.par", passes=())
    for key in module.rules:
        module.annotations[key].update(note)
    source = RuleCompiler(module).source
    assert "__import__" not in source and "pwned" not in source and "nan" not in source
    out = io.StringIO()
    Machine(module, stream=out).run()
    assert out.getvalue() == expected_output(EXAMPLES / "nrev.par")


# -- random programs: each pass alone and all together against -O0 -----------------------------------
@st.composite
def programs(draw):
    """Random programs over lists and integers whose output is decided by data alone (one
    write at the end): maps and filters with guards, `;` groups, complementary tests, sums
    with pending arithmetic, accumulators, a fanning recursion; a producer binds the input
    cell by cell."""
    k = draw(st.integers(1, 9))
    m = draw(st.integers(2, 5))
    a, b = draw(st.integers(-3, 3)), draw(st.integers(-5, 5))
    sep = draw(st.sampled_from([".", " ;"]))
    rels = [
        f"mode map(?, ^).\nmap([], []).\nmap([X|Xs], [Y|Ys]) <- X > {k} : Y is X * {a} + {b}, map(Xs, Ys){sep}\n"
        f"map([X|Xs], [X|Ys]) <- X =< {k} : map(Xs, Ys).\n",
        f"mode keep(?, ^).\nkeep([], []).\nkeep([X|Xs], Ys) <- X mod {m} =:= 0 : keep(Xs, Ys).\n"
        f"keep([X|Xs], [X|Ys]) <- X mod {m} =\\= 0 : keep(Xs, Ys).\n",
        "mode sum(?, ^).\nsum([], 0).\nsum([X|Xs], S) <- sum(Xs, S1), S is S1 + X.\n",
        "mode acc(?, ?, ^).\nacc([], A, A).\nacc([X|Xs], A0, A) <- A1 is A0 * 3 + X, acc(Xs, A1, A).\n",
        "mode pairs(?, ^).\npairs([X, Y|Xs], [p(X, Y)|Ps]) <- pairs(Xs, Ps) ;\npairs(_, []).\n",
        "mode fib(?, ^).\nfib(N, N) <- N < 2 : true.\n"
        "fib(N, F) <- N >= 2 : N1 is N - 1, N2 is N - 2, fib(N1, F1), fib(N2, F2), F is F1 + F2.\n",
        "mode gen(?, ^).\ngen([], []).\ngen([X|Xs], [X|Ys]) <- gen(Xs, Ys).\n",
        "mode slow(?, ^).\nslow([], []).\nslow([X|Xs], Out) <- Out = [X|Ys] & slow(Xs, Ys).\n",
    ]
    items = draw(st.lists(st.integers(-20, 20), max_size=25))
    first = draw(st.sampled_from(["gen", "slow"]))
    chain = draw(st.lists(st.sampled_from(["map", "keep"]), max_size=3))
    body = [f"{first}({items}, L0)"]
    for i, name in enumerate(chain):
        body.append(f"{name}(L{i}, L{i + 1})")
    last = f"L{len(chain)}"
    body += [f"sum({last}, S)", f"acc({last}, 0, A)", f"pairs({last}, P)", f"fib({min(len(items), 12)}, F)"]
    goal = ", ".join(body) + ", write(S/A/P/F) & nl"
    return "\n".join(rels) + f"\nmain <- {goal}.\n"


@given(programs(), st.sampled_from(SELECTIONS[1:]))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_programs_agree_with_O0(text, passes):
    assert run(text, passes)[0] == run(text, ())[0]


@given(programs())
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_programs_on_sixteen_pes(text):
    assert run(text, PARLOG_PASSES, pes=16, topology="mesh:4x4")[0] == run(text, ())[0]


# -- the random programs of tests/test_properties.py, run ------------------------------------------
def outcome(text: str, passes: tuple, **options) -> tuple[str, str]:
    """What a run shows: its output and how it ended (the kind of stop, if any)."""
    module = compile_source(text, "r.par", passes=passes)
    out = io.StringIO()
    try:
        Machine(module, stream=out, max_steps=20000, **options).run()
        end = "ok"
    except MachineStop as stop:
        end = type(stop).__name__
    return out.getvalue(), end


@st.composite
def property_programs(draw):
    """A program of test_properties.programs() with a main that calls each of its relations,
    one after another, with drawn inputs and fresh outputs."""
    text = draw(random_programs())
    module = compile_source(text + "main.\n", "r.par", passes=())
    calls = []
    for name in RELS:
        rel = next(r for k, r in module.rules.items() if k.startswith(name + "/"))
        args = [draw(st.sampled_from(["[]", "[1, 2]", "f(3, 1)", "0", "-3", "a", "5"])) if m == "?" else f"O{i}"
                for i, m in enumerate(rel.modes)]
        outs = [a for a, m in zip(args, rel.modes) if m == "^"]
        calls.append(f"{name}({', '.join(args)})" + "".join(f" & write({o}) & nl" for o in outs))
    return text + "main <- " + " & ".join(calls) + ".\n"


@given(property_programs(), st.sampled_from([PARLOG_PASSES, ("index-rules",), ("tail-loop", "dest-passing"),
                                              ("order-nodes",)]))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_property_programs_agree_with_O0(text, passes):
    assert outcome(text, passes) == outcome(text, ())


@given(property_programs())
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_property_programs_on_sixteen_pes(text):
    assert outcome(text, PARLOG_PASSES, pes=16, topology="mesh:4x4") == outcome(text, ())
