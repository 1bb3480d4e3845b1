"""Activation memory: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models" (arXiv:2205.05198; MLSys 2023), Table 2, Eqs. 5-6, §4.2.3, §4.3 and the
22B/175B/530B/1T models of its Table 1 (TP 8, s = 2048, micro-batch 1, V = 51200)."""

import pytest

from backend.planner import planned_layout, activation_bytes_per_layer, find_model, hardware_flops, model_flops
from backend.planner import stage_activations

GPT3 = find_model("gpt3-175b")
# Korthikanti et al. Table 1: model, pipeline size (TP 8 throughout).
KORTHIKANTI = [("korthikanti-22b", 1), ("gpt3-175b", 8), ("megatron-529.6b", 35), ("megatron-1t", 64)]


def sbh(model, b=1):
    return model.seq * b * model.hidden


def test_table_2_rows_for_gpt3():
    # Table 2, "Activations memory per transformer layer", with a = 96, s = 2048, h = 12288, t = 8.
    t, unit = 8, sbh(GPT3)
    per = lambda **kw: activation_bytes_per_layer(GPT3, 1, **kw)  # noqa: E731
    assert per() == unit * (34 + 80)  # no parallelism: sbh(34 + 5as/h)
    assert per(tp=t) == unit * (10 + 24 / t + 80 / t)  # tensor parallel (baseline)
    assert per(tp=t, sequence_parallel=True) == unit * (34 / t + 80 / t)  # tensor + sequence
    assert per(tp=t, recompute="selective") == unit * (10 + 24 / t)  # tensor + selective
    assert per(tp=t, sequence_parallel=True, recompute="selective") == unit * 34 / t
    assert per(tp=t, recompute="full") == unit * 2  # full recomputation: sbh(2)


@pytest.mark.parametrize("name", [name for name, _ in KORTHIKANTI])
@pytest.mark.parametrize("t", [1, 2, 4, 8])
def test_table_2_formulas_for_every_model(name, t):
    m = find_model(name)
    s, h, a = m.seq, m.hidden, m.heads
    for b in (1, 4):
        unit = sbh(m, b)
        assert activation_bytes_per_layer(m, b, t) == pytest.approx(
            unit * (10 + 24 / t + 5 * a * s / (h * t)))
        assert activation_bytes_per_layer(m, b, t, True) == pytest.approx(
            unit / t * (34 + 5 * a * s / h))
        assert activation_bytes_per_layer(m, b, t, True, "selective") == pytest.approx(34 * unit / t)
        assert activation_bytes_per_layer(m, b, t, False, "selective") == pytest.approx(
            unit * (10 + 24 / t))
    # Eq. 1 is the t = 1 case of Eqs. 2 and 4.
    if t == 1:
        assert activation_bytes_per_layer(m, 1, 1) == pytest.approx(
            sbh(m) * (34 + 5 * a * s / h))


def test_attention_term_of_the_examples():
    # §4.2.2: "5as/h" is 80 for GPT-3 175B and 64 for MT-NLG 530B (and the 1T model), and the
    # linear part is 34; selective recomputation saves 70% and 65% of activation memory.
    term = {name: 5 * m.heads * m.seq / m.hidden for name, m in
            ((n, find_model(n)) for n, _ in KORTHIKANTI)}
    assert term["gpt3-175b"] == 80
    assert term["megatron-529.6b"] == 64
    assert term["megatron-1t"] == 64
    assert term["korthikanti-22b"] == pytest.approx(320 / 3)
    for name, saving in (("gpt3-175b", 70), ("megatron-529.6b", 65)):
        m = find_model(name)
        full = activation_bytes_per_layer(m, 1)
        selective = activation_bytes_per_layer(m, 1, recompute="selective")
        assert round(100 * (1 - selective / full)) == saving


def test_selective_recompute_flops_overhead():
    # §5.2: selective recomputation costs 2.7% (GPT-3) and 1.6% (MT-NLG) more FLOPs; the paper's
    # hardware FLOPs 72Bslh²(1 + s/(3h) + V/(12hl)) over model FLOPs 72Bslh²(1 + s/(6h) + V/(12hl)).
    for name, percent in (("gpt3-175b", 2.7), ("megatron-529.6b", 1.6)):
        m = find_model(name)
        overhead = hardware_flops(m, 1, "selective") / model_flops(m, 1) - 1
        assert round(100 * overhead, 1) == percent


@pytest.mark.parametrize("name,pp", KORTHIKANTI)
def test_first_stage_equation_5_and_6(name, pp):
    # §4.2.3, Eq. 5: with 1F1B the first stage holds p micro-batches of L/p layers, so its
    # activations are (sbhL/t)(34 + 5as/h) with tensor + sequence parallelism, whatever p is;
    # Eq. 6: 34·sbhL/t with selective recomputation. §4.3 adds the embedding dropout masks,
    # sbhp/t, and for p = 1 the output layer, (4sbh/t)(1 + v/h).
    m = find_model(name)
    t, L, s, h, a, v = 8, m.layers, m.seq, m.hidden, m.heads, m.vocab
    unit = sbh(m)
    stage = "only" if pp == 1 else "first"
    for recompute, per_layer in (("none", unit / t * (34 + 5 * a * s / h)), ("selective", 34 * unit / t)):
        layout = planned_layout(tp=t, pp=pp, dp=1, global_batch=4 * pp, sequence_parallel=True,
                        recompute=recompute)
        acts = stage_activations(m, layout, stage)
        assert acts.layers == pytest.approx(per_layer * L)
        extra = unit * L / t * (pp / L + (4 / L) * (1 + v / h) * (pp == 1))
        assert acts.embedding + acts.output == pytest.approx(extra)


def test_interleaved_schedule_factor():
    # §4.2.3: the interleaved schedule multiplies the first stage's activations by
    # 1 + (p - 1)/(p·m) for m interleaving stages (our virtual stages v).
    p, v = 8, 2
    layout = planned_layout(tp=8, pp=p, dp=1, virtual_stages=v, global_batch=64, sequence_parallel=True,
                    recompute="selective")
    acts = stage_activations(GPT3, layout, "first")
    per_layer = 34 * sbh(GPT3) / 8
    assert acts.layers == pytest.approx(per_layer * GPT3.layers * (1 + (p - 1) / (p * v)))


def test_gpipe_holds_every_microbatch_and_1f1b_at_most_p():
    # Narayanan et al. 2021, §2.2.1: GPipe stashes all m micro-batches, 1F1B at most p.
    m, p = 32, 8
    per_layer = activation_bytes_per_layer(GPT3, 1, 8, True, "selective")
    layers_per_stage = GPT3.layers / p
    for schedule, in_flight in (("gpipe", m), ("1f1b", p)):
        layout = planned_layout(tp=8, pp=p, dp=1, global_batch=m, sequence_parallel=True,
                        recompute="selective", schedule=schedule)
        assert stage_activations(GPT3, layout, "first").layers == pytest.approx(
            per_layer * layers_per_stage * in_flight)
    few = planned_layout(tp=8, pp=p, dp=1, global_batch=3, sequence_parallel=True, recompute="selective")
    assert stage_activations(GPT3, few, "first").layers == pytest.approx(per_layer * layers_per_stage * 3)


def test_full_recompute_keeps_layer_inputs_and_one_working_layer():
    # Korthikanti et al.: full recomputation stores 2sbh per layer, 2sbhL in all; at its peak the
    # backward also rebuilds one layer's activations (the planner's working set).
    layout = planned_layout(tp=8, pp=1, dp=1, global_batch=1, recompute="full")
    acts = stage_activations(GPT3, layout, "only")
    assert acts.layers == 2 * sbh(GPT3) * GPT3.layers
    assert acts.working_set == activation_bytes_per_layer(GPT3, 1, 8) - 2 * sbh(GPT3)
