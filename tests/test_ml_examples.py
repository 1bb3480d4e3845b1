"""Every ML example (examples/ml/*.sml) prints exactly its recorded `.out` through `hpgrem run`, on
one PE and on 16 simulated PEs; the recorded outputs are Poly/ML's (spec/ml.md: Poly/ML is the
reference), re-checked against `poly --script` whenever it is installed.

An example that ends with an uncaught exception has a `.err` file (examples/ml/README.md):
its first line `status: N` is the expected exit status, each further line a substring the
stderr must contain. Without one, the expected status is 0 and stderr must be empty.

`python tests/test_ml_examples.py [NAME ...]` rewrites the `.out` files from Poly/ML.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, hpgrem

ML_EXAMPLES = ROOT / "examples" / "ml"
PROGRAMS = sorted(ML_EXAMPLES.glob("*.sml"))
POLY = shutil.which("poly")
needs_poly = pytest.mark.skipif(POLY is None, reason="Poly/ML is not installed")

# spec/ml.md: ForkJoin is not in Poly/ML; this shim makes the same file run there. The `;` makes
# it a chunk of its own, so a program may begin with a top-level expression.
FORKJOIN_SHIM = "structure ForkJoin = struct fun par (f, g) = (f (), g ()) end;\n"

# The 16-PE variant runs on a handful of examples (it is the slow one): the fork-join programs,
# the ones whose output order depends on effects being kept in program order, and exceptions.
SIXTEEN_PE = ["par_fib", "par_tree", "par_mergesort", "msort_par", "queens", "exceptions", "refs_loops", "chunks",
              "uncaught"]


def expected_stdout(path: Path) -> str:
    return path.with_suffix(".out").read_text()


def expected_status(path: Path) -> tuple[int, list[str]]:
    """(exit status, stderr substrings) from the `.err` file; (0, []) without one."""
    err = path.with_suffix(".err")
    if not err.exists():
        return 0, []
    first, *rest = err.read_text().splitlines()
    found = re.fullmatch(r"status: (\d+)", first.strip())
    assert found, f"{err.name}: the first line must be 'status: N'"
    return int(found.group(1)), [line for line in rest if line.strip()]


def check_run(path: Path, run: subprocess.CompletedProcess) -> None:
    status, messages = expected_status(path)
    assert "Traceback" not in run.stderr, run.stderr
    assert run.stdout == expected_stdout(path)
    assert run.returncode == status, run.stderr
    for message in messages:
        assert message in run.stderr
    if not messages:
        assert run.stderr == ""


# ---- the collection itself ------------------------------------------------------------------

def test_there_are_enough_examples():
    assert len(PROGRAMS) >= 24


@pytest.mark.parametrize("path", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_example_is_documented_and_recorded(path):
    assert path.read_text().startswith("(* "), f"{path.name} must open with a comment saying what it shows"
    assert path.with_suffix(".out").exists(), f"{path.name} has no recorded .out"
    assert f"`{path.name}`" in (ML_EXAMPLES / "README.md").read_text(), f"{path.name} is not in README.md"


def test_sixteen_pe_selection_names_examples():
    assert all((ML_EXAMPLES / f"{name}.sml").exists() for name in SIXTEEN_PE)


@pytest.mark.parametrize("path", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_example_type_checks_without_warnings(path):
    from frontend.ml import elaborate_program

    program = elaborate_program(path.read_text(), str(path))
    assert not program.warnings, [d.message for d in program.warnings]


# ---- hpgrem ---------------------------------------------------------------------------------

@pytest.mark.parametrize("path", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_example_output(path):
    check_run(path, hpgrem("run", str(path)))


@pytest.mark.parametrize("name", SIXTEEN_PE)
def test_example_output_on_sixteen_pes(name):
    path = ML_EXAMPLES / f"{name}.sml"
    check_run(path, hpgrem("run", "--pes", "16", str(path)))


# ---- the reference --------------------------------------------------------------------------

def poly_run(path: Path, tmp_dir: Path) -> tuple[str, int]:
    """The program's own output under `poly --script` (with the ForkJoin shim), and Poly/ML's
    exit status. Poly/ML prints its warnings and a final `Exception- X raised` line on stdout
    too; those are not program output and are cut here (errors are left in, to fail the test)."""
    script = tmp_dir / path.name
    script.write_text(FORKJOIN_SHIM + path.read_text())
    run = subprocess.run([POLY, "--script", str(script)], check=False, capture_output=True, text=True, timeout=60)
    out = run.stdout
    if run.returncode != 0:
        at = out.rfind("Exception- ")
        if at >= 0 and re.fullmatch(r"Exception- .* raised\n?", out[at:], re.DOTALL):
            out = out[:at]
    kept, in_warning = [], False
    for line in out.splitlines(keepends=True):
        if line.startswith(f"{script}:") and ": warning: " in line:
            in_warning = True
            continue
        if in_warning and line.startswith("   "):
            continue
        in_warning = False
        kept.append(line)
    return "".join(kept) + run.stderr, run.returncode


@needs_poly
@pytest.mark.parametrize("path", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_recorded_output_is_poly_ml_output(path, tmp_path):
    out, status = poly_run(path, tmp_path)
    assert out == expected_stdout(path)
    assert status == expected_status(path)[0]


if __name__ == "__main__":
    import tempfile

    if POLY is None:
        sys.exit("poly is not installed")
    chosen = [ML_EXAMPLES / f"{name.removesuffix('.sml')}.sml" for name in sys.argv[1:]] or PROGRAMS
    with tempfile.TemporaryDirectory() as tmp:
        for program in chosen:
            output, code = poly_run(program, Path(tmp))
            program.with_suffix(".out").write_text(output)
            print(f"{program.stem}: {len(output.splitlines())} lines, poly exit status {code}")
