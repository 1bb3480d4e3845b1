"""One suite across back ends (STYLE.md, after Lark's): every example program prints the same
output on 1 PE, on 16 simulated PEs over several topologies, and under `mpiexec -n 2` and `-n 4`."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from conftest import EXAMPLES, ROOT, compile_source, expected_output, run_program

PROGRAMS = sorted(EXAMPLES.glob("*.par"))
MPIEXEC = shutil.which("mpiexec")


@pytest.mark.parametrize("topology", ["mesh:4x4", "torus:4x4", "ring", "hypercube"])
@pytest.mark.parametrize("path", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_sixteen_simulated_pes(path, topology):
    out, _ = run_program(path.read_text(), file=str(path), pes=16, topology=topology)
    assert out == expected_output(path)


@pytest.mark.parametrize("topology,pes,seed", [("tree", 7, 3), ("full", 5, 11)])
@pytest.mark.parametrize("path", [p for p in PROGRAMS if p.stem != "queens10"], ids=lambda p: p.stem)
def test_other_topologies_sizes_and_seeds(path, topology, pes, seed):
    out, _ = run_program(path.read_text(), file=str(path), pes=pes, topology=topology, seed=seed)
    assert out == expected_output(path)


@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec is not installed")
@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_mpi_ranks(path, ranks):
    r = subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, "-m", "hpgrem.driver.cli", "run", str(path)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout == expected_output(path)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_simulation_is_deterministic_for_a_seed(seed):
    path = EXAMPLES / "queens.par"
    runs = [run_program(path.read_text(), pes=8, topology="ring", seed=seed) for _ in range(2)]
    assert runs[0] == runs[1]


# -- ML: the same machine, the same matrix ---------------------------------------------------------
ML_EXAMPLES = ROOT / "examples" / "ml"
ML_PROGRAMS = sorted(ML_EXAMPLES.glob("*.sml"))
ML_FOR_MPI = ["par_fib", "par_mergesort", "par_tree", "exceptions", "queens", "uncaught", "chunks"]


def run_ml(path, **options) -> tuple[str, str | None]:
    """Run an ML example in process: its stdout, and the uncaught exception's message if any."""
    import io

    from pam.errors import Uncaught
    from pam.machine import Machine

    module = compile_source(path.read_text(), str(path))
    out = io.StringIO()
    try:
        Machine(module, stream=out, **options).run()
    except Uncaught as u:
        return out.getvalue(), u.message
    return out.getvalue(), None


@pytest.mark.parametrize("topology,pes,seed", [("mesh:4x4", 16, 0), ("hypercube", 16, 5), ("ring", 6, 2)])
@pytest.mark.parametrize("path", ML_PROGRAMS, ids=lambda p: p.stem)
def test_ml_on_many_simulated_pes(path, topology, pes, seed):
    one, uncaught_one = run_ml(path)
    many, uncaught_many = run_ml(path, pes=pes, topology=topology, seed=seed)
    assert one == path.with_suffix(".out").read_text()
    assert many == one and uncaught_many == uncaught_one


@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec is not installed")
@pytest.mark.parametrize("name", ML_FOR_MPI)
def test_ml_mpi_ranks(name):
    path = ML_EXAMPLES / f"{name}.sml"
    r = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "hpgrem.driver.cli", "run", str(path)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    err = path.with_suffix(".err")
    status = int(err.read_text().splitlines()[0].split(":")[1]) if err.exists() else 0
    assert r.returncode == status, r.stderr
    assert r.stdout == path.with_suffix(".out").read_text()
