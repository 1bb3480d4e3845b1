"""The real-program benchmarks (benchmarks/ml/knuth_bendix.sml, simplifier.sml, fractal.sml:
higher-order functions, exceptions for control, reals), at small sizes: the same output at -O0
and -O2, on 1 PE, on 16 simulated PEs and under `mpiexec -n 2`, and Poly/ML's
(tests/golden/ml_real/NAME.out, recorded with `poly --script`; `python
tests/test_ml_real_programs.py` records them again).
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, compile_source

GOLDEN = ROOT / "tests" / "golden" / "ml_real"
# each program at a size small enough for the tests: its size settings rewritten
SMALL = {"knuth_bendix": {"rounds": 1}, "simplifier": {"size": 4, "rounds": 2}, "fractal": {"size": 12}}
MPIEXEC = shutil.which("mpiexec")


def small_program(name: str) -> str:
    text = (ROOT / "benchmarks" / "ml" / f"{name}.sml").read_text()
    for setting, value in SMALL[name].items():
        text, n = re.subn(rf"^val {setting} = \d+$", f"val {setting} = {value}", text, count=1, flags=re.M)
        assert n == 1, f"{name}: no `val {setting} = N` line"
    return text


def run_machine(text: str, opt: int, pes: int) -> str:
    from pam.machine import Machine

    out = io.StringIO()
    Machine(compile_source(text, "real.sml", opt=opt), stream=out, pes=pes,
            topology="mesh:4x4" if pes == 16 else None).run()
    return out.getvalue()


@pytest.mark.parametrize("name", list(SMALL))
@pytest.mark.parametrize("opt, pes", [(0, 1), (2, 1), (2, 16)])
def test_real_program_output_is_poly_mls(name, opt, pes):
    assert run_machine(small_program(name), opt, pes) == (GOLDEN / f"{name}.out").read_text()


@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec is not installed")
@pytest.mark.parametrize("name", list(SMALL))
def test_real_program_under_mpi(name, tmp_path):
    path = tmp_path / f"{name}.sml"
    path.write_text(small_program(name))
    r = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "hpgrem.driver.cli", "run", "-O2", str(path)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert (r.returncode, r.stdout) == (0, (GOLDEN / f"{name}.out").read_text()), r.stderr


if __name__ == "__main__":
    import tempfile
    from pathlib import Path

    GOLDEN.mkdir(parents=True, exist_ok=True)
    for program in SMALL:
        with tempfile.TemporaryDirectory() as tmp:
            source = Path(tmp) / f"{program}.sml"
            source.write_text(small_program(program))
            result = subprocess.run(["poly", "--script", str(source)], capture_output=True, text=True, check=True)
        (GOLDEN / f"{program}.out").write_text(result.stdout)
