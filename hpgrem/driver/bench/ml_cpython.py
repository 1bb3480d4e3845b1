"""ML against plain CPython, in one process: `python -m hpgrem.driver.bench.ml_cpython [ROUNDS]`.

For fib25, tak and nqueens8: the CPU time of the machine's run of the ML program (compiled
beforehand, at -O0, -O1 and -O2) and of the same function written in Python
(benchmarks/ml/NAME.py, its top level without the final print), alternated, best of ROUNDS
(15): no start-up in either, and CPU time, which other processes on the machine disturb less
than wall time. Prints each level's time over CPython's.
"""

from __future__ import annotations

import io
import sys
import time

from benchmarks import HERE

CALLS = {"fib25": "fib(25)", "tak": "tak(18, 12, 6)", "nqueens8": "queens(8, 0, None)"}
LEVELS = (0, 1, 2)


def python_function(name: str):
    """The benchmark's Python function, called as the program's last line calls it."""
    source = (HERE / "ml" / f"{name}.py").read_text().rsplit("\nprint(", 1)[0]
    namespace: dict = {}
    exec(compile(source, f"{name}.py", "exec"), namespace)
    return lambda: eval(CALLS[name], namespace)


def ratios(name: str, rounds: int) -> dict[str, float]:
    from hpgrem.driver.pipeline import Options, compile_file
    from pam.machine import Machine

    modules = {opt: compile_file(str(HERE / "ml" / f"{name}.sml"), Options(opt=opt)).complete() for opt in LEVELS}
    python = python_function(name)
    best = {"cpython": float("inf"), **{f"-O{opt}": float("inf") for opt in LEVELS}}
    for _ in range(rounds):
        began = time.thread_time()
        python()
        best["cpython"] = min(best["cpython"], time.thread_time() - began)
        for opt, module in modules.items():
            # as `hpgrem run` runs it: no --stats, so its code counts no reductions
            machine = Machine(module, stream=io.StringIO(), count_reductions=False)
            machine.runtime.build(poll=False, counts=False)  # its Python code: start-up, not timed
            began = time.thread_time()
            machine.run()
            best[f"-O{opt}"] = min(best[f"-O{opt}"], time.thread_time() - began)
    return best


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))  # the Python peers recurse
    print(f"{'benchmark':<10} {'cpython':>10} " + " ".join(f"{f'-O{o}':>16}" for o in LEVELS))
    for name in CALLS:
        best = ratios(name, rounds)
        cells = [f"{best[f'-O{o}'] * 1000:7.1f} ms {best[f'-O{o}'] / best['cpython']:4.2f}x" for o in LEVELS]
        print(f"{name:<10} {best['cpython'] * 1000:7.1f} ms " + " ".join(cells))


if __name__ == "__main__":
    main()
