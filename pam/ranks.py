"""The run of one MPI rank: how every rank ends together.

Each rank's PE runs under the driver (pam.driver.Rank: the network, then a batch of
reductions, turn after turn). Rank 0 holds the entry task, owns program output and detects
termination (Safra). However a run ends (success, deadlock, a failure or an internal error on
any rank, a limit), rank 0 learns it, tells every rank (HALT), and all ranks gather their
reports to rank 0 and leave with the same exit status; nothing waits forever on a rank that
stopped.
"""

from __future__ import annotations

import time
import traceback

from pam.driver import IDLE_SLEEP, Rank, resolve
from pam.errors import Deadlock, Finished, Halt, LimitExceeded, ProgramFailure, RankExit, Uncaught
from pam.pe import DEADLOCK_REPORT_LIMIT
from pam.stats import PEStats


def _describe(err: BaseException) -> tuple:
    """A picklable account of how this rank's run ended."""
    if isinstance(err, Uncaught):
        return ("uncaught", err.message)
    if isinstance(err, ProgramFailure):
        return ("failure", err.message, err.goal, err.span, err.pe)
    if isinstance(err, Halt):
        return ("halt",)
    if isinstance(err, Finished):
        return ("finished",)
    if isinstance(err, LimitExceeded):
        return ("limit", str(err))
    return ("internal", f"{type(err).__name__}: {err}", traceback.format_exc())


def run_on_ranks(pe, transport, comm, outputs: list) -> tuple[float, list[PEStats]]:
    """Run this rank's PE (rank 0's holds the entry task) until the run ends on every rank.
    Rank 0 returns the run's wall time and every rank's statistics, or raises how it ended;
    the other ranks raise RankExit with the status rank 0 chose."""
    me = pe.number
    rank = Rank(pe, transport)
    began = time.monotonic()
    busy = 0.0
    outcome = None
    try:
        outcome, busy = rank.run()
        if me == 0 and outcome == ("done",):
            resolve(pe.net, outputs, rank.deliver)
    except Exception as err:  # every way this rank's run can end is reported, never swallowed
        outcome = _describe(err)
        if me != 0:
            transport.report_failure(outcome)
            outcome = _wait_for_halt(transport)
    if me == 0:
        transport.halt_all(outcome)
    elapsed = time.monotonic() - began
    _part(comm, transport)
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


def _wait_for_halt(transport):
    while True:
        notice = transport.halt_notice()
        if notice is not None:
            return notice
        transport.poll()  # keep messages moving so that no sender blocks on this rank
        transport.outgoing.clear()
        time.sleep(IDLE_SLEEP)


def _part(comm, transport) -> None:
    """Stop sending, then keep receiving (and dropping) until every rank has stopped, so that
    no send is left waiting for a receiver that is gone."""
    transport.outgoing.clear()
    barrier = comm.Ibarrier()
    while True:
        transport.poll()
        transport.outgoing.clear()
        transport.local.clear()
        transport.requests = [r for r in transport.requests if not r.Test()]
        if not transport.requests and barrier.Test():
            return
        time.sleep(IDLE_SLEEP)


def _stats(pe, busy: float):
    pe.stats.busy_time = busy
    return pe.stats


def _status(outcome, gathered) -> int:
    kind = outcome[0]
    if kind == "done":
        return 3 if sum(g[1] for g in gathered) else 0
    return {"failure": 1, "uncaught": 1, "finished": 0, "halt": 0, "limit": 4, "internal": 70}[kind]


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
        raise Halt()
    if kind == "limit":
        raise LimitExceeded(outcome[1])
    if kind == "internal":
        raise RuntimeError(f"internal error on a rank: {outcome[1]}\n{outcome[2]}")
    total = sum(g[1] for g in gathered)
    if total:
        goals = [goal for g in gathered for goal in g[0]][:DEADLOCK_REPORT_LIMIT]
        raise Deadlock(goals, total)


__all__ = ["run_on_ranks"]
