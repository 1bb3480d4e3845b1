"""Parallel layouts (docs/tensor.md, "Parallel layouts"): the rank grid; the collectives on any
group with integer-valued tensors where every result is exact (sizes that do not divide are
padded); shards of GPT-2's tensors and back; and the exactness matrix: for each layout of
LAYOUTS, every step's loss and the parameters after the steps match the 1-PE run (float64 to
1e-9 relative, float32 losses to 1e-5 and parameters to 1e-3 of each tensor's largest
magnitude) on simulated PEs, and under `mpiexec -n 2`, `-n 4` and `-n 8`, several layouts a
launch (this file is the ranks' script: `python tests/test_tensor_layouts.py OUT.npz LAYOUT...`
under mpiexec).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backend.tensor.gpt import ModelShape, build_training_step, init_params  # noqa: E402
from backend.tensor.job import TensorJob  # noqa: E402
from backend.tensor.layout import Layout, LayoutError, lower  # noqa: E402
from backend.tensor.shards import shard, tp_axis, unshard  # noqa: E402
from hpgrem.ir.tensor import graph_of  # noqa: E402
from hpgrem.verify import verify  # noqa: E402
from pam.tensor.graph import OpSpec, StepGraph, Value  # noqa: E402

SHAPE = ModelShape(n_layer=4, n_head=4, d_model=16, seq_len=8, vocab=30)  # 4 layers: 2 chunks a stage
BATCH = 4
STEPS = 2
LR = 1e-2
MPIEXEC = shutil.which("mpiexec")

SCHEDULES = ({"schedule": "gpipe"}, {}, {"virtual_stages": 2})
"""GPipe, 1F1B and interleaved 1F1B (two chunks a stage)."""

LAYOUTS = [
    Layout(),
    Layout(tp=2),
    Layout(dp=2),
    *(Layout(dp=2, zero=z) for z in (1, 2, 3)),
    *(Layout(dp=2, tp=2, zero=z) for z in (0, 1, 2, 3)),
    *(Layout(dp=dp, tp=tp, pp=2, micro_batches=2, **s) for dp, tp in ((1, 1), (2, 1), (1, 2)) for s in SCHEDULES),
    *(Layout(dp=2, pp=2, micro_batches=2, zero=z, **s) for z in (1, 2, 3) for s in SCHEDULES),
    Layout(dp=2, tp=2, pp=2, micro_batches=2),
    Layout(dp=2, tp=2, pp=2, micro_batches=2, zero=3),
    Layout(dp=2, micro_batches=2, zero=2),  # micro-batches without a pipeline accumulate too
]
"""The exactness matrix: issue 19's (dp, tp, pp) = (1,1,1), (1,2,1), (1,1,2), (2,2,1), (2,1,2),
(1,2,2), each pipeline schedule and each ZeRO stage ((2,1,2) with ZeRO-1, -2, -3 under each
schedule: ZeRO beside a pipeline)."""


def batches() -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(11)
    return [{"tokens": rng.integers(0, SHAPE.vocab, (BATCH, SHAPE.seq_len)),
             "targets": rng.integers(0, SHAPE.vocab, (BATCH, SHAPE.seq_len))} for _ in range(STEPS)]


def train(dtype: str, layout: Layout, mpi: bool = False) -> tuple[list[float], dict[str, np.ndarray], TensorJob]:
    m = build_training_step(SHAPE, BATCH, dtype, weight_decay=0.1, clip=0.5)
    job = TensorJob(m, init_params(SHAPE, 5, dtype), layout=layout, mpi=mpi)
    losses = [job.step(b, LR, k + 1).loss for k, b in enumerate(batches())]
    return losses, job.parameters(), job


_ONE_PE: dict[str, tuple] = {}


def one_pe(dtype: str) -> tuple[list[float], dict[str, np.ndarray]]:
    if dtype not in _ONE_PE:
        losses, params, _ = train(dtype, Layout())
        _ONE_PE[dtype] = (losses, params)
    return _ONE_PE[dtype]


def assert_same_training(dtype: str, losses: list[float], params: dict[str, np.ndarray]) -> None:
    ref_losses, ref_params = one_pe(dtype)
    loss_tol, param_tol = (1e-9, 1e-9) if dtype == "float64" else (1e-5, 1e-3)
    np.testing.assert_allclose(losses, ref_losses, rtol=loss_tol, atol=0)
    assert ref_params.keys() == params.keys()
    for name, ref in ref_params.items():
        assert params[name].dtype == ref.dtype and params[name].shape == ref.shape, name
        scale = float(np.abs(ref).max()) or 1.0
        assert float(np.abs(params[name] - ref).max()) <= param_tol * scale, name


def test_the_grid_numbers_ranks_tp_fastest_then_dp_then_pp():
    layout = Layout(dp=2, tp=2, pp=2)
    assert layout.ranks == 8
    assert [(c.tp, c.dp, c.pp) for c in map(layout.coordinates, range(8))] == \
        [(0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 1, 0), (0, 0, 1), (1, 0, 1), (0, 1, 1), (1, 1, 1)]
    groups = layout.groups()
    assert groups["tp"] == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert groups["dp"] == ((0, 2), (1, 3), (4, 6), (5, 7))
    assert groups["pp"] == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert groups["mp"] == ((0, 1, 4, 5), (2, 3, 6, 7))


@pytest.mark.parametrize("options, message", [
    ({"tp": 0}, "tp must be a positive integer, got 0"),
    ({"zero": 4}, "zero must be 0, 1, 2 or 3, got 4"),
    ({"zero": 1}, "zero = 1 shards over the data-parallel ranks: it needs dp > 1"),
    ({"schedule": "zigzag"}, "schedule must be one of gpipe, 1f1b, interleaved, got 'zigzag'"),
])
def test_a_layout_out_of_range_is_refused_in_one_line(options, message):
    with pytest.raises(LayoutError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Layout(**options).check()


def _collectives_graph(n: int) -> StepGraph:
    """x [7] (the same on every rank), its rank's chunk `mine` (padded: 7 = 3 + 3 + 1 for 3
    ranks), and each collective of the dp group."""
    f = "float64"
    ops = (
        OpSpec("mine", "shard", ("x", "rank.dp"), {"ranks": n}, (-(-7 // n),), f),
        OpSpec("rs", "reduce_scatter", ("x",), {"group": "dp", "bucket": 0, "ranks": n, "reduce": "sum"},
               (-(-7 // n),), f),
        OpSpec("rs.mean", "reduce_scatter", ("x",), {"group": "dp", "bucket": 1, "ranks": n, "reduce": "mean"},
               (-(-7 // n),), f),
        OpSpec("ag", "all_gather", ("mine",), {"group": "dp", "bucket": 2, "ranks": n, "size": 7}, (7,), f),
        OpSpec("ar", "allreduce", ("mine",), {"group": "dp", "bucket": 3, "reduce": "sum"}, (-(-7 // n),), f),
        OpSpec("loss", "sum_squares", ("ag",), {}, (), f),
        OpSpec("grad_norm", "sum_squares", ("rs", "rs.mean", "ar"), {}, (), f),
    )
    return StepGraph((Value("x", (7,), f),), (), (Value("rank.dp", (), "int64"),), ops,
                     ("loss", "grad_norm", "rs", "rs.mean", "ag", "ar"), {})


@pytest.mark.parametrize("ranks, topology", [(2, None), (3, "ring"), (4, "mesh:2x2")])
def test_collectives_on_simulated_pes_are_exact_and_padded(ranks, topology):
    x = np.array([3.0, -1.0, 4.0, 1.0, -5.0, 9.0, 2.0])
    job = TensorJob(_collectives_graph(ranks), {"x": x}, layout=Layout(dp=ranks), topology=topology)
    result = job.step({}, 0.0, 1)
    s = -(-7 // ranks)
    padded = np.zeros(s * ranks)
    padded[:7] = x
    for r in range(ranks):
        replica = job.replica_of(r)
        mine = padded[r * s:(r + 1) * s]
        assert np.array_equal(replica.value("rs"), ranks * mine)
        assert np.array_equal(replica.value("rs.mean"), mine)
        assert np.array_equal(replica.value("ag"), x)
        assert np.array_equal(replica.value("ar"), padded.reshape(ranks, s).sum(axis=0))
    assert result.loss == float(x @ x)
    assert sum(p.bytes_sent for p in result.stats.per_pe) > 0


def test_shards_of_every_layout_give_back_the_whole_tensor():
    params = init_params(SHAPE, 1, "float64")
    for layout in (Layout(tp=2), Layout(tp=4), Layout(dp=3, tp=2, zero=3), Layout(dp=3, zero=1)):
        for name in ("wte", "h.0.attn.c_attn.weight", "h.1.attn.c_attn.bias", "h.0.mlp.c_proj.weight",
                     "h.1.mlp.c_fc.bias", "h.0.attn.c_proj.bias"):
            for key in (name, f"m.{name}"):
                parts = {r: shard(key, params[name], layout, r) for r in range(layout.ranks)}
                assert np.array_equal(unshard(key, parts, params[name].shape, layout), params[name]), (layout, key)
    # the fused q|k|v: tensor-parallel rank 1 of 2 holds the columns of heads 2 and 3 of each of q, k, v
    qkv = np.arange(3 * 16.0)
    assert shard("h.0.attn.c_attn.bias", qkv, Layout(tp=2), 1).tolist() == \
        [*range(8, 16), *range(24, 32), *range(40, 48)]


def test_tensor_parallel_splits_heads_and_mlp_and_verifies():
    m = build_training_step(SHAPE, BATCH, "float32", weight_decay=0.1, clip=0.5)
    lowered = lower(m, Layout(tp=2)).stages[0]
    assert verify(lowered) == []
    assert lowered.annotation("step", "tensor-parallel.splits") == 4 * SHAPE.n_layer
    values = graph_of(lowered).value_map()
    assert values["h.0.attn.c_attn.weight"].shape == (16, 24)
    assert values["h.0.attn.c_proj.weight"].shape == (8, 16)
    assert values["h.0.mlp.c_fc.weight"].shape == (16, 32)
    assert values["h.0.attn.c_proj.bias"].shape == (16,) and values["wte"].shape == (30, 16)
    assert values["h.0.attn.core"].attr("n_head") == 2
    reduces = [v for v in graph_of(lowered).values if getattr(v, "op", None) == "allreduce"]
    # forward: 2 row-parallel sums a layer; backward: 2 input gradients a layer; the norm
    assert len(reduces) == 4 * SHAPE.n_layer + 1
    assert len({v.attr("bucket") for v in reduces}) == len(reduces)
    with pytest.raises(LayoutError, match="4 heads .* do not divide among tp = 3"):
        lower(m, Layout(tp=3))


def test_zero_shards_the_model_states_over_dp():
    m = build_training_step(SHAPE, BATCH, "float32", weight_decay=0.1, clip=0.5)
    whole = init_params(SHAPE, 0, "float32")
    n = sum(p.size for p in whole.values())
    for stage in (1, 2, 3):
        lowered = lower(m, Layout(dp=4, zero=stage)).stages[0]
        assert verify(lowered) == []
        values = graph_of(lowered).value_map()
        for name, p in whole.items():
            chunk = (-(-p.size // 4),)
            assert values[f"m.{name}"].shape == values[f"v.{name}"].shape == chunk
            assert values[name].shape == (chunk if stage == 3 else p.shape)
            # stage 1 all-reduces the whole gradients and keeps its chunk; 2 and 3 reduce-scatter
            assert values[f"grad.{name}"].op == ("shard" if stage == 1 else "reduce_scatter")
        gathers = [v for v in graph_of(lowered).values if getattr(v, "op", None) == "all_gather"]
        # stage 3: each parameter before the forward and each one the backward reads again
        assert len(gathers) == len(whole) if stage < 3 else len(whole) < len(gathers) < 2 * len(whole)
    job = TensorJob(m, whole, layout=Layout(dp=4, zero=3))
    held = sum(a.nbytes for a in job.replica_of(2).persistent.values())
    assert 3 * n * 4 / 4 <= held < 3 * n * 4 / 4 * 1.02  # a quarter of params, m and v (+ padding)


def test_zero_beside_a_pipeline_reduces_each_gradient_once_after_the_micro_batches():
    m = build_training_step(SHAPE, BATCH, "float32", weight_decay=0.1, clip=0.5)
    whole = init_params(SHAPE, 0, "float32")
    for stage in (1, 2, 3):
        layout = Layout(dp=2, pp=2, micro_batches=2, zero=stage)
        lowered = lower(m, layout)
        for s, module in enumerate(lowered.stages):
            assert verify(module) == []
            values = graph_of(module).value_map()
            actions = lowered.actions[layout.rank(pp=s)]
            ran = {a.kind: [n for b in actions if b.kind == a.kind for n in b.values] for a in actions}
            kinds = {k: [getattr(values.get(n), "op", None) for n in names] for k, names in ran.items()}
            owned = [p for p in whole if f"adamw.{p}" in values]
            # the reduce action reduces each gradient the stage owns once, on its micro-batches' sum
            reductions = "allreduce" if stage == 1 else "reduce_scatter"
            assert kinds["reduce"].count(reductions) >= len(owned)
            assert "reduce_scatter" not in kinds["forward"] + kinds["backward"]
            for p in owned:
                assert values[f"grad.{p}"].op == ("shard" if stage == 1 else "reduce_scatter")
                assert values[f"grad.{p}.local"].shape == whole[p].shape  # the accumulated gradient, whole
                chunk = (-(-whole[p].size // 2),)
                assert values[f"m.{p}"].shape == chunk
                assert values[p].shape == (chunk if stage == 3 else whole[p].shape)
            if stage == 3:  # every micro-batch gathers the parameters it reads again
                gathers = [n for n in ran["forward"] + ran["backward"]
                           if getattr(values[n], "op", None) == "all_gather"]
                assert {n.split(".")[0] for n in gathers} == {"mb0", "mb1"}
                # the last stage gathers the tied wte for the LM head from its own shard
                assert values["wte"].shape == (-(-whole["wte"].size // 2),)
                if s == 1:
                    assert "mb0.wte.gathered.stage1" in ran["forward"]
                    assert not any(".wte." in x for a in actions if a.kind == "recv" for x in a.values)


@pytest.mark.parametrize("layout", LAYOUTS[1:], ids=str)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_each_layout_trains_as_one_pe_does(layout, dtype):
    losses, params, job = train(dtype, layout)
    assert_same_training(dtype, losses, params)
    assert job.pes == layout.ranks
    for r in range(layout.ranks):  # what tensor parallelism replicates stays the same bits on the tp group
        c = layout.coordinates(r)
        first = job.replica_of(layout.rank(c.dp, 0, c.pp)).persistent
        for name, value in job.replica_of(r).persistent.items():
            if tp_axis(name) is None:
                assert np.array_equal(value, first[name]), (r, name)


MPI_SCHEDULES = ("schedule=gpipe", "schedule=1f1b", "virtual_stages=2")


@pytest.mark.parametrize("ranks, layouts", [
    (2, ["tp=2", *(f"pp=2,micro_batches=2,{s}" for s in MPI_SCHEDULES), *(f"dp=2,zero={z}" for z in (1, 2, 3))]),
    (4, [*(f"dp=2,tp=2,zero={z}" for z in (0, 1, 2, 3)),
         *(f"{g},pp=2,micro_batches=2,{s}" for g in ("dp=2", "tp=2") for s in MPI_SCHEDULES),
         *(f"dp=2,pp=2,micro_batches=2,zero={z},{s}" for z in (1, 2, 3) for s in MPI_SCHEDULES)]),
    (8, [f"dp=2,tp=2,pp=2,micro_batches=2,{s}" for s in MPI_SCHEDULES]),  # 8 ranks on the machine's 2 cores
], ids=lambda x: str(x) if isinstance(x, int) else None)
def test_layouts_under_mpiexec_train_as_one_pe_does(ranks, layouts, tmp_path):
    if MPIEXEC is None:
        pytest.fail("mpiexec is not installed")
    out = tmp_path / "ranks.npz"
    r = subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, __file__, str(out), *layouts],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    got = np.load(out)
    for i in range(len(layouts)):
        for dtype in ("float64", "float32"):
            prefix = f"{i}/{dtype}/"
            params = {k[len(prefix):]: got[k] for k in got.files if k.startswith(prefix)}
            assert_same_training(dtype, list(got[f"{i}/losses.{dtype}"]), params)
    assert got["same_on_every_rank"]


def _parse(text: str) -> Layout:
    return Layout(**{k: int(v) if v.isdigit() else v for k, v in (item.split("=") for item in text.split(","))})


def _ranks_script(out: str, layouts: list[str]) -> None:
    """Under mpiexec: train each layout in both dtypes; rank 0 writes the losses and the
    gathered parameters, and whether every rank gathered the same."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    saved: dict[str, np.ndarray] = {}
    same = True
    for i, text in enumerate(layouts):
        for dtype in ("float64", "float32"):
            losses, params, job = train(dtype, _parse(text), mpi=True)
            every = comm.allgather((losses, params))
            same &= all(l == losses and all(np.array_equal(p[k], params[k]) for k in params) for l, p in every)
            job.close()
            saved[f"{i}/losses.{dtype}"] = np.array(losses)
            saved.update({f"{i}/{dtype}/{k}": v for k, v in params.items()})
    if comm.Get_rank() == 0:
        saved["same_on_every_rank"] = np.array(same)
        np.savez(out, **saved)


if __name__ == "__main__":
    _ranks_script(sys.argv[1], sys.argv[2:])
