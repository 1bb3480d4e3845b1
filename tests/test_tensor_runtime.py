"""The tensor runtime on the PAM scheduler (pam/tensor/) and the data-parallel lowering
(hpgrem/passes/tensor/data_parallel.py): the runtime computes what the sequential reference `evaluate`
computes; dp = 2 and 4 train as one PE does, on simulated PEs over several topologies and under
`mpiexec -n 2` and `-n 4` (this file is the ranks' script: `python tests/test_tensor_runtime.py
OUT.npz` under mpiexec); buckets overlap backward; the step statistics add up; a layout that
does not fit is refused with LayoutError.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as the ranks' script
    sys.path.insert(0, str(ROOT))

from backend.tensor.gpt import ModelShape, build_forward, build_training_step, init_params  # noqa: E402
from hpgrem.ir import Entry  # noqa: E402
from hpgrem.ir.tensor import Get, Op, graph_of  # noqa: E402
from hpgrem.passes import PassError, run_passes  # noqa: E402
from hpgrem.serialize import dumps, loads  # noqa: E402
from hpgrem.verify import verify  # noqa: E402
from backend.tensor.job import LayoutError, TensorJob  # noqa: E402
from pam.tensor.kernels import evaluate  # noqa: E402

SHAPE = ModelShape(n_layer=2, n_head=2, d_model=16, seq_len=8, vocab=32)
BATCH = 8
STEPS = 3
LR = 3e-3
BUCKET = 4096  # bytes: several buckets on this model
MPIEXEC = shutil.which("mpiexec")


def batches(steps: int = STEPS) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(7)
    return [{"tokens": rng.integers(0, SHAPE.vocab, (BATCH, SHAPE.seq_len)),
             "targets": rng.integers(0, SHAPE.vocab, (BATCH, SHAPE.seq_len))} for _ in range(steps)]


def module(dtype: str):
    return build_training_step(SHAPE, BATCH, dtype, weight_decay=0.1, clip=1.0)


def train(dtype: str, **layout) -> tuple[list[float], dict[str, np.ndarray], TensorJob]:
    job = TensorJob(module(dtype), init_params(SHAPE, 3, dtype), bucket_bytes=BUCKET, **layout)
    losses = [job.step(b, LR, k + 1).loss for k, b in enumerate(batches())]
    return losses, job.parameters(), job


_ONE_PE: dict[str, tuple] = {}


def one_pe(dtype: str) -> tuple[list[float], dict[str, np.ndarray]]:
    if dtype not in _ONE_PE:
        losses, params, _ = train(dtype)
        _ONE_PE[dtype] = (losses, params)
    return _ONE_PE[dtype]


def assert_same_training(dtype: str, losses: list[float], params: dict[str, np.ndarray]) -> None:
    """float64: every loss and every parameter tensor to 1e-9 relative (of the tensor's largest
    magnitude); float32: the losses to 1e-5 and the parameters to 1e-3 (the spec's bounds)."""
    ref_losses, ref_params = one_pe(dtype)
    loss_tol, param_tol = (1e-9, 1e-9) if dtype == "float64" else (1e-5, 1e-3)
    np.testing.assert_allclose(losses, ref_losses, rtol=loss_tol, atol=0)
    assert ref_params.keys() == params.keys()
    for name, ref in ref_params.items():
        assert params[name].dtype == ref.dtype
        assert np.max(np.abs(params[name] - ref)) <= param_tol * np.max(np.abs(ref)), name


def test_the_runtime_computes_what_evaluate_does():
    """Every value of one step on one PE, with the kernels in the same order: the same bits."""
    m = module("float64")
    params = init_params(SHAPE, 3, "float64")
    job = TensorJob(m, params, release=False)
    b = batches(1)[0]
    result = job.step(b, LR, 1)
    states = {v.name: np.zeros(v.shape, v.dtype) for v in job.graph.states}
    env = evaluate(m, {**params, **states, **b, "lr": np.float64(LR), "step": np.int64(1)})
    replica = job.runtime.replicas[0]
    compared = 0
    for v in graph_of(m).values:
        if type(v) in (Op, Get) and v.dtype != "tuple":
            assert np.array_equal(replica.value(v.name), env[v.name]), v.name
            compared += 1
    assert compared > 100
    assert result.loss == float(env["loss"]) and result.grad_norm == float(env["grad_norm"])
    updated = job.parameters()
    for target, source in graph_of(m).updates:
        if target in updated:
            assert np.array_equal(updated[target], env[source])


def test_the_machine_runs_a_step_through_the_registered_runtime():
    """`runtime_for` finds the tensor runtime by the module's language; the machine's entry
    runs one step on one PE and binds the loss."""
    from pam.machine import Machine
    from pam.runtimes import runtime_class
    from pam.tensor.runtime import TensorRuntime

    assert runtime_class("tensor") is TensorRuntime
    m = module("float64")
    params = init_params(SHAPE, 3, "float64")
    b = batches(1)[0]
    feeds = {**params, **{v.name: np.zeros(v.shape, v.dtype) for v in TensorJob(m, params).graph.states},
             **b, "lr": np.float64(LR), "step": np.int64(1)}
    runnable = replace(m, entry=Entry("step", ("Loss",)))
    result = Machine(runnable, stream=io.StringIO(), runtime=TensorRuntime(runnable, feeds=feeds)).run()
    assert result.bindings == [f"Loss = {float(evaluate(m, feeds)['loss'])!r}"]
    with pytest.raises(ValueError, match="TensorJob"):
        Machine(runnable, stream=io.StringIO(), runtime=TensorRuntime(runnable)).run()


@pytest.mark.parametrize("dp, topology", [(2, "ring"), (4, "mesh"), (4, "hypercube")])
def test_data_parallel_on_simulated_pes_trains_as_one_pe_does(dp, topology):
    for dtype in ("float64", "float32"):
        losses, params, job = train(dtype, dp=dp, topology=topology)
        assert_same_training(dtype, losses, params)
        first = job.runtime.replicas[0].persistent
        for n in range(1, dp):  # clipping and AdamW saw the same gradients on every PE
            other = job.runtime.replicas[n].persistent
            assert all(np.array_equal(first[k], other[k]) for k in first)


def test_gradients_are_all_reduced_in_buckets_during_backward():
    """The lowering puts each bucket's all-reduces right after its last gradient, so the first
    buckets stand before backward ends; on simulated PEs small buckets then make the step
    shorter than one bucket at the end (the collectives overlap the rest of backward)."""
    lowered = run_passes(module("float64"), ["tensor-data-parallel"], analyses=False,
                         options={"tensor-data-parallel": {"dp": 2, "bucket_bytes": BUCKET}})
    values = graph_of(lowered).values
    buckets = lowered.annotation("step", "tensor-data-parallel.buckets")
    assert buckets > 3
    first_reduce = next(i for i, v in enumerate(values) if type(v) is Op and v.op == "allreduce"
                        and v.name.startswith("grad."))
    last_grad = max(i for i, v in enumerate(values) if v.name.endswith(".local"))
    assert first_reduce < last_grad
    reduced = {v.name for v in values if type(v) is Op and v.op == "allreduce"}
    assert reduced == {"loss"} | {f"grad.{p}" for p in init_params(SHAPE, 0)}
    assert verify(lowered) == [] and loads(dumps(lowered)) == lowered

    def step_time(bucket_bytes: int) -> float:
        job = TensorJob(module("float64"), init_params(SHAPE, 3, "float64"), dp=2, bucket_bytes=bucket_bytes)
        return job.step(batches(1)[0], LR, 1).stats.time_s

    assert step_time(BUCKET) < step_time(1 << 30)


def test_the_pass_refuses_what_it_cannot_lower():
    def lower(m, dp=2):
        return run_passes(m, ["tensor-data-parallel"], analyses=False, options={"tensor-data-parallel": {"dp": dp}})

    with pytest.raises(PassError, match="no gradient grad.wte in the graph"):
        lower(build_forward(SHAPE, BATCH))
    with pytest.raises(PassError, match="already lowered for dp = 2"):
        lower(lower(module("float32")))
    assert lower(module("float32"), dp=1) == module("float32")


def test_step_statistics_add_up():
    _, _, alone = train("float64")
    _, _, pair = train("float64", dp=2, topology="ring")
    one = alone.step(batches(1)[0], LR, 4).stats
    two = pair.step(batches(1)[0], LR, 4).stats
    for stats in (one, two):
        assert stats.mode == "sim" and stats.time_s > 0 and 0 < stats.loop_share < 1
        for p in stats.per_pe:
            assert min(p.compute_s, p.comm_s, p.idle_s, p.loop_s) >= 0
            assert p.compute_s + p.comm_s + p.idle_s + p.loop_s == pytest.approx(stats.time_s, rel=1e-9)
    (solo,) = one.per_pe
    assert solo.comm_s == 0 and solo.idle_s == 0 and solo.collectives == 0 and solo.bytes_sent == 0
    for p in two.per_pe:
        assert 0 < p.comm_s and p.collectives > 3 and p.bytes_sent > p.reduced_bytes / 2
        assert p.compute_s < solo.compute_s  # half the batch; the optimizer runs on both
    assert two.time_s < one.time_s
    assert "compute_s" in two.table() and two.to_json()["per_pe"][1]["pe"] == 1


def test_a_layout_that_does_not_fit_is_refused():
    m, params = module("float32"), init_params(SHAPE, 0)
    with pytest.raises(LayoutError, match="the layout needs dp \\* tp \\* pp = 2 PEs, not 4"):
        TensorJob(m, params, dp=2, pes=4)
    with pytest.raises(LayoutError, match="a batch of 8 .* does not divide among dp = 3"):
        TensorJob(m, params, dp=3)
    with pytest.raises(LayoutError, match="mesh:3x3 .* 2"):
        TensorJob(m, params, dp=2, topology="mesh:3x3")
    with pytest.raises(LayoutError, match="the layout needs dp \\* tp \\* pp = 2 ranks, not the 1 MPI ranks"):
        TensorJob(m, params, dp=2, mpi=True)
    job = TensorJob(m, params, dp=2)
    with pytest.raises(LayoutError, match="'tokens' has shape \\[4, 8\\]; the step takes \\[8, 8\\]"):
        job.step({"tokens": np.zeros((4, 8), np.int64), "targets": np.zeros((4, 8), np.int64)}, LR, 1)


@pytest.mark.parametrize("ranks", [2, 4])
def test_data_parallel_under_mpiexec_trains_as_one_pe_does(ranks, tmp_path):
    if MPIEXEC is None:
        pytest.fail("mpiexec is not installed")
    out = tmp_path / "ranks.npz"
    r = subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, __file__, str(out)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    got = np.load(out)
    for dtype in ("float64", "float32"):
        params = {k.split("/", 1)[1]: got[k] for k in got.files if k.startswith(f"{dtype}/")}
        assert_same_training(dtype, list(got[f"losses.{dtype}"]), params)
    assert got["same_on_every_rank"]
    assert got["stats_pes"] == ranks and got["collectives"] > 3


def test_a_rank_that_fails_ends_the_job_under_mpiexec(tmp_path):
    """Rank 1 fails after step 1 (and closes its job, as the trainer does): rank 0, waiting
    in step 2 for its part, ends the job with a message instead of waiting forever."""
    if MPIEXEC is None:
        pytest.fail("mpiexec is not installed")
    r = subprocess.run([MPIEXEC, "-n", "2", sys.executable, __file__, str(tmp_path / "x.npz"), "fail"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode != 0
    assert "rank 1 left the job after 1 step(s) while rank 0 was in step 2: the job is abandoned" in r.stderr


def _failing_rank_script() -> None:
    from mpi4py import MPI

    job = TensorJob(module("float32"), init_params(SHAPE, 3), dp=2, mpi=True)
    try:
        for k, b in enumerate(batches(), 1):
            job.step(b, LR, k)
            if MPI.COMM_WORLD.Get_rank() == 1:
                raise RuntimeError("rank 1 fails")
    finally:
        job.close()


def _ranks_script(out: str) -> None:
    """Under mpiexec: train dp = ranks in both dtypes; rank 0 writes the losses and the final
    parameters, whether every rank ended with the same parameters and loss, and the stats."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    saved: dict[str, np.ndarray] = {}
    same = True
    for dtype in ("float64", "float32"):
        losses, params, job = train(dtype, dp=comm.Get_size(), mpi=True)
        stats = job.step(batches(1)[0], LR, STEPS + 1).stats
        every = comm.allgather((losses, params))
        same &= all(l == losses and all(np.array_equal(p[k], params[k]) for k in params) for l, p in every)
        job.close()
        saved[f"losses.{dtype}"] = np.array(losses)
        saved.update({f"{dtype}/{k}": v for k, v in params.items()})
    if comm.Get_rank() == 0:
        saved["same_on_every_rank"] = np.array(same)
        saved["stats_pes"] = np.array(len(stats.per_pe))
        saved["collectives"] = np.array(min(p.collectives for p in stats.per_pe))
        np.savez(out, **saved)


if __name__ == "__main__":
    if sys.argv[2:] == ["fail"]:
        _failing_rank_script()
    else:
        _ranks_script(sys.argv[1])
