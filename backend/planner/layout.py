"""A parallel layout: how one training step is split over ``dp * tp * pp`` GPUs."""

from __future__ import annotations

from dataclasses import dataclass

from backend.planner.errors import PlanError
from backend.planner.models import ModelConfig

RECOMPUTE = ("none", "selective", "full")
OFFLOAD = ("none", "optimizer", "params")
SCHEDULES = ("1f1b", "gpipe")


@dataclass(frozen=True, slots=True)
class Layout:
    """Data, tensor and pipeline parallel degrees and the memory-saving options."""

    tp: int = 1
    """Tensor-parallel degree t (Megatron: heads and MLP columns split)."""
    pp: int = 1
    """Pipeline stages p."""
    dp: int = 1
    """Data-parallel degree d (ZeRO shards over this group)."""
    virtual_stages: int = 1
    """Model chunks per pipeline rank v (interleaved 1F1B when above 1)."""
    micro_batch: int = 1
    """Sequences per micro-batch b."""
    global_batch: int = 1
    """Sequences per optimizer step B = d · b · m."""
    zero: int = 0
    """ZeRO stage 0 (plain data parallel) to 3."""
    sequence_parallel: bool = False
    """Korthikanti et al.'s sequence parallelism inside the tensor-parallel group."""
    recompute: str = "none"
    """Activation recomputation: ``none``, ``selective`` (attention core) or ``full`` (per layer)."""
    offload: str = "none"
    """Model states kept in host memory: ``none``, ``optimizer`` or ``params`` (ZeRO-3 only)."""
    schedule: str = "1f1b"
    """Pipeline schedule: ``1f1b`` (PipeDream-Flush, interleaved when v > 1) or ``gpipe``."""

    @property
    def gpus(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def microbatches(self) -> int:
        """Micro-batches per step on each pipeline, m = B / (d · b)."""
        return self.global_batch // (self.dp * self.micro_batch)

    @property
    def model_parallel(self) -> int:
        """GPUs that hold one copy of the model between them, t · p."""
        return self.tp * self.pp


def check_layout(layout: Layout, model: ModelConfig | None) -> None:
    """Raise a PlanError naming the first thing about ``layout`` that cannot run."""
    t, p, d, v = layout.tp, layout.pp, layout.dp, layout.virtual_stages
    for flag, value in (("--tp", t), ("--pp", p), ("--dp", d), ("--virtual-stages", v),
                        ("--micro-batch", layout.micro_batch), ("--global-batch", layout.global_batch)):
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
    if layout.global_batch % (d * layout.micro_batch):
        raise PlanError(f"global batch {layout.global_batch} is not divisible by "
                        f"dp * micro-batch = {d} * {layout.micro_batch}")
    m = layout.microbatches
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
