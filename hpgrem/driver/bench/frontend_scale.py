"""`hpgrem bench scale [--json]`: how the front end and the load grow with the size of a
program (issue 16, item 6). A generated PARLOG program of N small relations
(`p_i(X, Y) <- Y is X + 1.`, with a `main` that calls a chain of them) is checked
(`hpgrem check`) and run (`hpgrem run`), each as the user's command in a process of its own, for
N = 1,000, 10,000 and 100,000. Rows: the wall time and the CPU time of each command, and the
growth of its CPU time against the size before, per relation (`1.0` is growth in proportion:
ten times the relations, ten times the time; CPU time, because on a shared machine wall time
says more about the other work). The generators are also the fuzzer's big programs
(tests/test_fuzz.py).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

SIZES = (1_000, 10_000, 100_000)
COMMANDS = ("check", "run")
CHAIN = 10  # relations that main calls, in a chain


@dataclass(frozen=True, slots=True)
class Row:
    """One figure: `metric` of `command` on `relations` relations."""

    command: str
    relations: int
    metric: str  # "wall", "cpu" (s) or "growth" (CPU time ratio over size ratio against the size before)
    value: float
    unit: str


def relations_program(n: int, chain: int = CHAIN) -> tuple[str, str]:
    """A PARLOG program of `n` relations `p_i(X, Y) <- Y is X + i mod 7.` and a `main` that
    threads 0 through the first `chain` of them and writes the sum; with the output it prints."""
    lines = []
    for i in range(n):
        lines.append(f"mode p{i}(?, ^).\np{i}(X, Y) <- Y is X + {i % 7}.")
    used = min(chain, n)
    calls = ", ".join(f"p{i}(V{i}, V{i + 1})" for i in range(used))
    lines.append(f"main <- V0 = 0, {calls}, write(V{used}), nl.")
    return "\n".join(lines) + "\n", f"{sum(i % 7 for i in range(used))}\n"


def ml_program(n: int, chain: int = CHAIN) -> tuple[str, str]:
    """An ML program of `n` functions `fun f_i x = x + i mod 7` and a last declaration that
    applies the first `chain` of them to 0 and prints the sum; with the output it prints."""
    lines = [f"fun f{i} x = x + {i % 7}" for i in range(n)]
    used = min(chain, n)
    applied = "0"
    for i in range(used):
        applied = f"f{i} ({applied})"
    lines.append(f"val _ = print (Int.toString ({applied}) ^ \"\\n\");")
    return "\n".join(lines) + "\n", f"{sum(i % 7 for i in range(used))}\n"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _command_time(command: str, path: Path, expected: str) -> tuple[float, float]:
    """(wall, CPU) seconds of `hpgrem COMMAND PATH`, which must succeed with `expected` out."""
    began, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run([sys.executable, "-m", "hpgrem.driver.cli", command, str(path)], capture_output=True,
                          text=True, check=False)
    took = (time.perf_counter() - began, _children_cpu() - cpu)
    wanted = expected if command == "run" else ""
    if done.returncode != 0 or done.stdout != wanted:
        raise RuntimeError(f"hpgrem {command} on {path.name} exited {done.returncode}: {done.stderr[-2000:]}")
    return took


def rows(sizes: tuple[int, ...] = SIZES) -> list[Row]:
    """Wall and CPU time of each command at each size, and the CPU time's growth per relation."""
    out: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        cpu: dict[tuple[str, int], float] = {}
        for n in sizes:
            text, expected = relations_program(n)
            path = Path(tmp) / f"relations{n}.par"
            path.write_text(text)
            for command in COMMANDS:
                wall, cpu[command, n] = _command_time(command, path, expected)
                out.append(Row(command, n, "wall", wall, "s"))
                out.append(Row(command, n, "cpu", cpu[command, n], "s"))
        for command in COMMANDS:
            for before, n in zip(sizes, sizes[1:]):
                growth = (cpu[command, n] / cpu[command, before]) / (n / before)
                out.append(Row(command, n, "growth", growth, "x"))
    return out


def table(found: list[Row]) -> str:
    lines = [f"{'command':<8} {'relations':>10} {'metric':<8} {'value':>10} unit"]
    for r in found:
        lines.append(f"{r.command:<8} {r.relations:>10} {r.metric:<8} {r.value:>10.3f} {r.unit}")
    lines.append("growth: CPU time ratio over size ratio against the size before (1.0: in proportion)")
    return "\n".join(lines)


def to_json(found: list[Row]) -> str:
    return json.dumps([asdict(r) for r in found], indent=2)
