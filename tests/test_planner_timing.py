"""Step time: ring collectives, the achieved-FLOP/s mode, and the hardware model against the
iteration times Korthikanti et al. 2022 measured (Table 5)."""

import pytest

from backend.planner import planned_layout, find_gpu, find_model, make_plan, ring_all_reduce_s
from backend.planner.timing import point_to_point_s, ring_reduce_scatter_s

A100 = find_gpu("a100-80gb")


def test_ring_collectives():
    # A ring all-reduce sends 2(n-1)/n of the message over each link in 2(n-1) steps (Patarasuk
    # and Yuan 2009); reduce-scatter and all-gather are half of it each.
    assert ring_all_reduce_s(1e9, 8, 100e9, 1e-6) == pytest.approx(2 * 7 / 8 * 1e9 / 100e9 + 14e-6)
    assert ring_reduce_scatter_s(1e9, 8, 100e9, 1e-6) * 2 == pytest.approx(
        ring_all_reduce_s(1e9, 8, 100e9, 1e-6))
    assert ring_all_reduce_s(1e9, 1, 100e9, 1e-6) == 0
    assert point_to_point_s(1e9, 100e9, 1e-6) == pytest.approx(0.01 + 1e-6)


def test_achieved_flops_replace_the_hardware_model():
    m = find_model("gpt3-175b")
    layout = planned_layout(tp=8, pp=16, dp=8, global_batch=1536, zero=1, recompute="full")
    plan = make_plan(m, A100, layout, achieved_flops=140e12)
    assert plan.time_model == "achieved"
    assert plan.step_time_s == pytest.approx(plan.flops_per_iteration / (1024 * 140e12))
    assert plan.achieved_flops_per_gpu == pytest.approx(140e12)
    assert plan.hfu == pytest.approx(140 / 312)
    assert plan.mfu == pytest.approx(plan.hfu * plan.model_flops_per_iteration / plan.flops_per_iteration)


def test_step_time_parts():
    m = find_model("gpt3-175b")
    plan = make_plan(m, A100, planned_layout(tp=8, pp=16, dp=8, global_batch=1536, zero=1))
    step = plan.step
    assert step.total == pytest.approx(step.compute + step.tensor_parallel + step.pipeline_p2p
                                       + step.bubble + step.data_parallel + step.optimizer)
    assert step.compute == pytest.approx(plan.flops_per_iteration / 1024 / A100.achievable_flops)
    assert min(step.tensor_parallel, step.pipeline_p2p, step.bubble) > 0


# Korthikanti et al. 2022, Table 5: iteration seconds with full recomputation and with sequence
# parallelism + selective recomputation (TP 8, micro-batch 1, A100 80GB).
TABLE_5 = [
    ("korthikanti-22b", 1, 8, 4, 1.42, 1.10),
    ("gpt3-175b", 8, 64, 64, 18.13, 13.75),
    ("megatron-529.6b", 35, 280, 280, 49.05, 37.83),
    ("megatron-1t", 64, 512, 512, 94.42, 71.49),
]


@pytest.mark.parametrize("name,pp,gpus,batch,full_s,present_s", TABLE_5)
def test_hardware_model_near_measured_iteration_times(name, pp, gpus, batch, full_s, present_s):
    # An approximation, not a reproduction: the hardware model's one assumed constant (65% of peak
    # for matrix products) was chosen against this table. Within 20%; the three large models
    # within 7% (docs/planner.md lists every prediction).
    m = find_model(name)
    tolerance = 0.2 if name == "korthikanti-22b" else 0.07
    for recompute, sp, measured in (("full", False, full_s), ("selective", True, present_s)):
        layout = planned_layout(tp=8, pp=pp, dp=gpus // (8 * pp), global_batch=batch,
                        recompute=recompute, sequence_parallel=sp)
        plan = make_plan(m, A100, layout)
        assert plan.step_time_s == pytest.approx(measured, rel=tolerance)
        assert plan.fits  # every configuration of the paper ran on 80 GB A100s
