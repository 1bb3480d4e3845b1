"""A training run's checkpoints: written every `[checkpoint] every` steps, and `--resume` from
the newest complete one (backend/tensor/checkpoint.py holds the format).

A run resumed from step k's checkpoint continues with step k + 1: its batches are functions of
(seed, step) and its learning rate and Adam's bias correction of the step number, so with the
parameters and optimizer states of step k it computes exactly what the uninterrupted run did.
The checkpoint must be of the same model, dtype, seed and data file; the layout may differ.
"""

from __future__ import annotations

import sys

from backend.tensor.checkpoint import CheckpointError, Writer, latest
from backend.tensor.job_state import local_states, restore


class RunCheckpoints:
    """The checkpoints of one run of `config` (a TrainConfig) on `job`, whose state has the
    whole shapes `shapes`; `comm` under MPI, `data` the run's data file (None: synthetic)."""

    def __init__(self, config, job, shapes: dict[str, tuple[int, ...]], data: str | None, comm=None):
        c, m, p = config.checkpoint, config.model, config.parallel
        self.job, self.shapes, self.comm = job, shapes, comm
        self.every = c.every
        self.root = c.dir
        self.meta = {"seed": config.train.seed, "data": data, "dtype": config.train.dtype,
                     "model": {k: getattr(m, k) for k in ("n_layer", "n_head", "d_model", "seq_len", "vocab")},
                     "layout": {"dp": p.dp, "tp": p.tp, "pp": p.pp, "zero": p.zero}}
        self.writer = Writer(c.dir, c.keep, config.ranks, self.meta, comm=comm,
                             asynchronous=c.write == "async") if c.every else None

    def after_step(self, step: int) -> None:
        """After step `step`: complete a finished asynchronous write, and checkpoint if due."""
        if self.writer is None:
            return
        self.writer.poll()
        if step % self.every == 0:
            self.writer.save(step, local_states(self.job, self.shapes))

    def resume(self) -> int:
        """Load the newest complete checkpoint into the job; the step it was taken after (0
        when there is none: the run starts from the beginning)."""
        rank0 = self.comm is None or self.comm.Get_rank() == 0
        found = latest(self.root, None if rank0 else (lambda text: None))
        if found is None:
            if rank0:
                print(f"hpgrem: no complete checkpoint in {self.root}: starting at step 1", file=sys.stderr)
            return 0
        m = found.manifest
        for key, theirs in (("model", m.model), ("dtype", m.dtype), ("seed", m.seed), ("data", m.data)):
            if theirs != self.meta[key]:
                raise CheckpointError(f"{found.path} was written by a run with {key} {theirs!r}; this run has "
                                      f"{self.meta[key]!r}")
        missing = sorted(set(self.shapes) - set(found.values))
        wrong = [n for n in self.shapes if n in found.values and found.values[n].shape != self.shapes[n]]
        if missing or wrong:
            raise CheckpointError(f"{found.path} does not hold this model's state "
                                  f"({'missing ' + missing[0] if missing else 'shape of ' + wrong[0]})")
        restore(self.job, found.values)
        self.job.steps_done = m.step
        if rank0:
            print(f"hpgrem: resumed from {found.path} (step {m.step})", file=sys.stderr)
        return m.step

    def close(self) -> None:
        """Complete the checkpoint being written, if any."""
        if self.writer is not None:
            self.writer.wait()
