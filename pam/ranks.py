"""The run of one MPI rank: how every rank ends together.

Each rank's PE runs under the driver (pam.driver.Rank: the network, then a batch of
reductions, turn after turn). Rank 0 holds the entry task, owns program output and detects
termination (Safra). However a run ends (success, deadlock, a failure or an internal error on
any rank, a limit), rank 0 learns it, tells every rank (HALT; each acknowledges it), and all
ranks gather their reports to rank 0 and leave with the same exit status. Nothing waits forever
on a rank that stopped: once the outcome is known, a rank that does not answer in time (at the
latest shortly after --timeout, or PART_TIMEOUT) is named and the job abandoned (exit with the
outcome's status, without MPI's orderly end, which would wait for it too).
"""

from __future__ import annotations

import signal
import threading
import time
import traceback

from pam.driver import IDLE_SLEEP, Rank, resolve
from pam.errors import (Deadlock, Finished, Halt, HaltReceived, LimitExceeded, MachineStop,
                        ProgramFailure, RankAbandoned, RankExit, Uncaught)
from pam.limits import hard_grace, lift_memory_limit, memory_message
from pam.pe import DEADLOCK_REPORT_LIMIT
from pam.stats import PEStats


def _describe(err: BaseException) -> tuple:
    """A picklable account of how this rank's run ended."""
    if isinstance(err, Uncaught):
        return ("uncaught", err.message)
    if isinstance(err, ProgramFailure):
        return ("failure", err.message, err.goal, err.span, err.pe)
    if isinstance(err, Halt):  # with halt/1's exit status (0 for halt/0)
        return ("halt", err.status)
    if isinstance(err, Finished):
        return ("finished",)
    if isinstance(err, LimitExceeded):
        return ("limit", str(err))
    if isinstance(err, MemoryError):
        lift_memory_limit()  # room to report it
        return ("limit", memory_message())
    return ("internal", f"{type(err).__name__}: {err}", traceback.format_exc())


def run_on_ranks(pe, transport, comm, outputs: list, watchdog=None) -> tuple[float, list[PEStats]]:
    """Run this rank's PE (rank 0's holds the entry task) until the run ends on every rank.
    Rank 0 returns the run's wall time and every rank's statistics, or raises how it ended;
    the other ranks raise RankExit with the status rank 0 chose. `watchdog` (pam.limits) is
    disarmed as soon as this rank knows how the run ended. A rank that does not answer within
    the time left (see `_give_up_at`) is given up on: RankAbandoned."""
    began = time.monotonic()
    outcome, busy = _until_outcome(pe, transport, outputs, watchdog)
    return _end(pe, transport, comm, outcome, busy, began)


def step_on_ranks(pe, transport, comm) -> float:
    """One more run of loaded code on every rank (pam.machine.Machine.run_loaded): each rank's
    PE runs the tasks it was given until rank 0 detects termination, and all ranks go on to
    the next run together. Returns the seconds this rank spent running steps. Every other
    ending (a failure on any rank, a rank that left the job, tasks left suspended) ends the
    job as `run_on_ranks` does: rank 0 raises how it ended, the others RankExit."""
    me = pe.number
    began = time.monotonic()
    outcome, busy = _until_outcome(pe, transport, [], None)
    if outcome == ("done",):
        if me == 0:
            _halt_everyone(transport, outcome, _give_up_at(pe.deadline))
        else:
            transport.acknowledge_halt()
        if not comm.allreduce(len(pe.suspended)):
            return busy
    return _end(pe, transport, comm, outcome, busy, began, halted=outcome == ("done",))


def leave_ranks(transport, me: int, runs: int) -> None:
    """This rank leaves the job after `runs` runs of loaded code: a rank still in a later run
    learns it (rank 0 as a failure notice, the others as rank 0's HALT) and ends the job,
    rather than waiting forever for this rank's part."""
    notice = ("left", me, runs)
    if me == 0:
        transport.halt_all(notice)
    else:
        transport.report_failure(notice)


def _until_outcome(pe, transport, outputs: list, watchdog) -> tuple[tuple, float]:
    """This rank's PE runs until it knows how the run ended: the outcome, and the seconds it
    spent running steps. A rank other than 0 whose run fails reports it and waits for rank 0's
    HALT (RankAbandoned if rank 0 does not answer)."""
    me = pe.number
    rank = Rank(pe, transport)
    busy = 0.0
    try:
        try:
            with HaltWatch(transport, me != 0):
                outcome, busy = rank.run()
                if me == 0 and outcome == ("done",) and outputs:
                    resolve(pe.net, outputs, rank.deliver)
        finally:
            if watchdog is not None:
                watchdog.disarm()
    except HaltReceived as halt:  # rank 0 halted the run while this rank was inside a step
        outcome = halt.notice
    except Exception as err:  # every way this rank's run can end is reported, never swallowed
        outcome = _describe(err)
        if me != 0 and outcome[0] == "limit":  # say where (a memory bound is each rank's)
            outcome = ("limit", f"{outcome[1]} on PE {me}")
        if me != 0:
            transport.report_failure(outcome)
            own = outcome
            # staggered, so that the first rank to give up on rank 0 is usually the only one
            # to say so (mpiexec ends the others when it leaves)
            outcome = _wait_for_halt(transport, _give_up_at(pe.deadline) + ANSWER_SLACK + 0.05 * min(me, 10))
            if outcome is None:
                raise RankAbandoned(_status(own, []), f"hpgrem: error: {_text(own)} (on PE {me}); "
                                    "rank 0 does not answer (stopped or hung): the job is abandoned") from None
    if outcome[0] == "leave":  # rank 0 gave up on the job: leave with its status, quietly
        raise RankAbandoned(outcome[1], "")
    if outcome[0] == "left":  # a rank left the job while this one was still in a run
        _, gone, runs = outcome
        if me == 0:
            _tell_to_leave(transport, outcome)
        raise RankAbandoned(_status(outcome, []), f"hpgrem: error: rank {gone} left the job after {runs} step(s) "
                            f"while rank {me} was in step {runs + 1}: the job is abandoned")
    return outcome, busy


def _halt_everyone(transport, outcome, give_up: float) -> None:
    """Rank 0 tells every rank how the run ended and waits for their acknowledgements; a rank
    that does not answer by `give_up` ends the job (RankAbandoned)."""
    transport.halt_all(outcome)
    missing = _await_acknowledgements(transport, give_up)
    if missing:
        _tell_to_leave(transport, outcome)
        raise _abandon(outcome, f"{_ranks(missing)} {'does' if len(missing) == 1 else 'do'} not answer")


def _end(pe, transport, comm, outcome, busy: float, began: float, halted: bool = False):
    """However the run ended, every rank learns it (rank 0's HALT, acknowledged), the ranks
    part and gather their reports; rank 0 returns or raises, the others raise RankExit."""
    me = pe.number
    give_up = _give_up_at(pe.deadline)
    if me == 0:
        if not halted:
            _halt_everyone(transport, outcome, give_up)
    else:
        if not halted:
            transport.acknowledge_halt()
        # Rank 0 is there: it decides when to give up and reports, and mpiexec then ends this
        # rank. Should it stop answering now, this rank leaves quietly, well after it.
        give_up += PARTED_SLACK
    elapsed = time.monotonic() - began
    if not _part(comm, transport, give_up, me != 0):
        if me != 0:  # rank 0 said leave (or stopped answering itself): quietly
            raise RankAbandoned(_status(outcome, []), "")
        _tell_to_leave(transport, outcome)
        raise _abandon(outcome, "a rank stopped answering while the ranks parted")
    names: dict[int, str] = {}
    local = (pe.suspended_goals(names), len(pe.suspended), _stats(pe, busy))
    gathered = comm.gather(local, root=0)
    status = None
    if me == 0:
        status = _status(outcome, gathered)
    status = comm.bcast(status, root=0)
    if me != 0:
        raise RankExit(status)
    _raise_outcome(outcome, gathered)
    return elapsed, [g[2] for g in gathered]


PART_TIMEOUT = 10.0  # seconds ranks wait for each other once a run has ended (no --timeout)
# Ranks count --timeout from their own start, so their deadlines differ a little: a rank other
# than 0 waits for rank 0's HALT this much longer than rank 0 would wait for it, and once HALT
# has come, PARTED_SLACK longer (rank 0 must be the first to leave: mpiexec's exit status is
# that of rank 0 when it leaves by itself first).
ANSWER_SLACK = 0.5
PARTED_SLACK = 5.0


def _give_up_at(deadline) -> float:
    """When waiting for other ranks stops: PART_TIMEOUT from now, but with --timeout no later
    than the promise of the limit (pam.limits.hard_grace after it)."""
    now = time.monotonic()
    give_up = now + PART_TIMEOUT
    if deadline is not None:
        give_up = min(give_up, max(now, deadline.at) + hard_grace(deadline.seconds))
    return give_up


def _ranks(numbers: list[int]) -> str:
    return ("rank " if len(numbers) == 1 else "ranks ") + ", ".join(map(str, numbers))


def _abandon(outcome, why: str) -> RankAbandoned:
    """Rank 0 gives up on the others: it reports how the run ended, then why it leaves now."""
    cause = None
    try:
        _raise_outcome(outcome, [])
    except MachineStop as e:
        cause = e
    except RuntimeError as e:  # an internal error on a rank
        cause = e
    return RankAbandoned(_status(outcome, []), f"hpgrem: error: {why} (stopped or hung): "
                         "the job is abandoned", cause)


def _text(outcome) -> str:
    kind = outcome[0]
    if kind in ("limit", "uncaught"):
        return outcome[1]
    if kind == "failure":
        return f"{outcome[2] or 'the program'} failed: {outcome[1]}"
    if kind == "internal":
        return f"internal error: {outcome[1]}"
    return "the run ended"


def _wait_for_halt(transport, give_up: float):
    """Rank 0's HALT, or None if it has not come by `give_up`."""
    while True:
        notice = transport.halt_notice()
        if notice is not None:
            return notice
        if time.monotonic() > give_up:
            return None
        transport.poll()  # keep messages moving so that no sender blocks on this rank
        transport.outgoing.clear()
        time.sleep(IDLE_SLEEP)


def _await_acknowledgements(transport, give_up: float) -> list[int]:
    """Rank 0 waits until every rank has acknowledged HALT; returns those that did not by
    `give_up`."""
    waiting = set(range(1, transport.pes))
    while waiting:
        waiting.difference_update(transport.acknowledged())
        if not waiting or time.monotonic() > give_up:
            break
        transport.poll()
        transport.outgoing.clear()
        time.sleep(IDLE_SLEEP)
    return sorted(waiting)


def _tell_to_leave(transport, outcome) -> None:
    """Rank 0 gives up on a rank: the others leave now, as it does, with the same status (the
    exit status mpiexec reports is that of its ranks leaving by themselves, rank 0 first)."""
    transport.halt_all(("leave", _status(outcome, [])))


def _part(comm, transport, give_up: float, listen: bool) -> bool:
    """Stop sending, then keep receiving (and dropping) until every rank has stopped, so that
    no send is left waiting for a receiver that is gone. False if that did not happen by
    `give_up`, or (`listen`: a rank other than 0) rank 0 said leave."""
    transport.outgoing.clear()
    barrier = comm.Ibarrier()
    while True:
        if listen and transport.halt_notice() is not None:
            return False
        transport.poll()
        transport.outgoing.clear()
        transport.local.clear()
        transport.requests = [r for r in transport.requests if not r.Test()]
        if not transport.requests and barrier.Test():
            return True
        if time.monotonic() > give_up:
            return False
        time.sleep(IDLE_SLEEP)


class HaltWatch:
    """On ranks other than 0, while the run goes on: a step can take long (an abandoned ML
    child that loops forever inside one function, a slow step while rank 0 halts the run),
    and the rank would not hear HALT until it ends. So a timer of the CPU time this process
    uses (it fires only while the rank computes) looks for HALT every HALT_LOOK seconds and,
    when there is one, stops the step with HaltReceived. Outside the main thread it does
    nothing."""

    HALT_LOOK = 0.05

    def __init__(self, transport, active: bool):
        self.transport = transport
        self.active = active and hasattr(signal, "setitimer") \
            and threading.current_thread() is threading.main_thread()
        self.previous = None

    def __enter__(self):
        if self.active:
            self.previous = signal.signal(signal.SIGVTALRM, self._look)
            signal.siginterrupt(signal.SIGVTALRM, False)
            signal.setitimer(signal.ITIMER_VIRTUAL, self.HALT_LOOK, self.HALT_LOOK)
        return self

    def _look(self, signum, frame) -> None:
        if not self.active:
            return
        notice = self.transport.halt_notice()
        if notice is not None:
            self.active = False
            raise HaltReceived(notice)

    def __exit__(self, *exc) -> None:
        if self.previous is not None:
            self.active = False
            try:
                signal.setitimer(signal.ITIMER_VIRTUAL, 0)
            finally:
                signal.signal(signal.SIGVTALRM, self.previous)
                self.previous = None


def _stats(pe, busy: float):
    pe.stats.busy_time = busy
    return pe.stats


def _status(outcome, gathered) -> int:
    kind = outcome[0]
    if kind == "done":
        return 3 if sum(g[1] for g in gathered) else 0
    if kind == "halt":
        return outcome[1]
    return {"failure": 1, "uncaught": 1, "finished": 0, "limit": 4, "internal": 70, "left": 1}[kind]


def _raise_outcome(outcome, gathered) -> None:
    kind = outcome[0]
    if kind == "failure":
        _, message, goal, span, pe = outcome
        raise ProgramFailure(message, goal, span, pe)
    if kind == "uncaught":
        raise Uncaught(outcome[1])
    if kind == "finished":
        return
    if kind == "halt":
        raise Halt(outcome[1])
    if kind == "limit":
        raise LimitExceeded(outcome[1])
    if kind == "internal":
        raise RuntimeError(f"internal error on a rank: {outcome[1]}\n{outcome[2]}")
    total = sum(g[1] for g in gathered)
    if total:
        goals = [goal for g in gathered for goal in g[0]][:DEADLOCK_REPORT_LIMIT]
        raise Deadlock(goals, total)


__all__ = ["leave_ranks", "run_on_ranks", "step_on_ranks"]
