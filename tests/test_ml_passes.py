"""The ML optimizing passes (hpgrem/passes/ml_*.py) and the code shapes they select in
pam/ml/codegen.py: every pass alone and all together print what -O0 prints, on examples and on
random programs (tests/ml_gen.py), and the limits (--timeout, --max-steps) and deep recursion
still hold in the fast shapes."""

from __future__ import annotations

import time

import pytest
from conftest import hpgrem

FIB = "fun fib n = if n < 2 then n else fib (n - 1) + fib (n - 2)\n"
TAK = "fun tak (x, y, z) = if y < x then tak (tak (x - 1, y, z), tak (y - 1, z, x), tak (z - 1, x, y)) else z\n"
LEVELS = ["-O0", "-O1", "-O2"]


# ---- limits hold in direct code (issue #11: fib 38 with --timeout 2 ran its 16 s) -------------

@pytest.mark.parametrize("opt", LEVELS)
def test_timeout_stops_recursion_in_direct_code(tmp_path, opt):
    path = tmp_path / "fib.sml"
    path.write_text(FIB + 'val _ = print (Int.toString (fib 45) ^ "\\n")\n')
    began = time.monotonic()
    r = hpgrem("run", str(path), "--timeout", "1", opt, timeout=60)
    assert time.monotonic() - began < 20  # a generous bound: fib 45 runs for many minutes
    assert r.returncode == 4 and "time limit of 1 s reached (--timeout)" in r.stderr, r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("opt", LEVELS)
@pytest.mark.parametrize("program", [FIB + "val _ = fib 45\n",
                                     TAK + "val _ = tak (40, 20, 0)\n",
                                     "fun loop n = if n = 0 then 0 else loop (n - 1)\nval _ = loop 100000000000\n"])
def test_max_steps_stops_recursion_in_direct_code(tmp_path, opt, program):
    path = tmp_path / "p.sml"
    path.write_text(program)
    r = hpgrem("run", str(path), "--max-steps", "2000", opt, timeout=60)
    assert r.returncode == 4 and "step limit reached" in r.stderr, r.stderr


@pytest.mark.parametrize("opt", LEVELS)
def test_a_million_deep_non_tail_recursion_runs(tmp_path, opt):
    path = tmp_path / "deep.sml"
    path.write_text("fun down 0 = 0 | down n = 1 + down (n - 1)\n"
                    "fun sum (0, acc) = acc | sum (n, acc) = sum (n - 1, acc + down 3)\n"
                    'val _ = print (Int.toString (down 1000000) ^ " " ^ Int.toString (sum (10, 0)) ^ "\\n")\n')
    r = hpgrem("run", str(path), opt, timeout=300)
    assert (r.returncode, r.stdout) == (0, "1000000 30\n"), r.stderr
