"""A parallel layout as the planner takes it (the Layout itself: backend/layout.py): made from a
global batch, and checked for what a plan may assume."""

from __future__ import annotations

from backend.layout import OFFLOAD, RECOMPUTE, Layout
from backend.planner.errors import PlanError
from backend.planner.models import ModelConfig

SCHEDULES = ("1f1b", "gpipe")
"""The planner's schedules: interleaved 1F1B is 1f1b with virtual stages."""


def planned_layout(global_batch: int, *, micro_batch: int = 1, dp: int = 1, **options) -> Layout:
    """The layout of a step of `global_batch` sequences in micro-batches of `micro_batch` on each
    of `dp` data-parallel pipelines (`options`: the Layout's other fields); PlanError when they
    are not positive or dp * micro_batch does not divide the batch."""
    for flag, value in (("--dp", dp), ("--micro-batch", micro_batch), ("--global-batch", global_batch)):
        if value <= 0:
            raise PlanError(f"{flag} must be positive, got {value}")
    if global_batch % (dp * micro_batch):
        raise PlanError(f"global batch {global_batch} is not divisible by "
                        f"dp * micro-batch = {dp} * {micro_batch}")
    return Layout(dp=dp, micro_batch=micro_batch, micro_batches=global_batch // (dp * micro_batch), **options)


def check_layout(layout: Layout, model: ModelConfig | None) -> None:
    """Raise a PlanError naming the first thing about ``layout`` that cannot run."""
    t, p, d, v = layout.tp, layout.pp, layout.dp, layout.virtual_stages
    for flag, value in (("--tp", t), ("--pp", p), ("--dp", d), ("--virtual-stages", v),
                        ("--micro-batch", layout.micro_batch), ("--micro-batches", layout.micro_batches)):
        if value <= 0:
            raise PlanError(f"{flag} must be positive, got {value}")
    if layout.zero not in (0, 1, 2, 3):
        raise PlanError(f"--zero must be 0, 1, 2 or 3, got {layout.zero}")
    if layout.recompute not in RECOMPUTE:
        raise PlanError(f"--recompute must be one of {', '.join(RECOMPUTE)}")
    if layout.offload not in OFFLOAD:
        raise PlanError(f"--offload must be one of {', '.join(OFFLOAD)}")
    if layout.schedule not in SCHEDULES:
        raise PlanError(f"--schedule must be one of {', '.join(SCHEDULES)}")
    m = layout.micro_batches
    if model is not None:
        if model.heads % t:
            raise PlanError(f"{model.heads} attention heads are not divisible by tp={t}")
        if model.layers % (p * v):
            raise PlanError(f"{model.layers} layers are not divisible by pp * virtual-stages = {p * v}")
    if v > 1:
        # Megatron's interleaved schedule runs micro-batches in groups of p (Narayanan et al. 2021, §2.2.2).
        if layout.schedule != "1f1b":
            raise PlanError("virtual stages need --schedule 1f1b (the interleaved schedule)")
        if p < 2:
            raise PlanError("virtual stages need pp >= 2")
        if m % p:
            raise PlanError(f"the interleaved schedule needs micro-batches ({m}) divisible by pp={p}")
    if layout.offload == "optimizer" and layout.zero < 1:
        raise PlanError("--offload optimizer needs --zero 1 or higher (ZeRO-Offload)")
    if layout.offload == "params" and layout.zero != 3:
        raise PlanError("--offload params needs --zero 3 (ZeRO-Infinity)")
