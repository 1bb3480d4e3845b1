"""One PE per MPI rank (mpi4py): the same PE code as in simulation, over real messages.

A rank sends only to its topology neighbours; a message for a farther PE is forwarded hop by
hop, and each rank batches what it sends to one neighbour into one non-blocking send per turn.
Control (halting, failures, the final gather) goes straight between ranks on their own tags.
A large payload bound for a farther PE is pickled once where it is sent: the ranks on its way
pass its bytes on without unpickling and pickling it again.
"""

from __future__ import annotations

import pickle
import time
from collections import defaultdict

from pam.transport import Message

TAG_DATA, TAG_HALT, TAG_FAIL, TAG_ACK = 1, 2, 3, 4
PICKLE_ONCE_BYTES = 1024  # payloads of at least this many (modelled) bytes travel pickled


class Pickled:
    """A payload pickled by its sender, unpickled only at its destination."""

    __slots__ = ("data",)

    def __init__(self, payload) -> None:
        self.data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)

    def __reduce__(self):
        return _pickled, (self.data,)

    def load(self):
        return pickle.loads(self.data)


def _pickled(data: bytes) -> Pickled:
    p = Pickled.__new__(Pickled)
    p.data = data
    return p


def comm_world():
    from mpi4py import MPI
    return MPI.COMM_WORLD


class MPITransport:
    """Hop-by-hop delivery over MPI for the PE of this rank."""

    def __init__(self, comm, topology):
        self.comm = comm
        self.me = comm.Get_rank()
        self.topology = topology
        self.pes = topology.pes
        self.outgoing: dict[int, list[Message]] = defaultdict(list)
        self.local: list[Message] = []
        self.requests: list = []
        self.packets = 0  # MPI sends of data (each carries what one turn queued for one neighbour)

    def send(self, message: Message) -> None:
        if message.dst == self.me:
            self.local.append(message)
            return
        hop = self.topology.next_hop(self.me, message.dst)
        if hop != message.dst and message.nbytes >= PICKLE_ONCE_BYTES:
            message.payload = Pickled(message.payload)
        self.outgoing[hop].append(message)

    def flush(self) -> None:
        """One non-blocking send per neighbour with everything queued for it."""
        for hop, batch in self.outgoing.items():
            if batch:
                self.requests.append(self.comm.isend(batch, dest=hop, tag=TAG_DATA))
                self.packets += 1
        self.outgoing.clear()
        self.requests = [r for r in self.requests if not r.Test()]

    def poll(self) -> list[Message]:
        """Messages that have arrived for this PE; others are passed on toward their PE."""
        from mpi4py import MPI
        arrived, self.local = self.local, []
        status = MPI.Status()
        while self.comm.Iprobe(source=MPI.ANY_SOURCE, tag=TAG_DATA, status=status):
            for m in self.comm.recv(source=status.Get_source(), tag=TAG_DATA):
                m.hops.append(self.me)
                if m.dst == self.me:
                    if type(m.payload) is Pickled:
                        m.payload = m.payload.load()
                    arrived.append(m)
                else:
                    self.outgoing[self.topology.next_hop(self.me, m.dst)].append(m)
        return arrived

    def halt_notice(self):
        """A HALT sent to this rank (its payload), or None."""
        if self.comm.Iprobe(source=0, tag=TAG_HALT):
            return self.comm.recv(source=0, tag=TAG_HALT)
        return None

    def failure_notice(self):
        """A failure some rank reported to rank 0 (its payload), or None."""
        from mpi4py import MPI
        status = MPI.Status()
        if self.comm.Iprobe(source=MPI.ANY_SOURCE, tag=TAG_FAIL, status=status):
            return self.comm.recv(source=status.Get_source(), tag=TAG_FAIL)
        return None

    def halt_all(self, payload) -> None:
        for rank in range(1, self.pes):
            self.comm.send(payload, dest=rank, tag=TAG_HALT)

    def acknowledge_halt(self) -> None:
        """Tell rank 0 that this rank got its HALT (it knows then who is still there)."""
        self.comm.send(None, dest=0, tag=TAG_ACK)

    def acknowledged(self) -> list[int]:
        """The ranks whose acknowledgement of HALT arrived since the last call."""
        from mpi4py import MPI
        status = MPI.Status()
        ranks = []
        while self.comm.Iprobe(source=MPI.ANY_SOURCE, tag=TAG_ACK, status=status):
            ranks.append(status.Get_source())
            self.comm.recv(source=status.Get_source(), tag=TAG_ACK)
        return ranks

    def report_failure(self, payload) -> None:
        self.comm.send(payload, dest=0, tag=TAG_FAIL)


def now() -> float:
    return time.monotonic()
