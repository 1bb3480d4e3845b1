"""The machine contract from outside: a task kind, a value codec and a runtime defined in this
file alone (no change to pam/) run on 1 PE, on 16 simulated PEs and under `mpiexec -n 2`, with
the same result.

The kind: a *link* waits for its input variable; once it is bound it works for a few steps and
binds its output variable to the input's tally plus its own index. The entry spawns a chain of
links, each reading the one before, so idle PEs steal links that have not started yet: links
travel (their variables as global names), read and bind variables across PEs, and the tallies
they pass on cross PEs through the codec registered here. With `AskingRuntime` the chain's first
tally comes from the last PE by a round trip of two message kinds of the runtime's own (ASK and
TELL, `Net.add_handler`). Run as a script (under mpiexec), the file prints the run's bindings
(`asking`: and the PE that answered).
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpgrem.ir import Entry, Module
from pam.errors import Deadlock
from pam.machine import Machine
from pam.pack import HEADER, WORD
from pam.step import declare
from pam.task import Task
from pam.terms import Var, deref

LINKS = 60
WORK = 5  # steps a link takes once its input is bound
MPIEXEC = shutil.which("mpiexec")


class Tally:
    """What flows along the chain: the sum of the indices of the links passed, and their count."""

    __slots__ = ("total", "links")

    def __init__(self, total: int, links: int) -> None:
        self.total = total
        self.links = links


class TallyCodec:
    """Tallies travel as their two numbers."""

    name = "tally"
    value_class = Tally

    def __init__(self, runtime) -> None:
        self.runtime = runtime

    def flatten(self, tally: Tally) -> tuple:
        return None, (tally.total, tally.links)

    def rebuild(self, data, parts: tuple) -> Tally:
        self.runtime.rebuilt += 1
        return Tally(*parts)

    def size(self, data) -> int:
        return WORD


class Link(Task):
    """`args` = (input, output); `index` in the chain; `left` steps of work still to do."""

    __slots__ = ("index", "left")

    def __init__(self, proc, inp: Var, out: Var, index: int, left: int = WORK) -> None:
        super().__init__(proc, (inp, out), None, None)
        self.index = index
        self.left = left

    def describe(self, names=None) -> str:
        return f"link({self.index})"


class LinkKind:
    """A link that has not started may go; it travels as its variables, index and work left."""

    name = "link"
    task_class = Link

    def __init__(self, runtime) -> None:
        self.runtime = runtime

    def spare(self, link: Link) -> bool:
        return link.left == WORK

    def export(self, link: Link) -> tuple:
        return (*link.args, link.index, link.left)

    def arrive(self, step, value: tuple, site) -> Link:
        self.runtime.arrived += 1
        return Link(step, *value)


class ChainRuntime:
    """Loads the two steps (the chain's entry and a link) onto each PE. With `outside_after`,
    the chain's first input comes from outside: a hook of PE 0 binds it after that many polls."""

    batch = 8

    def __init__(self, outside_after: int | None = None) -> None:
        self.outside_after = outside_after
        self.steps: dict[int, dict] = {}
        self.first: Var | None = None  # the chain's first input
        self.polls = 0
        self.arrived = 0  # links rebuilt on a PE other than their own
        self.rebuilt = 0  # tallies that crossed PEs

    def load(self, pe, timeout=None) -> dict:
        @declare("link", 2, 40, key="link", exportable=True)
        def link(t: Link):
            inp, out = t.args
            value = deref(inp)
            if type(value) is Var:
                return [value]
            if t.left:
                t.left -= 1
                return t
            pe.bind(out, Tally(value.total + t.index, value.links + 1))
            return None

        @declare("chain", 1, 10, key="chain")
        def chain(t: Task):
            (result,) = t.args
            first = current = Var()
            for i in range(1, LINKS + 1):
                nxt = Var()
                pe.push(Link(link, current, nxt, i))
                current = nxt
            pe.bind(result, current)
            self.start(pe, first)
            return None

        if pe.net is not None:
            pe.net.add_kind(LinkKind(self))
            pe.net.add_codec(TallyCodec(self))
        if pe.number == 0 and self.outside_after is not None:
            pe.hooks.append(lambda: self.outside_event(pe))
        steps = self.steps[pe.number] = {"link": link, "chain": chain}
        return steps

    def start(self, pe, first: Var) -> None:
        """Give the chain its first input now, or leave it to PE 0's hook."""
        if self.outside_after is None:
            pe.bind(first, Tally(0, 0))
        else:
            self.first = first

    def outside_event(self, pe) -> bool:
        """PE 0's hook: True while the chain still waits for its first input from outside."""
        if self.first is None or self.first.val is not None:
            return False
        self.polls += 1
        if self.polls < self.outside_after:
            return True
        pe.bind(self.first, Tally(0, 0))
        return False

    def entry_task(self, pe, outputs: list) -> Task:
        return Task(self.steps[pe.number]["chain"], tuple(outputs), None, None)

    def show(self, value, names: dict) -> str:
        value = deref(value)
        return f"{value.total}/{value.links}" if type(value) is Tally else "unbound"


class AskingRuntime(ChainRuntime):
    """PE 0 asks the last PE for the chain's first tally (ASK, a message kind of this runtime's
    own); that PE's handler answers TELL, whose handler on PE 0 binds the first input."""

    def __init__(self) -> None:
        super().__init__()
        self.told_by: int | None = None

    def load(self, pe, timeout=None) -> dict:
        steps = super().load(pe, timeout)
        if pe.net is not None:
            pe.net.add_handler("ASK", lambda m: pe.net.send("TELL", m.src, (pe.number, 0, 0)))
            pe.net.add_handler("TELL", lambda m: self.told(pe, m.payload))
        return steps

    def start(self, pe, first: Var) -> None:
        if pe.net is None:
            pe.bind(first, Tally(0, 0))
            return
        self.first = first
        pe.net.send("ASK", pe.net.topology.pes - 1, "the first tally, please")

    def told(self, pe, payload: tuple) -> None:
        self.told_by, total, links = payload
        pe.bind(self.first, Tally(total, links))


def chain_module() -> Module:
    return Module("chain", {}, Entry("chain/1", ("Total",)), "parlog")


def run_chain(runtime: ChainRuntime, **options):
    return Machine(chain_module(), stream=io.StringIO(), runtime=runtime, **options).run()


EXPECTED = [f"Total = {LINKS * (LINKS + 1) // 2}/{LINKS}"]


def test_a_new_kind_runs_on_one_pe():
    assert run_chain(ChainRuntime()).bindings == EXPECTED


def test_a_new_kind_travels_between_sixteen_simulated_pes():
    runtime = ChainRuntime()
    result = run_chain(runtime, pes=16, topology="mesh:4x4")
    assert result.bindings == EXPECTED
    assert sum(p.steals for p in result.stats.per_pe) > 0
    assert runtime.arrived > 0 and runtime.rebuilt > 0


@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec is not installed")
def test_a_new_kind_runs_under_mpi():
    r = subprocess.run([MPIEXEC, "-n", "2", sys.executable, __file__], capture_output=True, text=True,
                       cwd=Path(__file__).parent.parent, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == EXPECTED


@pytest.mark.parametrize("pes", [1, 16])
def test_a_message_kind_of_a_runtimes_own_makes_a_round_trip(pes):
    runtime = AskingRuntime()
    result = run_chain(runtime, pes=pes)
    assert result.bindings == EXPECTED
    if pes > 1:
        assert runtime.told_by == pes - 1
        sent = result.stats.to_json()["per_pe"]
        # ASK carries a 23-character string (a length word and its bytes), TELL three numbers
        assert sent[0]["bytes_by_kind"]["ASK"] == HEADER + WORD + 23
        assert sent[pes - 1]["bytes_by_kind"]["TELL"] == HEADER + 3 * WORD


@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec is not installed")
def test_a_message_kind_of_a_runtimes_own_makes_a_round_trip_under_mpi():
    r = subprocess.run([MPIEXEC, "-n", "2", sys.executable, __file__, "asking"], capture_output=True, text=True,
                       cwd=Path(__file__).parent.parent, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [*EXPECTED, "told by 1"]


def test_a_runtime_may_not_take_over_a_message_kind_of_the_machine():
    machine = Machine(chain_module(), stream=io.StringIO(), runtime=ChainRuntime(), pes=2)
    with pytest.raises(ValueError, match="VALUE is the machine's own"):
        machine.pes[0].net.add_handler("VALUE", lambda m: None)


@pytest.mark.parametrize("pes", [1, 16])
def test_a_hook_waiting_for_an_outside_event_keeps_the_run_alive(pes):
    runtime = ChainRuntime(outside_after=50)
    assert run_chain(runtime, pes=pes).bindings == EXPECTED
    assert runtime.polls == 50


class Starved(ChainRuntime):
    """The outside event never comes."""

    def outside_event(self, pe) -> bool:
        return False


def test_a_deadlock_reports_tasks_of_a_new_kind_as_they_describe_themselves():
    with pytest.raises(Deadlock) as caught:
        run_chain(Starved(outside_after=1))
    assert caught.value.total == LINKS
    assert caught.value.goals[0] == (f"link({LINKS})", None, ["_G1"], 0)  # the newest link ran first


def _main() -> None:
    """One MPI rank's run: rank 0 prints the bindings."""
    from mpi4py import MPI

    from pam.errors import RankExit

    runtime = AskingRuntime() if sys.argv[1:] == ["asking"] else ChainRuntime()
    try:
        result = Machine(chain_module(), runtime=runtime, comm=MPI.COMM_WORLD).run()
    except RankExit as e:
        sys.exit(e.status)
    print("\n".join(result.bindings))
    if isinstance(runtime, AskingRuntime):
        print(f"told by {runtime.told_by}")


if __name__ == "__main__":
    _main()
