"""Scheduling priorities (spec/parlog.md, "`Goal @ Where`"; docs/distribution.md, "Priorities"):
`Goal @ priority(N)` and `Goal @ lower_priority` run the goal on its PE at that level; a PE runs
a task of a lower level only when none of a higher one is ready there, on one PE as on several.
Placements that name neither a PE nor a priority are located compile errors (exit 2), or, known
only at run time, mean the current PE."""

from __future__ import annotations

import io

import pytest

from conftest import compile_source, hpgrem, run_program

# A low-priority writer and a chain of writes at the default level: the low one writes last.
ORDER = """
mode chain(?).
chain(0).
chain(N) <- N > 0 : write(hi(N)), nl & N1 is N - 1, chain(N1).
low <- write(low), nl.
go <- low @ lower_priority, chain(3).
main <- go.
"""
HIGH_FIRST = "hi(3)\nhi(2)\nhi(1)\nlow\n"

# The same two, sent to PE 0 from PE 1: both run on PE 0, where the writes run.
ORDER_PLACED = ORDER.replace("main <- go.", "main <- start @ 1.\nstart <- go @ 0.")

# The chain one level above the default, the writer at the default level.
ORDER_UP = """
mode chain(?).
chain(0).
chain(N) <- N > 0 : write(hi(N)), nl & N1 is N - 1, chain(N1).
low <- write(low), nl.
main <- low, chain(3) @ priority(5).
"""

# Speculative search (as in KLIC): the nodes of a binary tree (N has children 2N and 2N+1, to
# depth 7) are tried for an answer (a number ending in 3); each level is spawned one priority
# below its parent's, so the shallowest answer is found first, and then the nodes still waiting
# are pruned. Depth first (no priorities) it would find 33 (1, 2, 4, 8, 16, 32, 64, 65, 33).
SEARCH = """
mode search(?, ?, ?).
search(_, _, Found) <- data(Found) : true.
search(N, _, Found) <- var(Found), N mod 10 =:= 3 : found(N, Found).
search(N, D, Found) <- var(Found), N mod 10 =\\= 3, D < 7 :
    D1 is D + 1, L is 2 * N, R is L + 1,
    search(L, D1, Found) @ lower_priority, search(R, D1, Found) @ lower_priority.
search(N, D, Found) <- var(Found), N mod 10 =\\= 3, D >= 7 : true.

mode found(?, ?).
found(N, Found) <- var(Found) : Found = N, write(found(N)), nl.
found(_, Found) <- data(Found) : true.

main <- search(1, 0, _).
"""

# A fan-out every level of which is one priority below the one before: stolen tasks carry
# their level to the thief.
FIB = """
mode fib(?, ^).
fib(N, F) <- N < 2 : F = N;
fib(N, F) <- N1 is N - 1, N2 is N - 2,
    fib(N1, F1) @ lower_priority, fib(N2, F2) @ lower_priority, F is F1 + F2.
main <- fib(16, F), write(F), nl.
"""


def machine_after(text: str, pes: int):
    from pam.machine import Machine
    module = compile_source(text, "test.par")
    out = io.StringIO()
    machine = Machine(module, stream=out, pes=pes)
    machine.run()
    return out.getvalue(), machine


def write(tmp_path, text: str):
    path = tmp_path / "prio.par"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("pes", ["1", "4"])
def test_lower_priority_runs(tmp_path, pes):
    r = hpgrem("run", write(tmp_path, "main <- p(1) @ lower_priority.\nmode p(?).\np(X) <- write(X), nl.\n"),
               "--pes", pes)
    assert (r.returncode, r.stdout, r.stderr) == (0, "1\n", "")


@pytest.mark.parametrize("pes", [1, 4])
def test_a_lower_priority_goal_waits_for_the_higher_ones(pes):
    assert run_program(ORDER, pes=pes)[0] == HIGH_FIRST
    assert run_program(ORDER_UP, pes=pes)[0] == HIGH_FIRST
    # without the priority the writer, spawned last, runs first (the queue is a stack)
    assert run_program(ORDER.replace(" @ lower_priority", ""), pes=pes)[0] == "low\n" + HIGH_FIRST[:-4]


@pytest.mark.parametrize("pes", [2, 4])
def test_priorities_hold_on_the_pe_a_placement_names(pes):
    assert run_program(ORDER_PLACED, pes=pes)[0] == HIGH_FIRST


@pytest.mark.parametrize("pes", [1, 4])
def test_speculative_search_finds_the_shallow_answer_first(pes):
    assert run_program(SEARCH, pes=pes)[0] == "found(3)\n"
    assert run_program(SEARCH.replace(" @ lower_priority", ""), pes=pes)[0] == "found(33)\n"


def test_stolen_tasks_keep_their_priority():
    out, machine = machine_after(FIB, 8)
    assert out == "987\n"
    assert all(not pe.ready and not pe.suspended and not pe.levels for pe in machine.pes)
    thieves = [pe for pe in machine.pes[1:] if pe.stats.reductions]
    assert thieves, "no task was stolen"
    # a thief got its tasks' levels (below the default) with them
    assert all(pe.levels is not None and pe.level < 0 for pe in thieves)


def test_a_program_without_priorities_keeps_one_queue():
    out, machine = machine_after(FIB.replace(" @ lower_priority", ""), 8)
    assert out == "987\n"
    assert all(pe.levels is None and pe.level == 0 for pe in machine.pes)


@pytest.mark.parametrize("where", ["priority(3)", "priority(-2)", "priority(0)", "lower_priority", "child(1)",
                                   "child", "north", "left", "parent", "random", "2", "-1", "W"])
@pytest.mark.parametrize("pes", ["1", "4"])
def test_placements_accepted(tmp_path, where, pes):
    bind = "W = priority(2), " if where == "W" else ""
    text = f"main <- {bind}p(1) @ {where}.\nmode p(?).\np(X) <- write(X), nl.\n"
    r = hpgrem("run", write(tmp_path, text), "--pes", pes)
    assert (r.returncode, r.stdout, r.stderr) == (0, "1\n", "")


@pytest.mark.parametrize("where,col,words", [
    ("foo(3)", 16, "'foo/1' is not a placement"),
    ("bogus", 16, "'bogus' is not a placement"),
    ("priority(a)", 25, "priority(N) needs an integer"),
    ("priority(1, 2)", 16, "'priority/2' is not a placement"),
    ("child(x)", 22, "child(I) needs an integer"),
    ("1.5", 16, "a floating-point number is not a placement"),
    ("[1]", 16, "a list is not a placement"),
])
def test_bad_placements_are_located_errors(tmp_path, where, col, words):
    path = write(tmp_path, f"main <- p(1) @ {where}.\nmode p(?).\np(X) <- write(X), nl.\n")
    for pes in ("1", "4"):
        r = hpgrem("run", path, "--pes", pes)
        assert r.returncode == 2, r.stderr
        assert f"prio.par:1:{col}: error: " in r.stderr and words in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and r.stdout == ""


@pytest.mark.parametrize("value", ["foo(3)", "bogus", "priority(a)", "1.5", "[1]", "child(x)"])
def test_a_placement_invalid_at_run_time_means_the_current_pe(tmp_path, value):
    text = f"main <- W = {value}, p(1) @ W.\nmode p(?).\np(X) <- write(X), nl.\n"
    r = hpgrem("run", write(tmp_path, text), "--pes", "4")
    assert (r.returncode, r.stdout, r.stderr) == (0, "1\n", "")


# call/3's `stop` and `suspend` reach a sub-computation's tasks at every priority level: an
# endless goal of lower priority inside it stops with it (else the run never ends).
STOP_LOW = """
mode spin(?).
spin(N) <- N1 is N + 1, spin(N1).
go <- spin(0) @ lower_priority.
mode report(?).
report(S) <- data(S) : write(S), nl.
mode later(?, ^).
later(0, C) <- C = [STOPS].
later(N, C) <- N > 0 : N1 is N - 1, later(N1, C).
main <- call(go, S, C), report(S), later(50, C).
"""


@pytest.mark.parametrize("orders,status", [("stop", "stopped"), ("suspend, continue, stop", "stopped")])
@pytest.mark.parametrize("pes", [1, 4])
def test_call3_orders_reach_every_priority_level(orders, status, pes):
    out, _ = run_program(STOP_LOW.replace("STOPS", orders), pes=pes, max_steps=200_000)
    assert out == f"{status}\n"


@pytest.mark.parametrize("control,why", [("[resume]", "unknown Control element resume"),
                                         ("[suspend|foo]", "the Control stream ends in foo, not []")])
def test_call3_refuses_what_is_not_an_order(tmp_path, control, why):
    prog = tmp_path / "c.par"
    prog.write_text(f"mode wait(?).\nwait(X) <- data(X) : true.\ngo <- wait(_).\n"
                    f"main <- call(go, S, {control}), write(S), nl.\n")
    r = hpgrem("run", str(prog))
    assert r.returncode == 1 and f"{prog}:4:9: error: call/3 failed: {why}" in r.stderr, r.stderr
