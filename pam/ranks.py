"""The run of one MPI rank: its PE's loop, termination, and how every rank ends together.

Each rank alternates between the network (receive, forward, send batches) and a batch of
reductions. Rank 0 holds the entry goal, owns program output and detects termination (Safra).
However a run ends (success, deadlock, a failure or an internal error on any rank, a limit),
rank 0 learns it, tells every rank (HALT), and all ranks gather their reports to rank 0 and
leave with the same exit status; nothing waits forever on a rank that stopped.
"""

from __future__ import annotations

import time
import traceback

from pam.errors import Deadlock, Finished, Halt, LimitExceeded, MachineStop, ProgramFailure, RankExit, Uncaught
from pam.pe import DEADLOCK_REPORT_LIMIT
from pam.stats import RunStats
from pam.transport.mpi import BATCH, IDLE_SLEEP

BATCH_SECONDS = 0.001  # the wall time between looks at the network that the batch size aims at
from pam.write import write_term


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


def run_on_ranks(machine, outputs):
    """Run `machine` (one PE per rank); returns rank 0's RunResult or raises how it ended.
    Ranks other than 0 raise RankExit with the status rank 0 chose."""
    from pam.machine import RunResult

    comm, transport, pe = machine.comm, machine.transport, machine.pe
    me = pe.number
    if me == 0:
        pe.push(machine.entry_task(outputs))
    began = time.monotonic()
    busy = 0.0
    outcome = None
    try:
        outcome, busy = _loop(machine)
        if me == 0 and outcome == ("done",):
            while pe.net.ask_peeks(outputs):
                while pe.net.peeks:
                    for m in transport.poll():
                        pe.net.receive(m)
                    transport.flush()
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
    machine.output.flush()
    _raise_outcome(outcome, gathered)
    result_names: dict[int, str] = {}
    bindings = [f"{name} = {write_term(v, result_names)}" for name, v in zip(machine.module.entry.outputs, outputs)]
    stats = RunStats(len(gathered), machine.topology.name, "mpi", elapsed, [g[2] for g in gathered])
    return RunResult(bindings, stats)


def _loop(machine) -> tuple[tuple, float]:
    transport, pe = machine.transport, machine.pe
    net, me = pe.net, pe.number
    busy = 0.0
    batch = 64  # grows to BATCH while steps are cheap
    while True:
        notice = transport.failure_notice() if me == 0 else transport.halt_notice()
        if notice is not None:
            return notice, busy
        for m in transport.poll():
            net.receive(m)
        transport.flush()  # answers (work for a thief, values) leave before the next batch
        if pe.ready:
            began = time.perf_counter()
            pe.run(batch)
            took = time.perf_counter() - began
            busy += took
            # look at the network about every millisecond, whatever a step costs (an ML step
            # is up to a hundred calls, a PARLOG step one reduction)
            if took > BATCH_SECONDS * 2:
                batch = max(8, batch // 2)
            elif took < BATCH_SECONDS / 2:
                batch = min(BATCH, batch * 2)
        else:
            net.idle()
            action, arg = net.safra.step()
            if action == "send":
                net.send("TOKEN", arg[0], arg[1])
            elif action == "terminated":
                transport.flush()
                return ("done",), busy
            elif not transport.outgoing:
                time.sleep(IDLE_SLEEP)
        transport.flush()


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


__all__ = ["run_on_ranks", "MachineStop"]
