"""One evaluated layout: memory, FLOPs, step time, utilization and training time together."""

from __future__ import annotations

from dataclasses import dataclass

from backend.planner.errors import PlanError
from backend.planner.flops import flops_from_params, hardware_flops, model_flops
from backend.planner.hardware import Hardware
from backend.planner.layout import Layout, check_layout
from backend.planner.memory import (
    MemoryBreakdown,
    activation_bytes_per_layer,
    memory_from_params,
    memory_per_gpu,
    params_on_gpu,
    stage_activations,
)
from backend.planner.models import ModelConfig
from backend.planner.timing import (
    StepTime,
    bubble_fraction,
    narayanan_training_time_s,
    step_time,
    step_time_from_achieved,
    utilization,
)


@dataclass(frozen=True, slots=True)
class Plan:
    """The planner's answer for one model, GPU type and layout."""

    model: ModelConfig | None
    """None when only a parameter count was given."""
    params: float
    params_per_gpu: float
    """Parameters on one GPU of the first stage before ZeRO shards them."""
    seq: int
    hardware: Hardware
    layout: Layout
    memory: MemoryBreakdown
    per_layer: float | None
    """Activation bytes of one layer for one micro-batch."""
    first_stage: float | None
    """Activation bytes the first pipeline stage holds at its peak."""
    flops_per_iteration: float
    """Executed FLOPs of one step, recomputation included."""
    model_flops_per_iteration: float
    step: StepTime
    time_model: str
    """``hardware`` (predicted from the hardware description) or ``achieved`` (--achieved-flops)."""
    tokens: float | None
    layers_first_stage: float | None = None
    """The transformer layers' part of ``first_stage``: Korthikanti et al.'s Eq. 5 (Eq. 6 with
    the interleaving factor 1 + (p - 1)/(p·v)), without embedding, output layer or working set."""

    @property
    def step_time_s(self) -> float:
        return self.step.total

    @property
    def fits(self) -> bool:
        return self.memory.total <= self.hardware.memory_bytes

    @property
    def mfu(self) -> float:
        return utilization(self.model_flops_per_iteration, self.step_time_s, self.layout.gpus,
                           self.hardware.peak)

    @property
    def hfu(self) -> float:
        return utilization(self.flops_per_iteration, self.step_time_s, self.layout.gpus,
                           self.hardware.peak)

    @property
    def achieved_flops_per_gpu(self) -> float:
        return self.flops_per_iteration / (self.step_time_s * self.layout.gpus)

    @property
    def bubble_fraction(self) -> float:
        return bubble_fraction(self.layout.pp, self.layout.micro_batches, self.layout.virtual_stages)

    @property
    def tokens_per_iteration(self) -> int:
        return self.layout.global_batch * self.seq

    @property
    def training_time_s(self) -> float | None:
        """Steps to see ``tokens`` tokens times the step time."""
        if self.tokens is None:
            return None
        return self.tokens / self.tokens_per_iteration * self.step_time_s

    @property
    def training_time_eq4_s(self) -> float | None:
        """Narayanan et al. 2021, Eq. 4 (8·T·P/(n·X); 6·T·P/(n·X) without full recomputation) at
        this plan's achieved FLOP/s per GPU."""
        if self.tokens is None:
            return None
        per_param_token = 8 if self.layout.recompute == "full" else 6
        return narayanan_training_time_s(self.tokens, self.params, self.layout.gpus,
                                         self.achieved_flops_per_gpu, per_param_token)


def make_plan(model: ModelConfig | None, hardware: Hardware, layout: Layout, *,
              params: float | None = None, seq: int | None = None, tokens: float | None = None,
              achieved_flops: float | None = None) -> Plan:
    """Evaluate ``layout`` for ``model`` (or a bare ``params`` count with sequence ``seq``)."""
    check_layout(layout, model)
    if tokens is not None and tokens <= 0:
        raise PlanError(f"--tokens must be positive, got {tokens:g}")
    if achieved_flops is not None and achieved_flops <= 0:
        raise PlanError(f"--achieved-flops must be positive, got {achieved_flops:g}")
    B = layout.global_batch
    if model is not None:
        total_params = float(model.params)
        seq_len = model.seq
        memory = memory_per_gpu(model, layout)
        per_layer = activation_bytes_per_layer(model, layout.micro_batch, layout.tp,
                                               layout.sequence_parallel, layout.recompute)
        first = "only" if layout.pp == 1 else "first"
        first_acts = stage_activations(model, layout, first)
        first_stage, layers_first_stage = first_acts.total, first_acts.layers
        hw_flops = hardware_flops(model, B, layout.recompute)
        mdl_flops = model_flops(model, B)
        params_gpu = params_on_gpu(model, layout.tp, layout.pp, first)
    else:
        if params is None or params <= 0:
            raise PlanError("give a model (--model or --layers/--hidden/--heads/--vocab/--seq) "
                            "or a positive --params")
        total_params = float(params)
        seq_len = seq if seq is not None else 2048
        memory = memory_from_params(total_params, layout)
        per_layer = first_stage = layers_first_stage = None
        mdl_flops, hw_flops = flops_from_params(total_params, B * seq_len, layout.recompute)
        params_gpu = total_params / layout.model_parallel
    if achieved_flops is not None:
        step = step_time_from_achieved(hw_flops, layout.gpus, achieved_flops)
        time_model = "achieved"
    else:
        step = step_time(model, params_gpu, layout, hardware, hw_flops)
        time_model = "hardware"
    return Plan(model, total_params, params_gpu, seq_len, hardware, layout, memory, per_layer,
                first_stage, hw_flops, mdl_flops, step, time_model, tokens, layers_first_stage)
