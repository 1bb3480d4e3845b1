"""PARLOG syntax a KL1/GHC/Prolog programmer reaches for (spec/parlog.md): `^` as SWI-Prolog's
power operator, module-qualified goals and `:- module` refused with a located error, KLIC's
argument arithmetic `p(~(E))` warned about, and programs in several files (`:- import(File).`)."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import SWIPL, compile_source, hpgrem, needs_swipl, run_program
from frontend.parlog.parser import _parse
from frontend.parlog.reader import read_program
from hpgrem.diagnostics import CompileError
from pam.errors import ProgramFailure

# -- `^` ------------------------------------------------------------------------------------------
# (expression, what SWI-Prolog 9.0.4 writes for `X is E, write(X)`; None: an evaluation error),
# each checked with swipl (test_power_table_agrees_with_swipl does it again where it is installed).
# SWI's defaults (prefer_rationals and iso false): an integer to a negative integer power is a
# float, except for the bases 1 and -1, which give integers; 0 to a negative power is an error.
POWER = [
    ("2^10", "1024"), ("2^3^2", "512"), ("2 ^ 3 ^ 2 ^ 0", "8"), ("- 2^2", "-4"), ("-2^2", "4"),
    ("- 1^2", "-1"), ("-1^2", "1"), ("(-1)^2", "1"), ("- (2^2)", "-4"), ("(- 2)^2", "4"), ("-(2)^2", "4"),
    ("- - 2^2", "4"), ("\\2^2", "-5"), ("2**3", "8"), ("2**3.0", "8.0"), ("2^3.0", "8.0"), ("2.0^3", "8.0"),
    ("(-2)^3", "-8"), ("2^2**3", "256"), ("- 2**2", "-4"), ("2*3^2", "18"), ("2-1^2", "1"), ("2^3*2", "16"),
    ("2^(1+1)", "4"), ("3^40", "12157665459056928801"), ("2^100", "1267650600228229401496703205376"),
    ("2^(-1)", "0.5"), ("2^ -1", "0.5"), ("2 ^ - 1", "0.5"), ("- 2^ - 2", "-0.25"), ("2^ \\1", "0.25"),
    ("2**(-1)", "0.5"), ("7^(-2)", "0.02040816326530612"), ("(-3)^(-1)", "-0.3333333333333333"),
    ("(-2)^(-2)", "0.25"), ("1^(-3)", "1"), ("(-1)^(-3)", "-1"), ("(-1)^(-2)", "1"), ("1**(-3)", "1"),
    ("(-1)^(10^10)", "1"), ("0^0", "1"), ("0^5", "0"), ("0^0.0", "1"), ("0.0^0", "1"), ("inf^0", "1"),
    ("1^inf", "1"), ("1^(-0.5)", "1"), ("1.5^2", "2.25"), ("2.5^(-1)", "0.4"), ("4^0.5", "2.0"),
    ("2^0.5", "1.4142135623730951"), ("2^3.5", "11.313708498984761"), ("10^(-400)", "0.0"),
    ("0^(-1)", None), ("0^(-1.0)", None), ("(-2.0)^0.5", None), ("(-8)^(1/3)", None), ("10.0^400", None),
    ("2^1024.0", None),
]


@pytest.mark.parametrize("expr, value", POWER)
def test_power_table(expr, value):
    text = f"main <- X is {expr}, write(X), nl."
    if value is None:
        with pytest.raises(ProgramFailure) as e:
            run_program(text)
        assert "arithmetic error" in e.value.message
    else:
        assert run_program(text)[0] == value + "\n"


@needs_swipl
def test_power_table_agrees_with_swipl():
    goals = "".join(f"catch((X{i} is {e}, write(X{i})), _, write(error)), nl, " for i, (e, _) in enumerate(POWER))
    r = subprocess.run([SWIPL, "-g", goals + "halt."], capture_output=True, text=True, timeout=120)
    assert r.stdout.split("\n")[:-1] == [v or "error" for _, v in POWER]


# (term, what write/1 prints, as SWI-Prolog 9 does)
POWER_TERMS = [
    ("x^2", "x^2"), ("a^b^c", "a^b^c"), ("(a^b)^c", "(a^b)^c"), ("- (a^b)", "-a^b"), ("(-a)^b", "(-a)^b"),
    ("-(2)^2", "(- 2)^2"), ("(-2)^2", "-2^2"), ("- (2^2)", "- 2^2"), ("a^(-1)", "a^ -1"), ("a^(- 1)", "a^ - 1"),
    ("a^(b**c)", "a^b**c"), ("(a^b)**c", "(a^b)**c"), ("(a**b)^c", "(a**b)^c"), ("x^2+y^2", "x^2+y^2"),
    ("a*b^c", "a*b^c"), ("(a*b)^c", "(a*b)^c"), ("a^(b,c)", "a^(b,c)"), ("f(^)", "f(^)"), ("^(a)", "^(a)"),
    ("'^'(a,b,c)", "^(a,b,c)"), ("[a^b]", "[a^b]"),
]


@pytest.mark.parametrize("term, printed", POWER_TERMS)
def test_power_terms_are_not_evaluated_and_print_as_swi(term, printed):
    assert run_program(f"main <- X = {term}, write(X), nl.")[0] == printed + "\n"


def test_power_term_is_the_structure_caret():
    out, _ = run_program("main <- X = x^2, X =.. L, write(L), nl, functor(X, N, A), write(N/A), nl.")
    assert out == "[^,x,2]\n(^)/2\n"


@needs_swipl
def test_power_terms_agree_with_swipl():
    goals = "".join(f"X{i} = ({t}), write(X{i}), nl, " for i, (t, _) in enumerate(POWER_TERMS))
    r = subprocess.run([SWIPL, "-g", goals + "halt."], capture_output=True, text=True, timeout=120)
    assert r.stdout.split("\n")[:-1] == [p for _, p in POWER_TERMS]


def test_power_of_two_carets_and_a_prefix_minus_is_a_syntax_error_as_in_swi():
    for text in ("main <- X is 2 ** 3 ** 2.", "main <- X is 2 ** 2 ^ 3."):
        with pytest.raises(CompileError, match="syntax error"):
            compile_source(text, "t.par")


def test_mode_declarations_with_caret_still_read():
    text = ("mode p(?, ^).\nmode q(in?, out ^).\nmode r( ^ ,? , % a comment\n ^).\n"
            "p(X, Y) <- Y is X^2.\nq(X, Y) <- p(X, Y).\nr(Y, X, Z) <- Z = X^Y.\n"
            "main <- q(3, A), write(A), nl, r(2, x, B), write(B), nl.\n")
    assert run_program(text)[0] == "9\nx^2\n"
    module = compile_source(text, "t.par")
    assert [module.rules[k].modes for k in ("p/2", "q/2", "r/3")] == [("?", "^"), ("?", "^"), ("^", "?", "^")]


def test_a_caret_where_a_mode_is_expected_is_still_an_error():
    with pytest.raises(CompileError, match="syntax error"):
        compile_source("mode p(?, ^ ^).\np(_, _).\n", "t.par")


READ_ALIKE = [
    "main <- X is 2^3^2, Y = - a^b, Z = a^ - 1, W = (a^b)^c, V = f(^, a^b).\n",
    "main <- X is - 2 ** 2 + 2 ** - 1 * \\ 3 ^ 2.\n",
    "mode p(?, ^).\np(X, Y) <- X > 0 : Y = X^X.\n",
    ":- import(lib).\n:- import('sub/b.par').\nmain <- true.\n",
    ":- module(m, [p/1]).\n:- foo, bar.\nmain <- a : b.\n",
    "main <- q, (m:r), s.\np :- m:q, r.\n",
    "main <- p(~(1+2)), X = f(~ a), ~ q.\n",
]


@pytest.mark.parametrize("text", READ_ALIKE)
def test_the_fast_reader_reads_the_new_syntax_as_lark_does(text):
    mine = read_program(text, "t.par")
    assert mine is not None and repr(mine) == repr(_parse(text, "t.par", "start"))


def _lark_reads(text: str):
    try:
        return repr(_parse(text, "t.par", "start"))
    except Exception as e:  # noqa: BLE001 - a refusal of either kind
        return type(e)


_LEAVES = st.sampled_from(["a", "X", "1", "-1", "2.5", "^", "'^'", "f(^)", "[]", "mode", "m"])
_OPS = st.sampled_from(["^", " ^ ", "**", "-", " - ", "*", ",", ":", " : ", "=", "&", "@", "<-", ":-"])
_PRE = st.sampled_from(["", "-", "- ", "\\", "~ ", "(", "^"])
_TERMS = st.recursive(_LEAVES, lambda child: st.one_of(
    st.tuples(child, _OPS, child).map("".join),
    st.tuples(_PRE, child).map("".join),
    child.map(lambda x: f"({x})"),
    child.map(lambda x: f"g({x}, ^)")), max_leaves=8)
_ITEMS = st.one_of(
    st.tuples(st.sampled_from(["", ":- ", ":-", "mode p(", "main <- "]), _TERMS, st.sampled_from([".\n", ").\n", " .\n"]))
    .map("".join),
    st.sampled_from(["mode p(?, ^).\n", "mode p(x^, ^).\n", "mode p(^).\n", "mode q( ^ ).\n"]))


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.lists(_ITEMS, min_size=1, max_size=3).map("".join))
def test_the_fast_reader_reads_generated_power_and_directive_programs_as_lark_does(text):
    mine = read_program(text, "t.par")
    if mine is not None:
        assert repr(mine) == _lark_reads(text), text


# -- module-qualified goals ----------------------------------------------------------------------
def _check(tmp_path, text: str, name: str = "prog.par", *args: str) -> subprocess.CompletedProcess:
    (tmp_path / name).write_text(text)
    return hpgrem("check", name, *args, cwd=tmp_path)


@pytest.mark.parametrize("text, line, col", [
    ("main <- lists:append([1], [2], X), write(X).\n", 1, 14),         # where a guard would end
    ("main <- write(a), lists:append([1], [2], X), write(X).\n", 1, 24),  # after other goals
    ("main <- write(a), (lists:append([1], [2], X)), write(X).\n", 1, 25),  # in parentheses
    ("main <- true : q & (m:q).\nq.\n", 1, 22),                            # nested in a body
    ("p :- lists:member(1, [1]).\nmain <- ~ p.\n", 1, 11),                  # a `:-` body
    ("p :- q, m:r.\nq.\nmain <- ~ p.\n", 1, 10),
])
def test_module_qualified_goals_are_a_located_error(tmp_path, text, line, col):
    r = _check(tmp_path, text)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    first = r.stderr.splitlines()
    assert first[0].startswith(f"prog.par:{line}:{col}: error: module-qualified goals (m:p) are not supported")
    assert first[2] == " " * (col - 1) + "^"
    assert "unknown relation lists/0" not in r.stderr and "unknown relation m/0" not in r.stderr  # not again


def test_a_second_colon_after_a_guard_says_why(tmp_path):
    r = _check(tmp_path, "main <- true : lists:append([1], [2], X), write(X).\n")
    assert r.returncode == 2
    assert r.stderr.startswith("prog.par:1:21: error: syntax error: unexpected ':'")
    assert "module-qualified goals (m:p) are not supported" in r.stderr


def test_module_qualified_goal_in_goal_option(tmp_path):
    (tmp_path / "prog.par").write_text("main.\n")
    r = hpgrem("run", "prog.par", "--goal", "lists:append([1], [2], X)", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.startswith("<goal>:1:6: error: module-qualified goals (m:p) are not supported")


def test_legal_guards_still_read_as_guards():
    text = ("mode p(?, ^).\np(X, pos) <- X > 0 : true.\np(X, neg) <- X < 0 : true.\n"
            "flag.\nr <- flag : write(r).\ns <- true : write(s).\nt <- flag, true : write(t).\n"
            "main <- p(3, A), write(A), nl, r & s & t & nl.\n")
    assert run_program(text)[0] == "pos\nrst\n"


def test_module_directive_is_a_located_error(tmp_path):
    r = _check(tmp_path, "% a module\n:- module(m, [main/0]).\nmain <- write(hi), nl.\n")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert lines[0].startswith("prog.par:2:1: error: modules are not supported")
    assert ":- import(File)." in lines[0]
    assert lines[1:3] == [":- module(m, [main/0]).", "^"]


def test_other_directives_are_a_located_error(tmp_path):
    r = _check(tmp_path, "main.\n:- dynamic(foo/1).\n")
    assert r.returncode == 2 and r.stderr.startswith("prog.par:2:1: error: unknown directive")


# -- `~` in an argument --------------------------------------------------------------------------
def test_negation_in_an_argument_is_warned_about(tmp_path):
    text = "mode p(?).\np(X) <- write(X), nl.\nmain <- p(~(1+2)), Y = f(~ a), write(Y), nl, ~ q.\nq :- 1 > 2.\n"
    (tmp_path / "prog.par").write_text(text)
    r = hpgrem("run", "prog.par", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == "~(1+2)\nf(~(a))\n"
    warnings = [line for line in r.stderr.splitlines() if ": warning: " in line]
    assert [w.split(": warning: ")[0].rsplit(":", 2)[1:] for w in warnings] == [["3", "11"], ["3", "26"]]
    assert "'~' in an argument is a term here (PARLOG's '~' is negation" in warnings[0]
    assert "is E" in warnings[0]
    lines = r.stderr.splitlines()
    assert lines[1] == "main <- p(~(1+2)), Y = f(~ a), write(Y), nl, ~ q." and lines[2] == " " * 10 + "^"


def test_negation_as_a_goal_is_not_warned_about(tmp_path):
    text = ("mode p(?).\np(X) <- ~ q(X) : write(no), nl.\nq(1).\n"
            "main <- p(2) & ~ q(3) & set(L, X, (q(X), ~ q(5))) & write(L) & nl.\n")
    (tmp_path / "prog.par").write_text(text)
    r = hpgrem("run", "prog.par", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == "no\n[1]\n" and "warning" not in r.stderr


# -- programs in several files -------------------------------------------------------------------
def _files(tmp_path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


TWO_FILES = {
    "app/main.par": "% the program\n:- import(lib).\nmain <- double(21, X), write(X), nl, greet(X).\n",
    "app/lib.par": ":- import('util/greet.par').\nmode double(?, ^).\ndouble(X, Y) <- Y is 2 * X.\n",
    "app/util/greet.par": "mode greet(?).\ngreet(X) <- X > 40 : write(hello), nl ; greet(_) <- write(bye), nl.\n",
}


@pytest.mark.parametrize("cwd", [".", "app"])
def test_a_program_of_several_files_runs(tmp_path, cwd):
    _files(tmp_path, TWO_FILES)
    main = "app/main.par" if cwd == "." else "main.par"
    r = hpgrem("run", main, cwd=tmp_path / cwd)
    assert (r.returncode, r.stdout, r.stderr) == (0, "42\nhello\n", "")
    assert hpgrem("check", main, cwd=tmp_path / cwd).returncode == 0
    r = hpgrem("ir", main, cwd=tmp_path / cwd)
    assert r.returncode == 0 and "relation double/2" in r.stdout and "relation greet/1" in r.stdout
    r = hpgrem("run", main, "--goal", "double(4, Y), greet(Y)", cwd=tmp_path / cwd)
    assert (r.returncode, r.stdout) == (0, "bye\nY = 8\n")


def test_imports_are_relative_to_the_importing_file_not_the_working_directory(tmp_path):
    _files(tmp_path, {**TWO_FILES, "lib.par": "this is not a program\n"})
    r = hpgrem("run", "app/main.par", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, "42\nhello\n")


def test_import_cycles_read_each_file_once(tmp_path):
    _files(tmp_path, {
        "a.par": ":- import(b).\n:- import(a).\n:- import('./b.par').\nmain <- ping(3).\n",
        "b.par": ":- import(a).\n:- import(c).\n:- import(d).\nmode ping(?).\nping(0) <- write(done), nl.\n"
                 "ping(N) <- N > 0 : N1 is N - 1, pong(N1).\n",
        "c.par": "",
        "d.par": ":- import(a).\n:- import(b).\nmode pong(?).\npong(N) <- ping(N).\n",
    })
    r = hpgrem("run", "a.par", cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (0, "done\n", "")


def test_an_error_in_an_imported_file_is_located_there(tmp_path):
    _files(tmp_path, {**TWO_FILES, "app/lib.par": "mode double(?, ^).\n\ndouble(X, Y) <- Y is 2 * X, halve(Y).\n"})
    r = hpgrem("check", "app/main.par", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert lines[0].startswith("app/main.par:3:38: error: unknown relation greet/1")  # lib imports it no more
    at = lines.index("app/lib.par:3:29: error: unknown relation halve/1")  # the files in the order read
    assert lines[at + 1:at + 3] == ["double(X, Y) <- Y is 2 * X, halve(Y).", " " * 28 + "^"]


def test_a_syntax_error_in_an_imported_file_is_located_there(tmp_path):
    _files(tmp_path, {**TWO_FILES, "app/util/greet.par": "mode greet(?).\ngreet(X) <- X > > 1.\n"})
    r = hpgrem("run", "app/main.par", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert lines[0].startswith("app/util/greet.par:2:17: error: syntax error: unexpected '>'")
    assert lines[1:3] == ["greet(X) <- X > > 1.", " " * 16 + "^"]
    assert len([line for line in lines if ": error: " in line]) == 1  # no follow-on errors


def test_a_relation_defined_in_two_files_is_an_error_naming_both(tmp_path):
    _files(tmp_path, {**TWO_FILES, "app/util/greet.par": TWO_FILES["app/util/greet.par"]
                      + "mode double(?, ^).\ndouble(X, X).\n"})
    r = hpgrem("check", "app/main.par", cwd=tmp_path)
    assert r.returncode == 2
    first = r.stderr.splitlines()[0]
    assert first.startswith("app/util/greet.par:4:1: error: double/2 is defined in two files")
    assert "app/lib.par:3:1" in first


def test_an_imported_relation_may_replace_the_preludes(tmp_path):
    _files(tmp_path, {"m.par": ":- import(l).\nmain <- append([a], [b], X), write(X), nl.\n",
                      "l.par": "mode append(?, ?, ^).\nappend(_, _, mine).\n"})
    assert hpgrem("run", "m.par", cwd=tmp_path).stdout == "mine\n"


def test_a_guard_atom_of_another_files_relation_is_a_guard(tmp_path):
    _files(tmp_path, {"m.par": ":- import(l).\nmain <- ready : write(yes), nl.\n", "l.par": "ready.\n"})
    r = hpgrem("run", "m.par", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, "yes\n")


@pytest.mark.parametrize("directive, message", [
    (":- import(missing).", "cannot import missing.par: no such file"),
    (":- import('sub').", "cannot import sub.par: is a directory"),
    (":- import('/etc/passwd').", "import path '/etc/passwd' is absolute"),
    (":- import(f(x)).", "import expects a file name"),
    (":- import(\"lib\").", "import expects a file name"),
])
def test_a_bad_import_is_a_located_error(tmp_path, directive, message):
    (tmp_path / "sub.par").mkdir()
    r = _check(tmp_path, f"main <- true.\n{directive}\n")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert lines[0].startswith("prog.par:2:11: error: ") and message in lines[0]
    assert lines[1:3] == [directive, " " * 10 + "^"]


def test_an_import_of_a_fifo_is_refused_without_blocking(tmp_path):
    import os
    os.mkfifo(tmp_path / "pipe.par")
    r = _check(tmp_path, ":- import(pipe).\nmain.\n")
    assert r.returncode == 2 and "cannot import pipe.par: not a regular file" in r.stderr


def test_the_number_of_files_is_limited(tmp_path, monkeypatch):
    import frontend.parlog as parlog
    monkeypatch.setattr(parlog, "MAX_FILES", 3)
    _files(tmp_path, {f"f{i}.par": f":- import(f{i + 1}).\n" for i in range(5)})
    _files(tmp_path, {"f5.par": "main.\n"})
    compiled = parlog.compile_program((tmp_path / "f0.par").read_text(), str(tmp_path / "f0.par"))
    assert compiled.module is None
    [d] = compiled.error.diagnostics
    assert d.span.file == str(tmp_path / "f2.par") and "at most 3 files" in d.message
