"""Deep guards and call/3 (spec/parlog.md, "Deep guards" and `call(Goal, Status, Control)`),
against expectations derived from the spec: on 1 PE, 16 simulated PEs, under `mpiexec -n 2`,
at -O2 and traced; what an abandoned guard or a stopped sub-computation leaves (nothing); and the
compile-time check of a guard that can only succeed by binding a call variable."""

from __future__ import annotations

import io
import shutil
import subprocess

import pytest

from conftest import EXAMPLES, compile_source, expected_output, hpgrem, run_program
from hpgrem.diagnostics import CompileError

MPIEXEC = shutil.which("mpiexec")
PROGRAMS = ["deep_guards", "metacall"]


def machine_after(text: str, pes: int = 1, opt: int = 1):
    """(stdout, the machine after its run)."""
    from pam.machine import Machine
    module = compile_source(text, "test.par", opt=opt)
    out = io.StringIO()
    machine = Machine(module, stream=out, pes=pes)
    machine.run()
    return out.getvalue(), machine


def idle(machine) -> bool:
    """No task ready or suspended on any PE."""
    return all(not pe.ready and not pe.suspended for pe in machine.pes)


@pytest.mark.parametrize("pes,opt", [(1, 1), (16, 1), (1, 2), (16, 2), (1, 0)])
@pytest.mark.parametrize("name", PROGRAMS)
def test_examples(name, pes, opt):
    path = EXAMPLES / f"{name}.par"
    out, machine = machine_after(path.read_text(), pes=pes, opt=opt)
    assert out == expected_output(path)
    assert idle(machine)


@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec is not installed")
@pytest.mark.parametrize("name", PROGRAMS)
def test_examples_under_mpi(name):
    path = EXAMPLES / f"{name}.par"
    done = subprocess.run([MPIEXEC, "-n", "2", "hpgrem", "run", str(path)], capture_output=True,
                                        text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected_output(path)


GROUPS = """
mode member(?, ?).
member(X, [X|_]);
member(X, [_|T]) <- member(X, T).

mode fails(?).
fails(X) <- X > 10 : true.

mode pick(?, ^).
pick(X, first) <- fails(X) : true.
pick(X, second) <- member(X, [1, 2]) : true;
pick(_, third).
"""


@pytest.mark.parametrize("goal,answer", [("pick(2, R)", "R = second"), ("pick(20, R)", "R = first"),
                                         ("pick(5, R)", "R = third")])
def test_guard_failure_rules_out_its_clause_only(goal, answer):
    _, bindings = run_program(GROUPS, goal=goal)
    assert bindings == [answer]


def test_a_guard_that_would_bind_a_call_variable_waits_for_the_caller():
    text = """
mode give(^).
give(a).
mode takes(?, ^).
takes(X, yes) <- give(X) : true.
"""
    # the caller binds X to `a` later: the guard then succeeds (it tests, binding nothing)
    _, bindings = run_program(text, goal="takes(X, R), X = a")
    assert bindings == ["X = a", "R = yes"]
    # bound to something else: the guard fails and so does the call
    with pytest.raises(Exception, match="no clause matches"):
        run_program(text, goal="takes(X, R), X = b")


def test_a_guard_left_waiting_is_a_deadlock_naming_the_call():
    text = "mode give(^).\ngive(a).\nmode takes(?, ^).\ntakes(X, yes) <- give(X) : true.\nmain <- takes(_, _).\n"
    from pam.errors import Deadlock
    with pytest.raises(Deadlock) as caught:
        machine_after(text)
    assert any("takes(" in goal[0] for goal in caught.value.goals)


def test_abandoned_guards_leave_nothing_behind():
    """The losers of a race (an endless guard, a guard suspended on its own variable) leave no
    task and no suspension on any PE, and write nothing."""
    text = """
mode forever(?).
forever(X) <- forever(X).
mode stuck(?).
stuck(X) <- Y = Z, data(Y), X = Z.
mode race(?, ^).
race(X, slow) <- forever(X) : true.
race(X, stuck) <- stuck(X) : true.
race(X, fast) <- X = go : true.
main <- race(go, R), write(R), nl.
"""
    for pes in (1, 16):
        out, machine = machine_after(text, pes=pes)
        assert out == "fast\n"
        assert idle(machine)


def test_guards_of_a_group_run_concurrently_in_time_slices():
    """An endless guard in front of the clause that commits: it runs in time slices beside the
    other guard, and is abandoned when that one commits."""
    text = """
mode forever(?).
forever(X) <- forever(X).
mode count(?, ?).
count(0, done);
count(N, R) <- N1 is N - 1, count(N1, R).
mode race(?, ^).
race(X, slow) <- forever(X) : true.
race(X, counted) <- count(X, done) : true.
main <- race(5000, R), write(R), nl.
"""
    out, machine = machine_after(text)
    assert out == "counted\n"
    assert machine.pe.stats.reductions > 5000


def test_bad_deep_guard_is_a_located_compile_error(tmp_path):
    path = tmp_path / "bad.par"
    path.write_text("mode give(^).\ngive(a).\n\nmode p(?, ^).\np(X, Y) <- var(X), give(X) : Y = 1.\n")
    done = hpgrem("run", str(path))
    assert done.returncode == 2
    assert f"{path}:5:20: error: this guard can only succeed by binding X" in done.stderr


@pytest.mark.parametrize("guard", ["var(X), X = f(_)", "var(X), X is 1 + 2"])
def test_var_then_bind_in_a_deep_guard_is_refused(guard):
    text = f"mode q(?).\nq(_).\nmode p(?, ^).\np(X, Y) <- q(X), {guard} : Y = 1.\n"
    with pytest.raises(CompileError, match="can only succeed by binding X"):
        compile_source(text, "t.par")


@pytest.mark.parametrize("goal", ["write(X)", "nl", "halt(1)", "read_stream(S)"])
def test_effects_in_a_guard_are_refused_with_one_error(goal):
    # one error, at the goal: the relation still exists, so its mode and calls raise no others
    text = f"mode p(?).\np(X) <- {goal} : true.\nmain <- p(1).\n"
    with pytest.raises(CompileError, match="cannot appear in a guard") as e:
        compile_source(text, "t.par")
    assert [(d.span.line, d.span.col) for d in e.value.diagnostics] == [(2, 9)]


def test_a_deep_guard_is_given_only_the_variables_it_uses(monkeypatch):
    # a head argument the guard never reads (a long list here) stays out of the guard's run, so
    # its safety walk does not visit it on every try
    from pam.parlog import clause_code
    made, real = [], clause_code.GuardSpec

    def spy(*args):
        made.append(real(*args))
        return made[-1]

    monkeypatch.setattr(clause_code, "GuardSpec", spy)
    text = ("mode small(?).\nsmall(N) <- N < 10 : true.\n"
            "mode p(?, ?, ^).\np(N, _Big, R) <- small(N) : R = yes.\np(N, _, R) <- N >= 10 : R = no.\n"
            "mode upto(?, ^).\nupto(0, []).\nupto(N, [N|T]) <- N > 0 : M is N - 1, upto(M, T).\n"
            "main <- upto(3000, L), p(3, L, A), p(30, L, B), write(A - B), nl.\n")
    out, _ = machine_after(text)
    assert out == "yes-no\n"
    assert [len(spec.known) for spec in made] == [1]  # N only, not _Big


def test_deep_guard_traced():
    from pam.machine import Machine
    from pam.trace import Trace
    module = compile_source((EXAMPLES / "deep_guards.par").read_text(), "deep_guards.par")
    out = io.StringIO()
    trace = Trace({"program": "deep_guards.par", "language": "parlog", "pes": 1, "opt": 1})
    Machine(module, stream=out, pes=1, trace=trace).run()
    assert out.getvalue() == expected_output(EXAMPLES / "deep_guards.par")
    outcomes = [e["redex"] for e in trace.events if e.get("rule") == "guard"]
    assert any(r.startswith("guard succeeded: classify(2,") for r in outcomes)
    assert any(r.startswith("guard failed: classify(5,") for r in outcomes)


STREAM = """
mode nums(?, ^).
nums(N, [N|T]) <- N1 is N + 1, nums(N1, T).
mode drain(?).
drain([_|T]) <- drain(T).
mode countdown(?, ^).
countdown(0, [stop]);
countdown(N, C) <- N1 is N - 1, countdown(N1, C).
main <- call((nums(0, L), drain(L)), S, C), countdown(2000, C) & write(S), nl.
"""


@pytest.mark.parametrize("opt", [1, 2])
def test_stopping_an_endless_stream_on_16_pes_leaves_every_pe_idle(opt):
    """Acceptance: call/3 stopped while its goal runs an infinite stream, on 16 simulated PEs,
    ends with Status = stopped and no task left on any PE."""
    out, machine = machine_after(STREAM, pes=16, opt=opt)
    assert out == "stopped\n"
    assert [len(pe.ready) + len(pe.suspended) for pe in machine.pes] == [0] * 16


def test_call3_failure_is_local_and_keeps_bindings():
    _, bindings = run_program("mode p(^, ^).\np(X, Y) <- X = 1, Y = 2 & X = 3.\n", goal="call(p(A, B), S, _)")
    assert bindings == ["A = 1", "B = 2", "S = failed"]


def test_call3_on_16_pes_and_nested():
    text = """
mode fib(?, ^).
fib(N, F) <- N < 2 : F = N;
fib(N, F) <- N1 is N - 1, N2 is N - 2, fib(N1, F1), fib(N2, F2), F is F1 + F2.
main <- call((fib(15, F), call(fail_here, S1, _)), S, _) & write(S/S1/F), nl.
mode fail_here.
fail_here <- 1 = 2.
"""
    for pes in (1, 16):
        out, machine = machine_after(text, pes=pes)
        assert out == "succeeded/failed/610\n"
        assert idle(machine)


def test_call3_suspend_holds_its_goals_until_continue():
    text = """
mode release(^).
release(C) <- C = [continue].
main <- call(X = held, S, [suspend|C]), (probe(X, P) & release(C)), write(P/S/X), nl.
mode probe(?, ^).
probe(X, unbound) <- var(X) : true;
probe(_, bound).
"""
    out, machine = machine_after(text)
    assert out == "unbound/succeeded/held\n"
    assert idle(machine)


# A held call/3's helpers: echo binds Y once X is go; release continues the call; spin waits;
# peek says whether Y is bound yet (tests/test_parlog_distributed.py uses them too).
HOLD_HELPERS = """
mode echo(?, ^).
echo(go, Y) <- Y = ran.
mode release(?, ^).
release(done, C) <- C = [continue].
mode spin(?).
spin(0);
spin(N) <- N > 0 : N1 is N - 1, spin(N1).
mode peek(?, ^).
peek(Y, unbound) <- var(Y) : true;
peek(_, bound).
"""


def test_call3_suspend_holds_a_goal_woken_meanwhile():
    """A goal of a held sub-computation that a binding from outside wakes does not run until
    `continue`."""
    text = HOLD_HELPERS + """
main <- call(echo(X, Y), S, C0), hold_then(C0, X, Y, P), write(P/S/Y), nl.
mode hold_then(^, ^, ?, ^).
hold_then(C0, X, Y, P) <- C0 = [suspend|C] & spin(1000) & X = go & spin(1000) & peek(Y, P) & release(done, C).
"""
    for pes in (1, 16):
        out, machine = machine_after(text, pes=pes)
        assert out == "unbound/succeeded/ran\n"
        assert idle(machine)
