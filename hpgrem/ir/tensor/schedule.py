"""A pipelined training step's schedule as data: per pipeline stage (PE) a list of actions.

An `Action` is one thing a stage does in order: the `forward` or `backward` of micro-batch
`micro_batch` on its model chunk `chunk`, a `send` of values to stage `peer` (never blocks: the
transports buffer it), a `recv` of values from stage `peer` (waits until they arrive), a `reduce`
(a collective of the stage's own data-parallel or tensor-parallel group, which every member runs
at the same place of the same list) and the `optimizer` step. A compute action names the ops of
its stage's graph that it runs (`values`, in graph order); a send or recv names the values it
moves (the same names on both sides: a message is matched by its first value).

`gpipe` and `interleaved` (Megatron's interleaved 1F1B; with one chunk per stage, 1F1B itself)
give the order of the compute units of one stage (`units` picks one by name). `check_programs` proves a set of lists deadlock-free before any runs: it builds one global order
of every action consistent with each list and with every send before its recv (a recv waits for
its send, a send waits for nothing), and refuses lists that admit none, naming what each blocked
stage waits for. This is the check the systems that fixed their pipeline hangs adopted.
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("forward", "backward", "send", "recv", "reduce", "optimizer")
COMPUTE = frozenset({"forward", "backward", "reduce", "optimizer"})
SCHEDULES = ("gpipe", "1f1b")


class ScheduleError(ValueError):
    """A schedule that cannot run: an unmatched message or a deadlock (the message says which)."""


@dataclass(frozen=True, slots=True)
class Action:
    """One action of a stage's list (see the module's docstring). `peer` is the other stage of
    a send or recv (-1 otherwise); `micro_batch` and `chunk` are -1 where they mean nothing."""

    kind: str
    micro_batch: int = -1
    chunk: int = -1
    peer: int = -1
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown action kind {self.kind!r}")

    def label(self) -> str:
        """What the action is and of which micro-batch and chunk: `forward mb 1 chunk 0`."""
        where = f" mb {self.micro_batch}" if self.micro_batch >= 0 else ""
        where += f" chunk {self.chunk}" if self.chunk >= 0 else ""
        return self.kind + where

    def text(self) -> str:
        """One line: `forward mb 1 chunk 0 (12 ops)`, `send mb 1 -> 2: h.1.res_2`."""
        if self.kind in ("send", "recv"):
            arrow = "->" if self.kind == "send" else "<-"
            return f"{self.label()} {arrow} stage {self.peer}: {', '.join(self.values)}"
        return f"{self.label()} ({len(self.values)} ops)"


Unit = tuple[str, int, int]
"""A compute unit of a stage: ("forward" | "backward", micro-batch, local chunk)."""


def gpipe(stages: int, stage: int, micro_batches: int, chunks: int = 1) -> list[Unit]:
    """GPipe: every forward, then every backward (micro-batches in order; with several chunks
    per stage in the interleaved order of `interleaved`)."""
    order = interleaved(stages, stage, micro_batches, chunks, warmup=micro_batches * chunks)
    return [u for u in order if u[0] == "forward"] + [u for u in order if u[0] == "backward"]


def interleaved(stages: int, stage: int, micro_batches: int, chunks: int,
                warmup: int | None = None) -> list[Unit]:
    """Megatron's interleaved 1F1B: the stage holds `chunks` model chunks (chunk c of stage s
    is the model's piece c * stages + s); forwards go through micro-batches in groups of
    `stages` per chunk, backwards likewise with the chunks reversed. `warmup` forwards come
    first (by default Megatron's count), then one forward and one backward in turn. With one
    chunk this is 1F1B."""
    total = micro_batches * chunks
    if chunks > 1 and micro_batches % stages:
        raise ScheduleError(f"interleaved 1F1B needs micro_batches ({micro_batches}) divisible by pp ({stages})")

    def unit(kind: str, k: int) -> Unit:
        c = (k // stages) % chunks if chunks > 1 else 0
        mb = (k // (stages * chunks)) * stages + k % stages if chunks > 1 else k
        return (kind, mb, c if kind == "forward" else chunks - 1 - c)

    if warmup is None:
        if chunks == 1:
            warmup = stages - stage - 1
        elif micro_batches == stages:
            warmup = total
        else:
            warmup = (stages - stage - 1) * 2 + (chunks - 1) * stages
    warmup = min(warmup, total)
    order = [unit("forward", k) for k in range(warmup)]
    for k in range(total - warmup):
        order += [unit("forward", warmup + k), unit("backward", k)]
    order += [unit("backward", k) for k in range(total - warmup, total)]
    return order


def units(schedule: str, stages: int, stage: int, micro_batches: int, chunks: int) -> list[Unit]:
    """The compute units of `stage` under `schedule` ("gpipe" or "1f1b"; with `chunks` > 1,
    "1f1b" is the interleaved schedule)."""
    if schedule == "gpipe":
        return gpipe(stages, stage, micro_batches, chunks)
    if schedule == "1f1b":
        return interleaved(stages, stage, micro_batches, chunks)
    raise ScheduleError(f"unknown pipeline schedule {schedule!r} (one of {', '.join(SCHEDULES)})")


def check_programs(programs: list[list[Action]]) -> list[tuple[int, int]]:
    """One global order of every action, as (stage, index in its list), consistent with each
    stage's list and with each send before its recv; ScheduleError if a message has no match
    or the lists deadlock."""
    sends: dict[tuple[int, int, tuple[str, ...]], int] = {}
    for s, program in enumerate(programs):
        for a in program:
            if a.kind in ("send", "recv") and not 0 <= a.peer < len(programs):
                raise ScheduleError(f"stage {s}: {a.text()}: no stage {a.peer}")
            if a.kind == "send":
                key = (s, a.peer, a.values)
                sends[key] = sends.get(key, 0) + 1
            elif a.kind == "recv":
                key = (a.peer, s, a.values)
                sends[key] = sends.get(key, 0) - 1
    unmatched = [k for k, n in sends.items() if n]
    if unmatched:
        src, dst, values = unmatched[0]
        which = "sent but never received" if sends[unmatched[0]] > 0 else "received but never sent"
        raise ScheduleError(f"{', '.join(values)} from stage {src} to stage {dst} is {which}")
    done = [0] * len(programs)
    posted: dict[tuple[int, int, tuple[str, ...]], int] = {}
    order: list[tuple[int, int]] = []
    progress = True
    while progress:
        progress = False
        for s, program in enumerate(programs):
            while done[s] < len(program):
                a = program[done[s]]
                if a.kind == "recv":
                    key = (a.peer, s, a.values)
                    if not posted.get(key):
                        break
                    posted[key] -= 1
                elif a.kind == "send":
                    key = (s, a.peer, a.values)
                    posted[key] = posted.get(key, 0) + 1
                order.append((s, done[s]))
                done[s] += 1
                progress = True
    blocked = [f"stage {s} at action {done[s]} ({p[done[s]].text()})"
               for s, p in enumerate(programs) if done[s] < len(p)]
    if blocked:
        raise ScheduleError("the pipeline schedule deadlocks: " + "; ".join(blocked))
    return order


def micro_batch_input(name: str) -> tuple[int, str] | None:
    """(i, input) for the input "mb{i}.<input>" that tensor-pipeline gives micro-batch i of a
    batched input; None for another name."""
    head, dot, rest = name.partition(".")
    if dot and head.startswith("mb") and head[2:].isdigit():
        return int(head[2:]), rest
    return None


def program_text(programs: list[list[Action]]) -> str:
    """Every stage's list, one action a line (what `--schedule-dump` prints)."""
    lines = []
    for s, program in enumerate(programs):
        lines.append(f"stage {s}:")
        lines += [f"  {i:3d} {a.text()}" for i, a in enumerate(program)]
    return "\n".join(lines)


__all__ = ["Action", "COMPUTE", "KINDS", "SCHEDULES", "ScheduleError", "check_programs", "gpipe", "interleaved",
           "micro_batch_input", "program_text", "units"]
