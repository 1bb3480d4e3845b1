"""A parallel layout of a training step: the one description that the trainer (backend/tensor)
and the planner (backend/planner) share.

`Layout(dp, tp, pp, zero, recompute, offload, schedule, virtual_stages, micro_batches,
micro_batch, sequence_parallel)` is a value. Its ranks are dp * tp * pp, numbered as Megatron
does, tensor parallelism fastest: rank r has the coordinates tp = r % tp, dp = (r // tp) % dp,
pp = r // (tp * dp). A *group* is the ranks that differ in one coordinate only: `groups()`
gives, for each name ("tp", "dp", "pp", and "mp" = tp * pp), the partition of all ranks into
groups of that name; a collective op of the graph names its group by its attribute `group` and
the runtime resolves it per rank.

Each user checks a layout by its own rules: the trainer with `check()` (LayoutError: what it
can run), the planner with backend.planner.layout.check_layout (PlanError: what a plan may
assume, such as ZeRO over one rank). The planner's batch geometry is `micro_batch` sequences
per micro-batch and `micro_batches` of them per step on each pipeline (`global_batch` = dp *
micro_batch * micro_batches); the trainer's global batch is its configuration's [train] batch.
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEDULES = ("gpipe", "1f1b", "interleaved")
RECOMPUTE = ("none", "selective", "full")
OFFLOAD = ("none", "optimizer", "params")
GROUPS = ("tp", "dp", "pp", "mp")


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
    """Data-parallel degree (ZeRO shards over this group)."""
    tp: int = 1
    """Tensor-parallel degree (Megatron: heads and MLP columns split)."""
    pp: int = 1
    """Pipeline stages."""
    zero: int = 0
    """ZeRO stage 0 (plain data parallel) to 3."""
    recompute: str = "none"
    """Activation recomputation: `none`, `selective` (attention core) or `full` (per layer)."""
    offload: str = "none"
    """Model states kept in host memory: `none`, `optimizer` or `params`."""
    schedule: str = "1f1b"
    """Pipeline schedule: `gpipe`, `1f1b` (interleaved when virtual_stages > 1) or `interleaved`."""
    virtual_stages: int = 1
    """Model chunks per pipeline rank (interleaved 1F1B when above 1)."""
    micro_batches: int = 1
    """Micro-batches per step on each pipeline."""
    micro_batch: int = 1
    """Sequences per micro-batch (the planner's b)."""
    sequence_parallel: bool = False
    """Korthikanti et al.'s sequence parallelism inside the tensor-parallel group (the planner's)."""

    def check(self) -> Layout:
        """The layout itself, or LayoutError naming the first option the trainer cannot run."""
        for key in ("dp", "tp", "pp", "virtual_stages", "micro_batches", "micro_batch"):
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
        return self

    @classmethod
    def of_config(cls, config) -> Layout:
        """The layout of a training configuration ([parallel], and [train] micro_batches)."""
        p = config.parallel
        return cls(p.dp, p.tp, p.pp, p.zero, p.recompute, p.offload, p.schedule, p.virtual_stages,
                   config.train.micro_batches).check()

    @property
    def ranks(self) -> int:
        return self.dp * self.tp * self.pp

    gpus = ranks

    @property
    def model_parallel(self) -> int:
        """Ranks that hold one copy of the model between them, tp * pp."""
        return self.tp * self.pp

    @property
    def global_batch(self) -> int:
        """Sequences per optimizer step, dp * micro_batch * micro_batches (the planner's B)."""
        return self.dp * self.micro_batch * self.micro_batches

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


PARALLEL_KEYS = ("dp", "tp", "pp", "zero", "recompute", "offload", "schedule", "virtual_stages")
"""The fields a training configuration's [parallel] section sets (backend/tensor/config.py)."""


__all__ = ["Coordinates", "GROUPS", "Layout", "LayoutError", "OFFLOAD", "PARALLEL_KEYS", "RECOMPUTE", "SCHEDULES"]
