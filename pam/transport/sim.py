"""N simulated transputers in one process, in virtual time (discrete events, deterministic).

Each PE has a clock. It runs its reductions in short batches; a batch advances its clock by the
instructions it executed (the cost model), and the messages it sent leave at the batch's end.
A message crosses its route link by link, store and forward: on each link it waits until the
link is free, then takes the hop start-up plus its bytes at the link's byte time, so messages on
one link keep their order. Arrival makes the PE handle the message (a process switch and the
handling instructions) before it runs again. Ties are broken by event order, never by chance.
"""

from __future__ import annotations

import heapq
import itertools
import random

from pam.costs import DEFAULT, CostModel
from pam.transport import Message


class Packet:
    """Messages from one PE to one PE, sent in one slice, crossing each link as one message:
    one hop start-up for all their bytes (the `aggregate` pass)."""

    __slots__ = ("messages", "src", "dst", "nbytes")

    def __init__(self, messages: list[Message]):
        self.messages = messages
        self.src = messages[0].src
        self.dst = messages[0].dst
        self.nbytes = sum(m.nbytes for m in messages)


class SimTransport:
    """What a PE's `Net` sends through: messages wait in the PE's outbox until its batch ends."""

    def __init__(self, sim: Simulation, pe: int):
        self.sim = sim
        self.pe = pe
        self.pes = sim.topology.pes

    def send(self, message: Message) -> None:
        self.sim.outbox[self.pe].append(message)


class Simulation:
    """The event loop over the PEs' clocks and the links between them."""

    def __init__(self, topology, costs: CostModel = DEFAULT, jitter: float = 0.0, seed: int = 0):
        self.topology = topology
        self.costs = costs
        # Tests stretch each hop by a random factor up to 1 + jitter: termination detection and
        # the protocols must not depend on timing (seeded, so still deterministic).
        self.jitter = jitter
        self.rng = random.Random(seed)
        self.clock = [0.0] * topology.pes
        self.outbox: list[list[Message]] = [[] for _ in range(topology.pes)]
        self.link_free: dict[tuple[int, int], float] = {}
        self.events: list = []
        self.order = itertools.count()
        # the time of each PE's pending turn, or None: a PE has at most one live turn event
        self.scheduled: list[float | None] = [None] * topology.pes
        self.in_flight = 0
        # Message aggregation (the `aggregate` pass): a flush sends one packet per destination
        self.aggregate = False
        self.stats: list = []  # the PEs' PEStats, where their `packets` are counted

    def transport(self, pe: int) -> SimTransport:
        return SimTransport(self, pe)

    # -- events -------------------------------------------------------------------------------
    def wake_pe(self, pe: int, at: float) -> None:
        """Make sure PE `pe` gets a turn at `at` (or at its own clock, if later). A turn already
        due later is brought forward: a message (the termination token, work) that reaches an
        idle PE is acted on at once, not when the PE's wait before its next steal request ends."""
        at = max(at, self.clock[pe])
        due = self.scheduled[pe]
        if due is None or at < due:
            self.scheduled[pe] = at  # an event for a later turn is now stale: skipped when popped
            heapq.heappush(self.events, (at, next(self.order), 0, pe, None))

    def flush(self, pe: int) -> None:
        """Send what PE `pe` put in its outbox, leaving at its clock."""
        box = self.outbox[pe]
        if not box:
            return
        self.outbox[pe] = []
        if self.aggregate and len(box) > 1:
            by_dst: dict[int, list[Message]] = {}
            for m in box:
                by_dst.setdefault(m.dst, []).append(m)
            for group in by_dst.values():
                self.route(group[0] if len(group) == 1 else Packet(group), self.clock[pe])
            return
        for m in box:
            self.route(m, self.clock[pe])

    def route(self, m: Message, t: float) -> None:
        path = self.topology.route(m.src, m.dst)
        c = self.costs
        for a, b in zip(path, path[1:]):
            start = max(t, self.link_free.get((a, b), 0.0))
            busy = c.byte_both_ways if self.link_free.get((b, a), 0.0) > start else c.byte_one_way
            hop = c.hop_startup + m.nbytes * busy
            if self.jitter:
                hop *= 1 + self.jitter * self.rng.random()
            t = start + hop
            self.link_free[(a, b)] = t
        if type(m) is Packet:
            for one in m.messages:
                one.hops = path
        else:
            m.hops = path
        if self.stats:
            self.stats[m.src].packets += 1
        self.in_flight += 1
        heapq.heappush(self.events, (t, next(self.order), 1, m.dst, m))

    def next_event(self):
        """The earliest event: (time, kind (0 run, 1 arrival), pe, message), or None."""
        while self.events:
            t, _, kind, pe, m = heapq.heappop(self.events)
            if kind == 0:
                if self.scheduled[pe] != t:
                    continue  # superseded by an earlier turn
                self.scheduled[pe] = None
            else:
                self.in_flight -= 1
            return t, kind, pe, m
        return None

    def advance(self, pe: int, t: float, instructions: int, switch: bool = False) -> None:
        """PE `pe` does `instructions` of work starting no earlier than `t`."""
        start = max(self.clock[pe], t)
        self.clock[pe] = start + instructions * self.costs.instruction + (self.costs.process_switch if switch else 0)
