"""`hpgrem bench`: each benchmark runs our machine and, where installed, the reference system
on the same algorithm, and reports both (spec/cli.md: a table, or JSON rows with `--json`).

Figures are best of three runs, timed around the machine's run only (compilation excluded),
and SWI-Prolog's are its own CPU-time measurements of the same algorithm. Programs are compiled
at one -O level, the command's (-O2 unless told), which the table and every JSON row name.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from hpgrem.driver.pipeline import DEFAULT_LEVEL

from benchmarks import HERE
from hpgrem.driver.bench.row import Row
REPEATS = 3
MICRO_REPEATS = 15  # the ML micro-benchmarks run for milliseconds: best of more runs


def _module(path: Path, opt: int = DEFAULT_LEVEL):
    """The program's module, compiled as `hpgrem run -O{opt}` compiles it."""
    from hpgrem.driver.pipeline import Options, compile_file
    return compile_file(str(path), Options(opt=opt)).complete()


def _run_parlog(path: Path, opt: int) -> tuple[float, int, str]:
    """Best wall time of the machine's run, its reductions, and its output."""
    from pam.machine import Machine

    module = _module(path, opt)
    best, reductions, output = float("inf"), 0, ""
    for _ in range(REPEATS):
        out = io.StringIO()
        machine = Machine(module, stream=out)
        began = time.perf_counter()
        result = machine.run()
        best = min(best, time.perf_counter() - began)
        reductions, output = result.stats.reductions, out.getvalue()
    return best, reductions, output


def _swipl(name: str) -> dict | None:
    """The JSON line a Prolog peer prints, or None when SWI-Prolog is not installed."""
    swipl = shutil.which("swipl")
    if swipl is None:
        return None
    r = subprocess.run([swipl, "-q", "-g", "main", "-t", "halt", str(HERE / "prolog" / f"{name}.pl")],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def bench_nrev30(opt: int) -> list[Row]:
    seconds, _, _ = _run_parlog(HERE / "parlog" / "nrev30.par", opt)
    lips = 496 * 1000 / seconds  # logical inferences of 1000 nrev30s, loop excluded (as SWI counts them)
    peer = _swipl("nrev30")
    return [Row("nrev30", "lips", lips, "LIPS", "SWI-Prolog" if peer else None, peer and peer["value"])]


def _timed(name: str, file: str, peer_name: str | None, opt: int) -> list[Row]:
    seconds, reductions, _ = _run_parlog(HERE / "parlog" / file, opt)
    peer = _swipl(peer_name) if peer_name else None
    return [Row(name, "time", seconds, "s", "SWI-Prolog" if peer else None, peer and peer["value"]),
            Row(name, "reductions_per_s", reductions / seconds, "reductions/s")]


def _timed_kl1(name: str, file: str, peer_name: str | None, opt: int) -> list[Row]:
    """A committed-choice benchmark in the style of the KL1 suites (benchmarks/parlog/): the rows
    of `_timed` (no peer when `peer_name` is None) and the cost of one reduction, the figure to
    compare before and after an optimisation."""
    rows = _timed(name, file, peer_name, opt)
    return [*rows, Row(name, "cost_per_reduction", 1e6 / rows[1].value, "us")]


def _run_ml(path: Path, opt: int, pes: int = 1, topology: str | None = None,
            repeats: int = REPEATS) -> tuple[float, object, str]:
    """Best wall time of the machine's run of an ML program (compilation excluded), its
    statistics, and its output."""
    from pam.machine import Machine

    module = _module(path, opt)
    best, output = float("inf"), ""
    for _ in range(repeats):
        out = io.StringIO()
        # timed as `hpgrem run` runs it, without --stats: code that counts no reductions
        machine = Machine(module, stream=out, pes=pes, topology=topology, count_reductions=False)
        counts = machine.pe.counts_reductions
        machine.runtime.build(poll=False, counts=counts)  # its Python code: compilation, not timed (nor Poly/ML's)
        began = time.perf_counter()
        machine.run()
        best = min(best, time.perf_counter() - began)
        output = out.getvalue()
    stats = Machine(module, stream=io.StringIO(), pes=pes, topology=topology).run().stats  # counted
    return best, stats, output


_TIMED_POLY = r"""val hpgrem_t0 = Time.now ();
{program}
val _ = print ("\nTIME " ^ LargeInt.toString (Time.toMicroseconds (Time.- (Time.now (), hpgrem_t0))) ^ "\n");
"""
_TIMED_PYTHON = ("import runpy, sys, time\nt = time.perf_counter()\nrunpy.run_path(sys.argv[1])\n"
                 "print('\\nTIME', int((time.perf_counter() - t) * 1e6))")


def _peer_time(command: list[str]) -> tuple[float, str] | None:
    """Best of three of a peer's own timing of the program (start-up excluded), and its output."""
    best, output = float("inf"), ""
    for _ in range(REPEATS):
        r = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if r.returncode != 0 or "\nTIME " not in r.stdout:
            return None
        output, _, micros = r.stdout.rpartition("\nTIME ")
        best = min(best, int(micros.split()[0]) / 1e6)
    return best, output


def _warm_python(name: str, repeats: int = REPEATS) -> float:
    """Best of `repeats` runs of the benchmark's Python function called in this process."""
    from hpgrem.driver.bench.ml_cpython import python_function

    call, best = python_function(name), float("inf")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10000))  # the Python peers recurse
    try:
        for _ in range(repeats):
            began = time.perf_counter()
            call()
            best = min(best, time.perf_counter() - began)
    finally:
        sys.setrecursionlimit(limit)
    return best


def bench_ml(name: str, opt: int) -> list[Row]:
    """An ML program on our machine, beside Poly/ML (when installed) and CPython running the
    same algorithm; outputs must agree."""
    sml, py = HERE / "ml" / f"{name}.sml", HERE / "ml" / f"{name}.py"
    seconds, stats, output = _run_ml(sml, opt, repeats=MICRO_REPEATS)
    rows = []
    poly = shutil.which("poly")
    if poly is not None:
        with tempfile.TemporaryDirectory() as tmp:
            timed = Path(tmp) / "timed.sml"
            timed.write_text(_TIMED_POLY.format(program=sml.read_text()))
            peer = _peer_time([poly, "--script", str(timed)])
        if peer is not None and peer[1].rstrip("\n") == output.rstrip("\n"):
            rows.append(Row(name, "time", seconds, "s", "Poly/ML", peer[0]))
    peer = _peer_time([sys.executable, "-c", _TIMED_PYTHON, str(py)])
    if peer is not None and peer[1].rstrip("\n") == output.rstrip("\n"):
        # timed in this process, warm, as ours is: a fresh process's first call of a small
        # function runs about twice as slow and would flatter us
        rows.append(Row(name, "time", seconds, "s", "CPython", _warm_python(name, MICRO_REPEATS)))
    if not rows:
        rows.append(Row(name, "time", seconds, "s"))
    rows.append(Row(name, "reductions_per_s", stats.reductions / seconds, "reductions/s"))
    return rows


# Programs in the style of real ML code (higher-order functions, exceptions for control),
# each run once as a user runs it (`hpgrem run -O0` and `-O2`, and `poly --script`): wall time,
# start-up included in both.
REAL_PROGRAMS = ("knuth_bendix", "simplifier", "fractal")


def _wall(command: list[str]) -> tuple[float, str] | None:
    """Wall time of one run of `command` and its output (None when it failed)."""
    began = time.perf_counter()
    r = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - began
    return (seconds, r.stdout) if r.returncode == 0 else None


def bench_real(name: str) -> list[Row]:
    """One of REAL_PROGRAMS at -O0 and -O2 (whatever level the command was given: both rows
    are the point), beside Poly/ML when installed and its output agrees."""
    sml = HERE / "ml" / f"{name}.sml"
    poly = shutil.which("poly")
    peer = _wall([poly, "--script", str(sml)]) if poly is not None else None
    rows = []
    for level in (0, 2):
        ours = _wall([sys.executable, "-m", "hpgrem.driver.cli", "run", f"-O{level}", str(sml)])
        if ours is None:
            raise RuntimeError(f"hpgrem run -O{level} {sml} failed")
        agrees = peer is not None and peer[1] == ours[1]
        rows.append(Row(f"{name}@O{level}", "time", ours[0], "s", "Poly/ML" if agrees else None,
                        peer[0] if agrees else None))
    return rows


def bench_speedup16(opt: int) -> list[Row]:
    """Virtual-time speedup on 16 simulated PEs (mesh:4x4) against one PE."""
    rows = []
    for name in ("queens10", "fib24"):
        path = HERE / "parlog" / f"{name}.par"
        one = virtual_time(path, 1, opt=opt)
        rows.append(Row(f"{name}@16", "speedup", one / virtual_time(path, 16, "mesh:4x4", opt), "x"))
    ml = HERE / "ml" / "pfib30.sml"
    rows.append(Row("pfib30@16", "speedup", virtual_time(ml, 1, opt=opt) / virtual_time(ml, 16, "mesh:4x4", opt),
                    "x"))
    return rows


def bench_remote(opt: int) -> list[Row]:
    """Data read on another PE: a 2,000-cell list built on PE 0 and summed on PE 1, virtual time
    on one PE against 2 and 16 (mesh:4x4) simulated PEs (below 1: the list's message costs more
    than the sum saves)."""
    path = HERE / "parlog" / "remote_list.par"
    one = virtual_time(path, 1, opt=opt)
    return [Row("remote2k@2", "speedup", one / virtual_time(path, 2, opt=opt), "x"),
            Row("remote2k@16", "speedup", one / virtual_time(path, 16, "mesh:4x4", opt), "x")]


def virtual_time(path: Path, pes: int, topology: str | None = None, opt: int = DEFAULT_LEVEL) -> float:
    """The virtual time of a program's run (PARLOG or ML) on `pes` simulated PEs, compiled at -O`opt`."""
    from pam.machine import Machine
    return Machine(_module(path, opt), stream=io.StringIO(), pes=pes, topology=topology).run().stats.time


def bench_mpi2(opt: int) -> list[Row]:
    """Real speedup: the run's wall time on one PE against `mpiexec -n 2`, on 10-queens (PARLOG)
    and fork/join Fibonacci (ML), best of three each (start-up excluded: both are the time of
    the run itself)."""
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        return []
    return [Row("queens10@mpi2", "speedup", _run_parlog(HERE / "parlog" / "queens10.par", opt)[0]
                / _mpi2_time(mpiexec, HERE / "parlog" / "queens10.par", opt), "x"),
            Row("pfib30@mpi2", "speedup", _run_ml(HERE / "ml" / "pfib30.sml", opt)[0]
                / _mpi2_time(mpiexec, HERE / "ml" / "pfib30.sml", opt), "x")]


def _mpi2_time(mpiexec: str, path: Path, opt: int) -> float:
    """The best of three times of the run itself under `mpiexec -n 2`."""
    two = float("inf")
    with tempfile.TemporaryDirectory() as tmp:
        stats = Path(tmp) / "stats.json"
        for _ in range(REPEATS):
            r = subprocess.run([mpiexec, "-n", "2", sys.executable, "-m", "hpgrem.driver.cli", "run", f"-O{opt}",
                                str(path), "--stats-json", str(stats)], capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                raise RuntimeError(f"mpiexec run failed: {r.stderr.strip()}")
            two = min(two, json.loads(stats.read_text())["time"])
    return two


def _tensor_rows(opt: int) -> list[Row]:
    """GPT training tokens/s beside PyTorch (hpgrem/driver/bench/tensor.py; imported only when run)."""
    from hpgrem.driver.bench.tensor import rows
    return rows(opt)


# name -> the rows of a benchmark, its programs compiled at the -O level given
BENCHMARKS: dict[str, Callable[[int], list[Row]]] = {
    "nrev30": bench_nrev30,
    "queens8": lambda opt: _timed("queens8", "queens.par", "queens", opt),
    "primes": lambda opt: _timed("primes", "primes.par", "primes", opt),
    "allqueens8": lambda opt: _timed("allqueens8", "allqueens.par", "allqueens", opt),  # set/3 vs findall/3
    "sieve120k": lambda opt: _timed_kl1("sieve120k", "sieve.par", "sieve", opt),
    "pascal": lambda opt: _timed_kl1("pascal", "pascal.par", "pascal", opt),
    "mastermind": lambda opt: _timed_kl1("mastermind", "mastermind.par", "mastermind", opt),  # `is` in guards
    "mastermind_body": lambda opt: _timed_kl1("mastermind_body", "mastermind_body.par", "mastermind", opt),
    "life": lambda opt: _timed_kl1("life", "life.par", None, opt),
    "fib25": lambda opt: bench_ml("fib25", opt),
    "tak": lambda opt: bench_ml("tak", opt),
    "nqueens8": lambda opt: bench_ml("nqueens8", opt),
    **{name: (lambda opt, name=name: bench_real(name)) for name in REAL_PROGRAMS},
    "speedup16": bench_speedup16,
    "remote2k": bench_remote,
    "mpi2": bench_mpi2,
    "tensor": _tensor_rows,
}


def table(rows: list[Row], opt: int) -> str:
    head = f"{'benchmark':<12} {'metric':<18} {'value':>14} {'unit':<14} {'peer':<12} {'peer value':>14} {'ratio':>10}"
    lines = [f"programs compiled at -O{opt}", head, "-" * len(head)]
    for r in rows:
        peer_value = f"{r.peer_value:>14.4g}" if r.peer_value is not None else f"{'-':>14}"
        ratio = "-"
        if r.peer_value:
            # a ratio above 1 always means "we are slower": time grows, rates shrink
            ratio = f"{(r.value / r.peer_value if r.unit == 's' else r.peer_value / r.value):.1f}x"
        lines.append(f"{r.name:<12} {r.metric:<18} {r.value:>14.4g} {r.unit:<14} {r.peer or '-':<12} "
                     f"{peer_value} {ratio:>10}")
    lines.append("ratio: how many times slower than the peer (time over time, or rate over rate)")
    return "\n".join(lines)


# Suites run only when named (they take minutes): name -> (rows, table, JSON) functions.
SUITES = {"passes": "hpgrem.driver.bench.passes", "scale": "hpgrem.driver.bench.frontend_scale"}


def main(names: list[str], as_json: bool = False, opt: int | None = None) -> int:
    """Run the named benchmarks (all by default) at -O`opt` (DEFAULT_LEVEL when None), or the
    named suites, which choose their passes themselves (a level given with them is refused)."""
    if names and all(n in SUITES for n in names):
        if opt is not None:
            print(f"hpgrem: error: -O{opt} does not apply to {', '.join(names)}: a suite compares passes of its own",
                  file=sys.stderr)
            return 2
        import importlib
        for name in names:
            suite = importlib.import_module(SUITES[name])
            found = suite.rows()
            print(suite.to_json(found) if as_json else suite.table(found))
        return 0
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"hpgrem: error: unknown benchmark {unknown[0]!r} (benchmarks: {', '.join([*BENCHMARKS, *SUITES])})",
              file=sys.stderr)
        return 2
    opt = DEFAULT_LEVEL if opt is None else opt
    rows: list[Row] = []
    for name in names or list(BENCHMARKS):
        rows.extend(BENCHMARKS[name](opt))
    if as_json:
        print(json.dumps([{**asdict(r), "level": opt} for r in rows], indent=2))
    else:
        print(table(rows, opt))
    return 0
