"""Shared helpers: run the `hpgrem` command in a subprocess, compile and run programs in-process."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "parlog"
SWIPL = shutil.which("swipl")
needs_swipl = pytest.mark.skipif(SWIPL is None, reason="SWI-Prolog is not installed")


def hpgrem(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the command line exactly as a user would (`python -m hpgrem.driver.cli` is the console script)."""
    return subprocess.run([sys.executable, "-m", "hpgrem.driver.cli", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=timeout)


def run_program(text: str, goal: str | None = None, file: str = "test.par", opt: int = 1,
                **machine_options) -> tuple[str, list[str]]:
    """Compile (as `hpgrem run` does) and run PARLOG source in-process; returns (stdout, --goal bindings)."""
    from pam.machine import Machine

    module = compile_source(text, file, goal=goal, opt=opt)
    out = io.StringIO()
    result = Machine(module, stream=out, **machine_options).run()
    return out.getvalue(), result.bindings


def compile_source(text: str, file: str, **options):
    """The verified module of source text (the language by `file`'s extension), compiled by the
    pipeline of the command line with `options` (hpgrem.driver.pipeline.Options); CompileError if any
    part of it does not compile."""
    from hpgrem.driver.pipeline import Options, compile_text
    return compile_text(text, file, Options(**options)).complete()


def expected_output(path: Path) -> str:
    """The `% expect:` lines a program carries, as the stdout they describe."""
    lines = []
    for line in path.read_text().splitlines():
        if line.startswith("% expect:"):
            lines.append(line[len("% expect:"):].removeprefix(" "))
    return "".join(line + "\n" for line in lines)


def pytest_addoption(parser):
    parser.addoption("--fuzz-long", action="store_true", default=False,
                     help="fuzz with thousands of mutants per fuzzer and fresh random seeds "
                          "(the same as HPGREM_FUZZ_LONG=1; docs/testing.md)")


def pytest_configure(config):
    import os
    if config.getoption("--fuzz-long", default=False):
        os.environ["HPGREM_FUZZ_LONG"] = "1"
