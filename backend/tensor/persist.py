"""A training run's checkpoints: written every `[checkpoint] every` steps, and `--resume` from
the newest complete one (backend/tensor/checkpoint.py holds the format).

A run resumed from step k's checkpoint continues with step k + 1: its batches are functions of
(seed, step) and its learning rate and Adam's bias correction of the step number, so with the
parameters and optimizer states of step k it computes exactly what the uninterrupted run did.
The checkpoint must be of the same model, dtype, seed and data file; the layout may differ.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np

from backend.tensor.checkpoint import Checkpoint, CheckpointError, Writer, latest
from backend.tensor.faults import Failure, PeerCopies, Recovery, disk_read_s
from backend.tensor.job_state import local_states, restore


class RunCheckpoints:
    """The checkpoints of one run of `config` (a TrainConfig) on `job`, whose state has the
    whole shapes `shapes`; `comm` under MPI, `data` the run's data file (None: synthetic)."""

    def __init__(self, config, job, shapes: dict[str, tuple[int, ...]], data: str | None, comm=None,
                 failure: Failure | None = None):
        c, m, p = config.checkpoint, config.model, config.parallel
        self.job, self.shapes, self.comm = job, shapes, comm
        self.every = c.every
        self.peer_copy = c.peer_copy
        self.peers = PeerCopies(config.ranks, job.costs) if c.peer_copy != "none" else None
        self.failure = failure
        self.recovery: Recovery | None = None
        self.step_times: dict[int, float] = {}  # step -> its virtual time (simulated PEs)
        if failure is not None and comm is not None:
            raise CheckpointError("--fail-pe kills a simulated PE; under mpiexec kill a rank's process instead")
        if failure is not None and self.peers is None and not c.every:
            raise CheckpointError("--fail-pe needs something to recover from: [checkpoint] peer_copy "
                                  "(--checkpoint-peer-copy step) or every (--checkpoint-every N)")
        self.root = c.dir
        self.meta = {"seed": config.train.seed, "data": data, "dtype": config.train.dtype,
                     "model": {k: getattr(m, k) for k in ("n_layer", "n_head", "d_model", "seq_len", "vocab")},
                     "layout": {"dp": p.dp, "tp": p.tp, "pp": p.pp, "zero": p.zero}}
        self.writer = Writer(c.dir, c.keep, config.ranks, self.meta, comm=comm,
                             asynchronous=c.write == "async") if c.every else None

    def after_step(self, step: int, time_s: float) -> None:
        """After step `step` (of `time_s` virtual seconds): complete a finished asynchronous
        write, checkpoint if due, and take the peer copies if due."""
        self.step_times[step] = time_s
        due = self.writer is not None and step % self.every == 0
        if self.writer is not None:
            self.writer.poll()
        copy = self.peers is not None and (self.peer_copy == "step" or due)
        if not (due or copy):
            return
        states = local_states(self.job, self.shapes)  # under MPI with parts: one gather for both
        if due:
            self.writer.save(step, states)
        if copy:
            self.peers.take(step, states)

    def before_step(self, step: int, run_step: Callable[[int], object]) -> None:
        """Before step `step`: if the failure drill kills a PE in this step, run the step
        with that PE's tensors lost, throw its work away, recover the state and run again the
        steps since (`run_step(k)` runs step k and returns the job's StepResult)."""
        f = self.failure
        if f is None or step != f.step:
            return
        persistent = self.job.replica_of(f.pe).persistent
        for name, value in persistent.items():
            persistent[name] = np.full_like(value, np.nan)
        with np.errstate(invalid="ignore", over="ignore"):
            failed_s = run_step(step).stats.time_s
        lost = failed_s
        state_bytes = sum(int(np.prod(s)) for s in self.shapes.values()) * np.dtype(self.meta["dtype"]).itemsize
        if self.peers is not None and self.peers.step >= 0 and self.peers.pes > 1:
            whole, source, start = self.peers.recover(f.pe), "peer copies", self.peers.step
            lost += self.peers.gather_s()
        else:
            self.close()
            found = self._newest()
            if found is None:
                raise CheckpointError(f"PE {f.pe} failed in step {step} before any peer copy or checkpoint "
                                      "was taken: nothing to recover from")
            whole, source, start = found.values, "disk checkpoint", found.manifest.step
            lost += disk_read_s(state_bytes)
        restore(self.job, whole)
        for k in range(start + 1, step):
            lost += run_step(k).stats.time_s
        disk_step = max((s for s in (self.writer.completed if self.writer else []) if s < step), default=0)
        restart = failed_s + (disk_read_s(state_bytes) if disk_step else 0.0) \
            + sum(t for k, t in self.step_times.items() if disk_step < k < step)
        copy_bytes = self.peers.copy_bytes() if self.peers is not None else 0
        self.recovery = Recovery(f, source, start, lost, restart, disk_step, copy_bytes)
        self.failure = None
        print(self.recovery.message(), file=sys.stderr)

    def resume(self) -> int:
        """Load the newest complete checkpoint into the job; the step it was taken after (0
        when there is none: the run starts from the beginning)."""
        rank0 = self.comm is None or self.comm.Get_rank() == 0
        found = self._newest()
        if found is None:
            if rank0:
                print(f"hpgrem: no complete checkpoint in {self.root}: starting at step 1", file=sys.stderr)
            return 0
        restore(self.job, found.values)
        if rank0:
            print(f"hpgrem: resumed from {found.path} (step {found.manifest.step})", file=sys.stderr)
        return found.manifest.step

    def _newest(self) -> Checkpoint | None:
        """The newest complete checkpoint, checked to be of this run's model, dtype, seed and
        data (rank 0 alone reports the ones skipped)."""
        rank0 = self.comm is None or self.comm.Get_rank() == 0
        found = latest(self.root, None if rank0 else (lambda text: None))
        if found is None:
            return None
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
        return found

    def close(self) -> None:
        """Complete the checkpoint being written, if any."""
        if self.writer is not None:
            self.writer.wait()
