"""The trainer: a GPT training step built once with the model builder, run for the configured
steps as a TensorJob on the PAM/TGR scheduler (one PE, simulated PEs, or MPI ranks), the
learning rate computed on the host each step.

Under `mpiexec` every rank runs this same code (SPMD): each draws the same global batch and the
job gives each its data-parallel share; only rank 0 reports. The learning rate warms up
linearly: step k (1-based) of a run with `warmup` W takes lr * min(1, k / W), then stays at lr.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace

import numpy as np

from backend.tensor.config import ConfigError, TrainConfig, with_vocab
from backend.tensor.data import BYTE_VOCAB, TextData, synthetic_batch

HELD_OUT_EVALUATIONS = 10
"""How many times in a run the held-out loss is measured (also at the first and last step)."""


@dataclass(frozen=True, slots=True)
class RunOptions:
    """What the command line sets beside the configuration's keys."""

    pes: int | None = None  # simulated PEs (None: as many as the layout needs)
    topology: str | None = None
    data: str | None = None  # a UTF-8 text file; None: the synthetic task
    flops_per_s: float | None = None  # the per-PE rate of virtual time (None: the runtime's)
    resume: bool = False  # continue from the newest complete checkpoint in [checkpoint] dir
    fail_pe: str | None = None  # "K@STEP": simulated PE K fails in step STEP (backend/tensor/faults.py)
    show_schedule: bool = False  # print each pipeline stage's action list before training
    trace: object | None = None  # a pam.trace.Trace recording every PE's steps (one process only)
    relayout: str | None = None  # "STEP:KEY=VALUE,...": after step STEP, go on under that layout


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step's metrics (one JSON line of --metrics)."""

    step: int
    loss: float
    tokens_per_s: float
    lr: float
    grad_norm: float
    held_out_loss: float | None = None

    def to_json(self) -> str:
        row = {"step": self.step, "loss": self.loss, "tokens_per_s": self.tokens_per_s,
               "lr": self.lr, "grad_norm": self.grad_norm}
        if self.held_out_loss is not None:
            row["held_out_loss"] = self.held_out_loss
        return json.dumps(row)


@dataclass(slots=True)
class TrainResult:
    """A finished run: every step's record, the final parameters, the last step's statistics."""

    records: list[StepRecord] = field(default_factory=list)
    params: dict[str, np.ndarray] = field(default_factory=dict)
    stats: object = None


def learning_rate(step: int, lr: float, warmup: int) -> float:
    """The learning rate of 1-based `step`: linear warmup over `warmup` steps, then constant."""
    return lr * min(1.0, step / warmup) if warmup > 0 else lr


def effective_config(config: TrainConfig, options: RunOptions) -> TrainConfig:
    """The configuration the run uses: a text file's vocabulary is its 256 byte values."""
    return with_vocab(config, BYTE_VOCAB) if options.data is not None else config


def layout_pes(config: TrainConfig, options: RunOptions, comm) -> int:
    """The PEs of the run, checked against the layout (ranks = dp * tp * pp); ConfigError if
    they disagree."""
    from pam.topology import TopologyError, parse_topology
    p = config.parallel
    need = f"dp * tp * pp = {p.dp} * {p.tp} * {p.pp} = {config.ranks}"
    if comm is not None:
        pes = comm.Get_size()
        if options.pes is not None and options.pes != pes:
            raise ConfigError(f"--pes {options.pes} disagrees with the {pes} MPI ranks")
        if pes != config.ranks:
            raise ConfigError(f"the layout needs {need} ranks but mpiexec started {pes} "
                              f"(set --dp {pes}, or run mpiexec -n {config.ranks})")
    else:
        pes = config.ranks if options.pes is None else options.pes
        if pes != config.ranks:
            raise ConfigError(f"the layout needs {need} PEs, not --pes {pes} "
                              f"(set --dp {pes}, or --pes {config.ranks})")
    try:
        parse_topology(options.topology, pes)
    except TopologyError as e:
        raise ConfigError(str(e)) from None
    return pes


def parse_relayout(text: str, config: TrainConfig) -> tuple[int, TrainConfig]:
    """`--relayout STEP:KEY=VALUE,...` (keys of [parallel] and micro_batches): the step after
    which the run goes on under another layout, and the configuration of that layout (checked
    as a configuration is); ConfigError, one line, on a mistake."""
    from backend.tensor.config import check, key_type
    step_text, _, body = text.partition(":")
    try:
        step = int(step_text)
    except ValueError:
        step = 0
    if step < 1 or not body:
        raise ConfigError(f"--relayout {text!r}: expected STEP:KEY=VALUE,..., e.g. 4:dp=1,tp=2 "
                          "(after step 4, tensor parallelism over 2 PEs)")
    parallel, train = {}, {}
    for item in body.split(","):
        key, _, value = item.partition("=")
        key = key.strip().replace("-", "_")
        section = "train" if key == "micro_batches" else "parallel"
        if section == "parallel" and key not in {f.name for f in fields(config.parallel)} or not value:
            raise ConfigError(f"--relayout {text!r}: {item!r} is not KEY=VALUE of a [parallel] key or "
                              "micro_batches")
        kind = key_type(section, key)
        try:
            (train if section == "train" else parallel)[key] = kind(value.strip())
        except ValueError:
            raise ConfigError(f"--relayout {text!r}: {key} takes {kind.__name__}, not {value!r}") from None
    new = replace(config, parallel=replace(config.parallel, **parallel), train=replace(config.train, **train),
                  source=f"--relayout {text}")
    check(new)
    return step, new


class Trainer:
    """One training run, step by step (the command line drives it; tests and benchmarks too)."""

    def __init__(self, config: TrainConfig, options: RunOptions = RunOptions(), comm=None):
        from backend.tensor.gpt import ModelShape
        self.config = config = effective_config(config, options)
        self.options = options
        self.comm = comm
        self.relayout_at = parse_relayout(options.relayout, config) if options.relayout is not None else None
        if self.relayout_at is not None:  # its PEs (or MPI ranks) checked before the run starts
            layout_pes(self.relayout_at[1], replace(options, pes=None), comm)
        self.text = TextData.load(options.data, config.model.seq_len) if options.data is not None else None
        m = config.model
        self.shape = ModelShape(m.n_layer, m.n_head, m.d_model, m.seq_len, m.vocab)
        self._start(config)
        if options.show_schedule and (comm is None or comm.Get_rank() == 0):
            print(self.job.schedule_text(), file=sys.stderr)
        self.step_count = 0
        self._held_out_module = None
        if options.resume:
            self.step_count = self.checkpoints.resume()

    def _start(self, config: TrainConfig) -> None:
        """The job of `config`'s layout, from the model's initial parameters, and its checkpoints."""
        from backend.tensor.faults import parse_failure
        from backend.tensor.gpt import build_training_step, init_params
        from backend.tensor.job import Layout, LayoutError, TensorJob
        from backend.tensor.job_state import state_shapes
        from backend.tensor.memory_plan import device_budget
        from backend.tensor.persist import RunCheckpoints
        options, comm, t = self.options, self.comm, config.train
        pes = layout_pes(config, replace(options, pes=None) if options.pes == self.config.ranks else options, comm)
        module = build_training_step(self.shape, t.batch, t.dtype, t.weight_decay, t.clip)
        params = init_params(self.shape, t.seed, t.dtype)
        rate = {} if options.flops_per_s is None else {"flops_per_s": options.flops_per_s}
        try:
            self.job = TensorJob(module, params, layout=Layout.of_config(config), pes=pes,
                                 topology=options.topology, mpi=comm is not None,
                                 device_budget=device_budget(config), trace=options.trace, **rate)
        except LayoutError as e:
            raise ConfigError(str(e)) from None
        failure = parse_failure(options.fail_pe, pes) if options.fail_pe is not None else None
        self.checkpoints = RunCheckpoints(config, self.job, state_shapes(self.shape.param_shapes()),
                                          options.data, comm, failure)

    def relayout(self, config: TrainConfig) -> None:
        """Go on under the layout of `config` (the same model, data and dtype): the state of the
        last step gathered into whole tensors, the job made again for the new layout, and each
        rank given its part of them, as `--resume` under another layout does from a checkpoint,
        without the disk. So a run killed after step k and resumed under layout L2 ends with the
        same bits as the run that changed to L2 after step k here."""
        from backend.tensor.job_state import local_states, restore, state_shapes
        states = local_states(self.job, state_shapes(self.shape.param_shapes()))
        values = {name: np.array(value) for name, value in next(iter(states.values())).items()}
        self.close()
        self._start(config)
        restore(self.job, values)
        self.config = config

    def batch(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        """The global batch of 1-based `step` (the same on every rank)."""
        m, t = self.config.model, self.config.train
        if self.text is not None:
            return self.text.batch(step, t.batch, m.seq_len, t.seed)
        return synthetic_batch(step, t.batch, m.seq_len, m.vocab, t.seed)

    def step(self, measure_held_out: bool = False) -> tuple[StepRecord, object]:
        """Run the next step; its record and the job's statistics for it."""
        if self.relayout_at is not None and self.step_count == self.relayout_at[0]:
            self.relayout(self.relayout_at[1])
        t = self.config.train
        self.step_count += 1
        k = self.step_count
        lr = learning_rate(k, t.lr, t.warmup)
        self.checkpoints.before_step(k, self.run_step)
        began = time.perf_counter()
        result = self.run_step(k)
        seconds = time.perf_counter() - began
        self.checkpoints.after_step(k, result.stats.time_s)
        held_out = self.held_out_loss() if measure_held_out and self.text is not None else None
        record = StepRecord(k, float(result.loss), self.config.tokens_per_step / seconds, lr,
                            float(result.grad_norm), held_out)
        return record, result.stats

    def run_step(self, k: int):
        """Step `k` on the job, with its batch and learning rate; the job's StepResult."""
        tokens, targets = self.batch(k)
        lr = learning_rate(k, self.config.train.lr, self.config.train.warmup)
        return self.job.step(batch={"tokens": tokens, "targets": targets}, lr=lr, step=k)

    def held_out_loss(self) -> float:
        """The loss of the current parameters on the held-out windows of the text file."""
        from backend.tensor.gpt import build_forward
        from pam.tensor.kernels import evaluate
        m, t = self.config.model, self.config.train
        if self._held_out_module is None:
            self._held_out_module = build_forward(self.shape, t.batch, t.dtype)
        tokens, targets = self.text.held_out_batch(t.batch, m.seq_len)
        values = {**self.job.parameters(), "tokens": tokens, "targets": targets}
        return float(evaluate(self._held_out_module, values)["loss"])

    def parameters(self) -> dict[str, np.ndarray]:
        return self.job.parameters()

    def close(self) -> None:
        try:
            self.checkpoints.close()
        finally:
            self.job.close()


def held_out_steps(steps: int) -> set[int]:
    """The steps whose held-out loss is measured: the first, the last, and evenly between."""
    every = max(1, steps // HELD_OUT_EVALUATIONS)
    return {1, steps, *range(every, steps + 1, every)}


def train(config: TrainConfig, options: RunOptions = RunOptions(), comm=None, *, report: bool = True,
          on_step: Callable[[StepRecord], None] | None = None) -> TrainResult:
    """Train for config.train.steps steps; `on_step` sees each record as it comes. Only where
    `report` holds (rank 0) is the held-out loss measured."""
    trainer = Trainer(config, options, comm)
    result = TrainResult()
    measured = held_out_steps(config.train.steps) if report else set()
    try:
        while trainer.step_count < config.train.steps:
            record, result.stats = trainer.step(trainer.step_count + 1 in measured)
            result.records.append(record)
            if on_step is not None:
                on_step(record)
        result.params = trainer.parameters()
    finally:
        trainer.close()
    return result
