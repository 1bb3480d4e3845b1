"""A parallel layout of a training step: its options, the grid of ranks, and the lowering that
turns the training step of the *global* batch into what each rank runs.

`Layout(dp, tp, pp, zero, recompute, offload, schedule, virtual_stages, micro_batches)` is a
value, checked by `check()` (LayoutError, one line). Its ranks are dp * tp * pp, numbered as
Megatron does, tensor parallelism fastest: rank r has the coordinates tp = r % tp,
dp = (r // tp) % dp, pp = r // (tp * dp). A *group* is the ranks that differ in one coordinate
only: `groups()` gives, for each name ("tp", "dp", "pp", and "mp" = tp * pp), the partition of
all ranks into groups of that name; a collective op of the graph names its group by its
attribute `group` and the runtime resolves it per rank.

`lower(module, layout)` composes the lowerings: tensor-parallel (tp > 1), data-parallel with
ZeRO (dp > 1), pipeline (pp > 1 or micro_batches > 1: it moves data parallelism's all-reduces
after the micro-batches' sums), recompute / offload. A step that is not
built yet passes the graph through. The result, `Lowered`, holds one graph per pipeline stage:
the ranks of one stage share it (tensor-parallel shards have equal shapes; a rank's own shard is
the values it is loaded with, see backend/tensor/shards.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.tensor.config import OFFLOAD, RECOMPUTE, SCHEDULES

GROUPS = ("tp", "dp", "pp", "mp")
TENSOR_PARALLEL = "tensor-parallel"
DATA_PARALLEL = "tensor-data-parallel"
PIPELINE = "tensor-pipeline"
RECOMPUTE_PASS = "tensor-recompute"
OFFLOAD_PASS = "tensor-offload"


class LayoutError(ValueError):
    """A parallel layout that does not fit: its options, the PEs or MPI ranks, the batch or the
    model, or a topology that does not fit the PEs. The message is one line for the user (the
    command exits 2)."""


@dataclass(frozen=True, slots=True)
class Coordinates:
    """A rank's place in the grid."""

    dp: int
    tp: int
    pp: int


@dataclass(frozen=True, slots=True)
class Layout:
    """How a training step is spread over dp * tp * pp ranks (see the module's docstring)."""

    dp: int = 1
    tp: int = 1
    pp: int = 1
    zero: int = 0
    recompute: str = "none"
    offload: str = "none"
    schedule: str = "1f1b"
    virtual_stages: int = 1
    micro_batches: int = 1

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """LayoutError naming the first option out of range."""
        for key in ("dp", "tp", "pp", "virtual_stages", "micro_batches"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise LayoutError(f"{key} must be a positive integer, got {value!r}")
        if isinstance(self.zero, bool) or self.zero not in (0, 1, 2, 3):
            raise LayoutError(f"zero must be 0, 1, 2 or 3, got {self.zero!r}")
        for key, allowed in (("recompute", RECOMPUTE), ("offload", OFFLOAD), ("schedule", SCHEDULES)):
            if getattr(self, key) not in allowed:
                raise LayoutError(f"{key} must be one of {', '.join(allowed)}, got {getattr(self, key)!r}")
        if self.zero and self.dp == 1:
            raise LayoutError(f"zero = {self.zero} shards over the data-parallel ranks: it needs dp > 1")

    @classmethod
    def of_config(cls, config) -> Layout:
        """The layout of a TrainConfig ([parallel] and [train] micro_batches)."""
        p = config.parallel
        return cls(p.dp, p.tp, p.pp, p.zero, p.recompute, p.offload, p.schedule, p.virtual_stages,
                   config.train.micro_batches)

    @property
    def ranks(self) -> int:
        return self.dp * self.tp * self.pp

    def coordinates(self, rank: int) -> Coordinates:
        """Rank `rank`'s coordinates (tp fastest, then dp, then pp)."""
        if not 0 <= rank < self.ranks:
            raise LayoutError(f"rank {rank} is outside the layout's {self.ranks} ranks")
        return Coordinates(dp=(rank // self.tp) % self.dp, tp=rank % self.tp, pp=rank // (self.tp * self.dp))

    def rank(self, dp: int = 0, tp: int = 0, pp: int = 0) -> int:
        """The rank at these coordinates."""
        return tp + self.tp * (dp + self.dp * pp)

    def group(self, name: str, rank: int) -> tuple[int, ...]:
        """The ranks of `rank`'s group `name`, in the order of their coordinate."""
        c = self.coordinates(rank)
        if name == "tp":
            return tuple(self.rank(c.dp, k, c.pp) for k in range(self.tp))
        if name == "dp":
            return tuple(self.rank(j, c.tp, c.pp) for j in range(self.dp))
        if name == "pp":
            return tuple(self.rank(c.dp, c.tp, i) for i in range(self.pp))
        if name == "mp":
            return tuple(self.rank(c.dp, k, i) for i in range(self.pp) for k in range(self.tp))
        raise LayoutError(f"no group {name!r}: the groups are {', '.join(GROUPS)}")

    def groups(self) -> dict[str, tuple[tuple[int, ...], ...]]:
        """For each group name, every group of that name (a partition of the ranks)."""
        out: dict[str, tuple[tuple[int, ...], ...]] = {}
        for name in GROUPS:
            seen: dict[tuple[int, ...], None] = {}
            for r in range(self.ranks):
                seen.setdefault(self.group(name, r), None)
            out[name] = tuple(seen)
        return out


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
