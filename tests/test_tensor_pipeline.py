"""Pipeline parallelism (docs/tensor.md, "Pipeline parallelism"): the schedules as data and
their deadlock check, the stages' graphs and action lists of tensor-pipeline, training that
matches the 1-PE run (float64, 1e-9 relative) for each schedule on simulated PEs and under
`mpiexec -n 2`, and the measured bubble against (p - 1) / m and (p - 1) / (v * m)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT

from backend.tensor.gpt import ModelShape, build_training_step, init_params
from backend.tensor.job import TensorJob
from backend.tensor.layout import Layout, LayoutError
from hpgrem.ir.tensor.schedule import Action, ScheduleError, check_programs, program_text, units
from hpgrem.passes import PassError, run_passes
from hpgrem.passes.tensor.pipeline import stage_step
from hpgrem.verify import verify
from pam.tensor.pipeline import bubble

MPIEXEC = shutil.which("mpiexec")
TINY = str(ROOT / "examples" / "llm" / "tiny.toml")
SHAPE = ModelShape(n_layer=4, n_head=2, d_model=8, seq_len=4, vocab=16)
BATCH = 8


def _batches(steps: int = 2) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(3)
    return [{"tokens": rng.integers(0, SHAPE.vocab, (BATCH, SHAPE.seq_len)),
             "targets": rng.integers(0, SHAPE.vocab, (BATCH, SHAPE.seq_len))} for _ in range(steps)]


def _train(layout: Layout) -> tuple[list[float], list[float], dict[str, np.ndarray]]:
    step = build_training_step(SHAPE, BATCH, "float64", weight_decay=0.1, clip=0.5)
    job = TensorJob(step, init_params(SHAPE, 2, "float64"), layout=layout)
    results = [job.step(b, 1e-2, k + 1) for k, b in enumerate(_batches())]
    return [r.loss for r in results], [r.grad_norm for r in results], job.parameters()


@pytest.fixture(scope="module")
def one_pe():
    return _train(Layout())


# -- schedules as data -------------------------------------------------------------------------
@pytest.mark.parametrize("schedule, stages, micro_batches, chunks", [
    ("gpipe", 4, 6, 1), ("1f1b", 4, 6, 1), ("1f1b", 4, 2, 1), ("1f1b", 2, 4, 2), ("1f1b", 4, 8, 3),
    ("gpipe", 2, 4, 2),
])
def test_each_stage_runs_every_unit_once_forward_before_backward(schedule, stages, micro_batches, chunks):
    for s in range(stages):
        order = units(schedule, stages, s, micro_batches, chunks)
        assert sorted(order) == sorted((k, mb, c) for k in ("forward", "backward")
                                       for mb in range(micro_batches) for c in range(chunks))
        assert all(order.index(("forward", mb, c)) < order.index(("backward", mb, c))
                   for mb in range(micro_batches) for c in range(chunks))


def test_1f1b_keeps_at_most_pp_micro_batches_in_flight_gpipe_all():
    def in_flight(order):
        live = peak = 0
        for kind, _, _ in order:
            live += 1 if kind == "forward" else -1
            peak = max(peak, live)
        return peak
    assert [in_flight(units("1f1b", 4, s, 8, 1)) for s in range(4)] == [4, 3, 2, 1]
    assert [in_flight(units("gpipe", 4, s, 8, 1)) for s in range(4)] == [8] * 4


def test_a_deadlocking_list_is_refused_naming_each_blocked_stage():
    a = ("x",)
    b = ("y",)
    programs = [[Action("recv", peer=1, values=b), Action("send", peer=1, values=a)],
                [Action("recv", peer=0, values=a), Action("send", peer=0, values=b)]]
    with pytest.raises(ScheduleError, match=r"deadlocks: stage 0 at action 0 \(recv <- stage 1: y\); stage 1"):
        check_programs(programs)
    programs[1].reverse()  # stage 1 sends first: one global order exists
    assert len(check_programs(programs)) == 4
    with pytest.raises(ScheduleError, match="x from stage 0 to stage 1 is sent but never received"):
        check_programs([[Action("send", peer=1, values=a)], []])


# -- the pass ----------------------------------------------------------------------------------
@pytest.mark.parametrize("schedule, pp, micro_batches, virtual_stages", [
    ("gpipe", 2, 2, 1), ("1f1b", 2, 4, 1), ("1f1b", 2, 2, 2), ("1f1b", 4, 4, 1),
])
def test_the_pass_gives_verified_stage_graphs_and_deadlock_free_lists(schedule, pp, micro_batches, virtual_stages):
    step = build_training_step(SHAPE, BATCH, "float64")
    lowered = run_passes(step, ["tensor-pipeline"], analyses=False, options={"tensor-pipeline": {
        "pp": pp, "micro_batches": micro_batches, "virtual_stages": virtual_stages, "schedule": schedule}})
    stages = [stage_step(lowered, s) for s in range(pp)]
    for module, _ in stages:
        assert verify(module) == []
    programs = [actions for _, actions in stages]
    assert len(check_programs(programs)) == sum(map(len, programs))
    text = program_text(programs)
    assert "send mb 0 chunk 0 -> stage 1: mb0.h." in text and "recv <- stage 0: new.wte" in text
    first = {p.name for p in stages[0][0].rules["step"].params()}
    last = {p.name for p in stages[-1][0].rules["step"].params()}
    assert {"wte", "wpe", "h.0.ln_1.weight"} <= first and {"wte", "ln_f.weight"} <= last  # the tied copy
    assert "m.wte" not in {s.name for s in stages[-1][0].rules["step"].values if type(s).__name__ == "State"}


def test_the_pass_refuses_more_chunks_than_layers():
    step = build_training_step(SHAPE, BATCH, "float64")
    with pytest.raises(PassError, match="4 layer.s. cannot fill pp . virtual_stages = 8 chunks"):
        run_passes(step, ["tensor-pipeline"], analyses=False,
                   options={"tensor-pipeline": {"pp": 4, "virtual_stages": 2, "micro_batches": 4}})
    with pytest.raises(LayoutError, match="does not divide among 3 micro-batches"):
        TensorJob(step, init_params(SHAPE, 2, "float64"), layout=Layout(pp=2, micro_batches=3))


# -- training matches one PE -------------------------------------------------------------------
@pytest.mark.parametrize("layout", [
    Layout(micro_batches=2),
    Layout(pp=2, micro_batches=2, schedule="gpipe"),
    Layout(pp=2, micro_batches=4, schedule="1f1b"),
    Layout(pp=2, micro_batches=2, virtual_stages=2),
    Layout(pp=4, micro_batches=4, schedule="gpipe"),
    Layout(dp=2, pp=2, micro_batches=2),
    Layout(dp=2, pp=2, micro_batches=2, schedule="gpipe"),
    Layout(dp=2, pp=2, micro_batches=2, virtual_stages=2),
    Layout(tp=2, pp=2, micro_batches=2),
    Layout(tp=2, pp=2, micro_batches=2, schedule="gpipe"),
    Layout(tp=2, pp=2, micro_batches=2, virtual_stages=2),
    Layout(pp=2, micro_batches=2, recompute="selective"),
], ids=str)
def test_a_pipelined_step_trains_as_one_pe_does(layout, one_pe):
    losses, norms, params = _train(layout)
    want_losses, want_norms, want = one_pe
    np.testing.assert_allclose(losses, want_losses, rtol=1e-9)
    np.testing.assert_allclose(norms, want_norms, rtol=1e-9)
    for name, value in want.items():
        assert np.max(np.abs(params[name] - value)) <= 1e-9 * np.max(np.abs(value)), name


@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec is not installed")
def test_mpiexec_n2_pipeline_trains_as_one_pe(tmp_path):
    one, two = tmp_path / "one.npz", tmp_path / "two.npz"
    args = ["train", TINY, "--steps", "2", "--dtype", "float64", "--micro-batches", "2"]
    r = subprocess.run([sys.executable, "-m", "hpgrem.driver.cli", *args, "--save", str(one)],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "hpgrem.driver.cli", *args, "--pp", "2",
                        "--schedule", "gpipe", "--save", str(two)], capture_output=True, text=True, cwd=ROOT,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    a, b = np.load(one), np.load(two)
    assert sorted(a.files) == sorted(b.files)
    for k in a.files:
        assert np.max(np.abs(a[k] - b[k])) <= 1e-9 * np.max(np.abs(a[k])), k


# -- the bubble --------------------------------------------------------------------------------
@pytest.mark.parametrize("pp, micro_batches, virtual_stages, schedule", [
    (2, 4, 1, "gpipe"), (2, 4, 1, "1f1b"), (4, 8, 1, "1f1b"), (2, 4, 2, "1f1b"), (4, 8, 2, "1f1b"),
])
def test_the_measured_bubble_is_the_schedules(pp, micro_batches, virtual_stages, schedule):
    """Layers dominate (a tiny vocabulary) and compute dominates the links (a T800's FLOP rate
    against a 64-wide model's activations): the bubble is (p - 1) / (v * m) within 10%."""
    shape = ModelShape(n_layer=pp * virtual_stages, n_head=4, d_model=64, seq_len=8, vocab=8)
    step = build_training_step(shape, micro_batches, "float32")
    job = TensorJob(step, init_params(shape, 0, "float32"),
                    layout=Layout(pp=pp, micro_batches=micro_batches, virtual_stages=virtual_stages,
                                  schedule=schedule))
    rng = np.random.default_rng(0)
    job.step({"tokens": rng.integers(0, 8, (micro_batches, 8)), "targets": rng.integers(0, 8, (micro_batches, 8))},
             1e-3, 1)
    measured = bubble([job.replica_of(r).clock for r in range(pp)], job.costs.instruction)
    assert measured == pytest.approx((pp - 1) / (virtual_stages * micro_batches), rel=0.10)


def test_train_shows_each_stages_actions(capsys):
    from hpgrem.driver.cli import main

    status = main(["train", TINY, "--steps", "1", "--pp", "2", "--micro-batches", "2", "--show-schedule"])
    err = capsys.readouterr().err
    assert status == 0, err
    assert "stage 0:\n    0 forward mb 0 chunk 0" in err and "recv <- stage 0: new.wte" in err


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_a_traced_training_step_shows_each_pes_actions(schedule, tmp_path, capsys):
    """`hpgrem train --trace --html`: the scheduler runs each op of a PE's forward and backward
    of each micro-batch as a task of its own, one rewrite per op on the PE of its stage, in the
    schedule's order, with the sends and receives between."""
    import json

    from hpgrem.driver.cli import main

    out, page = tmp_path / "step.jsonl", tmp_path / "step.html"
    status = main(["train", TINY, "--steps", "1", "--pp", "2", "--micro-batches", "4", "--schedule", schedule,
                   "--trace", str(out), "--html", str(page)])
    assert status == 0, capsys.readouterr().err
    events = [json.loads(line) for line in out.read_text().splitlines()[1:]]
    order, ops = [], {}
    for e in events:
        unit = e.get("redex", "").rpartition(" (")[2].rstrip(")")
        if e["ev"] == "rewrite" and unit.startswith(("forward", "backward")):
            ops.setdefault((e["pe"], unit), []).append(e["redex"])
            if e["pe"] == 0 and (not order or order[-1] != unit):
                order.append(unit)
    # one rewrite per op: each unit's rewrites are distinct ops, as many on each stage's PE
    for (pe, unit), redexes in ops.items():
        assert len(set(redexes)) == len(redexes) > 1, (pe, unit)
    assert {pe for pe, _ in ops} == {0, 1}
    assert {len(ops[(0, unit)]) for unit in order if unit.startswith("forward")} == \
        {len(ops[(0, "forward mb 0 chunk 0")])}
    f, b = "forward mb {} chunk 0", "backward mb {} chunk 0"
    want = {"gpipe": [f, f, f, f, b, b, b, b], "1f1b": [f, f, b, f, b, f, b, b]}[schedule]
    mbs = {"gpipe": [0, 1, 2, 3, 0, 1, 2, 3], "1f1b": [0, 1, 0, 2, 1, 3, 2, 3]}[schedule]
    assert order == [w.format(i) for w, i in zip(want, mbs)]
    p2p = [e for e in events if e["ev"] == "send" and e["kind"] == "TENSOR-P2P"]
    assert {e["pe"] for e in p2p} == {0, 1} and "Timeline" in page.read_text()


@pytest.mark.parametrize("flags, message", [
    (["--html", "step.html"], "--html draws a trace: give --trace OUT.jsonl too"),
    (["--trace", "step.txt"], "--trace step.txt: a trace is JSON lines: name it OUT.jsonl"),
])
def test_a_traced_run_refuses_what_it_cannot_write(flags, message, tmp_path, capsys, monkeypatch):
    from hpgrem.driver.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["train", TINY, "--steps", "1", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
