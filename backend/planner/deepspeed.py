"""DeepSpeed's published ZeRO-2 and ZeRO-3 model-state memory estimators.

The formulas of ``estimate_zero2_model_states_mem_needs`` (deepspeed/runtime/zero/stage_1_and_2.py)
and ``estimate_zero3_model_states_mem_needs`` (deepspeed/runtime/zero/stage3.py), as of DeepSpeed
commit 38327e07 (February 2025), restated here. They count model states only, per GPU and per
node's host memory, with a 1.5x safety factor on host memory; DeepSpeed truncates to integers.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.planner.errors import PlanError

ADDITIONAL_BUFFER_FACTOR = 1.5
"""DeepSpeed's default ``additional_buffer_factor`` for host memory."""


@dataclass(frozen=True, slots=True)
class Estimate:
    """What DeepSpeed's estimator prints: bytes per GPU and bytes of host memory per node."""

    gpu_bytes: int
    cpu_bytes: int


def zero2_estimate(total_params: float, gpus_per_node: int = 1, nodes: int = 1,
                   cpu_offload: bool = True,
                   additional_buffer_factor: float = ADDITIONAL_BUFFER_FACTOR) -> Estimate:
    """ZeRO-2 model states.

    Offloaded optimizer: 2 bytes of fp16 parameters per GPU; host max(4·N, 16) bytes per
    parameter, N the GPUs in all nodes. Otherwise: 2Ψ + 18Ψ/N on each GPU (18 = 16-bit and
    fp32 gradients, fp32 master weights, momentum and variance; DeepSpeed PR #5099, whose
    documentation still shows the older 4Ψ + 16Ψ/N), and 4Ψ per GPU of the node on the host.
    """
    total_gpus = nodes * gpus_per_node
    if cpu_offload:
        gpu = 2 * total_params
        cpu = total_params * max(4 * total_gpus, 16) * additional_buffer_factor
    else:
        gpu = 2 * total_params + int(18 * total_params / total_gpus)
        cpu = total_params * 4 * gpus_per_node * additional_buffer_factor
    return Estimate(int(gpu), int(cpu))


def zero3_estimate(total_params: float, largest_layer_params: float, gpus_per_node: int = 1,
                   nodes: int = 1, cpu_offload: bool = True, cpu_offload_params: bool = True,
                   zero_init: bool = True,
                   additional_buffer_factor: float = ADDITIONAL_BUFFER_FACTOR) -> Estimate:
    """ZeRO-3 model states.

    Every GPU gathers the largest layer's 16-bit parameters and gradients (4 bytes each). On top:
    nothing when parameters and optimizer are offloaded, 2Ψ/N with only the optimizer offloaded,
    18Ψ/N with nothing offloaded. Host memory per node: 18Ψ (params offloaded) or 16Ψ (optimizer
    only) divided among the nodes, or the full model's 4 bytes per GPU when not initialised
    partitioned (``zero_init`` false), times the buffer factor.
    """
    total_gpus = nodes * gpus_per_node
    per_node = 1 / nodes
    largest_layer_memory = 4 * largest_layer_params
    if cpu_offload and cpu_offload_params:
        gpu = largest_layer_memory
        host_per_param = 18 * per_node if zero_init else max(4 * gpus_per_node, 18 * per_node)
        cpu = total_params * host_per_param * additional_buffer_factor
    elif cpu_offload:
        gpu = largest_layer_memory + int(2 * total_params / total_gpus)
        host_per_param = 16 * per_node if zero_init else max(4 * gpus_per_node, 16 * per_node)
        cpu = total_params * host_per_param * additional_buffer_factor
    else:
        gpu = largest_layer_memory + int(18 * total_params / total_gpus)
        if zero_init:
            cpu = largest_layer_params * 4 * gpus_per_node * additional_buffer_factor
        else:
            cpu = total_params * 4 * gpus_per_node * additional_buffer_factor
    return Estimate(int(gpu), int(cpu))


def estimate(zero: int, offload: str, total_params: float, largest_layer_params: float | None,
             gpus_per_node: int, nodes: int, zero_init: bool | None = None) -> Estimate:
    """The estimator for ``zero`` with the planner's ``offload`` choice mapped onto DeepSpeed's;
    ``zero_init`` (ZeRO-3 only; None: DeepSpeed's default, true) says whether the model was built
    under ``deepspeed.zero.Init``, partitioned as it is made."""
    if gpus_per_node <= 0 or nodes <= 0:
        raise PlanError("--gpus-per-node and --nodes must be positive")
    if zero_init is not None and zero != 3:
        raise PlanError("--zero-init is an option of the ZeRO-3 estimator; pass --zero 3")
    if zero == 2:
        if offload == "params":
            raise PlanError("DeepSpeed offloads parameters only under ZeRO-3")
        return zero2_estimate(total_params, gpus_per_node, nodes, cpu_offload=offload == "optimizer")
    if zero == 3:
        if largest_layer_params is None:
            raise PlanError("the ZeRO-3 estimator needs --largest-layer-params (or a model shape)")
        return zero3_estimate(total_params, largest_layer_params, gpus_per_node, nodes,
                              cpu_offload=offload != "none", cpu_offload_params=offload == "params",
                              zero_init=True if zero_init is None else zero_init)
    raise PlanError("--estimator deepspeed covers ZeRO stages 2 and 3; pass --zero 2 or --zero 3")
