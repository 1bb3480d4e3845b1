"""What `hpgrem run` does with ML programs that are wrong (spec/ml.md "Running", spec/cli.md):
type, scope, syntax and subset errors exit 2 with `FILE:LINE:COL: error: MESSAGE`, the source line
and a caret on stderr and nothing run; an uncaught exception exits 1 with `uncaught exception
NAME` on stderr after the output printed before it; each `;` chunk is checked before it runs.

The run-time and chunk cases are also run under Poly/ML, where it is installed, to confirm the
expected output and the exception are what the reference does."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import hpgrem

POLY = shutil.which("poly")
needs_poly = pytest.mark.skipif(POLY is None, reason="Poly/ML is not installed")


def run_ml(tmp_path: Path, text: str, *options: str) -> tuple[subprocess.CompletedProcess, Path]:
    path = tmp_path / "prog.sml"
    path.write_text(text)
    return hpgrem("run", *options, str(path)), path


def assert_diagnostic(run: subprocess.CompletedProcess, path: Path, line: int, col: int, *phrases: str) -> None:
    """Exit 2, nothing on stdout, `FILE:LINE:COL: error:` with every phrase, then the source line
    and a caret under the column; no traceback."""
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    head = f"{path}:{line}:{col}: error: "
    lines = run.stderr.splitlines()
    at = next((i for i, text in enumerate(lines) if text.startswith(head)), None)
    assert at is not None, run.stderr
    for phrase in phrases:
        assert phrase in lines[at], lines[at]
    source = path.read_text().splitlines()[line - 1]
    assert lines[at + 1] == source
    assert lines[at + 2] == " " * (col - 1) + "^"


# ---- errors before anything runs (exit status 2) --------------------------------------------

def test_type_error_names_both_types(tmp_path):
    run, path = run_ml(tmp_path, 'val _ = print "never\\n"\nval x = 1\nval y = x + "one"\n')
    assert_diagnostic(run, path, 3, 13, "expected int, found string")
    assert run.stdout == ""


def test_type_error_in_an_application(tmp_path):
    run, path = run_ml(tmp_path, 'fun double (x : int) = 2 * x\nval _ = print (Int.toString (double "two"))\n')
    assert_diagnostic(run, path, 2, 37, "expected int, found string")


def test_unbound_identifier(tmp_path):
    run, path = run_ml(tmp_path, 'val x = 1\nval _ = print (Int.toString (x + foo))\n')
    assert_diagnostic(run, path, 2, 34, "unbound", "foo")
    assert run.stdout == ""


@pytest.mark.parametrize("text,line,col,phrase", [
    ('val _ = print "a\\n"\nstructure S = struct val x = 1 end\n', 2, 1, "structures"),
    ('val _ = print (Real.toString 1.5)\n', 1, 16, "Real.toString"),
    ('val a = Array.array (3, 0)\n', 1, 9, "arrays"),
    ('fun f (a : int array) = 1\n', 1, 12, "arrays"),
    ('open List\n', 1, 1, "open"),
    ('val _ = print (exnMessage Div)\n', 1, 16, "exnMessage"),
    ('val v = Vector.fromList [1]\n', 1, 9, "vectors"),
], ids=["structure", "Real.toString", "Array", "array-type", "open", "exnMessage", "Vector"])
def test_unsupported_feature_says_so_at_its_location(tmp_path, text, line, col, phrase):
    run, path = run_ml(tmp_path, text)
    assert_diagnostic(run, path, line, col, "not supported", phrase)
    assert run.stdout == ""


def test_user_fixity_declaration_is_rejected(tmp_path):
    run, path = run_ml(tmp_path, 'infix 5 ++\nfun a ++ b = a + b\n')
    assert_diagnostic(run, path, 1, 1, "not supported")


def test_syntax_error(tmp_path):
    run, path = run_ml(tmp_path, 'val _ = print "x\\n"\nval x = (1 + 2\nval y = 3\n')
    assert_diagnostic(run, path, 3, 1, "syntax error")
    assert run.stdout == ""


def test_syntax_error_at_end_of_input(tmp_path):
    run, path = run_ml(tmp_path, 'fun f x = x +\n')
    assert_diagnostic(run, path, 1, 14, "syntax error")


def test_file_without_semicolons_is_checked_whole_before_it_runs(tmp_path):
    text = 'val _ = print "one\\n"\nval _ = print "two\\n"\nval x : int = "three"\n'
    run, path = run_ml(tmp_path, text)
    assert_diagnostic(run, path, 3, 15, "expected int, found string")
    assert run.stdout == ""


CHUNKS = ('val _ = print "one\\n";\nfun two () = print "two\\n";\nval _ = two ();\n'
          'val n : int = "three";\nval _ = print "four\\n";\n')


def test_each_chunk_is_checked_before_it_runs(tmp_path):
    run, path = run_ml(tmp_path, CHUNKS)
    assert_diagnostic(run, path, 4, 15, "expected int, found string")
    assert run.stdout == "one\ntwo\n"


# ---- uncaught exceptions at run time (exit status 1) ----------------------------------------

RUNTIME = {
    "fail": ('val _ = print "one\\n"\nval _ = print "two\\n"\nval _ = raise Fail "bad"\nval _ = print "three\\n"\n',
             "one\ntwo\n", "uncaught exception Fail: bad", "Fail"),
    "match": ('fun f 1 = "one"\n  | f 2 = "two"\nval _ = print "before\\n"\nval _ = print (f 3)\n',
              "before\n", "uncaught exception Match", "Match"),
    "div": ('val _ = print "a\\n"\nval _ = print (Int.toString (1 div 0))\n',
            "a\n", "uncaught exception Div", "Div"),
    "overflow": ('val _ = print "a\\n"\nval _ = print (Int.toString (4611686018427387903 + 1))\n',
                 "a\n", "uncaught exception Overflow", "Overflow"),
    "subscript": ('val _ = print "a\\n"\nval _ = print (Int.toString (List.nth ([1, 2], 2)))\n',
                  "a\n", "uncaught exception Subscript", "Subscript"),
    "user": (('exception Oops of int\nfun f n = if n > 2 then raise Oops n else n\n'
              'val _ = print (Int.toString (f 1) ^ "\\n")\nval _ = print (Int.toString (f 3) ^ "\\n")\n'),
             "1\n", "uncaught exception Oops", "Oops"),
    "chunks": ('val _ = print "one\\n";\nval _ = raise Div;\nval _ = print "two\\n";\n',
               "one\n", "uncaught exception Div", "Div"),
    "in-parallel-branch": (('val _ = print "start\\n"\n'
                            'val (a, b) = ForkJoin.par (fn () => 1 div 0, fn () => (raise Fail "right") : int)\n'
                            'val _ = print "unreached\\n"\n'),
                           "start\n", "uncaught exception Div", "Div"),
}


@pytest.mark.parametrize("name", list(RUNTIME))
def test_uncaught_exception(tmp_path, name):
    text, stdout, message, _ = RUNTIME[name]
    run, _ = run_ml(tmp_path, text)
    assert run.returncode == 1, run.stderr
    assert run.stdout == stdout
    assert message in run.stderr
    assert "Traceback" not in run.stderr


def test_uncaught_fail_message_is_exact(tmp_path):
    run, _ = run_ml(tmp_path, RUNTIME["fail"][0])
    assert "uncaught exception Fail: bad" in run.stderr.splitlines()


def test_match_failure_also_warns(tmp_path):
    run, path = run_ml(tmp_path, RUNTIME["match"][0])
    assert f"{path}:1:5: warning: matches are not exhaustive" in run.stderr
    assert run.returncode == 1


def test_uncaught_exception_on_sixteen_pes(tmp_path):
    text, stdout, message, _ = RUNTIME["in-parallel-branch"]
    run, _ = run_ml(tmp_path, text, "--pes", "16")
    assert (run.returncode, run.stdout) == (1, stdout)
    assert message in run.stderr


# ---- the same programs under the reference --------------------------------------------------

SHIM = "structure ForkJoin = struct fun par (f, g) = (f (), g ()) end;\n"


def poly(tmp_path: Path, text: str) -> subprocess.CompletedProcess:
    path = tmp_path / "prog.sml"
    path.write_text(SHIM + text)
    return subprocess.run([POLY, "--script", str(path)], check=False, capture_output=True, text=True, timeout=60)


def program_output(out: str) -> str:
    """Poly/ML's stdout without its own warning lines (and their indented continuations)."""
    kept, in_warning = [], False
    for line in out.splitlines(keepends=True):
        if re.match(r"\S+\.sml:\d+: warning: ", line):
            in_warning = True
        elif not (in_warning and line.startswith("   ")):
            in_warning = False
            kept.append(line)
    return "".join(kept)


@needs_poly
@pytest.mark.parametrize("name", list(RUNTIME))
def test_poly_ml_raises_the_same_exception(tmp_path, name):
    text, stdout, _, exn = RUNTIME[name]
    run = poly(tmp_path, text)
    assert run.returncode == 1
    out = program_output(run.stdout)
    assert out.startswith(stdout + f"Exception- {exn}"), out


@needs_poly
def test_poly_ml_checks_each_chunk_before_it_runs(tmp_path):
    run = poly(tmp_path, CHUNKS)
    assert run.returncode == 1
    assert run.stdout.startswith("one\ntwo\n")
    assert re.search(r"prog\.sml:\d+: error:", run.stdout) and "four" not in run.stdout


@needs_poly
def test_poly_ml_runs_nothing_of_a_file_without_semicolons(tmp_path):
    run = poly(tmp_path, 'val _ = print "one\\n"\nval _ = print "two\\n"\nval x : int = "three"\n')
    assert run.returncode == 1
    assert re.match(r"\S*prog\.sml:\d+: error:", run.stdout), run.stdout


# ---- what the Definition of Standard ML rejects, and two forms it allows --------------------
# (issue 16, item 8: found against another compiler's regression suite). Each rejection is a
# diagnostic at the name or construct at fault; Poly/ML, where installed, rejects the same
# program at the same line, and runs each accepted one with the same output.

REJECTED = {  # name: (program, line, column, phrase, does Poly/ML reject it too?)
    "two values": ("val x = 1 and x = 2;\n", 1, 15, "x is bound twice in this declaration", True),
    "two functions": ("fun f 0 = 1 | f n = n and f x = x;\n", 1, 27, "f is bound twice", True),
    "two val rec": ("val rec f = fn x => x and f = fn y => y;\n", 1, 27, "f is bound twice", True),
    "a value and a val rec": ("val f = 1 and rec f = fn y => y;\n", 1, 19, "f is bound twice", True),
    "two types": ("type t = int and t = bool;\n", 1, 18, "type t is bound twice", True),
    "two datatypes": ("datatype t = A and t = B;\n", 1, 20, "type t is bound twice", True),
    "two exceptions": ("exception E and E;\n", 1, 17, "exception E is bound twice", True),
    "= by val": ("val op = = 3;\n", 1, 8, "= cannot be rebound", True),
    "= by fun": ("fun op = (x, y) = true;\n", 1, 5, "= cannot be rebound", True),
    "= by val rec": ("val rec (op =) = fn _ => 13;\n", 1, 13, "= cannot be rebound", True),
    "it as a constructor": ("datatype t = it;\n", 1, 14, "it cannot be bound as a constructor", True),
    "it as an exception": ("exception it;\n", 1, 11, "it cannot be bound as an exception", True),
    "a datatype escaping a function's let": ("fun f () = let datatype t = A in A end;\n", 1, 12,
                                             "escapes its scope", True),
    # the Definition's rule 4; Poly/ML lets it pass when the value is bound to `_` (MLton does not)
    "a datatype escaping a let": ("val _ =\n   let\n      datatype t = T\n   in\n      (T, fn T => 1)\n   end;\n",
                                  2, 4, "datatype t declared inside it", False),
}

ACCEPTED = {  # name: (program, its output)
    "val rec, parenthesized and typed": (
        "val rec (f : int -> int) = fn 0 => 1 | n => n * f (n - 1);\nval _ = print (Int.toString (f 5));\n",
        "120"),
    "val rec of two fns": (
        "val rec ev = fn 0 => true | n => od (n - 1) and od = fn 0 => false | n => ev (n - 1);\n"
        "val _ = print (Bool.toString (ev 4));\n", "true"),
    # `rec` covers the rest of the group, whose fns see the k bound before the declaration
    "and rec": ("val k = 10;\nval k = 1 and rec f = fn 0 => k | n => f (n - 1);\n"
                "val _ = print (Int.toString (f 3 + k));\n", "11"),
    "rec rec, layered names": ("val rec rec e as g = fn 0 => 0 | n => g (n - 1) + 2;\n"
                               "val _ = print (Int.toString (e 3 + g 1));\n", "8"),
    "val 'a rec": ("val 'a rec self = fn (x : 'a) => x;\nval _ = print (self \"ok\");\n", "ok"),
    "#a fixed by a later declaration of the chunk": (
        "fun f r = #a r + 1\nval x = f {a = 1, b = 2};\nval _ = print (Int.toString x);\n", "2"),
    "#a fixed inside a local": ("local fun f r = #a r in val x = f {a = 1} end;\nval _ = print (Int.toString x);\n",
                                "1"),
    "#a fixed inside a let": ("val n = let fun sel r = #a r in sel {a = 4, b = true} end;\n"
                              "val _ = print (Int.toString n);\n", "4"),
    # SML '97 has no escape rule for `local` (its type t stays, unnamed): Poly/ML agrees
    "a local datatype's value": ("local datatype t = A in val x = A end;\nval _ = print (if x = x then \"same\" else \"\");\n",
                                 "same"),
}


@pytest.mark.parametrize("name", list(REJECTED))
def test_definition_rejects(tmp_path, name):
    text, line, col, phrase, _ = REJECTED[name]
    run, path = run_ml(tmp_path, text)
    assert_diagnostic(run, path, line, col, phrase)


@pytest.mark.parametrize("name", list(ACCEPTED))
def test_definition_accepts(tmp_path, name):
    text, output = ACCEPTED[name]
    run, _ = run_ml(tmp_path, text)
    assert (run.returncode, run.stdout) == (0, output), run.stderr
    assert "warning" not in run.stderr


def poly_plain(tmp_path: Path, text: str) -> subprocess.CompletedProcess:
    """Poly/ML on the program as it is (no shim: its line numbers are the program's)."""
    path = tmp_path / "prog.sml"
    path.write_text(text)
    return subprocess.run([POLY, "--script", str(path)], check=False, capture_output=True, text=True, timeout=60)


@needs_poly
@pytest.mark.parametrize("name", list(REJECTED))
def test_poly_ml_rejects_the_same(tmp_path, name):
    text, line, _, _, poly_rejects = REJECTED[name]
    run = poly_plain(tmp_path, text)
    said = run.stdout + run.stderr
    assert bool(re.search(rf"prog\.sml:{line}: error:", said)) == poly_rejects, said


@needs_poly
@pytest.mark.parametrize("name", list(ACCEPTED))
def test_poly_ml_accepts_the_same(tmp_path, name):
    text, output = ACCEPTED[name]
    run = poly_plain(tmp_path, text)
    assert (run.returncode, program_output(run.stdout)) == (0, output), run.stdout + run.stderr
