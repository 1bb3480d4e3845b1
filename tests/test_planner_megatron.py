"""Megatron-LM's closed forms: Narayanan et al. 2021, "Efficient Large-Scale Language Model
Training on GPU Clusters Using Megatron-LM" (SC'21, arXiv:2104.04473) Table 1, Table 2, Eqs. 2-4
and §2.2; Korthikanti et al. 2022 (arXiv:2205.05198) Table 5 MFU and HFU."""

import math

import pytest

from backend.planner import (
    MODELS,
    bubble_fraction,
    find_gpu,
    find_model,
    hardware_flops,
    make_plan,
    model_flops,
    narayanan_params,
    narayanan_training_time_s,
    planned_layout,
    utilization,
)

DAY = 86_400

# Narayanan et al. 2021, Table 1: parameters (billions), attention heads, hidden size, layers,
# tensor-parallel size, pipeline-parallel size, GPUs, batch size (V = 51,200, s = 2,048).
TABLE_1 = [
    ("1.7", 24, 2304, 24, 1, 1, 32, 512),
    ("3.6", 32, 3072, 30, 2, 1, 64, 512),
    ("7.5", 32, 4096, 36, 4, 1, 128, 512),
    ("18.4", 48, 6144, 40, 8, 1, 256, 1024),
    ("39.1", 64, 8192, 48, 8, 2, 512, 1536),
    ("76.1", 80, 10240, 60, 8, 4, 1024, 1792),
    ("145.6", 96, 12288, 80, 8, 8, 1536, 2304),
    ("310.1", 128, 16384, 96, 8, 16, 1920, 2160),
    ("529.6", 128, 20480, 105, 8, 35, 2520, 2520),
    ("1008.0", 160, 25600, 128, 8, 64, 3072, 3072),
]


@pytest.mark.parametrize("billions,heads,hidden,layers,tp,pp,gpus,batch", TABLE_1)
def test_table_1_parameter_counts(billions, heads, hidden, layers, tp, pp, gpus, batch):
    # Eq. 2, P = 12lh²(1 + 13/(12h) + (V + s)/(12lh)), rounds to every printed cell
    # (1.652 -> "1.7", ..., 1008.04 -> "1008.0").
    p = narayanan_params(layers, hidden, 51200, 2048)
    assert f"{p / 1e9:.1f}" == billions
    # The preset of that row counts the same parameters plus the final LayerNorm's 2h, and its
    # layout is valid as published.
    preset = next(m for m in MODELS.values()
                  if (m.layers, m.hidden, m.heads) == (layers, hidden, heads) and m.seq == 2048)
    assert preset.params == pytest.approx(p + 2 * hidden, abs=1)
    dp = gpus // (tp * pp)
    layout = planned_layout(tp=tp, pp=pp, dp=dp, global_batch=batch, recompute="full")
    make_plan(preset, find_gpu("a100-80gb"), layout)


def test_gpt2_parameter_counts():
    # GPT-2's released checkpoints (Radford et al. 2019): 124,439,808 / 354,823,168 /
    # 774,030,080 / 1,557,611,200 parameters with the tied LM head counted once.
    counts = [find_model(n).params for n in ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl")]
    assert counts == [124_439_808, 354_823_168, 774_030_080, 1_557_611_200]


def test_gpt3_is_the_174_6b_model_of_table_2():
    # Table 2 of Narayanan et al. lists GPT-3 as 174.6B parameters (V = 51,200).
    assert f"{find_model('gpt3-175b').params / 1e9:.1f}" == "174.6"


def test_equation_3_is_four_passes_of_the_matrix_products():
    # Eq. 3, F = 96Bslh²(1 + s/(6h) + V/(16lh)): three forward passes of the 24sh² + 4s²h layer
    # products plus backward, one more forward for recomputation, and 6BshV for the logits.
    m, B = find_model("gpt3-175b"), 1536
    s, l, h, V = m.seq, m.layers, m.hidden, m.vocab
    per_layer_forward = 24 * B * s * h * h + 4 * B * s * s * h
    assert hardware_flops(m, B, "full") == pytest.approx(4 * l * per_layer_forward + 6 * B * s * h * V)
    assert model_flops(m, B) == pytest.approx(3 * l * per_layer_forward + 6 * B * s * h * V)


def test_training_time_gpt3_34_days():
    # §5.1: GPT-3 (P = 175B), T = 300B tokens, n = 1024 A100s, X = 140 TFLOP/s: about 34 days.
    t = narayanan_training_time_s(300e9, 175e9, 1024, 140e12)
    assert round(t / DAY) == 34
    # The planner with the same X: Eq. 4 at the preset's 174.6B parameters is 33.8 days; counting
    # steps of Eq. 3's FLOPs (batch 1536) keeps the s/(6h) and V/(16lh) terms Eq. 4 drops, 34.7.
    plan = make_plan(find_model("gpt3-175b"), find_gpu("a100-80gb"),
                     planned_layout(tp=8, pp=16, dp=8, global_batch=1536, zero=1, recompute="full"),
                     tokens=300e9, achieved_flops=140e12)
    assert round(plan.training_time_eq4_s / DAY) == 34
    assert plan.training_time_s / DAY == pytest.approx(34.73, abs=0.01)
    l, h = 96, 12288
    eq3_over_eq4 = (1 + 2048 / (6 * h) + 51200 / (16 * l * h)) / (plan.params / (12 * l * h * h))
    assert plan.training_time_s / plan.training_time_eq4_s == pytest.approx(eq3_over_eq4)


def test_training_time_1t_84_days():
    # §5.1: the 1T model (1008B), T = 450B tokens, 3072 GPUs at 163 TFLOP/s: about 84 days.
    p = narayanan_params(128, 25600, 51200, 2048)
    assert round(narayanan_training_time_s(450e9, p, 3072, 163e12) / DAY) == 84


# Narayanan et al. 2021, Table 2 (PTD-P vs ZeRO-3): model, batch, GPUs, TFLOP/s per GPU, days to
# train on 300B tokens.
TABLE_2 = [
    ("gpt3-175b", 1536, 384, 144, 90), ("gpt3-175b", 1536, 768, 88, 74),
    ("gpt3-175b", 1536, 1536, 44, 74), ("megatron-529.6b", 2560, 640, 138, 169),
    ("megatron-529.6b", 2240, 1120, 98, 137), ("megatron-529.6b", 2240, 2240, 48, 140),
    ("gpt3-175b", 1536, 384, 153, 84), ("gpt3-175b", 1536, 768, 149, 43),
    ("gpt3-175b", 1536, 1536, 141, 23), ("megatron-529.6b", 2240, 560, 171, 156),
    ("megatron-529.6b", 2240, 1120, 167, 80), ("megatron-529.6b", 2240, 2240, 159, 42),
]


@pytest.mark.parametrize("name,batch,gpus,tflops,days", TABLE_2)
def test_table_2_training_days(name, batch, gpus, tflops, days):
    # Steps of Eq. 3's FLOPs at the measured rate reproduce each row within the rounding of the
    # printed TFLOP/s (±0.5) and days (±0.5).
    m = find_model(name)
    steps = 300e9 / (batch * m.seq)
    flops = hardware_flops(m, batch, "full")
    slowest = steps * flops / (gpus * (tflops - 0.5) * 1e12) / DAY
    fastest = steps * flops / (gpus * (tflops + 0.5) * 1e12) / DAY
    assert fastest <= days + 0.5 and slowest >= days - 0.5


def test_pipeline_bubble():
    # §2.2.1: bubble time fraction (p - 1)/m; §2.2.2: (1/v)(p - 1)/m interleaved.
    assert bubble_fraction(8, 64) == 7 / 64
    assert bubble_fraction(8, 64, 2) == 7 / 128
    assert bubble_fraction(1, 16) == 0
    plan = make_plan(find_model("gpt3-175b"), find_gpu("a100-80gb"),
                     planned_layout(tp=8, pp=8, dp=1, virtual_stages=4, global_batch=64))
    assert plan.bubble_fraction == 7 / 256
    # In time: (p - 1)/v micro-batch times (Narayanan et al. 2021, §2.2.2).
    step = plan.step
    microbatch_s = (step.compute + step.tensor_parallel + step.pipeline_p2p) / 64
    assert step.bubble == pytest.approx(7 / 4 * microbatch_s)


# Korthikanti et al. 2022, Table 5 ("present work": sequence parallelism + selective
# recomputation on A100s, 312 TFLOP/s peak): model, GPUs, global batch, iteration time (s),
# MFU %, HFU %.
TABLE_5 = [
    ("korthikanti-22b", 8, 4, 1.10, 41.5, 43.7),
    ("gpt3-175b", 64, 64, 13.75, 51.4, 52.8),
    ("megatron-529.6b", 280, 280, 37.83, 56.0, 57.0),
    ("megatron-1t", 512, 512, 71.49, 56.3, 57.0),
]


def _consistent(flops, gpus, seconds, percent):
    # The MFU from the printed time (±0.005 s) overlaps the printed percentage (±0.05).
    low = utilization(flops, seconds + 0.005, gpus, 312e12) * 100
    high = utilization(flops, seconds - 0.005, gpus, 312e12) * 100
    return low <= percent + 0.05 and high >= percent - 0.05


@pytest.mark.parametrize("name,gpus,batch,seconds,mfu,hfu", TABLE_5)
def test_table_5_mfu_and_hfu(name, gpus, batch, seconds, mfu, hfu):
    m = find_model(name)
    assert _consistent(model_flops(m, batch), gpus, seconds, mfu)
    assert _consistent(hardware_flops(m, batch, "selective"), gpus, seconds, hfu)
    if name != "korthikanti-22b":  # the 22B time has only three significant digits
        assert math.isclose(utilization(model_flops(m, batch), seconds, gpus, 312e12) * 100, mfu,
                            abs_tol=0.05)
