"""`hpgrem run --trace OUT.jsonl` and `hpgrem trace FILE` (spec/cli.md, docs/trace.md).

A traced run is the same run (same schedule, outputs and statistics) with a `pam.trace.Trace`
on its machine; when it ends, however it ends, the stream gets its terminate event and is
written to `--trace OUT.jsonl`, and `hpgrem trace` renders it: as text on stdout (after the
program's own output), and with `--dot DIR` and `--html OUT.html` as Graphviz snapshots and the
viewer. `hpgrem trace FILE.jsonl` reads a stream back (untrusted input: checked line by line,
hpgrem.trace.events) and renders it the same way.
"""

from __future__ import annotations

import argparse
import sys

from hpgrem.driver.outputs import check_output, write_output
from hpgrem.errors import UsageError


def add_render_options(q: argparse.ArgumentParser) -> None:
    """`hpgrem trace`'s own options (besides run's)."""
    q.add_argument("--select", type=_rules, metavar="R/N,S/M", help="show only the rewrites of these "
                   "rules (e.g. --select append/3,nrev/2)")
    q.add_argument("--steps", type=_steps, metavar="A:B", help="show only steps A to B (an event's step "
                   "is its place in the stream, from 1; A: or :B leave one end open)")
    q.add_argument("--pe", type=_pe, metavar="K", help="show only the events of PE K")
    q.add_argument("--dot", metavar="DIR", help="also write Graphviz snapshots of the goal graph to DIR "
                   "(at each rewrite of the --steps, or at steps spread over the run)")
    q.add_argument("--html", metavar="OUT.html", help="also write the trace viewer, one self-contained file")


def _rules(text: str) -> frozenset[str]:
    rules = frozenset(r.strip() for r in text.split(",") if r.strip())
    if not rules:
        raise argparse.ArgumentTypeError("expected rules such as append/3,nrev/2")
    return rules


def _steps(text: str) -> tuple[int | None, int | None]:
    first, sep, last = text.partition(":")
    try:
        a = int(first) if first.strip() else None
        b = int(last) if last.strip() else None
    except ValueError:
        a = b = -1
    if not sep or (a is not None and a < 1) or (b is not None and b < 1) or (a is not None and b is not None and a > b):
        raise argparse.ArgumentTypeError(f"expected a step range A:B (1 <= A <= B), got {text!r}")
    return a, b


def _pe(text: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a PE number, got {text!r}")
    return int(text)


def traced(args) -> bool:
    """Whether this run records a trace (UsageError for a --trace-limit with nothing to limit)."""
    if args.command == "trace" or args.trace is not None:
        return True
    if args.trace_limit is not None:
        raise UsageError("--trace-limit limits a trace: give --trace OUT.jsonl too (or use hpgrem trace)")
    return False


def start_trace(args, module, pes: int, comm):
    """The Trace of this run (its header), its outputs checked before it runs."""
    from pam.topology import parse_topology
    from pam.trace import Trace
    for path in (args.trace, getattr(args, "html", None)):
        if path is not None:
            check_output(path, inputs=(args.file,))
    if args.trace is not None and not args.trace.lower().endswith(".jsonl"):
        raise UsageError(f"--trace {args.trace}: a trace is JSON lines: name it OUT.jsonl")
    mode = "mpi" if comm is not None else "simulated" if pes > 1 else "single"
    header = {"program": args.file, "language": module.language, "pes": pes,
              "topology": parse_topology(args.topology, pes).name if pes > 1 else None,
              "opt": args.opt, "mode": mode, "clock": "wall_us" if comm is not None else "virtual",
              "sources": _sources(args.file, module, args.goal)}
    return Trace(header, args.trace_limit)


def _sources(file: str, module, goal: str | None) -> dict[str, list[str]]:
    """The source lines a trace's spans may name: the program's lines the module kept (those
    its rules' spans name, by line number), its language's prelude, if it uses it, and --goal."""
    kept = module.source_lines
    lines = [""] * max(kept, default=0)
    for number, text in kept.items():
        lines[number - 1] = text
    sources = {file: lines}
    prelude = _prelude_file(module.language)
    if prelude is not None and any(key.startswith("prelude:") for key in module.rules):
        sources[PRELUDE] = prelude.read_text(encoding="utf-8").split("\n")
    if goal is not None:
        sources[GOAL] = [goal]
    return sources


PRELUDE, GOAL = "<prelude>", "<goal>"  # the file names the front ends give the prelude's and --goal's spans


def _prelude_file(language: str):
    if language == "parlog":
        from frontend.parlog import PRELUDE_FILE
        return PRELUDE_FILE
    if language == "ml":
        from frontend.ml.lower import PRELUDE_FILE
        return PRELUDE_FILE
    return None


def finish_trace(args, machine, stop: BaseException | None) -> None:
    """The run ended (`stop`: how, None for success): the terminate event, the stream written
    to --trace, and `hpgrem trace`'s renderings. Under MPI every rank's events are gathered to
    rank 0 (ordered by time), which writes and renders them."""
    trace = machine.trace
    comm = machine.comm
    suspended = trace.suspended_tasks()
    if comm is not None:
        parts = comm.gather((trace.events, suspended), root=0)
        if comm.Get_rank() != 0:
            return
        events = [e for part, _ in parts for e in part]
        events.sort(key=lambda e: (e["t"], e["pe"], e["seq"]))
        trace.events = events
        suspended = [i for _, ids in parts for i in ids]
        # what no rank received was still in flight when the ranks parted (and was dropped)
        received = {e["msg"] for e in events if e["ev"] == "receive"}
        in_flight = [e["msg"] for e in events if e["ev"] == "send" and e["msg"] not in received]
    else:
        in_flight = _in_flight(machine.sim)
    trace.terminate(_status(stop), suspended, in_flight)
    if args.trace is not None:
        write_output(args.trace, "\n".join(trace.lines()) + "\n")
    if args.command == "trace":
        sys.stdout.flush()
        render(args, trace.header, trace.events, trace.end_line())


def _status(stop: BaseException | None) -> str:
    from pam.errors import Deadlock, Finished, Halt, LimitExceeded, RankExit
    if stop is None or isinstance(stop, (Halt, Finished)):
        return "success"
    if isinstance(stop, RankExit):
        return {0: "success", 3: "deadlock", 4: "limit"}.get(stop.status, "failure")
    if isinstance(stop, Deadlock):
        return "deadlock"
    if isinstance(stop, (LimitExceeded, MemoryError)):
        return "limit"
    return "failure"


def _in_flight(sim) -> list[int]:
    """The ids of the messages a simulation still carried when the run ended."""
    if sim is None:
        return []
    messages = [m for box in sim.outbox for m in box]
    for event in sim.events:
        m = event[4]
        if event[2] == 1:
            messages += getattr(m, "messages", [m])
    return [m.trace[0] for m in messages if m.trace is not None]


def render_file(args) -> int:
    """`hpgrem trace FILE.jsonl`: render a trace read back."""
    from hpgrem.trace.events import TraceFormatError, read_trace
    for option in ("goal", "trace"):
        if getattr(args, option) is not None:
            raise UsageError(f"--{option} is for running a program, not for rendering a trace file")
    if args.html is not None:
        check_output(args.html, inputs=(args.file,))
    try:
        stream = read_trace(args.file)
    except TraceFormatError as e:
        raise UsageError(str(e)) from None
    render(args, stream.header, stream.events, stream.end)
    return 0


def render(args, header: dict, events: list[dict], end: dict) -> None:
    """The text rendering on stdout, and the --dot and --html renderings."""
    from hpgrem.trace.text import Selection, render as text
    first, last = args.steps or (None, None)
    selection = Selection(args.select, first, last, args.pe)
    sys.stdout.write(text(header, events, end, selection))
    if args.dot is not None:
        from hpgrem.trace.dot import write_snapshots
        steps = None  # T3's choice: steps spread over the run
        if args.steps is not None:  # a snapshot at each rewrite in the range (the graph changes there)
            steps = [n for n in range(first or 1, min(last or len(events), len(events)) + 1)
                     if events[n - 1]["ev"] == "rewrite"]
        try:
            written = write_snapshots(header, events, args.dot, steps)
        except OSError as e:  # e.g. --dot names a file, or a folder that cannot be written
            raise UsageError(f"--dot {args.dot}: cannot write snapshots there: {e.strerror or e}") from None
        for path in written:
            print(f"wrote {path}", file=sys.stderr)
    if args.html is not None:
        from hpgrem.trace.html import write_viewer
        # the end line last: a cut stream shows the viewer's "trace was cut" note
        write_viewer(header, events + [end] if end is not None else events, args.html)
        print(f"wrote {args.html}", file=sys.stderr)


__all__ = ["add_render_options", "finish_trace", "render", "render_file", "start_trace", "traced"]
