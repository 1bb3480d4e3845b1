"""Driving PEs: the turn every driver repeats, and the drivers of one PE, of simulated PEs and
of the PE of an MPI rank.

A *turn* of a PE (`turn`): poll its hooks, then run a batch of steps if a task is ready;
otherwise the PE is idle: it asks a neighbour for work and plays its part in Safra's
termination detection. Before a turn the driver delivers the PE's messages: the simulation
makes each arrival an event of its own, at its virtual time; an MPI rank polls its transport.

Hooks (`PE.hooks`) are how other event sources join the loop, e.g. a tensor back end's
collectives, which complete outside the PE's tasks. A runtime appends a function to the list
at load time; every turn calls it first. It may bind variables (so waking tasks) and returns
True while it still waits for an outside event: the PE is then not passive, so it passes no
termination token, and a simulated PE looks again after a process switch.
"""

from __future__ import annotations

import time

from pam.transport.sim import Packet

RAN, IDLE, WAITING, DONE = "ran", "idle", "waiting", "done"  # how a turn ended
MPI_BATCH = 1024  # the most steps an MPI rank runs between looks at the network
BATCH_SECONDS = 0.001  # the wall time between looks at the network that its batch size aims at
IDLE_SLEEP = 0.0002  # an idle rank yields its core (ranks may outnumber cores)
LIMIT_CHECK_TURNS = 256  # simulated turns between checks of --max-steps and --timeout


def poll(hooks: list) -> bool:
    """Call every hook; True when one of them still waits for an outside event."""
    pending = False
    for hook in hooks:
        if hook():
            pending = True
    return pending


def turn(pe, batch: int) -> str:
    """One turn of a PE with a Net: RAN, IDLE, WAITING (a hook waits) or DONE (terminated)."""
    pending = poll(pe.hooks)
    if pe.ready:
        pe.run(batch)
        return RAN
    net = pe.net
    net.idle()
    if pending:
        return WAITING
    action, arg = net.safra.step()
    if action == "send":
        net.send("TOKEN", arg[0], arg[1])
    elif action == "terminated":
        return DONE
    return IDLE


def run_alone(pe) -> None:
    """One PE, no network: reduce until no task is ready and no hook waits."""
    pe.run()
    while poll(pe.hooks) or pe.ready:
        pe.run()


def resolve(net, outputs: list, deliver) -> None:
    """Fetch the current values of remote variables in the `--goal` bindings (PEEK) after
    termination; `deliver()` moves messages on and is False when none can come any more."""
    while net.ask_peeks(outputs):
        while net.peeks:
            if not deliver():
                return


class Simulated:
    """PEs in one process under a `Simulation` (pam/transport/sim.py), in virtual time."""

    def __init__(self, pes: list, sim, batch: int):
        self.pes = pes
        self.sim = sim
        self.batch = batch  # steps a PE runs between looks at its messages
        sim.stats = [pe.stats for pe in pes]

    def run(self, check_limits) -> float:
        """Every PE to global termination; returns the virtual time it took. `check_limits()`
        is called every LIMIT_CHECK_TURNS turns."""
        sim, pes, costs = self.sim, self.pes, self.sim.costs
        for n in range(len(pes)):
            sim.wake_pe(n, 0.0)
        turns = 0
        while True:
            event = sim.next_event()
            if event is None:
                raise AssertionError("simulation ran out of events before termination")
            t, kind, n, message = event
            pe = pes[n]
            if kind == 1:  # a message arrives: the PE switches to handling it
                if type(message) is Packet:  # one switch, then each message of the packet
                    sim.advance(n, t, costs.message_handling * len(message.messages), switch=True)
                    for m in message.messages:
                        pe.net.receive(m)
                else:
                    sim.advance(n, t, costs.message_handling, switch=True)
                    pe.net.receive(message)
                sim.flush(n)
                sim.wake_pe(n, sim.clock[n])
                continue
            sim.clock[n] = max(sim.clock[n], t)
            before = pe.instructions
            state = turn(pe, self.batch)
            sim.advance(n, sim.clock[n], pe.instructions - before)
            sim.flush(n)
            if state is RAN:
                sim.wake_pe(n, sim.clock[n])
            elif state is DONE:
                return max(sim.clock)
            elif state is WAITING:
                sim.wake_pe(n, sim.clock[n] + costs.process_switch)
            elif not pe.net.steal_pending:
                sim.wake_pe(n, pe.net.steal_after)
            turns += 1
            if turns % LIMIT_CHECK_TURNS == 0:
                check_limits()

    def deliver(self) -> bool:
        """Send what PE 0 sent and deliver the next message, if any."""
        sim = self.sim
        sim.flush(0)
        event = sim.next_event()
        if event is None:
            return False
        t, kind, n, message = event
        if kind == 1:
            for m in message.messages if type(message) is Packet else (message,):
                self.pes[n].net.receive(m)
            sim.flush(n)
        return True


class Rank:
    """The PE of this MPI rank over its `MPITransport` (pam/transport/mpi.py)."""

    def __init__(self, pe, transport):
        self.pe = pe
        self.transport = transport

    def run(self) -> tuple[tuple, float]:
        """Turns until the run ends: ("done",) when rank 0 detects termination, or the notice
        that stopped it (a failure reported to rank 0, a HALT from rank 0); and the seconds
        spent running steps."""
        pe, transport = self.pe, self.transport
        me = pe.number
        busy = 0.0
        batch = 64  # grows to MPI_BATCH while steps are cheap
        while True:
            notice = transport.failure_notice() if me == 0 else transport.halt_notice()
            if notice is not None:
                pe.stats.packets = transport.packets
                return notice, busy
            self.deliver()  # answers (work for a thief, values) leave before the next batch
            began = time.perf_counter()
            state = turn(pe, batch)
            if state is RAN:
                took = time.perf_counter() - began
                busy += took
                # look at the network about every millisecond, whatever a step costs (an ML
                # step is up to a hundred calls, a PARLOG step one reduction)
                if took > BATCH_SECONDS * 2:
                    batch = max(8, batch // 2)
                elif took < BATCH_SECONDS / 2:
                    batch = min(MPI_BATCH, batch * 2)
            elif state is DONE:
                transport.flush()
                pe.stats.packets = transport.packets
                return ("done",), busy
            elif not transport.outgoing:
                time.sleep(IDLE_SLEEP)
            transport.flush()

    def deliver(self) -> bool:
        """Receive what has arrived, pass on what it sent."""
        net = self.pe.net
        for m in self.transport.poll():
            net.receive(m)
        self.transport.flush()
        return True
