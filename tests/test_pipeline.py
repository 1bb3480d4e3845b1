"""The one pipeline (hpgrem/driver/pipeline.py): the command line, `hpgrem bench` and the tests compile
alike; pass selection on the command line; every example gives its recorded output at every
optimization level."""

from __future__ import annotations

import io

import pytest

from conftest import EXAMPLES, ROOT, expected_output, hpgrem, run_program
from hpgrem.diagnostics import CompileError
from hpgrem.driver.pipeline import Options, UsageError, compile_file, compile_text
from hpgrem.serialize import dumps

NREV = str(EXAMPLES / "nrev.par")
ML_EXAMPLES = ROOT / "examples" / "ml"
PARLOG_PROGRAMS = sorted(EXAMPLES.glob("*.par"))
ML_PROGRAMS = sorted(ML_EXAMPLES.glob("*.sml"))


# -- pass selection on the command line ---------------------------------------------------------
def test_passes_runs_exactly_the_passes_named():
    pruned = hpgrem("ir", NREV, "-O0", "--passes", "prune-unreachable")
    none = hpgrem("ir", NREV, "--passes", "")
    assert pruned.returncode == none.returncode == 0
    assert "relation prelude:merge/3" not in pruned.stdout
    assert "relation prelude:merge/3" in none.stdout  # the level's pass did not run


def test_disable_takes_repeats_and_comma_lists():
    for args in (["--disable", "prune-unreachable"], ["--disable", "simplify,prune-unreachable", "-O2"],
                 ["-O2", "--disable", "simplify", "--disable", "prune-unreachable"]):
        r = hpgrem("ir", NREV, *args)
        assert r.returncode == 0 and "relation prelude:merge/3" in r.stdout, args


def test_after_prints_before_the_analyses():
    after = hpgrem("ir", NREV, "--after", "prune-unreachable")
    whole = hpgrem("ir", NREV)
    assert "granularity.cost=" not in after.stdout and "relation prelude:merge/3" not in after.stdout
    assert "granularity.cost=" in whole.stdout  # among the notes -O2 prints, not necessarily first


@pytest.mark.parametrize("args", [["ir", NREV, "--passes", "prune-unreachable,nosuch"],
                                  ["ir", NREV, "--disable", "nosuch"],
                                  ["ir", NREV, "--after", "granularity"],  # analyses always run
                                  ["run", NREV, "--passes", "nosuch"],
                                  ["compile", NREV, "-o", "x.hpg", "--disable", "nosuch"]])
def test_unknown_passes_are_usage_errors_that_list_the_passes(args):
    r = hpgrem(*args)
    assert r.returncode == 2 and r.stdout == ""
    assert "unknown pass" in r.stderr and "simplify, prune-unreachable" in r.stderr


def test_ir_help_lists_the_passes_and_analyses():
    r = hpgrem("ir", "--help")
    assert r.returncode == 0
    for name in ("simplify", "prune-unreachable", "granularity", "ml-kinds"):
        assert name in r.stdout


def test_run_and_compile_take_a_pass_selection(tmp_path):
    r = hpgrem("run", NREV, "-O2", "--disable", "simplify")
    assert (r.returncode, r.stdout) == (0, expected_output(EXAMPLES / "nrev.par"))
    out = tmp_path / "n.hpg"
    assert hpgrem("compile", NREV, "-o", str(out), "--passes", "simplify").returncode == 0
    assert out.read_text() == dumps(compile_file(NREV, Options(passes=("simplify",))).complete())


# -- one pipeline for the command line, the benchmarks and the tests ------------------------------
@pytest.mark.parametrize("path", [EXAMPLES / "nrev.par", ML_EXAMPLES / "fib.sml"], ids=lambda p: p.name)
def test_cli_bench_and_tests_compile_alike(path, tmp_path):
    from hpgrem.driver.bench.suite import _module
    from conftest import compile_source

    out = tmp_path / "p.hpg"
    assert hpgrem("compile", str(path), "-o", str(out)).returncode == 0
    assert out.read_text() == dumps(_module(path)) == dumps(compile_source(path.read_text(), str(path)))


def test_a_later_ml_chunk_error_leaves_the_earlier_chunks():
    compiled = compile_text('val _ = print "one\\n";\nval x : int = "two";\n', "p.sml")
    assert isinstance(compiled.error, CompileError) and compiled.module is not None
    with pytest.raises(CompileError):
        compiled.complete()
    from pam.machine import Machine
    out = io.StringIO()
    Machine(compiled.module, stream=out).run()
    assert out.getvalue() == "one\n"


def test_a_parlog_error_leaves_no_module():
    compiled = compile_text("main <- undefined_thing(1).\n", "p.par")
    assert compiled.module is None and isinstance(compiled.error, CompileError)


def test_hpg_files_are_verified_and_refuse_a_goal(tmp_path):
    hpg = tmp_path / "n.hpg"
    module = compile_file(NREV).complete()
    hpg.write_text(dumps(module))
    assert dumps(compile_file(str(hpg)).complete()) == dumps(module)
    with pytest.raises(UsageError, match="--goal needs the source program"):
        compile_file(str(hpg), Options(goal="true"))
    with pytest.raises(UsageError, match="not a valid HPGREM module"):
        compile_text(dumps(module).replace('"nrev/2"', '"nrev/9"', 1), "bad.hpg")


def test_usage_errors_come_before_reading_the_file():
    with pytest.raises(UsageError, match="unknown file type"):
        compile_file("nowhere.txt")
    with pytest.raises(UsageError, match="--goal is for PARLOG programs"):
        compile_file("nowhere.sml", Options(goal="true"))
    with pytest.raises(UsageError, match="unknown pass"):
        compile_file("nowhere.par", Options(disable=("nosuch",)))
    with pytest.raises(UsageError, match="no such file"):
        compile_file("nowhere.par")


# -- every example at every level -----------------------------------------------------------------
@pytest.mark.parametrize("opt", [0, 1, 2])
@pytest.mark.parametrize("path", PARLOG_PROGRAMS, ids=[p.stem for p in PARLOG_PROGRAMS])
def test_parlog_example_output_at_every_level(path, opt):
    out, _ = run_program(path.read_text(), file=str(path), opt=opt)
    assert out == expected_output(path)


@pytest.mark.parametrize("opt", [0, 1, 2])
@pytest.mark.parametrize("path", ML_PROGRAMS, ids=[p.stem for p in ML_PROGRAMS])
def test_ml_example_output_at_every_level(path, opt):
    from conftest import compile_source
    from pam.errors import Uncaught
    from pam.machine import Machine
    from test_ml_examples import expected_status, expected_stdout

    out = io.StringIO()
    status, messages = expected_status(path)
    try:
        Machine(compile_source(path.read_text(), str(path), opt=opt), stream=out).run()
        uncaught = ""
    except Uncaught as u:
        uncaught = u.message
    assert out.getvalue() == expected_stdout(path)
    assert (1 if uncaught else 0) == status and all(m in uncaught for m in messages)
