"""Deep guards and call/3 across PEs (spec/parlog.md, "Deep guards", `call(Goal, Status,
Control)`; docs/parlog.md): guard runs stolen by other PEs, the first success committing and the
losers abandoned wherever they run; a call/3's goals on other PEs stopped, held, released and
failed from its home. On 16 simulated PEs (every PE left idle, checked) and under `mpiexec -n 2`
(exit 0: no task left suspended on any rank), with the same output as on one PE."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from conftest import ROOT
from pam.errors import ProgramFailure
from test_parlog_deep_guards import HOLD_HELPERS, idle, machine_after

MPIEXEC = shutil.which("mpiexec")

# Five clauses of one search group whose guards cost tens of thousands of reductions each; one
# never ends (a fan-out, so it is worth moving), one succeeds.
GUARDS = """
mode fib(?, ^).
fib(N, F) <- N < 2 : F = N;
fib(N, F) <- N1 is N - 1, N2 is N - 2, fib(N1, F1), fib(N2, F2), F is F1 + F2.

mode spin(?).
spin(N) <- N1 is N + 1, spin(N1), spin(N1).

mode pick(?, ^).
pick(N, zero) <- fib(N, F), F =:= 0 : true.
pick(N, negative) <- N1 is N + 1, fib(N1, F), F < 0 : true.
pick(N, endless) <- spin(N) : true.
pick(N, big) <- N2 is N - 1, fib(N2, F), F > 100 : true.
pick(N, small) <- N2 is N - 2, fib(N2, F), F < 100 : true.

main <- pick(17, R), write(R), nl.
"""

# A call/3 whose goal runs an endless stream between PEs 1 and 2 and an endless fan-out from PE 3
# (spread by stealing), stopped from PE 0 once it has seen 300 elements of the stream.
STOPPED = """
mode nums(?, ^).
nums(N, [N|T]) <- N1 is N + 1, nums(N1, T).
mode drain(?).
drain([_|T]) <- drain(T).
mode burn(?).
burn(0);
burn(N) <- N1 is N - 1, burn(N1), burn(N1).
mode forever(?).
forever(N) <- burn(10) & N1 is N + 1, forever(N1).
mode work(^).
work(L) <- nums(0, L) @ 1, drain(L) @ 2, forever(0) @ 3.
mode stop_after(?, ?, ^).
stop_after(_, 0, [stop]);
stop_after([_|T], N, C) <- N > 0 : N1 is N - 1, stop_after(T, N1, C).
main <- call(work(L), S, C), stop_after(L, 300, C) & write(S), nl.
"""


def counted(machine, name: str) -> list[int]:
    return [pe.stats.counters[name] for pe in machine.pes]


def nothing_left(machine) -> bool:
    """No task anywhere, no guard run sent or received still known, no exported `&`
    membership, no live call/3."""
    return idle(machine) and all(
        not pe.boundary.guards.arrived and not pe.boundary.guards.exported and not (pe.net and pe.net.groups)
        and not pe.boundary.live for pe in machine.pes)


@pytest.mark.parametrize("opt", [1, 2])
def test_guards_run_on_other_pes_and_the_losers_leave_nothing(opt):
    alone, _ = machine_after(GUARDS, pes=1, opt=opt)
    out, machine = machine_after(GUARDS, pes=16, opt=opt)
    assert out == alone == "big\n"
    remote = counted(machine, "guards_remote")
    assert remote[0] == 0 and sum(1 for n in remote if n) >= 2, remote
    assert nothing_left(machine)


def test_a_guard_run_elsewhere_that_would_bind_a_call_variable_waits_for_the_caller():
    """Safety on the thief: the guard's `give(X)` would bind X (a proxy there): the run waits
    and the caller's binding decides, as on one PE."""
    text = """
mode fib(?, ^).
fib(N, F) <- N < 2 : F = N;
fib(N, F) <- N1 is N - 1, N2 is N - 2, fib(N1, F1), fib(N2, F2), F is F1 + F2.
mode give(^).
give(a).
mode takes(?, ^).
takes(X, yes) <- fib(16, _), give(X) : true.
takes(X, never) <- fib(17, F), give(X), F < 0 : true.
mode later(?, ?, ^).
later(V, F, V) <- data(F) : true.
main <- takes(X, R), fib(19, F), later(VALUE, F, X), write(R), nl.
"""
    for value, outcome in (("a", "yes\n"), ("b", None)):
        program = text.replace("VALUE", value)
        if outcome is None:
            with pytest.raises(Exception, match="no clause matches"):
                machine_after(program, pes=16)
            continue
        alone, _ = machine_after(program, pes=1)
        out, machine = machine_after(program, pes=16)
        assert out == alone == outcome
        assert sum(counted(machine, "guards_remote")) >= 1
        assert nothing_left(machine)


@pytest.mark.parametrize("opt", [1, 2])
def test_a_stopped_call_leaves_no_task_on_any_pe(opt):
    """Acceptance: stopped while its goal runs an endless stream on 16 simulated PEs: Status =
    stopped, tasks of it were running on other PEs when it stopped, none is left anywhere."""
    out, machine = machine_after(STOPPED, pes=16, opt=opt)
    assert out == "stopped\n"
    stopped = counted(machine, "stopped_remote")
    assert stopped[0] == 0 and sum(stopped) >= 2, stopped  # the stream's two ends at least
    assert sum(pe.stats.reductions for pe in machine.pes[1:]) > 1000
    assert nothing_left(machine)


def test_the_same_call_is_stopped_on_one_pe():
    """There the endless fan-out keeps the front of the queue busy: the goal that stops it
    still gets its turns (pam.pe.FAIR)."""
    out, machine = machine_after(STOPPED, pes=1)
    assert out == "stopped\n"
    assert nothing_left(machine)


def test_suspend_and_continue_reach_goals_on_other_pes():
    """A goal of the call on PE 1, woken there by a binding made while the call is held, does
    not run until `continue` (the same answer as on one PE)."""
    text = HOLD_HELPERS + """
mode away(?, ^).
away(X, Y) <- echo(X, Y) @ 1.
main <- call(away(X, Y), S, C0), hold_then(C0, X, Y, P), write(P/S/Y), nl.
mode hold_then(^, ^, ?, ^).
hold_then(C0, X, Y, P) <- spin(300) & C0 = [suspend|C] & spin(1000) & X = go & spin(1000) & peek(Y, P) & release(done, C).
"""
    for pes in (1, 16):
        out, machine = machine_after(text, pes=pes)
        assert out == "unbound/succeeded/ran\n"
        assert nothing_left(machine)


def test_a_failure_on_another_pe_fails_the_call_only():
    text = """
mode clash(^).
clash(X) <- X = 1 & X = 2.
mode away(^).
away(X) <- clash(X) @ 1.
main <- call(away(Z), S, _) & write(S - Z), nl.
"""
    for pes in (1, 16):
        out, machine = machine_after(text, pes=pes)
        assert out == "failed-1\n"
        assert nothing_left(machine)


# A call/3 whose goal, sent to PE 1, binds the caller's Z = 2 once the caller has bound Z = 1
# (the caller answers Started with Ack after binding Z): the clash is found at Z's owner, PE 0,
# when PE 1's BIND arrives there.
LATE_CLASH = """
mode late(^, ^, ?).
late(X, Started, Ack) <- Started = yes, wait(Ack, X).
mode wait(?, ^).
wait(ok, X) <- X = 2.
mode away(^, ^, ?).
away(X, Started, Ack) <- late(X, Started, Ack) @ 1.
mode answer(?, ^, ^).
answer(yes, Z, Ack) <- Z = 1 & Ack = ok.
mode go(^, ^, ?, ^).
go(Z, Started, Ack, S) <- call(away(Z, Started, Ack), S, _).
MAIN
"""
HOME_OWNS = "main <- call(away(Z, St, Ack), S, _), answer(St, Z, Ack) & write(S - Z), nl."
# the call/3 runs on PE 2: Z's owner (PE 0) is neither the goal's PE nor the call's
THIRD_OWNS = "main <- go(Z, St, Ack, S) @ 2, answer(St, Z, Ack) & write(S - Z), nl."
WITHOUT_CALL = "main <- away(Z, St, Ack), answer(St, Z, Ack) & write(Z), nl."


@pytest.mark.parametrize("main", [HOME_OWNS, THIRD_OWNS])
def test_a_clash_at_the_owner_of_a_bind_from_a_call_fails_the_call_only(monkeypatch, main):
    """The BIND names the sub-computation that made it: the owner fails that one (Status =
    failed, the program goes on), not the program."""
    from pam.parlog.subcomp import Subcomputations
    clashes = []
    clashed = Subcomputations.clashed

    def record(self, ident):
        clashes.append((self.pe.number, ident))
        return clashed(self, ident)

    monkeypatch.setattr(Subcomputations, "clashed", record)
    program = LATE_CLASH.replace("MAIN", main)
    home = 0 if main is HOME_OWNS else 2
    for pes in (1, 16):
        clashes.clear()
        out, machine = machine_after(program, pes=pes)
        assert out == "failed-1\n"
        assert clashes == ([] if pes == 1 else [(0, (home, 0))])
        assert nothing_left(machine)
    failed_reports = [pe.stats.bytes_by_kind.get("CALL3_FAILED", 0) for pe in machine.pes]
    assert (failed_reports[0] > 0) == (home != 0) and sum(failed_reports[1:]) == 0


def test_a_bind_from_a_call_that_agrees_is_accepted_and_leaves_nothing():
    """Without a clash the owner's FINISH ends the binding's membership: the call succeeds."""
    program = LATE_CLASH.replace("MAIN", THIRD_OWNS).replace("Z = 1 &", "Z = 2 &")
    for pes in (1, 16):
        out, machine = machine_after(program, pes=pes)
        assert out == "succeeded-2\n"
        assert nothing_left(machine)


def test_the_same_clash_without_call3_fails_the_program():
    program = LATE_CLASH.replace("MAIN", WITHOUT_CALL)
    with pytest.raises(ProgramFailure, match="bindings made on two PEs clash"):
        machine_after(program, pes=16)


def test_stopping_a_call_ends_the_calls_nested_in_it():
    """The inner call/3's watcher (Control never bound) goes with the outer's goals; its Status
    stays unbound."""
    text = """
mode nums(?, ^).
nums(N, [N|T]) <- N1 is N + 1, nums(N1, T).
mode drain(?).
drain([_|T]) <- drain(T).
mode inner(^).
inner(S1) <- call((nums(0, L), drain(L)), S1, _).
mode countdown(?, ^).
countdown(0, [stop]);
countdown(N, C) <- N1 is N - 1, countdown(N1, C).
main <- call(inner(S1), S, C), countdown(500, C) & write(S), nl & unbound(S1).
mode unbound(?).
unbound(V) <- var(V) : write(unbound), nl.
"""
    for pes in (1, 16):
        out, machine = machine_after(text, pes=pes)
        assert out == "stopped\nunbound\n"
        assert nothing_left(machine)


def _mpi(tmp_path, text: str) -> tuple[str, list[dict]]:
    path = tmp_path / "prog.par"
    path.write_text(text)
    stats = tmp_path / "stats.json"
    done = subprocess.run([MPIEXEC, "-n", "2", "hpgrem", "run", str(path), "--stats-json", str(stats)],
                          capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert done.returncode == 0, done.stderr  # 3 would be a task left suspended on a rank
    return done.stdout, json.loads(stats.read_text())["per_pe"]


@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec is not installed")
def test_guards_and_a_stopped_call_under_mpi(tmp_path):
    # guards of about a second: rank 1 is up and asking for work while they run
    out, per_pe = _mpi(tmp_path, GUARDS.replace("pick(17, R)", "pick(23, R)"))
    assert out == "big\n"
    assert per_pe[0]["guards_remote"] == 0 and per_pe[1]["guards_remote"] >= 1
    out, per_pe = _mpi(tmp_path, STOPPED)
    assert out == "stopped\n"
    assert per_pe[1]["stopped_remote"] >= 1


@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec is not installed")
def test_a_clash_at_the_owner_under_mpi(tmp_path):
    """Rank 1's BIND (its origin packed with it) clashes on rank 0: the call fails, exit 0;
    without call/3 the run fails (exit 1)."""
    out, per_pe = _mpi(tmp_path, LATE_CLASH.replace("MAIN", HOME_OWNS))
    assert out == "failed-1\n"
    assert per_pe[1]["bytes_by_kind"]["BIND"] > 0
    path = tmp_path / "plain.par"
    path.write_text(LATE_CLASH.replace("MAIN", WITHOUT_CALL))
    done = subprocess.run([MPIEXEC, "-n", "2", "hpgrem", "run", str(path)],
                          capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert done.returncode == 1 and "bindings made on two PEs clash" in done.stderr, done.stderr


@pytest.mark.parametrize("opt", [0, 2])
@pytest.mark.parametrize("name", ["guards", "stopped"])
def test_traced_rewrites_are_the_reductions_on_every_pe(name, opt):
    """Guard runs on thieves, a stop reaching other PEs: the trace's rewrites per PE are what
    --stats counts, and the traced run is the same schedule."""
    from test_trace import rewrites_per_pe, traced_run
    plain, traced, events = traced_run({"guards": GUARDS, "stopped": STOPPED}[name], f"{name}.par", opt, 16)
    per_pe = rewrites_per_pe(events, 16)
    assert per_pe == [p.reductions for p in plain.per_pe] == [p.reductions for p in traced.per_pe]
    assert sum(1 for n in per_pe[1:] if n) >= 2
    assert traced.time == plain.time
