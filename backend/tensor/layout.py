"""The lowering that turns the training step of the *global* batch into what each rank of a
parallel layout runs (the layout itself, its grid of ranks and groups: backend/layout.py).

`lower(module, layout)` composes the lowerings: tensor-parallel (tp > 1), data-parallel with
ZeRO (dp > 1), pipeline (pp > 1 or micro_batches > 1: it moves data parallelism's all-reduces
after the micro-batches' sums), recompute / offload. A step that is not
built yet passes the graph through. The result, `Lowered`, holds one graph per pipeline stage:
the ranks of one stage share it (tensor-parallel shards have equal shapes; a rank's own shard is
the values it is loaded with, see backend/tensor/shards.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.layout import GROUPS, Coordinates, Layout, LayoutError

TENSOR_PARALLEL = "tensor-parallel"
DATA_PARALLEL = "tensor-data-parallel"
PIPELINE = "tensor-pipeline"
RECOMPUTE_PASS = "tensor-recompute"
OFFLOAD_PASS = "tensor-offload"


@dataclass(slots=True)
class Lowered:
    """A training step lowered for a layout: `stages[i]` is the graph (a tensor module or a
    StepGraph) that the ranks of pipeline stage i run; `actions` maps a rank to its action list
    when the layout schedules one (pipeline), None when each rank runs its graph once."""

    layout: Layout
    stages: tuple = ()
    actions: dict[int, tuple] | None = field(default=None)

    def graph_of(self, rank: int):
        """The graph rank `rank` runs."""
        return self.stages[self.layout.coordinates(rank).pp]


def lower(module, layout: Layout, *, bucket_bytes: int | None = None) -> Lowered:
    """The training step `module` (backend/tensor/gpt.py build_training_step, for the global
    batch) lowered for `layout`: tensor-parallel, data-parallel / ZeRO, pipeline, then
    recompute / offload. A StepGraph is taken as lowered already (one stage)."""
    from pam.tensor.graph import StepGraph

    if isinstance(module, StepGraph):
        return Lowered(layout, (module,))
    if layout.tp > 1:
        module = _run(module, TENSOR_PARALLEL, {"tp": layout.tp})
    stages = (module,)
    options: dict[str, object] = {"dp": layout.dp}
    if layout.zero:
        options["zero"] = layout.zero
    if layout.pp > 1 or layout.micro_batches > 1:
        options["accumulate"] = 1  # the micro-batches' gradients are summed before the reduction
    if bucket_bytes is not None:
        options["bucket_bytes"] = bucket_bytes
    stages = tuple(_data_parallel(m, layout, options) for m in stages)
    actions = None
    if layout.pp > 1 or layout.micro_batches > 1:
        stages, actions = _pipeline(stages[0], layout)
    if layout.recompute != "none":
        stages = tuple(_run(m, RECOMPUTE_PASS, {"mode": layout.recompute}) for m in stages)
    if layout.offload != "none":
        stages = tuple(_run(m, OFFLOAD_PASS, {"mode": layout.offload}) for m in stages)
    return Lowered(layout, stages, actions)


def _pipeline(module, layout: Layout) -> tuple[tuple, dict[int, tuple]]:
    """The pipeline stages' modules and each rank's action list (hpgrem/passes/tensor/pipeline.py).
    It runs after tensor-data-parallel: a stage reduces its gradients (all-reduce, or ZeRO's
    reduce-scatter) once per step, on their sums over the micro-batches."""
    from hpgrem.passes.tensor.pipeline import stage_step

    lowered = _run(module, PIPELINE, {"pp": layout.pp, "micro_batches": layout.micro_batches,
                                      "virtual_stages": layout.virtual_stages, "schedule": layout.schedule})
    stages = [stage_step(lowered, s) for s in range(layout.pp)]
    actions = {r: tuple(stages[layout.coordinates(r).pp][1]) for r in range(layout.ranks)}
    return tuple(m for m, _ in stages), actions


def _data_parallel(module, layout: Layout, options: dict):
    from hpgrem.ir.tensor import STEP

    done = module.annotation(STEP, f"{DATA_PARALLEL}.dp")
    if done is not None:
        if done != layout.dp:
            raise LayoutError(f"the graph is lowered for dp = {done}, the layout asks dp = {layout.dp}")
        return module
    if layout.dp == 1:
        return module
    return _run(module, DATA_PARALLEL, options)


def _run(module, name: str, options: dict):
    from hpgrem.passes import PassError, run_passes

    try:
        return run_passes(module, [name], analyses=False, options={name: options})
    except PassError as e:
        raise LayoutError(str(e)) from None


__all__ = ["Coordinates", "GROUPS", "Layout", "LayoutError", "Lowered", "lower"]
