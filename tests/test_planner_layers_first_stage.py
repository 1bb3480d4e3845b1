"""``hpgrem plan --json``'s activations.layers_first_stage, ``--zero-init`` of DeepSpeed's ZeRO-3
estimator, and the planner's count of hpgrem's own runtime (``runtime_precision``)."""

import json

import pytest

from backend.planner.cli import main
from backend.planner.deepspeed import zero3_estimate
from backend.planner.memory import MIXED, Precision, activation_bytes_per_layer, model_states, runtime_precision
from backend.planner.models import find_model

GPT3 = find_model("gpt3-175b")


def run_json(capsys, *argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("pp,v", [(8, 1), (8, 2), (4, 3)])
def test_layers_first_stage_is_equation_5_times_the_interleaving_factor(capsys, pp, v):
    # Korthikanti et al. 2022, Eq. 5: (sbhL/t)(34 + 5as/h) with tensor + sequence parallelism;
    # the interleaved schedule multiplies it by 1 + (p - 1)/(p·v) (§4.2.3).
    m, t = GPT3, 8
    out = run_json(capsys, "--model", "gpt3-175b", "--tp", str(t), "--pp", str(pp), "--dp", "1",
                   "--virtual-stages", str(v), "--global-batch", str(8 * pp), "--seq-parallel")
    s, b, h, a, L = m.seq, 1, m.hidden, m.heads, m.layers
    eq5 = s * b * h * L / t * (34 + 5 * a * s / h)
    factor = 1 + (pp - 1) / (pp * v) if v > 1 else 1
    acts = out["activations"]
    assert acts["layers_first_stage"] == pytest.approx(eq5 * factor, rel=1e-9)
    assert acts["layers_first_stage"] < acts["first_stage"]  # the embedding's masks are beside it


def test_layers_first_stage_is_none_without_a_shape(capsys):
    out = run_json(capsys, "--params", "1e9")
    assert out["activations"]["layers_first_stage"] is None


@pytest.mark.parametrize("offload", ["none", "optimizer", "params"])
def test_zero_init_reaches_the_zero3_estimator(capsys, offload):
    args = ("--model", "gpt2-xl", "--dp", "8", "--zero", "3", "--offload", offload, "--estimator", "deepspeed")
    default = run_json(capsys, *args)["estimator"]
    built_whole = run_json(capsys, *args, "--zero-init", "0")["estimator"]
    partitioned = run_json(capsys, *args, "--zero-init", "1")["estimator"]
    assert default == partitioned and partitioned["zero_init"] is True and built_whole["zero_init"] is False
    m = find_model("gpt2-xl")
    for zero_init, got in ((False, built_whole), (True, partitioned)):
        want = zero3_estimate(m.params, m.largest_layer_params, 8, 1, cpu_offload=offload != "none",
                              cpu_offload_params=offload == "params", zero_init=zero_init)
        assert (got["gpu_bytes"], got["cpu_bytes"]) == (want.gpu_bytes, want.cpu_bytes)
    # built whole, every GPU of the node first holds the model's 16-bit parameters in host memory
    assert built_whole["cpu_bytes"] > partitioned["cpu_bytes"]


@pytest.mark.parametrize("argv,message", [
    (("--model", "gpt2", "--zero-init", "0"), "--zero-init is an option of --estimator deepspeed"),
    (("--model", "gpt2", "--dp", "2", "--zero", "2", "--estimator", "deepspeed", "--zero-init", "1"),
     "--zero-init is an option of the ZeRO-3 estimator"),
])
def test_zero_init_out_of_place_is_a_usage_error(capsys, argv, message):
    assert main(list(argv)) == 2
    assert message in capsys.readouterr().err


def test_zero_init_takes_zero_or_one(capsys):
    assert main(["--model", "gpt2", "--estimator", "deepspeed", "--zero", "3", "--zero-init", "2"]) == 2


def test_mixed_precision_is_the_default_and_unchanged():
    # Korthikanti et al. Table 2's row without parallelism: sbh(34 + 5as/h).
    m = GPT3
    sbh = m.seq * m.hidden
    assert activation_bytes_per_layer(m, 1) == pytest.approx(sbh * (34 + 5 * m.heads * m.seq / m.hidden))
    assert activation_bytes_per_layer(m, 1, precision=MIXED) == activation_bytes_per_layer(m, 1)
    assert model_states(100, 0, 1).total == 16 * 100


def test_runtime_precision_counts_what_hpgrem_keeps():
    # float32, no dropout: the replicated 4sbh elements, the split 12sbh plus the GELU's tanh
    # 4sbh, and the softmax's as²b; model states 4 + 4 + 8 bytes per parameter (AdamW m and v).
    m = find_model("gpt2")
    f32 = runtime_precision(4)
    assert f32 == Precision(value=4, optimizer=8, logits=4, dropout=False, gelu_tanh=True)
    s, h, a, t = m.seq, m.hidden, m.heads, 2
    per_layer = activation_bytes_per_layer(m, 1, tp=t, precision=f32)
    assert per_layer == pytest.approx(4 * (s * h * (4 + 16 / t) + a * s * s / t))
    assert activation_bytes_per_layer(m, 1, recompute="full", precision=f32) == 4 * s * h
    assert model_states(100, 0, 1, precision=f32).total == 16 * 100
    assert model_states(100, 3, 4, precision=f32).total == 16 * 100 / 4
