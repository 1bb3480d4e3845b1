"""Deep recursion and long streams run without Python recursion errors, in memory proportional
to live data (measured as peak resident memory of a child process)."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT, run_program

STREAM = """
mode gen(?, ?, ^).
gen(I, N, []) <- I > N : true.
gen(I, N, [I|Xs]) <- I =< N : I1 is I + 1, gen(I1, N, Xs).
main <- gen(1, {n}, Xs), sum(Xs, S), write(S), nl.
"""

PEAK = """
import io, resource, sys
from hpgrem.driver.pipeline import Options, compile_text
from pam.machine import Machine
out = io.StringIO()
Machine(compile_text(sys.stdin.read(), "s.par", Options(opt=0)).complete(), stream=out).run()
print(out.getvalue().strip(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def peak_kib(program: str) -> tuple[str, int]:
    r = subprocess.run([sys.executable, "-c", PEAK], input=program, capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    answer, kib = r.stdout.split()
    return answer, int(kib)


def test_a_million_element_stream_is_summed_in_constant_memory():
    small, small_kib = peak_kib(STREAM.format(n=100_000))
    big, big_kib = peak_kib(STREAM.format(n=1_000_000))
    assert small == str(100_000 * 100_001 // 2)
    assert big == str(1_000_000 * 1_000_001 // 2)
    # Holding the stream would cost over 60 MB more; the producer and consumer take turns instead.
    assert big_kib - small_kib < 20_000, (small_kib, big_kib)


def test_deep_non_tail_recursion():
    prog = """
    mode len(?, ^).
    len([], 0).
    len([_|T], N) <- len(T, N1), N is N1 + 1.
    mode gen(?, ^).
    gen(0, []).
    gen(N, [N|T]) <- N > 0 : N1 is N - 1, gen(N1, T).
    main <- gen(300000, L), len(L, N), write(N).
    """
    out, _ = run_program(prog)
    assert out == "300000"


def test_long_lists_unify_print_and_compare_without_recursion():
    prog = """
    mode gen(?, ^).
    gen(0, []).
    gen(N, [N|T]) <- N > 0 : N1 is N - 1, gen(N1, T).
    main <- gen(200000, A), gen(200000, B), (A = B & A == B & length(A, N) & write(N)).
    """
    out, _ = run_program(prog)
    assert out == "200000"


def test_deeply_nested_term_prints():
    prog = """
    mode nest(?, ?, ^).
    nest(0, T, T).
    nest(N, T, R) <- N > 0 : N1 is N - 1, nest(N1, s(T), R).
    main <- nest(100000, z, T), write(T).
    """
    out, _ = run_program(prog)
    assert out.startswith("s(s(") and out.endswith("z" + ")" * 100000)
