"""`hpgrem train CONFIG.toml [flags]` and `hpgrem plot METRICS.jsonl -o loss.png` (docs/tensor.md).

`train` reads the configuration (backend/tensor/config.py), lets a flag override any key
(`--steps 20 --dp 2 --lr 1e-3 --n-layer 4`), trains, and reports on rank 0: a progress bar with
loss and tokens/s on a terminal, one summary line otherwise, metrics as JSON lines, the saved
parameters, and with `--stats` the compute, communication and idle time per PE. Mistakes raise
UsageError (the command prints one line, exit status 2).
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import sys
from dataclasses import replace
from typing import Any

from hpgrem.driver.args import ArgumentParser, pes
from hpgrem.driver.outputs import check_output, write_output
from hpgrem.errors import EXIT_USAGE, UsageError


def train_parser() -> argparse.ArgumentParser:
    """`hpgrem train`'s flags: the run's own, then one per configuration key."""
    from backend.tensor.config import DTYPES, flag_name, key_type, keys
    p = ArgumentParser(prog="hpgrem train", description="Train a GPT model on the tensor-graph "
                        "back end (docs/tensor.md). Flags override the configuration's keys.")
    p.add_argument("config", metavar="CONFIG.toml")
    run = p.add_argument_group("the run")
    run.add_argument("--pes", type=pes, metavar="N", help="simulated PEs (default: dp * tp * pp; "
                     "under mpiexec, the ranks)")
    run.add_argument("--topology", help="mesh:RxC, torus:RxC, ring, hypercube, tree, full")
    run.add_argument("--data", metavar="FILE", help="train on a UTF-8 text file as bytes (vocab 256), "
                     "with a held-out split whose loss is reported (default: the synthetic task)")
    run.add_argument("--metrics", metavar="OUT.jsonl", help="write one JSON line per step")
    run.add_argument("--save", metavar="OUT.npz", help="write the final parameters (numpy .npz, GPT-2 names)")
    run.add_argument("--stats", action="store_true", help="print compute, communication and idle "
                     "time per PE on stderr")
    run.add_argument("--resume", action="store_true", help="continue from the newest complete checkpoint "
                     "in [checkpoint] dir (under any layout)")
    run.add_argument("--fail-pe", metavar="K@STEP", help="simulated PE K fails in step STEP; the run "
                     "recovers from peer copies ([checkpoint] peer_copy) or the newest checkpoint")
    run.add_argument("--relayout", metavar="STEP:KEY=VALUE,...", help="after step STEP go on under another "
                     "layout ([parallel] keys, micro_batches), the state resharded in memory, e.g. 4:dp=1,tp=2")
    run.add_argument("--show-schedule", action="store_true", help="print each pipeline stage's list of "
                     "actions (forward, backward, send, recv, reduce, optimizer) before training")
    run.add_argument("--trace", metavar="OUT.jsonl", help="record every PE's steps (each pipeline action, "
                     "each message) in virtual time as a trace stream (docs/trace.md); simulated PEs only")
    run.add_argument("--html", metavar="OUT.html", help="with --trace: also write the trace viewer (each "
                     "PE's forward, backward, send and receive on its timeline)")
    run.add_argument("--flops-per-s", type=_rate, metavar="F", help="each simulated PE's kernel rate "
                     "(FLOP/s) in virtual time")
    over = p.add_argument_group("configuration keys ([section] key)")
    for section, key in keys():
        kind = key_type(section, key)
        extra: dict[str, Any] = {"choices": DTYPES} if key == "dtype" else {}
        over.add_argument(flag_name(section, key), dest=f"{section}.{key}", type=kind, metavar=kind.__name__.upper()
                          if not extra else None, help=f"[{section}] {key}", **extra)
    return p


def _rate(text: str) -> float:
    """`--flops-per-s`: a finite positive number."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"expected a positive number of FLOP/s, got {text!r}")
    return value


def cmd_train(argv: list[str], comm) -> int:
    """`hpgrem train`; `comm` is MPI.COMM_WORLD under mpiexec with several ranks, else None."""
    from backend.tensor.config import TomlSyntaxError, load_config
    from backend.tensor.train import RunOptions, effective_config, train
    from pam.tensor.kernels import retain_freed_memory
    args = train_parser().parse_args(argv)
    retain_freed_memory()  # this process trains: keep freed buffers for the next step
    overrides = {tuple(dest.split(".")): value for dest, value in vars(args).items()
                 if "." in dest and value is not None}
    try:
        config = load_config(args.config, overrides)
    except TomlSyntaxError as e:  # FILE:LINE:COL, the line and a caret (spec/cli.md)
        print(e.diagnostic.render(e.text), file=sys.stderr)
        return EXIT_USAGE
    options = RunOptions(pes=args.pes, topology=args.topology, data=args.data, flops_per_s=args.flops_per_s,
                         resume=args.resume, fail_pe=args.fail_pe, show_schedule=args.show_schedule,
                         relayout=args.relayout)
    rank0 = comm is None or comm.Get_rank() == 0
    trace = _start_trace(args, config, comm)
    options = replace(options, trace=trace)
    for out in (args.metrics, args.save):
        if out is not None:
            check_output(out, inputs=tuple(x for x in (args.config, args.data) if x))
    metrics = _MetricsFile(args.metrics) if rank0 and args.metrics else None
    bar = _Progress(config.train.steps) if rank0 else None

    def on_step(record) -> None:
        if metrics is not None:
            metrics.write(record.to_json())
        if bar is not None:
            bar.update(record)
    try:
        result = train(config, options, comm, report=rank0, on_step=on_step)
    finally:
        if bar is not None:
            bar.close()
        if metrics is not None:
            metrics.close()
    if not rank0:
        return 0
    if result.records:
        last = result.records[-1]
        held = f", held-out loss {last.held_out_loss:.4f}" if last.held_out_loss is not None else ""
        print(f"step {last.step}: loss {last.loss:.4f} (first {result.records[0].loss:.4f}){held}, "
              f"{last.tokens_per_s:,.0f} tokens/s", file=sys.stderr)
    if args.save:
        write_output(args.save, _npz(result.params))
    if trace is not None:
        _finish_trace(args, trace)
    if args.stats and result.stats is not None:
        print(f"statistics of the last step ({len(result.records)}):\n{_stats_text(result.stats)}", file=sys.stderr)
        if any(pe.memory for pe in result.stats.per_pe):
            from backend.tensor.memory_plan import comparison_table
            print(comparison_table(effective_config(config, options), result.stats.per_pe), file=sys.stderr)
    return 0


def _start_trace(args, config, comm):
    """The Trace of a traced training run (--trace), its outputs checked before it runs."""
    if args.html is not None and args.trace is None:
        raise UsageError("--html draws a trace: give --trace OUT.jsonl too")
    if args.trace is None:
        return None
    if comm is not None:
        raise UsageError("--trace records simulated PEs: run without mpiexec (--pes N)")
    if not args.trace.lower().endswith(".jsonl"):
        raise UsageError(f"--trace {args.trace}: a trace is JSON lines: name it OUT.jsonl")
    for path in (args.trace, args.html):
        if path is not None:
            check_output(path, inputs=(args.config,))
    from pam.topology import parse_topology
    from pam.trace import Trace
    pes = args.pes or config.ranks
    return Trace({"program": args.config, "language": "tensor", "pes": pes,
                  "topology": parse_topology(args.topology, pes).name if pes > 1 else None, "opt": None,
                  "mode": "simulated" if pes > 1 else "single", "clock": "virtual", "sources": {}})


def _finish_trace(args, trace) -> None:
    """The traced run is over: its end, the stream written, and the viewer."""
    trace.terminate("success", trace.suspended_tasks())
    write_output(args.trace, "\n".join(trace.lines()) + "\n")
    if args.html is not None:
        from hpgrem.trace.html import viewer_html
        write_output(args.html, viewer_html(trace.header, trace.events))


def _npz(params: dict) -> bytes:
    import numpy as np
    buffer = io.BytesIO()
    np.savez(buffer, **params)
    return buffer.getvalue()


def _stats_text(stats) -> str:
    table = getattr(stats, "table", None)
    return table() if callable(table) else str(stats)


class _MetricsFile:
    """--metrics: one JSON line per step, flushed as it comes (a plot can follow a long run)."""

    def __init__(self, path: str):
        self.path = path
        try:
            self.file = open(path, "w", encoding="utf-8")
        except OSError as e:
            raise UsageError(f"{path}: cannot write: {e.strerror or e}") from None

    def write(self, line: str) -> None:
        try:
            self.file.write(line + "\n")
            self.file.flush()
        except OSError as e:
            raise UsageError(f"{self.path}: cannot write: {e.strerror or e}") from None

    def close(self) -> None:
        try:
            self.file.close()
        except OSError:
            pass


class _Progress:
    """The progress bar on a terminal (tqdm), with the loss and tokens/s."""

    def __init__(self, steps: int):
        from tqdm import tqdm
        self.bar = tqdm(total=steps, unit="step", file=sys.stderr, dynamic_ncols=True, disable=None)

    def update(self, record) -> None:
        self.bar.set_postfix(loss=f"{record.loss:.4f}", tok_s=f"{record.tokens_per_s:,.0f}", refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def plot_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="hpgrem plot", description="Draw the loss curve of `hpgrem train --metrics`.")
    p.add_argument("metrics", metavar="METRICS.jsonl")
    p.add_argument("-o", dest="output", required=True, metavar="OUT.png", help="the image to write (PNG, SVG, PDF)")
    return p


def cmd_plot(argv: list[str]) -> int:
    """`hpgrem plot METRICS.jsonl -o loss.png`: loss (and held-out loss) against step."""
    args = plot_parser().parse_args(argv)
    try:
        import matplotlib
    except ImportError:
        raise UsageError("hpgrem plot needs matplotlib: pip install 'hpgrem[plot]'") from None
    check_output(args.output, inputs=(args.metrics,))
    rows = read_metrics(args.metrics)
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    figure, axes = plt.subplots(figsize=(7, 4.2))
    axes.plot([r["step"] for r in rows], [r["loss"] for r in rows], label="training loss")
    held = [r for r in rows if "held_out_loss" in r]
    if held:
        axes.plot([r["step"] for r in held], [r["held_out_loss"] for r in held], "o-", label="held-out loss")
    axes.set_xlabel("step")
    axes.set_ylabel("loss (nats per token)")
    axes.set_title(os.path.basename(args.metrics))
    axes.grid(alpha=0.3)
    axes.legend()
    buffer = io.BytesIO()
    suffix = args.output.rpartition(".")[2].lower()
    figure.savefig(buffer, format=suffix if suffix in ("png", "svg", "pdf") else "png", dpi=120,
                   bbox_inches="tight")
    plt.close(figure)
    write_output(args.output, buffer.getvalue())
    return 0


def read_metrics(path: str) -> list[dict]:
    """The rows of a metrics file; UsageError naming the line that is not a metrics row."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise UsageError(f"{path}:{number}: not a JSON line: {e.msg}") from None
        if not isinstance(row, dict) or not all(isinstance(row.get(k), (int, float)) for k in ("step", "loss")):
            raise UsageError(f"{path}:{number}: a metrics line needs numbers 'step' and 'loss'")
        rows.append(row)
    if not rows:
        raise UsageError(f"{path}: no metrics lines")
    return rows


def run_step(path: str, module, feeds_path: str, pes: int, comm) -> int:
    """`hpgrem run STEP.hpg --feeds FEEDS.npz`: one training step of a tensor module on one PE
    of the machine, its parameters, optimizer states and inputs by name from the .npz; prints
    each of the graph's outputs (`loss = ...`, `grad_norm = ...`)."""
    import numpy as np

    from pam.machine import Machine
    from pam.tensor.runtime import TensorRuntime
    from pam.tensor.graph import step_graph

    if comm is not None or pes != 1:
        raise UsageError(f"{path}: a tensor step runs on one PE under `hpgrem run`; its parallel "
                         "layouts run with `hpgrem train CONFIG.toml`")
    graph = step_graph(module)
    feeds = _step_feeds(feeds_path, graph, np)
    runtime = TensorRuntime(module)
    machine = Machine(module, runtime=runtime)
    for pe in machine.pes:
        runtime.replicas[pe.number].start(feeds)
    machine.run_loaded()
    replica = runtime.replicas[0]
    for name in graph.outputs:
        value = np.asarray(replica.value(name))
        print(f"{name} = {value.item() if value.shape == () else value.tolist()!r}")
    return 0


def _step_feeds(path: str, graph, np) -> dict:
    """The .npz's arrays, checked against what the step takes: every parameter, state and input
    by name, of its shape and dtype, and nothing else."""
    from hpgrem.files import read_bytes

    try:
        with np.load(io.BytesIO(read_bytes(path, kind="feeds file")), allow_pickle=False) as data:
            given = {name: data[name] for name in data.files}
    except (ValueError, OSError, EOFError) as e:  # not an .npz, truncated, or an object array
        raise UsageError(f"{path}: not a numpy .npz of arrays ({e})") from None
    wanted = {v.name: v for v in (*graph.persistent, *graph.inputs)}
    extra = sorted(given.keys() - wanted.keys())
    if extra:
        raise UsageError(f"{path}: {extra[0]!r} is not a parameter, state or input of the step")
    feeds = {}
    for name, v in wanted.items():
        if name not in given:
            raise UsageError(f"{path}: no value for {name!r} (the step takes {v.dtype}{list(v.shape)})")
        value = given[name]
        if tuple(value.shape) != tuple(v.shape) or not np.can_cast(value.dtype, v.dtype, "same_kind"):
            raise UsageError(f"{path}: {name!r} is {value.dtype}{list(value.shape)}; the step takes "
                             f"{v.dtype}{list(v.shape)}")
        feeds[name] = np.array(value, dtype=v.dtype)
    return feeds
