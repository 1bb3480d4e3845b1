"""``--search``: enumerate the layouts of a model on N GPUs, keep those that fit, rank by step time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from backend.planner.errors import PlanError
from backend.planner.hardware import Hardware
from backend.planner.layout import RECOMPUTE, Layout, check_layout, planned_layout
from backend.planner.models import ModelConfig
from backend.planner.plan import Plan, make_plan

MICRO_BATCHES = (1, 2, 4, 8)
MAX_VIRTUAL_STAGES = 4


@dataclass(frozen=True, slots=True)
class Choices:
    """What the user fixed on the command line; None leaves a dimension to the search."""

    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    virtual_stages: int | None = None
    micro_batch: int | None = None
    zero: int | None = None
    sequence_parallel: bool | None = None
    recompute: str | None = None
    offload: str = "none"
    schedule: str = "1f1b"


@dataclass(frozen=True, slots=True)
class SearchResult:
    """The ranked layouts that fit, and how many were looked at."""

    evaluated: int
    fitting: int
    best: list[Plan]


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def candidate_layouts(model: ModelConfig, gpus: int, hardware: Hardware, global_batch: int,
                      choices: Choices) -> Iterator[Layout]:
    """Every valid layout, within these bounds: tensor parallelism no wider than a node
    (Narayanan et al. 2021, Takeaway #1), micro-batches of 1, 2, 4 or 8 sequences, up to
    four virtual stages, ZeRO-2/3 only without pipeline parallelism."""
    tps = [choices.tp] if choices.tp else [t for t in _divisors(gpus)
                                           if t <= hardware.gpus_per_node and model.heads % t == 0]
    for t in tps:
        pps = [choices.pp] if choices.pp else [p for p in _divisors(gpus // t) if model.layers % p == 0]
        for p in pps:
            if gpus % (t * p):
                continue
            d = gpus // (t * p)
            if choices.dp and choices.dp != d:
                continue
            for b in [choices.micro_batch] if choices.micro_batch else MICRO_BATCHES:
                if global_batch % (d * b):
                    continue
                vs = ([choices.virtual_stages] if choices.virtual_stages
                      else [v for v in range(1, MAX_VIRTUAL_STAGES + 1) if v == 1 or p >= 2])
                zeros = [choices.zero] if choices.zero is not None else ([0, 1] if p > 1 else [0, 1, 2, 3])
                sps = ([choices.sequence_parallel] if choices.sequence_parallel is not None
                       else ([False, True] if t > 1 else [False]))
                recs = [choices.recompute] if choices.recompute else list(RECOMPUTE)
                for v in vs:
                    for z in zeros:
                        if d == 1 and z > 0 and choices.zero is None:
                            continue  # ZeRO over one rank changes nothing
                        for sp in sps:
                            for rec in recs:
                                layout = planned_layout(global_batch, tp=t, pp=p, dp=d, virtual_stages=v,
                                                        micro_batch=b, zero=z,
                                                sequence_parallel=sp, recompute=rec,
                                                offload=choices.offload, schedule=choices.schedule)
                                try:
                                    check_layout(layout, model)
                                except PlanError:
                                    continue
                                yield layout


def search(model: ModelConfig, gpus: int, hardware: Hardware, global_batch: int,
           choices: Choices = Choices(), top: int = 10, tokens: float | None = None) -> SearchResult:
    """The ``top`` fastest layouts whose memory fits the GPU, fastest first (ties: less memory)."""
    evaluated = 0
    fitting: list[Plan] = []
    for layout in candidate_layouts(model, gpus, hardware, global_batch, choices):
        evaluated += 1
        plan = make_plan(model, hardware, layout, tokens=tokens)
        if plan.fits:
            fitting.append(plan)
    fitting.sort(key=lambda plan: (plan.step_time_s, plan.memory.total))
    return SearchResult(evaluated, len(fitting), fitting[:top])

