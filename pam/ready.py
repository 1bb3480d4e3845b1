"""A ready queue ordered by priority, for a runtime whose tasks must run in an order of its own.

A PE's ready queue is a stack by default (pam/pe.py): what is woken last runs first, which is
right for goals and calls. A tensor step's tasks must instead run in the plan's order whatever
order their inputs arrive in (every PE then makes its gradients, and starts their collectives,
in the same order; a pipeline stage runs its schedule's actions in the schedule's order). Such a
runtime gives its tasks a `priority` (an int: the smallest runs first) and asks the PE for this
queue (`PE.order_by_priority`); the scheduler then chooses, and no step reorders the queue.

It offers what the PE loop and distribution use of a deque. Pushing to the back (a time slice
that ran out) and to the front are the same: the order is the priorities', then first come,
first served.

PARLOG's scheduling priorities (`Goal @ priority(N)`, `Goal @ lower_priority`: docs/distribution.md,
"Priorities") are levels of the PE's own queue instead (pam/pe.py, `PE.enqueue`): the larger
level is the more urgent, `DEFAULT_PRIORITY` that of every goal no placement gave another.
`priority_level` reads a placement term as a level.
"""

from __future__ import annotations

from heapq import heapify, heappop, heappush

from pam.terms import Struct, deref, mkatom

DEFAULT_PRIORITY = 0  # the level of main and of every goal whose placement names no priority
PRIORITY = mkatom("priority")
LOWER_PRIORITY = mkatom("lower_priority")


def priority_level(where, current: int) -> int | None:
    """The level that the placement `where` (dereferenced) asks for, spawned from a goal of
    level `current`: `priority(N)` is N, `lower_priority` is current - 1; None for any other
    placement (a PE). `priority(X)` with X no integer (unbound, or anything else, known only
    at run time) keeps the current level."""
    if type(where) is str and where == LOWER_PRIORITY:
        return current - 1
    if type(where) is Struct and where.name == PRIORITY and len(where.args) == 1:
        n = deref(where.args[0])
        return n if type(n) is int else current
    return None


class PriorityReady:
    __slots__ = ("heap", "pushed")

    def __init__(self, tasks=()) -> None:
        self.heap: list[tuple[int, int, object]] = []
        self.pushed = 0
        self.extend(tasks)

    def append(self, task) -> None:
        heappush(self.heap, (task.priority, self.pushed, task))
        self.pushed += 1

    appendleft = append

    def extend(self, tasks) -> None:
        for task in tasks:
            self.append(task)

    def pop(self):
        """The ready task of the smallest priority."""
        return heappop(self.heap)[2]

    def __len__(self) -> int:
        return len(self.heap)

    def __bool__(self) -> bool:
        return bool(self.heap)

    def __getitem__(self, i: int):
        """The i-th task in the heap's own order (the first is the next to run)."""
        return self.heap[i][2]

    def __delitem__(self, i: int) -> None:
        del self.heap[i]
        heapify(self.heap)

    def __iter__(self):
        return (entry[2] for entry in sorted(self.heap))

    def __contains__(self, task) -> bool:
        return any(entry[2] is task for entry in self.heap)

    def remove(self, task) -> None:
        for i, entry in enumerate(self.heap):
            if entry[2] is task:
                del self[i]
                return
        raise ValueError("the task is not ready")

    def reverse(self) -> None:
        """Nothing to turn round: no task waits for ever behind ones of a smaller priority
        that keep coming, since a step's tasks are finitely many."""

    def clear(self) -> None:
        self.heap.clear()


__all__ = ["DEFAULT_PRIORITY", "PriorityReady", "priority_level"]
