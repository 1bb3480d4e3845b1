"""How a collective moves between PEs: the two transports of one lowering.

Three collectives over any group of PEs (`Bucket.kind`): `allreduce` (every member ends with
the sum), `reduce_scatter` (member i of the group ends with chunk i of the sum) and `all_gather`
(every member ends with the members' chunks in group order). The runtime's collective task
(pam.tensor.runtime) flattens a bucket into one buffer of `ranks` equal chunks (zero-padded when
the size does not divide; for an all-gather the member's own part in its chunk), calls `begin`,
then `advance` until it returns None: the buffer then holds the sum (all-reduce), the sum in the
member's own chunk (reduce-scatter) or every chunk (all-gather). A value other than None is what
the task waits for, as the step protocol says. The same graph runs over either transport:

- `SimAllReduce`, in one process: ring algorithms whose parts are messages of the runtime's own
  kind TENSOR-PART through the PE's Net, so each part crosses the simulated links at their byte
  time, hop by hop over any topology (bytes charged). A reduce-scatter is the ring's n - 1
  summing stages, an all-gather its n - 1 copying stages, an all-reduce both. A part names its
  bucket, step and stage: a part that arrives before its task asks for it waits in the inbox as
  a bound variable. Each chunk is summed once, on one PE, and copied to the others, so every PE
  ends with the same bits. Adding a part is charged its FLOPs as communication.
- `MPIAllReduce`, under mpiexec: a non-blocking `Iallreduce`, `Ireduce_scatter_block` or
  `Iallgather` on the group's sub-communicator; a PE hook (pam.driver) tests the outstanding
  requests at every turn, so the PE keeps running other tasks, and binds a request's variable
  when it completes, which wakes its task.
"""

from __future__ import annotations

from time import perf_counter

import numpy as np

from pam.pack import HEADER, WORD
from pam.terms import Var

PART = "TENSOR-PART"  # (bucket key, step, stage) and one chunk of a bucket, to the next PE of the ring


class SimAllReduce:
    """Ring collectives over the PE's Net (simulated PEs); a group of one needs no message."""

    def __init__(self, replica, pe, per_flop: float, comms=None) -> None:
        self.replica = replica
        self.pe = pe
        self.per_flop = per_flop
        self.inbox: dict[tuple, Var] = {}
        if pe.net is not None:
            pe.net.add_handler(PART, self.arrived)

    def arrived(self, message) -> None:
        key, part = message.payload
        self.pe.bind(self._slot(key), part)  # its task, if it waits, takes its turn first

    def _slot(self, key: tuple) -> Var:
        var = self.inbox.get(key)
        if var is None:
            var = self.inbox[key] = Var()
        return var

    def begin(self, task, bucket) -> None:
        group = self.replica.members[bucket.group]
        if len(group) > 1:
            task.chunks = np.array_split(task.buffer, len(group))
            if bucket.kind == "reduce_scatter":  # direct: each chunk to its owner at once
                r = group.index(self.pe.number)
                for j, member in enumerate(group):
                    if j != r:
                        part = task.chunks[j]
                        key = (bucket.key, self.replica.round, r)
                        self.pe.net.send(PART, member, (key, part), HEADER + 3 * WORD + part.nbytes)
                return
            self._send(task, bucket, 0)

    def _send(self, task, bucket, stage: int) -> None:
        group = self.replica.members[bucket.group]
        n, r = len(group), group.index(self.pe.number)
        reducing, offset = _stages(bucket.kind, n)
        # reduce-scatter: pass on the chunk summed so far; all-gather: pass on a finished one
        index = (r - stage - offset) % n if stage < reducing else (r - (stage - reducing) + 1 - offset) % n
        part = task.chunks[index]
        key = (bucket.key, self.replica.round, stage)
        self.pe.net.send(PART, group[(r + 1) % n], (key, part), HEADER + 3 * WORD + part.nbytes)

    def advance(self, task, bucket):
        group = self.replica.members[bucket.group]
        n = len(group)
        r = group.index(self.pe.number) if n > 1 else 0
        if bucket.kind == "reduce_scatter":
            return self._gather_parts(task, bucket, n, r)
        reducing, offset = _stages(bucket.kind, n)
        last = reducing + (n - 1 if bucket.kind != "reduce_scatter" else 0)
        while task.stage < last:
            stage = task.stage
            key = (bucket.key, self.replica.round, stage)
            var = self._slot(key)
            if var.val is None:
                return [var]
            del self.inbox[key]
            part = var.val
            if stage < reducing:
                task.chunks[(r - stage - 1 - offset) % n] += part
                instructions = round(part.size * self.per_flop)
                self.pe.charge(instructions)
                self.replica.clock.comm_instr += instructions
            else:
                task.chunks[(r - (stage - reducing) - offset) % n][...] = part
            task.stage = stage + 1
            if task.stage < last:
                self._send(task, bucket, task.stage)
        return None


    def _gather_parts(self, task, bucket, n: int, r: int):
        """A direct reduce-scatter's end on member r: every other member's part of chunk r
        has arrived; they are summed in the group's order (the same order on every member)."""
        if n < 2 or task.stage > 0:
            return None
        keys = [(bucket.key, self.replica.round, i) for i in range(n) if i != r]
        waiting = [var for var in map(self._slot, keys) if var.val is None]
        if waiting:
            return waiting
        mine = task.chunks[r]
        total = None
        for i in range(n):
            part = mine if i == r else self.inbox.pop((bucket.key, self.replica.round, i)).val
            if total is None:
                total = part.copy()
            else:
                total += part
        mine[...] = total
        instructions = round((n - 1) * mine.size * self.per_flop)
        self.pe.charge(instructions)
        self.replica.clock.comm_instr += instructions
        task.stage = 1
        return None


def _stages(kind: str, n: int) -> tuple[int, int]:
    """The ring's summing stages for a collective of `kind` over n members, and the chunk
    offset: an all-reduce ends its summing with member r holding chunk r + 1 (then copies it
    on); a reduce-scatter or all-gather has member r own chunk r."""
    if kind == "allreduce":
        return n - 1, 0
    return (n - 1 if kind == "reduce_scatter" else 0), 1


class MPIAllReduce:
    """Non-blocking collectives on MPI sub-communicators (`comms`: group -> communicator),
    completed by a PE hook. MPI matches the collectives of a communicator by the order in which
    its ranks start them, while a PE starts a collective when its inputs exist (which differs
    from rank to rank): so a collective whose inputs are ready waits until those before it in
    the plan, on the same group, have started."""

    def __init__(self, replica, pe, per_flop: float, comms: dict) -> None:
        self.replica = replica
        self.pe = pe
        self.comms = comms
        self.pending: list[tuple] = []  # (request, its variable, the buffers it uses)
        self.order: dict[str, list[int]] = {}  # group name -> its collectives' keys, in plan order
        for step in replica.plan.steps:
            if getattr(step, "group", None) is not None:
                self.order.setdefault(step.group, []).append(step.key)
        self.started: dict[str, int] = {}  # group name -> how many of this step's have started
        self.ready: dict[int, tuple] = {}  # key -> (task, bucket, buffer) ready, not yet started
        pe.hooks.append(self.poll)

    def begin(self, task, bucket) -> None:
        group = self.replica.members[bucket.group]
        if len(group) < 2:
            return
        task.chunks = Var()
        self.ready[bucket.key] = (task, bucket, task.buffer)
        task.buffer = np.zeros_like(task.buffer)
        order = self.order[bucket.group]
        while True:
            n = self.started.get(bucket.group, 0)
            entry = self.ready.pop(order[n], None) if n < len(order) else None
            if entry is None:
                return
            self.started[bucket.group] = (n + 1) % len(order)
            self._start(*entry)

    def _start(self, task, bucket, buffer: np.ndarray) -> None:
        from mpi4py import MPI

        group = self.replica.members[bucket.group]
        comm = self.comms[group]
        out = task.buffer
        if bucket.kind == "allreduce":
            request = comm.Iallreduce(buffer, out, op=MPI.SUM)
        else:
            s = buffer.size // len(group)
            mine = slice(group.index(self.pe.number) * s, (group.index(self.pe.number) + 1) * s)
            if bucket.kind == "reduce_scatter":
                request = comm.Ireduce_scatter_block(buffer, out[mine], op=MPI.SUM)
            else:
                request = comm.Iallgather(buffer[mine], out)
        self.pending.append((request, task.chunks, buffer, bucket.key))

    def advance(self, task, bucket):
        done = task.chunks
        if done is None or done.val is not None:
            return None
        return [done]

    def poll(self) -> bool:
        """Bind the variable of every request that has completed; True while some have not."""
        if not self.pending:
            return False
        began = perf_counter()
        waiting = []
        for entry in self.pending:
            if entry[0].Test():
                self.pe.bind(entry[1], True)
            else:
                waiting.append(entry)
        self.pending = waiting
        self.replica.clock.comm_wall += perf_counter() - began
        return bool(waiting)


__all__ = ["MPIAllReduce", "PART", "SimAllReduce"]
