"""``hpgrem plan``: the planner's command line (spec/cli.md exit statuses: 0 ok, 2 usage)."""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import replace
from typing import Any

from backend.planner.deepspeed import estimate
from backend.planner.errors import PlanError
from backend.planner.hardware import GPUS, Hardware, find_gpu
from backend.planner.layout import OFFLOAD, RECOMPUTE, SCHEDULES, Layout, check_layout, planned_layout
from backend.planner.memory import max_params
from backend.planner.models import MODELS, ModelConfig, custom_model, find_model
from backend.planner.plan import make_plan
from backend.planner.report import UNITS, estimate_json, plan_json, plan_text, search_json, search_text
from backend.planner.search import Choices, search

DEFAULT_GLOBAL_BATCH = 1536
"""Sequences per step when --global-batch is not given (GPT-3's batch in Narayanan et al. 2021)."""

_SUFFIXES = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "b": 1e9, "t": 1e12, "p": 1e15,
             "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
             "kib": 2.0**10, "mib": 2.0**20, "gib": 2.0**30, "tib": 2.0**40}


def parse_quantity(text: str) -> float:
    """A positive number, with an optional decimal (k, M, G/B, T, P, GB) or binary (GiB) suffix."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if not match or match.group(2).lower() not in _SUFFIXES:
        raise argparse.ArgumentTypeError(f"not a number: '{text}'")
    value = float(match.group(1)) * _SUFFIXES[match.group(2).lower()]
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: '{text}'")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hpgrem plan",
        description="Memory per GPU and time per step of GPT training layouts, from analytic "
                    "models that reproduce ZeRO, Megatron-LM and Korthikanti et al.",
    )
    what = parser.add_argument_group("model")
    what.add_argument("--model", help=f"a preset ({', '.join(MODELS)})")
    for flag in ("--layers", "--hidden", "--heads", "--vocab", "--seq"):
        what.add_argument(flag, type=int, help="a shape dimension (overrides the preset's)")
    what.add_argument("--params", type=parse_quantity,
                      help="a parameter count instead of a shape (no activations)")
    where = parser.add_argument_group("hardware")
    where.add_argument("--gpu", default="a100-80gb", help=f"GPU type ({', '.join(GPUS)})")
    where.add_argument("--gpus", type=int, help="GPUs in all (default tp * pp * dp)")
    where.add_argument("--gpus-per-node", type=int, help="GPUs per node (default the GPU's node)")
    where.add_argument("--nodes", type=int, help="nodes (DeepSpeed estimator; default GPUs / node)")
    how = parser.add_argument_group("layout")
    how.add_argument("--tp", type=int, help="tensor-parallel degree (default 1)")
    how.add_argument("--pp", type=int, help="pipeline stages (default 1)")
    how.add_argument("--dp", type=int, help="data-parallel degree (default gpus / (tp * pp))")
    how.add_argument("--virtual-stages", type=int, help="model chunks per pipeline rank (default 1)")
    how.add_argument("--micro-batch", type=int, help="sequences per micro-batch (default 1)")
    how.add_argument("--global-batch", type=int,
                     help=f"sequences per step (default {DEFAULT_GLOBAL_BATCH}, rounded up to a "
                          "multiple of dp * micro-batch)")
    how.add_argument("--zero", type=int, choices=(0, 1, 2, 3), help="ZeRO stage (default 0)")
    how.add_argument("--seq-parallel", action=argparse.BooleanOptionalAction, default=None,
                     help="sequence parallelism (default off)")
    how.add_argument("--recompute", choices=RECOMPUTE, help="activation recomputation (default none)")
    how.add_argument("--offload", choices=OFFLOAD, default="none", help="model states kept on the host")
    how.add_argument("--schedule", choices=SCHEDULES, default="1f1b", help="pipeline schedule")
    ask = parser.add_argument_group("questions")
    ask.add_argument("--search", action="store_true",
                     help="rank every valid layout that fits and print the best ten")
    ask.add_argument("--tokens", type=parse_quantity, help="training tokens, for the training time")
    ask.add_argument("--achieved-flops", type=parse_quantity,
                     help="measured end-to-end FLOP/s per GPU, replacing the hardware model")
    ask.add_argument("--max-params", action="store_true",
                     help="the largest model whose model states fit --gpu-memory")
    ask.add_argument("--gpu-memory", type=parse_quantity,
                     help="bytes per GPU for --max-params (default the GPU's memory)")
    ask.add_argument("--estimator", choices=("deepspeed",),
                     help="also run DeepSpeed's ZeRO-2/3 model-state estimator")
    ask.add_argument("--largest-layer-params", type=parse_quantity,
                     help="parameters of the largest layer (DeepSpeed ZeRO-3 estimator)")
    ask.add_argument("--zero-init", type=int, choices=(0, 1),
                     help="DeepSpeed ZeRO-3 estimator: 1 if the model is built partitioned "
                          "(deepspeed.zero.Init, the default), 0 if whole on every GPU first")
    ask.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def check_counts(args: argparse.Namespace) -> None:
    """Reject zero or negative counts before they reach a division."""
    for name in ("layers", "hidden", "heads", "vocab", "seq", "gpus", "gpus_per_node", "nodes",
                 "tp", "pp", "dp", "virtual_stages", "micro_batch", "global_batch"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise PlanError(f"--{name.replace('_', '-')} must be positive, got {value}")


def resolve_model(args: argparse.Namespace) -> ModelConfig | None:
    """The preset, the preset with shape overrides, a custom shape, or None."""
    shape = {k: getattr(args, k) for k in ("layers", "hidden", "heads", "vocab", "seq")}
    given = {k: v for k, v in shape.items() if v is not None}
    if args.model is not None:
        if args.params is not None:
            raise PlanError("give --model or --params, not both")
        base = find_model(args.model)
        if not given:
            return base
        merged = {k: given.get(k, getattr(base, k)) for k in shape}
        return replace(custom_model(**merged), name=f"{base.name} (modified)")
    if args.params is not None:
        extra = sorted(set(given) - {"seq"})
        if extra:
            raise PlanError(f"--params takes no shape besides --seq (got --{extra[0]})")
        return None
    if given:
        missing = [f"--{k}" for k, v in shape.items() if v is None]
        if missing:
            raise PlanError(f"a custom shape needs {', '.join(missing)} too")
        return custom_model(**given)
    return None


def resolve_gpus(args: argparse.Namespace, hw: Hardware) -> int:
    if args.gpus is not None:
        return args.gpus
    if args.nodes is not None:
        return args.nodes * hw.gpus_per_node
    return (args.tp or 1) * (args.pp or 1) * (args.dp or 1)


def resolve_layout(args: argparse.Namespace, gpus: int) -> Layout:
    tp, pp = args.tp or 1, args.pp or 1
    if args.dp is not None:
        dp = args.dp
        if tp * pp * dp != gpus:
            raise PlanError(f"tp * pp * dp = {tp} * {pp} * {dp} = {tp * pp * dp} but there are "
                            f"{gpus} GPUs")
    else:
        if gpus % (tp * pp):
            raise PlanError(f"{gpus} GPUs are not divisible by tp * pp = {tp * pp}")
        dp = gpus // (tp * pp)
    micro = args.micro_batch or 1
    batch = args.global_batch
    if batch is None:
        step = max(dp * micro, 1)
        batch = math.ceil(DEFAULT_GLOBAL_BATCH / step) * step
    return planned_layout(batch, tp=tp, pp=pp, dp=dp, virtual_stages=args.virtual_stages or 1, micro_batch=micro,
                          zero=args.zero or 0, sequence_parallel=bool(args.seq_parallel),
                          recompute=args.recompute or "none", offload=args.offload, schedule=args.schedule)


def run_search(args: argparse.Namespace, model: ModelConfig, gpus: int, hw: Hardware) -> str:
    if args.achieved_flops is not None:
        raise PlanError("--achieved-flops gives every layout the same speed; it cannot rank a --search")
    batch = args.global_batch or DEFAULT_GLOBAL_BATCH
    choices = Choices(tp=args.tp, pp=args.pp, dp=args.dp, virtual_stages=args.virtual_stages,
                      micro_batch=args.micro_batch, zero=args.zero,
                      sequence_parallel=args.seq_parallel, recompute=args.recompute,
                      offload=args.offload, schedule=args.schedule)
    result = search(model, gpus, hw, batch, choices, tokens=args.tokens)
    if args.json:
        return json.dumps(search_json(result, model.name, gpus, hw, batch), indent=2)
    return search_text(result, model.name, gpus, hw, batch)


def run_plan(args: argparse.Namespace, model: ModelConfig | None, gpus: int, hw: Hardware) -> str:
    layout = resolve_layout(args, gpus)
    check_layout(layout, model)
    out: dict[str, Any] = {}
    text: list[str] = []
    if model is not None or args.params is not None:
        plan = make_plan(model, hw, layout, params=args.params, seq=args.seq, tokens=args.tokens,
                         achieved_flops=args.achieved_flops)
        out = plan_json(plan)
        text.append(plan_text(plan))
        total_params = plan.params
    else:
        out = {"gpus": layout.gpus}
        total_params = None
    if args.max_params:
        memory = args.gpu_memory or float(hw.memory_bytes)
        largest = max_params(memory, layout.zero, layout.dp, layout.model_parallel, layout.offload)
        out["max_params"] = largest
        out["gpu_memory"] = memory
        text.append(f"largest model whose model states fit {memory / 1e9:.2f} GB per GPU "
                    f"(ZeRO-{layout.zero}, dp={layout.dp}, tp*pp={layout.model_parallel}): "
                    f"{largest / 1e9:.2f} B parameters")
    if args.estimator == "deepspeed":
        if total_params is None:
            raise PlanError("--estimator deepspeed needs --model, a shape or --params")
        gpn = args.gpus_per_node or min(hw.gpus_per_node, gpus)
        nodes = args.nodes or math.ceil(gpus / gpn)
        largest_layer = args.largest_layer_params or (model.largest_layer_params if model else None)
        zero_init = None if args.zero_init is None else bool(args.zero_init)
        result = estimate(layout.zero, layout.offload, total_params, largest_layer, gpn, nodes, zero_init)
        out["estimator"] = estimate_json(layout.zero, result, gpn, nodes, zero_init)
        built = f", zero_init {int(zero_init is not False)}" if layout.zero == 3 else ""
        text.append(f"DeepSpeed ZeRO-{layout.zero} estimator ({nodes} node(s) x {gpn} GPUs, "
                    f"offload {layout.offload}{built}): {result.gpu_bytes / 2**30:.2f} GiB per GPU, "
                    f"{result.cpu_bytes / 2**30:.2f} GiB host memory per node")
    if args.zero_init is not None and args.estimator != "deepspeed":
        raise PlanError("--zero-init is an option of --estimator deepspeed")
    if not text:
        raise PlanError("nothing to plan: give --model NAME, a shape (--layers --hidden --heads "
                        "--vocab --seq), --params N or --max-params")
    if args.json:
        out["units"] = UNITS
        return json.dumps(out, indent=2)
    return "\n".join(text)


def main(argv: list[str]) -> int:
    """Run ``hpgrem plan`` with ``argv`` (the arguments after ``plan``); return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # argparse has printed usage or help
        return stop.code if isinstance(stop.code, int) else 2
    try:
        check_counts(args)
        hw = find_gpu(args.gpu)
        if args.gpus_per_node is not None:
            hw = hw.with_gpus_per_node(args.gpus_per_node)
        model = resolve_model(args)
        gpus = resolve_gpus(args, hw)
        if args.search:
            if model is None:
                raise PlanError("--search needs a model shape (--model or --layers ... --seq)")
            output = run_search(args, model, gpus, hw)
        else:
            output = run_plan(args, model, gpus, hw)
    except PlanError as error:
        print(f"hpgrem plan: error: {error}", file=sys.stderr)
        return 2
    print(output)
    return 0
