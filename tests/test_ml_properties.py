"""Property tests of the ML run time (spec/ml.md) on random well-typed programs (tests/ml_gen.py):
`hpgrem run` prints what Poly/ML prints and exits as it does (0, or 1 for an uncaught exception,
named the same), and a program prints the same on 1 PE as on 16 simulated PEs. The generator's
own contract (every program elaborates, without warnings unless by design; Poly/ML accepts it)
is checked here too, without the run time."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import hpgrem
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ml_gen import FORKJOIN_SHIM, programs

from frontend.ml import elaborate_program

POLY = shutil.which("poly")
needs_poly = pytest.mark.skipif(POLY is None, reason="Poly/ML is not installed")

# Printed first under Poly/ML: a file without top-level `;` is compiled whole before it runs, so
# Poly's warnings all come before this line and the program's output all after it.
START = "<<hpgrem-test: the program starts here>>"
SLOW = settings(max_examples=25, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
RUN_TIMEOUT = 300


class Reference:
    """What Poly/ML does with a program: its stdout (without Poly's own lines), its exit status,
    and the uncaught exception as `hpgrem run` must name it on stderr (None when there is none)."""

    def __init__(self, text: str, workdir: Path):
        path = workdir / "poly.sml"
        path.write_text(FORKJOIN_SHIM + f'val _ = print "{START}\\n"\n' + text)
        run = subprocess.run([POLY, "--script", str(path)], check=False, capture_output=True, text=True, timeout=120)
        before, sep, out = run.stdout.partition(START + "\n")
        assert sep, f"Poly/ML rejected the program (a generator bug):\n{run.stdout}{run.stderr}\n{text}"
        assert "error" not in before.lower(), before
        self.status = run.returncode
        self.uncaught = None
        if run.returncode != 0:
            cut = out.rfind("Exception- ")
            assert run.returncode == 1 and cut >= 0, f"Poly/ML status {run.returncode}:\n{run.stdout}"
            self.uncaught = _ours_for(out[cut:].strip())
            out = out[:cut]
        self.stdout = out


def _ours_for(poly_line: str) -> str:
    """`Exception- E1 3 raised` -> `E1`; `Exception- Fail "bad" raised` -> `Fail: bad`."""
    m = re.fullmatch(r'Exception- (\S+)(.*) raised', poly_line, re.DOTALL)
    assert m, poly_line
    name, arg = m.group(1), m.group(2).strip()
    if name == "Fail":
        return "Fail: " + arg[1:-1]       # generated messages hold no escapes
    return name


def _uncaught_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("uncaught exception")]


def _show(text: str, run) -> str:
    return f"\n--- program ---\n{text}--- stdout ---\n{run.stdout}--- stderr ---\n{run.stderr}"


# -- the run time against Poly/ML ----------------------------------------------------------------

@needs_poly
@given(programs(warnings=None))
@SLOW
def test_programs_print_and_fail_as_in_poly_ml(text):
    with tempfile.TemporaryDirectory() as tmp:
        ref = Reference(text, Path(tmp))
        path = Path(tmp) / "prog.sml"
        path.write_text(text)
        ours = hpgrem("run", str(path), timeout=RUN_TIMEOUT)
    assert ours.returncode == ref.status, _show(text, ours)
    assert ours.stdout == ref.stdout, _show(text, ours)
    if ref.uncaught is not None:
        assert _uncaught_lines(ours.stderr) == [f"uncaught exception {ref.uncaught}"], _show(text, ours)


@given(programs(warnings=None), st.integers(0, 3))
@SLOW
def test_one_pe_and_sixteen_simulated_pes_agree(text, seed):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "prog.sml"
        path.write_text(text)
        one = hpgrem("run", str(path), timeout=RUN_TIMEOUT)
        many = hpgrem("run", "--pes", "16", "--seed", str(seed), str(path), timeout=RUN_TIMEOUT)
    assert one.returncode in (0, 1), _show(text, one)
    assert (many.returncode, many.stdout) == (one.returncode, one.stdout), _show(text, many)
    assert _uncaught_lines(many.stderr) == _uncaught_lines(one.stderr)


# -- the generator's contract (no run time needed) -----------------------------------------------

@given(programs())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_generated_programs_elaborate_without_warnings(text):
    program = elaborate_program(text, "gen.sml")
    assert [w.message for w in program.warnings] == []


@given(programs(warnings=True))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_warnings_by_design_are_only_non_exhaustive_matches(text):
    program = elaborate_program(text, "gen.sml")
    assert {w.message for w in program.warnings} <= {"matches are not exhaustive"}


@needs_poly
@given(programs(warnings=None))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_poly_ml_accepts_generated_programs(text):
    with tempfile.TemporaryDirectory() as tmp:
        ref = Reference(text, Path(tmp))
    assert ref.status in (0, 1)
