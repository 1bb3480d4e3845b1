"""The planner: memory per GPU and time per step of GPT training layouts at scale.

Analytic models that reproduce the published results exactly where those are exact: ZeRO's
model-state memory (Rajbhandari et al. 2020), activation memory with tensor/sequence parallelism
and recomputation (Korthikanti et al. 2022), Megatron-LM's parameter, FLOP, bubble and training-
time formulas (Narayanan et al. 2021), and DeepSpeed's ZeRO-2/3 estimators. docs/planner.md
explains them; ``hpgrem plan`` (``backend.planner.cli.main``) is the command line.
"""

from backend.planner.deepspeed import Estimate, zero2_estimate, zero3_estimate
from backend.planner.errors import PlanError
from backend.planner.flops import flops_from_params, hardware_flops, model_flops
from backend.planner.hardware import GPUS, Hardware, find_gpu
from backend.planner.layout import Layout, check_layout, planned_layout
from backend.planner.memory import (
    MemoryBreakdown,
    activation_bytes_per_layer,
    max_params,
    memory_per_gpu,
    model_states,
    stage_activations,
    zero_model_state_bytes,
)
from backend.planner.models import MODELS, ModelConfig, find_model, narayanan_params
from backend.planner.plan import Plan, make_plan
from backend.planner.search import Choices, SearchResult, search
from backend.planner.timing import (
    StepTime,
    bubble_fraction,
    narayanan_training_time_s,
    ring_all_reduce_s,
    step_time,
    utilization,
)

__all__ = [
    "Choices", "Estimate", "GPUS", "Hardware", "Layout", "MODELS", "MemoryBreakdown", "ModelConfig",
    "Plan", "PlanError", "SearchResult", "StepTime", "activation_bytes_per_layer", "bubble_fraction",
    "check_layout", "find_gpu", "planned_layout", "find_model", "flops_from_params", "hardware_flops", "make_plan",
    "max_params", "memory_per_gpu", "model_flops", "model_states", "narayanan_params",
    "narayanan_training_time_s", "ring_all_reduce_s", "search", "stage_activations", "step_time",
    "utilization", "zero2_estimate", "zero3_estimate", "zero_model_state_bytes",
]
