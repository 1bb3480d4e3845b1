"""Point-to-point messages of a pipelined step: the values one stage sends another.

A send never blocks: in one process it is a message of the runtime's own kind TENSOR-P2P
through the PE's Net (it crosses the simulated links at their byte time); under mpiexec a
non-blocking `isend` on the pipeline group's communicator, completed by a PE hook. A message is
named by (step, its first value): one that arrives before its recv asks for it waits in the
inbox as a bound variable, as a collective's part does (pam.tensor.collectives).
"""

from __future__ import annotations

import numpy as np

from pam.pack import HEADER, WORD
from pam.terms import Var

P2P = "TENSOR-P2P"  # (step, first value name) and the values, to the stage that receives them
TAG = 7  # the MPI tag of the pipeline's messages on the group's communicator


class _Inbox:
    def __init__(self, pe) -> None:
        self.pe = pe
        self.inbox: dict[tuple, Var] = {}

    def slot(self, key: tuple) -> Var:
        """The variable that the message `key` binds (made when first asked or arrived)."""
        var = self.inbox.get(key)
        if var is None:
            var = self.inbox[key] = Var()
        return var

    def take(self, key: tuple) -> tuple[np.ndarray, ...] | None:
        """The values of message `key` if it has arrived (taken out of the inbox)."""
        var = self.slot(key)
        if var.val is None:
            return None
        del self.inbox[key]
        return var.val


class SimPointToPoint(_Inbox):
    """Messages over the PE's Net (simulated PEs)."""

    def __init__(self, pe, comm=None, members: tuple[int, ...] = ()) -> None:
        super().__init__(pe)
        if pe.net is not None:
            pe.net.add_handler(P2P, self.arrived)

    def arrived(self, message) -> None:
        key, values = message.payload
        self.pe.bind(self.slot(key), values)

    def send(self, dst: int, key: tuple, values: tuple[np.ndarray, ...]) -> int:
        """Send `values` to PE `dst`; returns the bytes sent."""
        size = HEADER + 3 * WORD + sum(v.nbytes for v in values)
        self.pe.net.send(P2P, dst, (key, values), size)
        return size


class MPIPointToPoint(_Inbox):
    """Non-blocking sends and polled receives on the pipeline group's communicator `comm`
    (`members`: its ranks' PE numbers, in the communicator's rank order)."""

    def __init__(self, pe, comm, members: tuple[int, ...]) -> None:
        super().__init__(pe)
        self.comm = comm
        self.members = members
        self.sending: list = []
        pe.hooks.append(self.poll)

    def send(self, dst: int, key: tuple, values: tuple[np.ndarray, ...]) -> int:
        self.sending.append(self.comm.isend((key, values), dest=self.members.index(dst), tag=TAG))
        return sum(v.nbytes for v in values)

    def poll(self) -> bool:
        """Take every message that has arrived; drop completed sends. True while some wait."""
        from mpi4py import MPI

        status = MPI.Status()
        while self.comm.iprobe(source=MPI.ANY_SOURCE, tag=TAG, status=status):
            key, values = self.comm.recv(source=status.Get_source(), tag=TAG)
            self.pe.bind(self.slot(key), values)
        self.sending = [r for r in self.sending if not r.Test()]
        return bool(self.sending) or any(v.val is None for v in self.inbox.values())


__all__ = ["MPIPointToPoint", "P2P", "SimPointToPoint"]
