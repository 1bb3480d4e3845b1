"""The traced twin of a hot loop comes from its template (pam/twins.py), and a runtime's tasks
can be ordered by priority (pam/ready.py)."""

from __future__ import annotations

import traceback

import pytest

from pam.ready import PriorityReady
from pam.twins import traced_source, traced_twin


def _template(n):
    """Sums 0..n-1; the traced twin also records each i."""
    total = 0
    for i in range(n):
        total += i
        #+ seen.append(i)
        step = i  #-
    return total, scale * total


def _made(scale_value):
    scale = scale_value

    def add(n):
        out = 0
        for i in range(n):
            out += scale * i
            #+ seen.append(out)
        return out
    return add


def test_the_traced_twin_runs_the_traced_lines_and_not_the_plain_ones():
    seen = []
    twin = traced_twin(_template, seen=seen)
    global scale
    scale = 3
    try:
        assert _template(4) == twin(4) == (6, 18)
    finally:
        del scale
    assert seen == [0, 1, 2, 3]
    assert traced_source(["    x = 1  #-", "    #+ y = 2", "    z = 3"]) == ["    pass", "    y = 2", "    z = 3"]


def test_a_closures_twin_keeps_its_free_variables_and_the_templates_lines():
    seen = []
    plain = _made(2)
    twin = traced_twin(plain, seen=seen)
    assert plain(3) == twin(3) == 6 and seen == [0, 2, 6]
    assert twin.__code__.co_filename == plain.__code__.co_filename
    assert twin.__code__.co_firstlineno == plain.__code__.co_firstlineno
    with pytest.raises(TypeError) as failed:
        twin("x")
    where = traceback.extract_tb(failed.value.__traceback__)[-1]
    assert where.lineno == plain.__code__.co_firstlineno + 2  # the template's own line: for i in range(n)


class _Task:
    def __init__(self, priority, name):
        self.priority = priority
        self.name = name


def test_the_priority_queue_runs_the_smallest_priority_first_whatever_the_push_order():
    ready = PriorityReady()
    tasks = [_Task(p, n) for p, n in ((5, "e"), (1, "a"), (3, "c"), (-2, "urgent"), (3, "c2"))]
    for t in tasks[:3]:
        ready.append(t)
    ready.appendleft(tasks[3])  # the back and the front are the same: the order is the priorities'
    ready.extend(tasks[4:])
    assert len(ready) == 5 and tasks[2] in ready
    assert [t.name for t in ready] == ["urgent", "a", "c", "c2", "e"]  # equal priorities: first come first
    ready.remove(tasks[1])
    assert tasks[1] not in ready
    assert [ready.pop().name for _ in range(len(ready))] == ["urgent", "c", "c2", "e"]
    assert not ready
    with pytest.raises(ValueError):
        ready.remove(tasks[0])


def test_a_pe_asked_to_order_by_priority_keeps_what_it_had():
    from pam.pe import PE

    pe = PE(0, print)
    first, second = _Task(2, "b"), _Task(1, "a")
    pe.push(first)
    pe.order_by_priority()
    pe.push(second)
    assert type(pe.ready) is PriorityReady and pe.ready.pop() is second and pe.ready.pop() is first
