"""Rendering plans as the ``--json`` object and as text for people."""

from __future__ import annotations

from typing import Any

from backend.planner.deepspeed import Estimate
from backend.planner.hardware import GIB, Hardware
from backend.planner.layout import Layout
from backend.planner.plan import Plan
from backend.planner.search import SearchResult

DAY = 86_400.0

UNITS: dict[str, str] = {
    "params": "count",
    "params_per_gpu": "count",
    "gpus": "count",
    "memory.*": "bytes",
    "activations.*": "bytes",
    "hardware.memory_bytes": "bytes",
    "hardware.peak_flops.*": "FLOP/s",
    "flops_per_iteration": "FLOPs",
    "model_flops_per_iteration": "FLOPs",
    "tokens_per_iteration": "tokens",
    "step_time_s": "seconds",
    "time.*": "seconds",
    "achieved_flops_per_gpu": "FLOP/s",
    "mfu": "fraction of peak",
    "hfu": "fraction of peak",
    "bubble_fraction": "bubble time / ideal compute time",
    "tokens": "tokens",
    "training_time_s": "seconds",
    "training_time_eq4_s": "seconds",
    "training_days": "days",
    "max_params": "count",
    "gpu_memory": "bytes",
    "estimator.*": "bytes",
}


def _bytes(value: float | None) -> int | None:
    return None if value is None else int(round(value))


def hardware_json(hw: Hardware) -> dict[str, Any]:
    return {
        "name": hw.name,
        "memory_bytes": hw.memory_bytes,
        "peak_flops": dict(hw.peak_flops),
        "training_dtype": hw.training_dtype,
        "gpus_per_node": hw.gpus_per_node,
        "achievable_fraction": hw.achievable_fraction,
    }


def layout_json(layout: Layout) -> dict[str, Any]:
    return {
        "tp": layout.tp, "pp": layout.pp, "dp": layout.dp,
        "virtual_stages": layout.virtual_stages, "micro_batch": layout.micro_batch,
        "global_batch": layout.global_batch, "microbatches": layout.micro_batches,
        "zero": layout.zero, "sequence_parallel": layout.sequence_parallel,
        "recompute": layout.recompute, "offload": layout.offload, "schedule": layout.schedule,
    }


def plan_json(plan: Plan) -> dict[str, Any]:
    """Every figure of ``plan`` as plain JSON numbers (bytes, seconds, FLOPs, counts)."""
    m = plan.model
    mem = plan.memory
    step = plan.step
    training = plan.training_time_s
    return {
        "model": None if m is None else {
            "name": m.name, "layers": m.layers, "hidden": m.hidden, "heads": m.heads,
            "vocab": m.vocab, "seq": m.seq,
        },
        "hardware": hardware_json(plan.hardware),
        "gpus": plan.layout.gpus,
        "layout": layout_json(plan.layout),
        "params": int(round(plan.params)),
        "params_per_gpu": int(round(plan.params_per_gpu)),
        "memory": {
            "parameters": _bytes(mem.parameters),
            "gradients": _bytes(mem.gradients),
            "optimizer": _bytes(mem.optimizer),
            "activations": _bytes(mem.activations),
            "buffers": _bytes(mem.buffers),
            "total": _bytes(mem.total),
            "capacity": plan.hardware.memory_bytes,
            "host": _bytes(mem.host),
            "stage": mem.stage,
            "fits": plan.fits,
        },
        "activations": {
            "per_layer": _bytes(plan.per_layer),
            "first_stage": _bytes(plan.first_stage),
            "layers_first_stage": _bytes(plan.layers_first_stage),
        },
        "flops_per_iteration": plan.flops_per_iteration,
        "model_flops_per_iteration": plan.model_flops_per_iteration,
        "tokens_per_iteration": plan.tokens_per_iteration,
        "step_time_s": plan.step_time_s,
        "time_model": plan.time_model,
        "time": {
            "compute": step.compute, "tensor_parallel": step.tensor_parallel,
            "pipeline_p2p": step.pipeline_p2p, "bubble": step.bubble,
            "data_parallel": step.data_parallel, "optimizer": step.optimizer,
        },
        "achieved_flops_per_gpu": plan.achieved_flops_per_gpu,
        "mfu": plan.mfu,
        "hfu": plan.hfu,
        "bubble_fraction": plan.bubble_fraction,
        "tokens": plan.tokens,
        "training_time_s": training,
        "training_days": None if training is None else training / DAY,
        "training_time_eq4_s": plan.training_time_eq4_s,
    }


def estimate_json(zero: int, estimate: Estimate, gpus_per_node: int, nodes: int,
                  zero_init: bool | None = None) -> dict[str, Any]:
    out = {"name": f"deepspeed-zero{zero}", "gpu_bytes": estimate.gpu_bytes,
           "cpu_bytes": estimate.cpu_bytes, "gpus_per_node": gpus_per_node, "nodes": nodes}
    if zero == 3:
        out["zero_init"] = True if zero_init is None else zero_init
    return out


def search_json(result: SearchResult, model_name: str, gpus: int, hw: Hardware,
                global_batch: int) -> dict[str, Any]:
    return {
        "search": {"model": model_name, "gpus": gpus, "gpu": hw.name, "global_batch": global_batch,
                   "evaluated": result.evaluated, "fitting": result.fitting},
        "results": [plan_json(plan) for plan in result.best],
        "units": UNITS,
    }


def _gib(value: float) -> str:
    return f"{value / GIB:8.2f} GiB"


def _layout_text(layout: Layout) -> str:
    sp = "on" if layout.sequence_parallel else "off"
    return (f"tp={layout.tp} pp={layout.pp} dp={layout.dp} v={layout.virtual_stages}, "
            f"micro-batch {layout.micro_batch}, global batch {layout.global_batch} "
            f"({layout.micro_batches} micro-batches), ZeRO-{layout.zero}, sequence parallel {sp}, "
            f"recompute {layout.recompute}, offload {layout.offload}, {layout.schedule}")


def plan_text(plan: Plan) -> str:
    """A readable report of one plan."""
    name = plan.model.name if plan.model else "model"
    mem = plan.memory
    step = plan.step
    lines = [
        f"{name} on {plan.layout.gpus} x {plan.hardware.name}: {_layout_text(plan.layout)}",
        f"parameters          {plan.params / 1e9:10.2f} B ({plan.params_per_gpu / 1e9:.3f} B per GPU)",
        f"memory per GPU ({mem.stage} stage)",
        f"  parameters        {_gib(mem.parameters)}",
        f"  gradients         {_gib(mem.gradients)}",
        f"  optimizer         {_gib(mem.optimizer)}",
        "  activations       " + ("     n/a" if mem.activations is None else _gib(mem.activations)),
        f"  buffers           {_gib(mem.buffers)}",
        f"  total             {_gib(mem.total)} of {plan.hardware.memory_bytes / GIB:.0f} GiB"
        + ("  fits" if plan.fits else "  DOES NOT FIT"),
    ]
    if mem.host:
        lines.append(f"  offloaded to host {_gib(mem.host)}")
    if plan.per_layer is not None and plan.first_stage is not None:
        lines.append(f"activations         {_gib(plan.per_layer)} per layer and micro-batch, "
                     f"{plan.first_stage / GIB:.2f} GiB on the first stage")
    lines += [
        f"FLOPs per iteration {plan.flops_per_iteration:10.3e} (model {plan.model_flops_per_iteration:.3e})",
        f"step time           {plan.step_time_s:10.3f} s ({plan.time_model})",
    ]
    if plan.time_model == "hardware":
        lines.append(f"  compute {step.compute:.3f}, tensor parallel {step.tensor_parallel:.3f}, "
                     f"pipeline sends {step.pipeline_p2p:.3f}, bubble {step.bubble:.3f}, "
                     f"data parallel {step.data_parallel:.3f}, optimizer {step.optimizer:.3f} s")
    lines.append(f"MFU {plan.mfu:.1%}, HFU {plan.hfu:.1%}, {plan.achieved_flops_per_gpu / 1e12:.1f} "
                 f"TFLOP/s per GPU, bubble {plan.bubble_fraction:.1%} of compute")
    training = plan.training_time_s
    if training is not None and plan.tokens is not None:
        eq4 = plan.training_time_eq4_s or 0.0
        c = 8 if plan.layout.recompute == "full" else 6
        lines.append(f"training on {plan.tokens:.3g} tokens: {training / DAY:.1f} days "
                     f"({c}·T·P/(n·X) as in Narayanan et al. Eq. 4: {eq4 / DAY:.1f} days)")
    return "\n".join(lines)


def search_text(result: SearchResult, model_name: str, gpus: int, hw: Hardware,
                global_batch: int) -> str:
    """The best layouts as a table."""
    lines = [f"{model_name} on {gpus} x {hw.name}, global batch {global_batch}: "
             f"{result.fitting} of {result.evaluated} layouts fit; the {len(result.best)} fastest:"]
    header = (f"{'rank':>4} {'tp':>3} {'pp':>3} {'dp':>5} {'v':>2} {'mb':>3} {'zero':>4} "
              f"{'sp':>3} {'recompute':>9} {'GiB/GPU':>8} {'step s':>9} {'MFU':>6}")
    lines += [header, "-" * len(header)]
    for rank, plan in enumerate(result.best, 1):
        layout = plan.layout
        lines.append(
            f"{rank:>4} {layout.tp:>3} {layout.pp:>3} {layout.dp:>5} {layout.virtual_stages:>2} "
            f"{layout.micro_batch:>3} {layout.zero:>4} {'on' if layout.sequence_parallel else 'off':>3} "
            f"{layout.recompute:>9} {plan.memory.total / GIB:8.2f} {plan.step_time_s:9.3f} "
            f"{plan.mfu:6.1%}")
    return "\n".join(lines)
