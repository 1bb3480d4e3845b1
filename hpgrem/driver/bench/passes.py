"""`hpgrem bench passes [--json]`: each optimizing pass on the benchmark it is for, before and
after, and on a program it cannot help (docs/passes.md).

`ENTRIES` is the table: one `PassEntry` per pass (a language's passes add their own rows). For
each entry, on one PE: the counters the pass changes (from a run of code compiled to count) and
the wall time of the machine's run (best of REPEATS, before and after alternated in one
process); then the virtual time on 1, 4, 16 and 64 simulated PEs, and on 16 PEs as the link's
start-up cost per hop varies. Figures are JSON rows `{"pass", "program", "metric", "pes",
"startup_us", "before", "after", "unit"}`, or a table.
"""

from __future__ import annotations

import io
import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from benchmarks import HERE
PARLOG = HERE / "parlog"
EXAMPLES = HERE.parent / "examples" / "parlog"
REPEATS = 5
PES = (1, 4, 16, 64)
STARTUPS_US = (1.0, 5.0, 50.0)  # link start-up per hop; the cost model's default is 5 us
PARLOG_O2 = ("prune-unreachable", "order-nodes", "index-rules", "tail-loop", "dest-passing", "lift", "schedule")
ML = HERE / "ml"
ML_EXAMPLES = HERE.parent / "examples" / "ml"
ML_O2 = ("ml-flatten", "ml-grain", "ml-inline", "simplify", "prune-unreachable", "ml-switch", "ml-ranges",
         "ml-batch-counts")


@dataclass(frozen=True)
class PassEntry:
    """A pass measured on `program`: the passes run before (`before`) and after (`after`: the
    same plus the pass), the counters it changes, and `unhelped`, a program it cannot help
    (None for the rows of all the passes together)."""

    name: str
    program: Path
    counters: tuple[str, ...]
    unhelped: Path | None
    before: tuple[str, ...] = ()
    parallel: bool = True  # measure virtual time on several PEs (a sequential program gains nothing)
    adds: tuple[str, ...] | None = None  # the passes added (by default the one named)
    links: bool = False  # also count messages, packets and bytes sent on the simulated PEs

    @property
    def after(self) -> tuple[str, ...]:
        return (*self.before, *(self.adds if self.adds is not None else (self.name,)))


ENTRIES: list[PassEntry] = [
    PassEntry("index-rules", PARLOG / "primes.par", ("clause_tries", "guard_tests"), PARLOG / "fib24.par"),
    PassEntry("tail-loop", PARLOG / "nrev30.par", ("looped", "reductions"), EXAMPLES / "univ.par",
              parallel=False),
    PassEntry("dest-passing", PARLOG / "nrev30.par", ("cells_in_place",), PARLOG / "fib24.par",
              before=("tail-loop",), parallel=False),
    PassEntry("order-nodes", PARLOG / "queens.par", ("suspensions", "enqueues"), PARLOG / "nrev30.par"),
    PassEntry("lift", PARLOG / "fib24.par", ("exported",), PARLOG / "queens.par"),
    # aggregate changes nothing on one PE: its counts are the links' (messages, packets, bytes)
    PassEntry("aggregate", PARLOG / "queens.par", ("reductions",), PARLOG / "primes.par", links=True),
    PassEntry("schedule", PARLOG / "queens.par", ("enqueues", "suspensions"), PARLOG / "primes.par",
              before=("order-nodes",)),
    # All of them together: -O0 against the PARLOG passes of -O2, on the targets.
    PassEntry("parlog-O2", PARLOG / "nrev30.par", ("looped", "cells_in_place"), None,
              adds=PARLOG_O2, parallel=False),
    PassEntry("parlog-O2", PARLOG / "primes.par", ("guard_tests", "cells_in_place"), None,
              adds=PARLOG_O2),
    PassEntry("parlog-O2", PARLOG / "queens.par", ("suspensions", "exported"), None,
              adds=PARLOG_O2),
    PassEntry("parlog-O2", PARLOG / "fib24.par", ("suspensions", "exported"), None,
              adds=PARLOG_O2),
    # ML (docs/passes.md): the counters are the run's reductions and the tasks exported.
    PassEntry("ml-flatten", ML / "tak.sml", ("reductions",), ML / "fib25.sml", parallel=False),
    PassEntry("ml-grain", ML / "pfib_fine.sml", ("exported",), ML / "pfib30.sml"),
    PassEntry("ml-inline", ML / "sumsq.sml", ("reductions",), ML / "fib25.sml", parallel=False),
    PassEntry("ml-switch", ML / "classify.sml", ("reductions",), ML / "fib25.sml", before=("simplify",),
              parallel=False),
    PassEntry("ml-ranges", ML / "fib25.sml", ("reductions",), ML / "nqueens8.sml", parallel=False),
    PassEntry("ml-batch-counts", ML / "fib25.sml", ("reductions",), ML_EXAMPLES / "higher_order.sml",
              parallel=False),
    # All of them together: -O0 against the ML passes of -O2.
    PassEntry("ml-O2", ML / "fib25.sml", ("reductions",), None, adds=ML_O2, parallel=False),
    PassEntry("ml-O2", ML / "tak.sml", ("reductions",), None, adds=ML_O2, parallel=False),
    PassEntry("ml-O2", ML / "pfib30.sml", ("exported",), None, adds=ML_O2),
]


@dataclass
class Row:
    """One figure before and after a pass (the keys `--json` promises)."""

    pass_: str
    program: str
    metric: str
    pes: int
    startup_us: float | None
    before: float
    after: float
    unit: str


def _module(path: Path, passes: tuple[str, ...]):
    from hpgrem.driver.pipeline import Options, compile_file
    return compile_file(str(path), Options(passes=passes)).complete()


def _machine(module, counting: bool = False, **options):
    from pam.machine import Machine
    from pam.runtimes import runtime_for
    return Machine(module, stream=io.StringIO(), runtime=runtime_for(module, counting), **options)


def counters(module, names: tuple[str, ...]) -> dict[str, float]:
    """The counters of a counting run on one PE (reductions included)."""
    stats = _machine(module, counting=True).run().stats
    out = {"reductions": stats.reductions}
    for name in names:
        out[name] = sum(p.count(name) for p in stats.per_pe) if name != "reductions" else stats.reductions
    return out


def wall_times(a, b) -> tuple[float, float]:
    """Best wall time of the machine's run of module a and of b, alternated in one process."""
    best = [float("inf"), float("inf")]
    for _ in range(REPEATS):
        for i, module in enumerate((a, b)):
            machine = _machine(module)
            began = time.perf_counter()
            machine.run()
            best[i] = min(best[i], time.perf_counter() - began)
    return best[0], best[1]


def virtual(module, pes: int, startup_us: float | None = None) -> tuple[float, int]:
    """Virtual time and tasks exported on `pes` simulated PEs (mesh), with a link start-up."""
    stats = _virtual_stats(module, pes, startup_us)
    return stats.time, sum(p.exported for p in stats.per_pe)


def _virtual_stats(module, pes: int, startup_us: float | None = None):
    from pam.costs import DEFAULT
    costs = DEFAULT if startup_us is None else replace(DEFAULT, hop_startup=startup_us * 1e-6)
    return _machine(module, pes=pes, costs=costs).run().stats


def link_counts(module, pes: int) -> dict[str, int]:
    """Messages, packets (link messages: aggregate packs several into one) and bytes sent."""
    per_pe = _virtual_stats(module, pes).per_pe
    return {name: sum(getattr(p, field) for p in per_pe)
            for name, field in (("messages", "sent"), ("packets", "packets"), ("bytes", "bytes_sent"))}


def measure(entry: PassEntry) -> list[Row]:
    rows: list[Row] = []
    programs = [(entry.program, True)] + ([(entry.unhelped, False)] if entry.unhelped else [])
    for path, helped in programs:
        a, b = _module(path, entry.before), _module(path, entry.after)
        program = path.stem

        def row(metric, pes, startup, before, after, unit):
            rows.append(Row(entry.name, program, metric, pes, startup, before, after, unit))

        ca, cb = counters(a, entry.counters), counters(b, entry.counters)
        for name in dict.fromkeys((*entry.counters, "reductions")):
            row(name, 1, None, ca[name], cb[name], "count")
        ta, tb = wall_times(a, b)
        row("wall", 1, None, ta, tb, "s")
        if entry.links:  # on the program it cannot help too: the packets are the messages
            for pes in PES[1:]:
                la, lb = link_counts(a, pes), link_counts(b, pes)
                for name, unit in (("messages", "count"), ("packets", "count"), ("bytes", "bytes")):
                    row(name, pes, 5.0, la[name], lb[name], unit)
        if not (helped and entry.parallel):
            continue
        for pes in PES:
            (va, xa), (vb, xb) = virtual(a, pes), virtual(b, pes)
            row("virtual_time", pes, 5.0, va, vb, "s")
            if pes > 1:
                row("exported", pes, 5.0, xa, xb, "tasks")
                if xa and xb:
                    row("grain", pes, 5.0, ca["reductions"] / xa, cb["reductions"] / xb, "reductions/task")
        for startup in STARTUPS_US:
            (va, _), (vb, _) = virtual(a, 16, startup), virtual(b, 16, startup)
            (one_a, _), (one_b, _) = virtual(a, 1, startup), virtual(b, 1, startup)
            row("speedup", 16, startup, one_a / va, one_b / vb, "x")
    return rows


def table(rows: list[Row]) -> str:
    head = f"{'pass':<13} {'program':<10} {'metric':<14} {'pes':>4} {'start-up':>9} {'before':>12} {'after':>12} {'after/before':>12}"
    lines = [head, "-" * len(head)]
    for r in rows:
        ratio = f"{r.after / r.before:.3f}" if r.before else "-"
        startup = f"{r.startup_us:g} us" if r.startup_us is not None else "-"
        lines.append(f"{r.pass_:<13} {r.program:<10} {r.metric:<14} {r.pes:>4} {startup:>9} "
                     f"{r.before:>12.6g} {r.after:>12.6g} {ratio:>12}")
    return "\n".join(lines)


def rows(names: list[str] | None = None) -> list[Row]:
    out: list[Row] = []
    for entry in ENTRIES:
        if not names or entry.name in names:
            out.extend(measure(entry))
    return out


def to_json(rows_: list[Row]) -> str:
    return json.dumps([{("pass" if k == "pass_" else k): v for k, v in asdict(r).items()} for r in rows_], indent=2)
