"""Messages cost what they carry, and data that crosses PEs is the receiver's own.

Each message is charged a header and its payload's packed size (pam.pack: a word per item, an
array its length word and `nbytes`), counted per kind in `--stats-json` (`bytes_by_kind`). A
runtime defined here moves a numpy array from PE 0 to PE 1 and changes it there in place; the
sender's copy must not change, as under MPI, where pickling copies it. The same runtime shows a
variable made on one PE and owned by another (`PE.new_var`), a step charging a cost computed
from its data (`PE.charge`) and a counted wait (`WaitAll`).
"""

from __future__ import annotations

import io
import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import hpgrem

from hpgrem.ir import Entry, Module
from pam.machine import Machine
from pam.pack import HEADER, WORD
from pam.step import WaitAll, declare
from pam.task import Task
from pam.terms import Var, deref
from pam.topology import parse_topology
from pam.transport import Message
from pam.transport.mpi import PICKLE_ONCE_BYTES, MPITransport

MPIEXEC = shutil.which("mpiexec")
N = 1000  # elements of the array that travels
SENT_SUM = N * (N - 1) / 2  # np.arange(N).sum()


# -- the bytes of a PARLOG value read on another PE, through the command line ----------------------
LIST_PROGRAM = """\
mode make(^). mode consume(?).
main <- consume(X) @ 1, make(X).
make([1,2,3,4,5,6,7,8,9,10]).
consume([]).
consume([H|T]) <- write(H) & nl & consume(T).
"""


def test_a_list_read_on_another_pe_is_charged_its_packed_size(tmp_path):
    source, stats = tmp_path / "list.par", tmp_path / "stats.json"
    source.write_text(LIST_PROGRAM)
    r = hpgrem("run", str(source), "--pes", "2", "--stats-json", str(stats))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(i) for i in range(1, 11)]
    pe0 = json.loads(stats.read_text())["per_pe"][0]
    # consume(X) leaves for PE 1 with X unbound; PE 0 answers its FETCH with one VALUE:
    # the owner and the variable's number, then the list in postfix: ten integers, the atom
    # [] (a length word and 2 bytes) and ten list-cell markers, a word each.
    list_code = 10 * WORD + (WORD + 2) + 10 * WORD
    assert pe0["bytes_by_kind"]["VALUE"] == HEADER + 2 * WORD + list_code == 102
    assert pe0["bytes_sent"] == sum(pe0["bytes_by_kind"].values())


# -- a runtime that moves an array ---------------------------------------------------------------
class Reader(Task):
    """`args` = (array, result): adds one to the array in place and binds the result to its sum."""

    __slots__ = ()


class ReaderKind:
    """Readers are placed, never stolen; they travel as their two variables."""

    name = "reader"
    task_class = Reader

    def spare(self, task: Reader) -> bool:
        return False

    def export(self, task: Reader) -> tuple:
        return task.args

    def arrive(self, step, value: tuple, site) -> Reader:
        return Reader(step, value, None, None)


class ArrayRuntime:
    """PE 0 makes an array and a variable for its sum owned by PE `owner`, places a reader on PE
    1, binds the array, then waits (counted) for the sum and the readers' acknowledgements."""

    batch = 8

    def __init__(self, owner: int = 0, readers: int = 1) -> None:
        self.owner = owner
        self.readers = readers
        self.steps: dict[int, dict] = {}
        self.reader_pes: list[int] = []
        self.main_steps = 0  # how often the main step ran
        self.result: tuple | None = None  # (the sender's sum after the run, the readers' sums)

    def load(self, pe, timeout=None) -> dict:
        @declare("reader", 2, 10, key="reader")
        def reader(t: Reader):
            array, out = t.args
            value = deref(array)
            if type(value) is Var:
                return [value]
            value += 1.0  # in place: the received array is this PE's own
            pe.charge(value.size)  # a cost from the data: an instruction per element
            self.reader_pes.append(pe.number)
            pe.bind(out, float(value.sum()))
            return None

        @declare("main", 1, 10, key="main")
        def main(t: Task):
            self.main_steps += 1
            if len(t.args) == 1:  # first run: start the readers
                (result,) = t.args
                array, sent = Var(), np.arange(N, dtype=np.float64)
                sums = [pe.new_var(self.owner) for _ in range(self.readers)]
                for s in sums:
                    pe.place(Reader(reader, (array, s), None, None), 1)
                pe.bind(array, sent)
                t.args = (result, sent, sums)
                return WaitAll(sums)
            result, sent, sums = t.args
            self.result = (float(sent.sum()), [deref(s) for s in sums])
            pe.bind(result, self.result)
            return None

        if pe.net is not None:
            pe.net.add_kind(ReaderKind())
        self.steps[pe.number] = {"reader": reader, "main": main}
        return self.steps[pe.number]

    def entry_task(self, pe, outputs: list) -> Task:
        return Task(self.steps[pe.number]["main"], tuple(outputs), None, None)

    def show(self, value, names: dict) -> str:
        return repr(deref(value))


def run_array(runtime: ArrayRuntime, **options):
    module = Module("arrays", {}, Entry("main/1", ("Sums",)), "parlog")
    result = Machine(module, stream=io.StringIO(), runtime=runtime, **options).run()
    return result.bindings, result.stats.to_json()


@pytest.mark.parametrize("pes", [2, 16])
def test_an_array_changed_in_place_on_another_pe_leaves_the_senders_alone(pes):
    runtime = ArrayRuntime()
    bindings, stats = run_array(runtime, pes=pes)
    assert runtime.reader_pes == [1]
    assert bindings == [f"Sums = {(SENT_SUM, [SENT_SUM + N])!r}"]
    # the array went once, as a VALUE from PE 0 to PE 1: the owner and number of the variable,
    # then the array (a length word and its bytes)
    assert stats["per_pe"][0]["bytes_by_kind"]["VALUE"] == HEADER + 2 * WORD + WORD + N * 8


def test_a_step_charges_a_cost_computed_from_its_data():
    # on one PE the reader's charge is virtual time: N instructions more than its declared cost
    _, small = run_array(ArrayRuntime())
    assert small["time"] == pytest.approx((10 + 10 + 10 + N) * 100e-9)


def test_a_variable_made_on_one_pe_is_owned_by_another():
    runtime = ArrayRuntime(owner=3)
    bindings, stats = run_array(runtime, pes=16, topology="mesh:4x4")
    assert bindings == [f"Sums = {(SENT_SUM, [SENT_SUM + N])!r}"]
    owner = stats["per_pe"][3]["bytes_by_kind"]
    # the reader's BIND goes to PE 3, which answers PE 0's FETCH with the sum (a real: 8 bytes)
    assert owner["VALUE"] == HEADER + 2 * WORD + 8
    assert "VALUE" not in stats["per_pe"][1]["bytes_by_kind"]


@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec is not installed")
def test_under_mpi_an_array_crosses_as_a_copy_and_a_variable_is_owned_by_the_chosen_rank():
    r = subprocess.run([MPIEXEC, "-n", "2", sys.executable, __file__], capture_output=True, text=True,
                       cwd=Path(__file__).parent.parent, timeout=120)
    assert r.returncode == 0, r.stderr
    # the three readers share rank 1's copy, each adding one to it; rank 0's is left alone
    assert r.stdout.splitlines() == [f"sent {SENT_SUM!r}, read {[SENT_SUM + k * N for k in (1, 2, 3)]!r}",
                                     "PE 1 answered 3 FETCH"]


@pytest.mark.parametrize("pes", [1, 16])
def test_a_counted_wait_runs_its_step_once_all_inputs_are_bound(pes):
    runtime = ArrayRuntime(readers=50)
    run_array(runtime, pes=pes)
    assert runtime.main_steps == 2  # started, then woken once: not once per input bound
    sent, sums = runtime.result
    # the readers share one array on the PE they run on, each adding one to it in place; on one
    # PE that array is the sender's (nothing crossed), on 16 PEs a copy
    assert sorted(sums) == [SENT_SUM + k * N for k in range(1, 51)]
    assert sent == (SENT_SUM + 50 * N if pes == 1 else SENT_SUM)


# -- under MPI a large payload is pickled once, however many ranks forward it ---------------------
class Counted:
    """A payload that counts how often it is pickled."""

    pickled = 0

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __reduce__(self):
        Counted.pickled += 1
        return Counted, (self.data,)


class FakeComm:
    """Ranks of one process: what a rank sends waits, pickled, in its destination's queue."""

    def __init__(self, rank: int, queues: dict) -> None:
        self.rank = rank
        self.queues = queues

    def Get_rank(self) -> int:
        return self.rank

    def isend(self, obj, dest: int, tag: int):
        self.queues.setdefault(dest, []).append((self.rank, tag, pickle.dumps(obj)))
        return Done()

    def Iprobe(self, source, tag: int, status=None) -> bool:
        for src, t, _ in self.queues.get(self.rank, []):
            if t == tag:
                if status is not None:
                    status.Set_source(src)
                return True
        return False

    def recv(self, source: int, tag: int):
        queue = self.queues[self.rank]
        i = next(i for i, (src, t, _) in enumerate(queue) if src == source and t == tag)
        return pickle.loads(queue.pop(i)[2])


class Done:
    def Test(self) -> bool:
        return True


def test_under_mpi_a_large_payload_is_pickled_once_on_its_way():
    topology = parse_topology("ring", 4)
    queues: dict = {}
    ranks = [MPITransport(FakeComm(r, queues), topology) for r in range(4)]
    payload = Counted(bytes(PICKLE_ONCE_BYTES))
    ranks[0].send(Message("MINE", 0, 2, payload, [0], HEADER + WORD + PICKLE_ONCE_BYTES))
    ranks[0].flush()
    assert Counted.pickled == 1
    middle = next(r for r in ranks[1:4:2] if r.me in queues)  # the route passes PE 1 or PE 3
    assert middle.poll() == []  # passed on, not unpickled
    middle.flush()
    (arrived,) = ranks[2].poll()
    assert Counted.pickled == 1 and arrived.hops == [0, middle.me, 2]
    assert type(arrived.payload) is Counted and arrived.payload.data == payload.data


def _main() -> None:
    """One MPI rank's run (three readers on rank 1, their sums owned by rank 1): rank 0 prints
    the sums and how many values rank 1 was asked for."""
    from mpi4py import MPI

    from pam.errors import RankExit

    runtime = ArrayRuntime(owner=1, readers=3)
    module = Module("arrays", {}, Entry("main/1", ("Sums",)), "parlog")
    try:
        result = Machine(module, runtime=runtime, comm=MPI.COMM_WORLD).run()
    except RankExit as e:
        sys.exit(e.status)
    sent, sums = runtime.result
    print(f"sent {sent!r}, read {sorted(sums)!r}")
    (pe1,) = [p for p in result.stats.per_pe if p.pe == 1]
    print(f"PE 1 answered {pe1.bytes_by_kind.get('VALUE', 0) // (HEADER + 2 * WORD + 8)} FETCH")


if __name__ == "__main__":
    _main()
