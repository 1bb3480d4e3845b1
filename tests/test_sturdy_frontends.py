"""The front ends never crash on a user's mistake: each class of input that once gave a Python
traceback or an internal error (exit 70) now gives `FILE:LINE:COL: error: MESSAGE`, the source
line and a caret (exit 2), or simply works. One test (or parametrized family) per class."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import ROOT, hpgrem
from hpgrem.diagnostics import MAX_NESTING, Diagnostic
from frontend.parlog.parser import _parse
from frontend.parlog.reader import read_program
from hpgrem.ir import Span


def run(tmp_path, name: str, text: str, command: str = "run", *options: str) -> subprocess.CompletedProcess:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return hpgrem(command, str(path), *options)


def assert_error(r: subprocess.CompletedProcess, where: str, *words: str) -> None:
    """Exit 2 with one diagnostic at `where` ("LINE:COL"), its source line and a caret."""
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    head, *rest = r.stderr.splitlines()
    assert f":{where}: error: " in head, head
    for w in words:
        assert w in head, head
    col = int(where.split(":")[1])
    assert rest[1] == " " * (col - 1) + "^"


# ---- 1. ML source is ASCII (outside comments), as in Poly/ML


@pytest.mark.parametrize("text, where", [("val café = 1;\n", "1:8"), ("val x = ²;\n", "1:9"),
                                         ("val x = 1٣;\n", "1:10"), ("val x = 1;\u2028val y = 2;\n", "1:11")])
def test_non_ascii_in_ml_source_is_an_illegal_character(tmp_path, text, where):
    assert_error(run(tmp_path, "a.sml", text), where, "illegal character", "ASCII")


def test_non_ascii_in_an_ml_comment_is_fine(tmp_path):
    r = run(tmp_path, "a.sml", '(* café ² *) val _ = print "ok\\n";\n')
    assert (r.returncode, r.stdout) == (0, "ok\n"), r.stderr


# ---- 2. the functions of one `fun ... and ...` group, whatever their arities


@pytest.mark.parametrize("text, where", [
    ("fun f x = 1 + g x and g a b = 0;\n", "1:15"),              # g used with fewer arguments
    ("fun f x = g x x and g a = a + 1;\n", "1:27"),              # ... and with more
    ("fun f 0 = 0 | f n = g (n, 1) and g (a, b) c = a;\n", "1:21"),
    ("fun f x = h x and g y = f y y and h z = 1;\n", "1:41"),    # the third of three
    ("fun f x = g and g y = f;\n", "1:23"),                      # a circular type
    ("val rec f = fn x => 1 + g x and g = fn a => fn b => 0;\n", "1:37"),
])
def test_a_misused_function_of_an_and_group_is_a_type_error(tmp_path, text, where):
    assert_error(run(tmp_path, "a.sml", text), where, "type mismatch")


def test_and_groups_of_different_arities_run(tmp_path):
    text = ('fun f x = g x 1 and g a b = if a = 0 then b else f (a - 1) + b;\n'
            'val _ = print (Int.toString (f 3) ^ "\\n");\n')
    r = run(tmp_path, "a.sml", text)
    assert (r.returncode, r.stdout) == (0, "4\n"), r.stderr


# ---- 3. integer literals of any length


@pytest.mark.parametrize("literal", ["1" * 5000, "0x" + "f" * 5000, "99999999999999999999"])
def test_huge_ml_integer_literals_are_out_of_range(tmp_path, literal):
    r = run(tmp_path, "a.sml", f"val x = {literal};\n")
    assert_error(r, "1:9", "out of range for int (63 bits")
    assert len(r.stderr.splitlines()[0]) < 300  # the message quotes the start of the literal


def test_an_out_of_range_integer_pattern_is_an_error(tmp_path):
    r = run(tmp_path, "a.sml", "val x = case 5 of 99999999999999999999 => 1 | _ => 2;\n")
    assert_error(r, "1:19", "out of range for int")


def test_a_numeric_label_of_thousands_of_digits_works(tmp_path):
    text = "val r = {1 = 2, " + "9" * 5000 + ' = 3};\nval _ = print (Int.toString (#1 r) ^ "\\n");\n'
    r = run(tmp_path, "a.sml", text)
    assert (r.returncode, r.stdout) == (0, "2\n"), r.stderr


@pytest.mark.parametrize("literal", ["1" * 5000, "0x" + "f" * 5000])
def test_parlog_integer_literals_over_the_digit_limit_are_refused(tmp_path, literal):
    r = run(tmp_path, "a.par", f"main <- X = {literal}, write(X), nl.\n")
    assert_error(r, "1:13", "decimal digits")


def test_parlog_integer_literals_of_thousands_of_digits_work(tmp_path):
    r = run(tmp_path, "a.par", f"main <- X is {'9' * 4000} + 1, write(X), nl.\n")
    assert (r.returncode, r.stdout) == (0, "1" + "0" * 4000 + "\n"), r.stderr


# ---- 4. float literals that overflow


def test_ml_real_literals_that_overflow_are_infinite_as_in_poly_ml(tmp_path):
    text = ('fun show r = print (Real.fmt (StringCvt.FIX (SOME 1)) r ^ "\\n");\n'
            "val _ = show 1.0e400;\nval _ = show ~1.0e400;\nval _ = show 1.0e~400;\n")
    r = run(tmp_path, "a.sml", text)
    assert (r.returncode, r.stdout) == (0, "inf\n~inf\n0.0\n"), r.stderr


@pytest.mark.parametrize("literal", ["1.0e400", "-1.0e400", "1e999"])
def test_parlog_float_literals_that_overflow_are_refused_as_in_swi_prolog(tmp_path, literal):
    r = run(tmp_path, "a.par", f"main <- X = {literal}, write(X), nl.\n")
    assert_error(r, "1:13", "out of range")


# ---- 5. nesting: deep nesting is refused where it is, flat sequences are not nesting

DEEP = 10_000


@pytest.mark.parametrize("term", ["f(" * DEEP + "a" + ")" * DEEP, "(" * DEEP + "a" + ")" * DEEP,
                                  "[" * DEEP + "a" + "]" * DEEP, "+".join(["1"] * DEEP)])
def test_parlog_nesting_10000_deep_is_refused(tmp_path, term):
    r = run(tmp_path, "a.par", f"main <- true.\nmode p(^).\np(X) <- X = {term}.\n", "check")
    assert r.returncode == 2, r.stderr
    assert ":3:" in r.stderr and f"nested too deeply (more than {MAX_NESTING} levels)" in r.stderr


def test_parlog_terms_nested_1000_deep_and_flat_sequences_run(tmp_path):
    deep = "f(" * 1000 + "a" + ")" * 1000
    goals = ", ".join(["true"] * DEEP)
    items = ",".join(["1"] * 20_000)
    text = (f"mode p(?).\np({deep}) <- write(deep), nl.\n"
            f"main <- p({deep}), {goals}, L = [{items}], length(L, N), write(N), nl.\n")
    r = run(tmp_path, "a.par", text)
    assert (r.returncode, r.stdout) == (0, "deep\n20000\n"), r.stderr


def test_ml_if_nested_10000_deep_is_refused(tmp_path):
    text = "val x =\n  " + "if true then " * DEEP + "1" + " else 2" * DEEP + ";\n"
    r = run(tmp_path, "a.sml", text)
    assert r.returncode == 2, r.stderr
    assert ":2:" in r.stderr and "nested too deeply" in r.stderr


def test_a_flat_ml_list_is_not_nesting(tmp_path):
    items = ",".join(f'(print "{i} "; {i})' if i < 3 else str(i) for i in range(5000))
    text = (f"val l = [{items}];\n"
            'val _ = print (Int.toString (length l) ^ " " ^ Int.toString (List.nth (l, 4321)) ^ "\\n");\n')
    r = run(tmp_path, "a.sml", text)
    assert (r.returncode, r.stdout) == (0, "0 1 2 5000 4321\n"), r.stderr


def nested(n: int) -> dict[str, str]:
    """Programs nesting `if`, `case`, `handle` and a constructor pattern `n` deep; each binds
    y = 99 (so `n` >= 100)."""
    return {
        "else if": "fun f x = " + "".join(f"if x = {i} then {i} else " for i in range(n)) + "~1;\nval y = f 99;\n",
        "case": "fun f x = " + "".join(f"case x of {i} => {i} | _ => " for i in range(n)) + "~1;\nval y = f 99;\n",
        "handle": ("val y = " + "((" * n + 'raise Fail "x"' + ") handle Fail _ => raise Div)" * n
                   + " handle Div => 99;\n"),
        "constructor pattern": ("datatype t = A of t | B;\nfun f " + "(A " * n + "B" + ")" * n
                                + " = 99 | f _ = 0;\nval y = f " + "(A " * n + "B" + ")" * n + ";\n"),
        # a looping function (a self tail call deep inside) and a generator (it prints)
        "loop": ("fun f (x, k) = if k > 0 then f (x, k - 1) else "
                 + "".join(f"if x = ~{i + 1} then {i} else " for i in range(n))
                 + f"if x > 99 then f (x - 1, 0) else x;\nval y = f ({n + 99}, 3);\n"),
        "generator": ("fun f x = (print \"\"; " + "".join(f"if x = {i} then {i} else " for i in range(n))
                      + "~1);\nval y = f 99;\n"),
    }


N = 100
NESTED_100 = nested(N)
PRINT_Y = 'val _ = print (Int.toString y ^ "\\n");\n'


@pytest.mark.parametrize("name", NESTED_100)
def test_ml_nested_100_deep_checks(tmp_path, name):
    r = run(tmp_path, "a.sml", NESTED_100[name] + PRINT_Y, "check")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
@pytest.mark.parametrize("name", NESTED_100)
def test_ml_nested_100_deep_runs(tmp_path, name, opt):
    """pam/ml/codegen.py moves code nested deeper than Python takes into helper functions."""
    r = run(tmp_path, "a.sml", NESTED_100[name] + PRINT_Y, "run", opt)
    assert (r.returncode, r.stdout) == (0, "99\n"), r.stderr


@pytest.mark.parametrize("name, n", [("else if", 1000), ("case", 300), ("handle", 300), ("loop", 1000)])
def test_ml_nested_as_deep_as_the_front_end_takes_runs(tmp_path, name, n):
    """About as deep as the front end's limit of 1,200 levels (a `case` takes several)."""
    r = run(tmp_path, "a.sml", nested(n)[name] + PRINT_Y)
    assert (r.returncode, r.stdout) == (0, "99\n"), r.stderr


# ---- 6. diagnostics: lines end at \n only, control characters are shown escaped


@pytest.mark.parametrize("name, text, where", [
    ("a.sml", '(* \f \v \u2028 \u2029 \x1c \x85 *)\nval x = 1 + "a";\n', "2:13"),
    ("a.sml", 'val x = 1;\f\v\nval y = 1 + "a";\n', "2:13"),
    ("a.par", "% \f \u2028 \u2029 \x1c \x85\nmain <- foo(1).\n", "2:9"),
])
def test_carets_land_under_the_right_line(tmp_path, name, text, where):
    r = run(tmp_path, name, text, "check")
    assert_error(r, where)
    assert r.stderr.splitlines()[1] == text.split("\n")[1]


@pytest.mark.parametrize("name, text, where, shown", [
    ("a.sml", "val x = (\x07 1);\n", "1:10", "val x = (\\x07 1);"),
    ("a.par", "main <- X = f(\x1b, b).\n", "1:15", "main <- X = f(\\x1b, b)."),
])
def test_control_characters_are_escaped_in_diagnostics(tmp_path, name, text, where, shown):
    r = run(tmp_path, name, text, "check")
    head, line, caret = r.stderr.splitlines()[:3]
    assert r.returncode == 2 and f":{where}: error: " in head
    assert line == shown and caret.index("^") == shown.index("\\")
    assert all(ch == "\n" or ch.isprintable() for ch in r.stderr)


def test_render_keeps_the_caret_under_the_column_after_escapes():
    source = "a\tb\x07c\u2028d e\nnext"
    text = Diagnostic(Span("f", 1, 7), "m\x1b").render(source)
    assert text.splitlines() == ["f:1:7: error: m\\x1b", "a b\\x07c\\u2028d e", " " * 14 + "^"]


# ---- 7. ML strings hold printable ASCII; chars are bytes


@pytest.mark.parametrize("text, where", [('val s = "café";\n', "1:13"), ("val c = #\"é\";\n", "1:11"),
                                         ('val s = "a\tb";\n', "1:11"), ('val s = "a\x07b";\n', "1:11"),
                                         ('val s = "\\u20AC";\n', "1:10"), ('val s = "a\\q";\n', "1:11")])
def test_ml_string_literals_follow_poly_ml(tmp_path, text, where):
    r = run(tmp_path, "a.sml", text)
    assert_error(r, where)


def test_a_string_gap_error_points_at_its_line(tmp_path):
    r = run(tmp_path, "a.sml", 'val s = "a\\\n   x";\n')
    assert_error(r, "2:4", "string gap")


def test_ml_prints_chars_over_127_as_single_bytes(tmp_path):
    path = tmp_path / "a.sml"
    path.write_text('val _ = print "\\200\\255\\u00E9";\n')
    r = subprocess.run([sys.executable, "-m", "hpgrem.driver.cli", "run", str(path)], capture_output=True,
                       cwd=ROOT, timeout=120)
    assert (r.returncode, r.stdout) == (0, b"\xc8\xff\xe9")


# ---- PARLOG escapes, as in SWI-Prolog


@pytest.mark.parametrize("literal, printed", [('"\\x41"', "[65]"), ('"\\x41\\"', "[65]"), ('"\\101"', "[65]"),
                                              ("'\\x41\\b'", "Ab"), ("0'\\x41\\", "65"), ('"\\0\\"', "[0]")])
def test_parlog_numeric_escapes(tmp_path, literal, printed):
    r = run(tmp_path, "a.par", f"main <- X = {literal}, write(X), nl.\n")
    assert (r.returncode, r.stdout) == (0, printed + "\n"), r.stderr


@pytest.mark.parametrize("literal, words", [('"\\q"', "unknown escape '\\q'"),
                                            ('"\\x110000\\"', "out of range"), ("'\\xD800\\'", "out of range")])
def test_parlog_bad_escapes_are_syntax_errors(tmp_path, literal, words):
    assert_error(run(tmp_path, "a.par", f"main <- X = {literal}, write(X), nl.\n"), "1:13", words)


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_a_case_of_thousands_of_arms_runs(tmp_path, opt):
    """pam/ml/codegen.py dispatches many constant arms through a table (an elif chain of 20,000
    nested too deeply for Python's compiler: 'out of memory')."""
    arms = " | ".join(f"{i} => {i}" for i in range(20000))
    text = f"fun f x = case x of {arms} | _ => ~1;\n" \
           'val _ = print (Int.toString (f 777 + f 19999 + f 0 + f 20000) ^ "\\n");\n'
    r = run(tmp_path, "a.sml", text, "run", opt)
    assert (r.returncode, r.stdout) == (0, f"{777 + 19999 - 1}\n"), r.stderr


def test_many_constructors_and_strings_switch_as_poly_ml_does(tmp_path):
    n = 300
    text = ("datatype t = " + " | ".join(f"C{i}" for i in range(n)) + ";\n"
            "fun f x = case x of " + " | ".join(f"C{i} => {i}" for i in range(n)) + ";\n"
            "fun g s = case s of " + " | ".join(f'"s{i}" => {i}' for i in range(n)) + " | _ => ~1;\n"
            'val _ = print (Int.toString (f C0 + f C150 + f C299 + g "s7" + g "s299" + g "zz") ^ "\\n");\n')
    r = run(tmp_path, "a.sml", text)
    assert (r.returncode, r.stdout) == (0, "754\n"), r.stderr


# ---- PARLOG's two readers agree (issue 16, item 6) ------------------------------------------
# frontend/parlog/reader.py reads programs several times faster than Lark's parser; it must
# read each program exactly as Lark does (items, terms, spans) or leave it to Lark, never
# accept one Lark refuses. Checked on every program of the project and on generated ones.

# the project's own files, not the copies an install makes (build/, a virtual environment:
# .venv, CI's .venv-ci), which would be read again
PAR_FILES = sorted(p for p in ROOT.glob("**/*.par")
                   if not any(d == "build" or d.startswith(".venv") for d in p.relative_to(ROOT).parts))


def lark_reads(text: str):
    try:
        return repr(_parse(text, "t.par", "start"))
    except Exception as e:  # noqa: BLE001 - a refusal of either kind (CompileError, nesting)
        return type(e)


def assert_read_alike(text: str) -> None:
    mine = read_program(text, "t.par")
    if mine is not None:
        assert repr(mine) == lark_reads(text), text


@pytest.mark.parametrize("path", PAR_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_reader_reads_every_program_as_lark_does(path):
    text = path.read_text()
    if isinstance(lark_reads(text), type):
        return  # a program written to be refused: the reader must leave it to Lark
    mine = read_program(text, "t.par")
    assert mine is not None and repr(mine) == lark_reads(text)


SPACE = st.sampled_from(["", " ", "  ", "\n", "\t", " % note\n", "/* c */", "\r\n"])
ATOMS = st.sampled_from(["a", "foo_Bar1", "'A b'", "'it''s'", "'\\n'", "[]", "+", "-", "*", "mode", "is", "mod",
                         "'$x'", "\\+", "=..", ".", "@", "#", "'\\x41\\'", "\\"])
NUMBERS = st.sampled_from(["0", "7", "-1", "-0", "12345678901234567890", "0x1F", "0o17", "0b101", "1.5", "-2.5e3",
                           "1e5", "0'a", "0'\\n", "0''", "3.0E-2"])
VARIABLES = st.sampled_from(["X", "_", "_Y", "Xs1", "Acc"])
STRINGS = st.sampled_from(['""', '"ab"', '"a\\"b"', '"x""y"', '"\\x41\\"'])
OPERATORS = st.sampled_from([",", "&", ":", ";", "<-", ":-", "@", "=", "==", "\\==", "=..", "=:=", "=\\=", "<", ">",
                             "=<", ">=", "\\=", "is", "+", "-", "/\\", "\\/", "*", "/", "//", "mod", "rem", "<<",
                             ">>", "**", "|"])


def _terms(child):
    joined = st.lists(child, min_size=1, max_size=3)
    return st.one_of(
        st.tuples(ATOMS, SPACE, joined).map(lambda t: f"{t[0]}{t[1]}(" + ", ".join(t[2]) + ")"),
        st.tuples(child, SPACE, OPERATORS, SPACE, child).map("".join),
        st.tuples(st.sampled_from(["-", "\\", "~", "- "]), child).map("".join),
        joined.map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.tuples(joined, child).map(lambda t: "[" + ", ".join(t[0]) + " | " + t[1] + "]"),
        child.map(lambda x: f"({x})"),
    )


TERMS = st.recursive(st.one_of(ATOMS, NUMBERS, VARIABLES, STRINGS), _terms, max_leaves=12)
ITEMS = st.one_of(
    st.tuples(TERMS, SPACE, st.sampled_from([".", ". ", ".\n", "", " .", ".%\n"])).map("".join),
    st.tuples(st.sampled_from(["mode ", "mode  "]), st.sampled_from(["p", "'q r'", "s"]),
              st.sampled_from(["", "(?)", "(?, ^)", "( ^ ,? )", "(X?)", "()"]), st.sampled_from([".", ". "])).map("".join),
)


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(ITEMS, SPACE).map("".join), min_size=1, max_size=4).map("\n".join))
def test_the_reader_reads_generated_programs_as_lark_does(text):
    assert_read_alike(text)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(PAR_FILES), st.integers(0, 1 << 16), st.integers(0, 3),
       st.one_of(OPERATORS, ATOMS, NUMBERS, SPACE, st.sampled_from(["(", ")", "[", "]", ".", "'", '"', "0'", "%"])))
def test_the_reader_reads_mutated_programs_as_lark_does(path, at, cut, insert):
    text = path.read_text()
    at %= len(text) + 1
    assert_read_alike(text[:at] + insert + text[at + cut:])


def test_the_reader_leaves_deep_nesting_to_lark():
    deep = "main <- X = " + "f(" * 400 + "a" + ")" * 400 + ".\n"
    chain = "main <- X is " + " + ".join(["1"] * 500) + ".\n"
    assert read_program(deep, "t.par") is None and read_program(chain, "t.par") is None
    assert read_program("main <- X = " + "f(" * 50 + "a" + ")" * 50 + ".\n", "t.par") is not None
