"""The tensor dialect (hpgrem/ir/tensor/__init__.py, tensor_dialect.py): a GPT-2 training step prints,
verifies, round-trips through `.hpg` and goes through the pass manager like any module; a bad
graph is refused at the JSON path of what is wrong (exit 2 from the command); the model
builder names the key of a shape it cannot build."""

from __future__ import annotations

import json

import pytest

from backend.tensor.gpt import ModelShape, build_forward, build_training_step, init_params
from conftest import hpgrem
from hpgrem.ir.tensor import Graph, graph_of
from hpgrem.ir.tensor.build import GraphBuilder
from hpgrem.ir.tensor.dialect import ShapeError
from hpgrem.passes import level, run_passes
from hpgrem.printer import module_text
from hpgrem.serialize import HpgFormatError, dumps, loads
from hpgrem.verify import verify

SHAPE = ModelShape(n_layer=2, n_head=2, d_model=8, seq_len=4, vocab=16)


@pytest.fixture(scope="module")
def step():
    return build_training_step(SHAPE, batch=2, weight_decay=0.1)


def test_a_training_step_verifies_and_prints(step):
    assert verify(step) == []
    text = module_text(step)
    assert text.startswith("module 'gpt2' (tensor)\n\ngraph step:\n  param wte: f32[16, 8]\n")
    assert "  input tokens: i64[2, 4]\n" in text
    assert "  h.0.attn.core = causal_attention(h.0.attn.qkv) {n_head=2}: tuple[]\n" in text
    assert "  loss = cross_entropy#0: f32[]\n" in text
    assert "  outputs loss, grad_norm\n" in text
    assert "  update h.1.mlp.c_fc.weight <- new.h.1.mlp.c_fc.weight\n" in text
    graph = graph_of(step)
    names = [v.name for v in graph.values]
    assert len(names) == len(set(names))
    assert {f"grad.{p}" for p in init_params(SHAPE, 0)} <= set(names)


def test_hpg_round_trip(step):
    back = loads(dumps(step))
    assert back == step and dumps(back) == dumps(step)
    assert module_text(back) == module_text(step)


def test_float64_is_the_builders_option():
    graph = graph_of(build_forward(SHAPE, batch=1, dtype="float64"))
    assert {v.dtype for v in graph.values} == {"float64", "int64", "tuple"}


def test_pass_manager_differentiates_and_leaves_a_step_as_it_is(step):
    forward = build_forward(SHAPE, batch=2)
    done = run_passes(forward, ["tensor-autodiff"])
    assert verify(done) == [] and "grad.wte" in graph_of(done).value_map()
    assert graph_of(run_passes(done, ["tensor-autodiff"])) is graph_of(done)  # differentiated once
    assert graph_of(run_passes(step, level(2))) == graph_of(step)


def test_a_graph_of_thousands_of_ops():
    big = build_training_step(ModelShape(n_layer=24, n_head=1, d_model=4, seq_len=2, vocab=5), batch=1)
    assert len(graph_of(big).values) > 2500
    assert verify(big) == []
    assert loads(dumps(big)) == big
    assert module_text(big).count("\n") > 2500


def _mutated(step, path: tuple, value) -> str:
    doc = json.loads(dumps(step))
    target = doc["rules"][0]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return json.dumps(doc)


def _index(step, name: str) -> int:
    return next(i for i, v in enumerate(graph_of(step).values) if v.name == name)


@pytest.mark.parametrize("name, field, value, message", [
    ("h.0.attn.qkv", "shape", [2, 4, 23], "values[{i}].shape: inferred float32 [2, 4, 24], declared float32 [2, 4, 23]"),
    ("h.0.attn.qkv", "dtype", "float64", "values[{i}].dtype: inferred float32 [2, 4, 24], declared float64"),
    ("h.0.ln_1", "op", "layernorm2", "values[{i}].op: unknown op 'layernorm2'"),
    ("h.0.ln_1", "inputs", ["emb", "nope", "h.0.ln_1.bias"], "values[{i}].inputs[1]: 'nope' is not a value defined before"),
    ("h.0.ln_1", "inputs", ["emb", "h.1.res_2", "h.0.ln_1.bias"], "values[{i}].inputs[1]: 'h.1.res_2' is not a value defined before"),
    ("h.0.attn.core", "attrs", [["n_head", 3]], "values[{i}]: causal_attention: width 8 is not divisible by n_head 3"),
    ("h.0.attn.core", "attrs", [], "values[{i}].attrs: causal_attention needs the attribute 'n_head'"),
    ("h.0.mlp.act", "attrs", [["eps", 1.0]], "values[{i}].attrs: gelu has no attribute 'eps'"),
    ("h.0.attn.y", "index", 2, "values[{i}].index: 'h.0.attn.core' has 2 components"),
    ("h.0.attn.y", "source", "h.0.ln_1", "values[{i}].source: 'h.0.ln_1' is not a tuple-valued op"),
    ("h.0.ln_2", "name", "h.0.ln_1", "values[{i}].name: 'h.0.ln_1' is defined twice"),
    ("wte", "dtype", "float16", "values[{i}].dtype: 'float16' is not a dtype"),
])
def test_bad_graphs_are_refused_at_their_json_path(step, name, field, value, message):
    i = _index(step, name)
    problems = loads_or_problem(_mutated(step, ("values", i, field), value))
    assert any(f"at $.rules[0].{message.format(i=i)}" in p for p in problems), problems


def loads_or_problem(text: str) -> list[str]:
    """The problems the `.hpg` reader and the verifier find (as the command reports them)."""
    try:
        return verify(loads(text))
    except HpgFormatError as e:
        return [str(e)]


def test_bad_updates_and_outputs(step):
    graph = graph_of(step)
    n = len(graph.updates)
    assert any("updates[0][0]: 'emb' is not a parameter or state" in p
               for p in loads_or_problem(_mutated(step, ("updates", 0, 0), "emb")))
    assert any(f"updates[{n - 1}][1]: 'new.wte' has type" in p
               for p in loads_or_problem(_mutated(step, ("updates", n - 1, 1), "new.wte")))
    assert any("outputs[1]: 'norm' is not a value of the graph" in p
               for p in loads_or_problem(_mutated(step, ("outputs", 1), "norm")))


def test_the_command_refuses_a_bad_graph_with_exit_2(step, tmp_path):
    i = _index(step, "logits")
    bad = tmp_path / "bad.hpg"
    bad.write_text(_mutated(step, ("values", i, "shape"), [2, 4, 15]))
    r = hpgrem("ir", str(bad))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"at $.rules[0].values[{i}].shape: inferred float32 [2, 4, 16], declared float32 [2, 4, 15]" in r.stderr
    good = tmp_path / "step.hpg"
    good.write_text(dumps(step))
    r = hpgrem("ir", str(good), "-O0")
    assert r.returncode == 0 and r.stdout == module_text(step)
    r = hpgrem("run", str(good))
    assert r.returncode == 2 and "a tensor graph is a training step: run one with --feeds FEEDS.npz" in r.stderr


def _feeds(step, params: dict, tokens, targets) -> dict:
    """Every value one step of `step` takes: the parameters, zero optimizer states, the batch."""
    import numpy as np

    from pam.tensor.graph import step_graph

    graph = step_graph(step)
    feeds = {v.name: np.zeros(v.shape, v.dtype) for v in graph.states}
    feeds.update(params, tokens=tokens, targets=targets, lr=np.array(3e-3), step=np.array(1))
    return feeds


def test_hpgrem_run_runs_one_training_step_of_an_hpg_on_the_machine(step, tmp_path):
    """`hpgrem run STEP.hpg --feeds FEEDS.npz`: the step on one PE, the same loss and gradient
    norm as the training job's first step; bad feeds are refused in one line."""
    import numpy as np

    from backend.tensor.job import TensorJob

    params = init_params(SHAPE, 0)
    rng = np.random.default_rng(1)
    tokens, targets = (rng.integers(0, SHAPE.vocab, (2, SHAPE.seq_len)) for _ in range(2))
    path, feeds = tmp_path / "step.hpg", tmp_path / "feeds.npz"
    path.write_text(dumps(step))
    np.savez(feeds, **_feeds(step, params, tokens, targets))
    r = hpgrem("run", str(path), "--feeds", str(feeds))
    assert r.returncode == 0, r.stderr
    want = TensorJob(step, params).step({"tokens": tokens, "targets": targets}, 3e-3, 1)
    got = dict(line.split(" = ") for line in r.stdout.splitlines())
    assert set(got) == {"loss", "grad_norm"}
    assert float(got["loss"]) == want.loss and float(got["grad_norm"]) == want.grad_norm

    wrong = _feeds(step, params, tokens, targets)
    wrong["wte"] = wrong["wte"][:3]
    np.savez(tmp_path / "wrong.npz", **wrong)
    missing = _feeds(step, params, tokens, targets)
    del missing["targets"]
    np.savez(tmp_path / "missing.npz", **missing)
    (tmp_path / "junk.npz").write_bytes(b"PK not really")
    for name, message in (("wrong.npz", "'wte' is float32[3, 8]; the step takes float32[16, 8]"),
                          ("missing.npz", "no value for 'targets'"), ("junk.npz", "not a numpy .npz"),
                          ("none.npz", "no such feeds file")):
        r = hpgrem("run", str(path), "--feeds", str(tmp_path / name))
        assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, (name, r.stderr)
    r = hpgrem("run", str(path), "--feeds", str(feeds), "--pes", "4")
    assert r.returncode == 2 and "runs on one PE under `hpgrem run`" in r.stderr


def test_the_builder_names_the_key_of_a_shape_it_cannot_build():
    with pytest.raises(ValueError, match=r"model.d_model \(10\) is not divisible by model.n_head \(4\)"):
        build_forward(ModelShape(n_layer=1, n_head=4, d_model=10, seq_len=4, vocab=8), batch=1)
    with pytest.raises(ValueError, match=r"model.vocab must be a positive integer"):
        build_training_step(ModelShape(n_layer=1, n_head=1, d_model=4, seq_len=4, vocab=0), batch=1)
    with pytest.raises(ValueError, match=r"train.batch"):
        build_forward(SHAPE, batch=0)
    with pytest.raises(ValueError, match=r"train.dtype"):
        build_forward(SHAPE, batch=1, dtype="float16")


def test_graph_builder_infers_and_refuses():
    b = GraphBuilder()
    x, w = b.param("x", (3, 4), "float32"), b.param("w", (5, 4), "float32")
    y = b.op("matmul", x, w, transpose_b=True)
    assert b.type_of(y) == ((3, 5), "float32")
    with pytest.raises(ShapeError, match="inner dimensions differ"):
        b.op("matmul", x, w)
    with pytest.raises(ValueError, match="defined twice"):
        b.param("x", (1,), "float32")
    assert isinstance(b.graph((y,)), Graph)
