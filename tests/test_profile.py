"""`hpgrem run --profile` and `--profile-json` (docs/profile.md): the time of a run by the
program's own functions and relations, the machine's parts grouped; the run itself unchanged."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, compile_source, hpgrem

MPIEXEC = shutil.which("mpiexec")

# fib is hot, square cheap: fib's row must come first, named and placed as written
HOT_ML = """\
fun square x = x * x

fun fib n = if n < 2 then n else fib (n - 1) + fib (n - 2)

fun main () = print (Int.toString (square (fib 22)) ^ "\\n")

val _ = main ()
"""

# sum/3 loops 20,000 times, twice/2 runs once
HOT_PARLOG = """\
mode twice(?, ^).
twice(X, Y) <- Y is X * 2.

mode sum(?, ?, ^).
sum(0, A, S) <- S = A.
sum(N, A, S) <- N > 0 : N1 is N - 1, A1 is A + N, sum(N1, A1, S).

main <- sum(20000, 0, S), twice(S, T), write(T) & nl.
"""


def line_of(text: str, start: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith(start))


def profiled(tmp_path, name: str, text: str, *options: str, mpi: int = 0):
    """Run the program plainly and with --profile --profile-json; both results and the JSON."""
    src = tmp_path / name
    src.write_text(text)
    out = tmp_path / "profile.json"
    if mpi:
        def run(*args):
            return subprocess.run([MPIEXEC, "-n", str(mpi), sys.executable, "-m", "hpgrem.driver.cli", *args],
                                  capture_output=True, text=True, cwd=ROOT, timeout=300)
    else:
        run = hpgrem
    plain = run("run", str(src), *options)
    prof = run("run", str(src), *options, "--profile", "--profile-json", str(out))
    return src, plain, prof, json.loads(out.read_text()) if out.exists() else None


def program_rows(profile: dict) -> list[dict]:
    return [r for r in profile["rows"] if r["kind"] == "program"]


def test_an_ml_programs_hot_function_comes_first_by_its_name_and_line(tmp_path):
    src, plain, prof, data = profiled(tmp_path, "hot.sml", HOT_ML)
    assert prof.returncode == plain.returncode == 0, prof.stderr
    assert prof.stdout == plain.stdout == f"{(17711 ** 2)}\n"  # fib 22 squared: the output is the run's
    top = data["rows"][0]
    assert (top["name"], top["file"], top["line"]) == ("fib", str(src), line_of(HOT_ML, "fun fib"))
    assert top["calls"] == 57313  # the calls fib 22 makes, however the code generator splits fib
    assert top["share"] > 0.5
    # the table on stderr, after the program's output: fib's line is its first row
    lines = prof.stderr.splitlines()
    assert lines[0].startswith(f"profile of {src} (1 PE): ")
    assert lines[2].split()[3:] == ["57,313", "fib", f"{src}:{line_of(HOT_ML, 'fun fib')}"]
    assert lines[-1].split()[1:] == ["100.0%", "total"]
    # the top-level declarations run once, and their total time holds fib's
    top_level = next(r for r in program_rows(data) if r["name"] == "<top level>")
    assert top_level["calls"] == 1
    assert top_level["total_s"] >= top["self_s"] > top_level["self_s"]


def test_a_parlog_programs_hot_relation_comes_first_by_name_arity_and_line(tmp_path):
    src, plain, prof, data = profiled(tmp_path, "hot.par", HOT_PARLOG)
    assert prof.returncode == plain.returncode == 0, prof.stderr
    assert prof.stdout == plain.stdout == f"{2 * sum(range(20001))}\n"
    top = program_rows(data)[0]
    assert (top["name"], top["file"], top["line"]) == ("sum/3", str(src), line_of(HOT_PARLOG, "sum(0"))
    assert data["rows"][0]["name"] == "sum/3"
    names = {r["name"] for r in program_rows(data)}
    assert {"sum/3", "twice/2", "main/0"} <= names
    assert "(machine: scheduler)" in {r["name"] for r in data["rows"]}


def test_the_json_rows_add_up_to_the_profiled_run(tmp_path):
    _, _, prof, data = profiled(tmp_path, "hot.par", HOT_PARLOG, "-O0")
    assert prof.returncode == 0
    assert {"program", "pes", "mode", "profiled_s", "rows"} <= set(data)
    assert data["pes"] == 1 and data["mode"] == "sim"
    rows = data["rows"]
    assert all(set(r) == {"name", "kind", "file", "line", "col", "self_s", "total_s", "calls", "share"} for r in rows)
    assert sum(r["self_s"] for r in rows) == pytest.approx(data["profiled_s"], abs=1e-4)
    assert sum(r["share"] for r in rows) == pytest.approx(1.0, abs=1e-3)
    assert [r["self_s"] for r in rows] == sorted((r["self_s"] for r in rows), reverse=True)
    for r in rows:  # the machine's rows have no calls or total; the program's do
        if r["kind"] == "machine":
            assert r["name"].startswith("(machine: ") and r["calls"] is None and r["total_s"] is None
        else:
            assert r["calls"] >= 0 and r["total_s"] >= r["self_s"] - 1e-6


def test_a_failing_program_keeps_its_output_and_status_and_is_profiled(tmp_path):
    text = (ROOT / "examples" / "ml" / "uncaught.sml").read_text()
    _, plain, prof, data = profiled(tmp_path, "uncaught.sml", text)
    assert plain.returncode == prof.returncode == 1
    assert prof.stdout == plain.stdout
    assert prof.stderr.startswith(plain.stderr)  # the error first, then the profile
    assert "profile of" in prof.stderr and data["rows"]


def test_simulated_pes(tmp_path):
    text = (ROOT / "examples" / "ml" / "par_fib.sml").read_text()
    src, plain, prof, data = profiled(tmp_path, "par_fib.sml", text, "--pes", "16")
    assert prof.returncode == plain.returncode == 0, prof.stderr
    assert prof.stdout == plain.stdout
    assert data["pes"] == 16 and "(16 simulated PEs)" in prof.stderr
    fib = next(r for r in data["rows"] if r["name"] == "fib")
    assert fib["file"] == str(src) and fib["line"] == line_of(text, "fun fib") and fib["calls"] > 1000
    assert "(machine: simulation)" in {r["name"] for r in data["rows"]}


@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec is not installed")
def test_mpi_ranks_profile_and_rank_0_reports_them_summed(tmp_path):
    src, plain, prof, data = profiled(tmp_path, "hot.par", HOT_PARLOG, mpi=2)
    assert prof.returncode == plain.returncode == 0, prof.stderr
    assert prof.stdout == plain.stdout == f"{2 * sum(range(20001))}\n"
    assert data["mode"] == "mpi" and data["pes"] == 2
    assert prof.stderr.count("profile of") == 1 and "(2 MPI ranks, their times summed)" in prof.stderr
    assert program_rows(data)[0]["name"] == "sum/3"
    assert "(machine: distribution)" in {r["name"] for r in data["rows"]}


def test_usage_errors(tmp_path):
    src = tmp_path / "hot.par"
    src.write_text(HOT_PARLOG)
    r = hpgrem("run", str(src), "--profile", "--trace", str(tmp_path / "t.jsonl"))
    assert r.returncode == 2 and r.stdout == "" and "--profile and --trace" in r.stderr
    assert len(r.stderr.splitlines()) == 1
    r = hpgrem("run", str(src), "--profile-json", str(tmp_path / "no" / "p.json"))
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr  # refused before the run
    r = hpgrem("trace", str(src), "--profile")  # only `run` profiles
    assert r.returncode == 2 and "unrecognized arguments: --profile" in r.stderr


# -- every generated function has a name ----------------------------------------------------------


def generated_functions(source: str) -> list[str]:
    return [n.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name != "make"]


@pytest.mark.parametrize("opt", [0, 2])
@pytest.mark.parametrize("example", ["higher_order", "exceptions", "tak", "par_tree"])
def test_every_generated_ml_function_is_named_by_its_ml_function(example, opt):
    from pam.ml.loader import MLRuntime
    from pam.ml.profile_names import code_names
    path = ROOT / "examples" / "ml" / f"{example}.sml"
    runtime = MLRuntime(compile_source(path.read_text(), str(path), opt=opt))
    names = code_names(runtime.analysis)
    infos = runtime.analysis.info.values()
    for fn in generated_functions(runtime.source):
        where = names.where(fn)
        assert where is not None, fn
        # the function it was made for: the longest FunctionInfo.py its name starts with
        info = max((i for i in infos if fn.startswith(i.py)), key=lambda i: len(i.py))
        assert where.line == info.fn.span.line or info.key.startswith("basis:") or "/curry" in info.key, fn


@pytest.mark.parametrize("opt", [0, 2])
@pytest.mark.parametrize("example", ["queens", "allsolutions", "subset", "negation", "primes", "deep_guards"])
def test_every_generated_parlog_function_is_named_by_its_relation(example, opt):
    from pam.parlog.profile_names import rule_names, search_names
    from pam.parlog.rules import RuleCompiler
    path = ROOT / "examples" / "parlog" / f"{example}.par"
    module = compile_source(path.read_text(), str(path), opt=opt)
    rc = RuleCompiler(module)
    for names, source in ((rule_names(rc), rc.source), (search_names(rc.searches), rc.searches.source)):
        for fn in generated_functions(source):
            where = names.where(fn)
            assert where is not None, fn
            assert where.kind == "machine" or where.name.split("/")[0] in {
                r.name for r in module.rules.values()} | {"set", "subset", "~"}, fn


# -- the rows of a profile ------------------------------------------------------------------------


def test_rows_join_a_functions_parts_and_charge_helpers_to_their_callers():
    """fib made of two Python functions (`f0` calls `f0_d`, which recurses), main calling it
    and a helper of the generated code (a lambda): fib's calls are its calls in the source
    program, the lambda's time is main's, and the rows add up to the profile."""
    from pam.profile import CodeNames, Profiler, Where, register_code
    fib, main = Where("fib", "p.sml", 1, 5), Where("main", "p.sml", 3, 5)
    register_code("<profile test>", lambda: CodeNames({"f0": fib, "f1": main}))
    namespace: dict = {}
    exec(compile("def f0(n):\n    return f0_d(n)\n"
                 "def f0_d(n):\n    return n if n < 2 else f0_d(n - 1) + f0_d(n - 2)\n"
                 "def f1():\n    spin = lambda: sum(range(20000))\n    return f0(15) + spin()\n",
                 "<profile test>", "exec"), namespace)
    with Profiler() as p:
        namespace["f1"]()
    rows = {r.where: r for r in p.rows()}
    assert rows[fib].calls == 1973  # the calls fib 15 makes: f0 once, f0_d the rest
    assert rows[main].calls == 1
    assert rows[main].total_s >= rows[fib].self_s + rows[main].self_s * 0.99
    assert set(rows) <= {fib, main}  # the lambda and builtins: main's
    assert rows[main].self_s > 0


def test_the_registry_keeps_no_compiler_alive():
    """A process that runs many programs (a test worker, a host) holds none of their compilers."""
    import gc

    from pam import profile

    class Compiler:
        pass

    c = Compiler()
    profile.register_code("<profile registry test>", lambda _: profile.CodeNames({}), c)
    assert "<profile registry test>" in profile._registered()
    del c
    gc.collect()
    assert "<profile registry test>" not in profile._registered()
    assert "<profile registry test>" not in profile._CODE
