"""Pattern-match compilation: decision trees, the arms' bindings, and the warnings for
non-exhaustive and redundant matches; a property test runs random matches both as trees and by
trying the rules in order."""

from __future__ import annotations

import re
import shutil
import subprocess
from itertools import count

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frontend.ml import elaborate_program
from frontend.ml import typed as t


def warnings(src: str) -> list[tuple[int, int, str]]:
    return [(w.span.line, w.span.col, w.message) for w in elaborate_program(src, "t.sml").warnings]


def function(src: str, name: str) -> t.Fn:
    for dec in elaborate_program(src, "t.sml").decs:
        if isinstance(dec, t.RecDec):
            for var, fn in dec.binds:
                if var.name == name:
                    return fn
        if isinstance(dec, t.ValDec) and dec.root.name == name:
            return dec.expr
    raise KeyError(name)


def match_of(src: str, name: str) -> t.Match:
    body = function(src, name)
    while isinstance(body, t.Fn):
        body = body.body
    assert isinstance(body, t.Match)
    return body


# ---- warnings


def test_non_exhaustive_case_fn_and_fun():
    assert warnings("fun f x = case x of 1 => 2 | 2 => 3") == [(1, 11, "matches are not exhaustive")]
    assert warnings("val g = fn [] => 0") == [(1, 9, "matches are not exhaustive")]
    assert warnings("fun h (SOME x) = x") == [(1, 5, "matches are not exhaustive")]
    assert warnings("fun h (SOME x) 0 = x\n  | h NONE _ = 0") == [(1, 5, "matches are not exhaustive")]


def test_redundant_rules_are_named_by_number_at_their_pattern():
    assert warnings("fun f x = case x of NONE => 0 | SOME y => y | _ => 2") == [(1, 47, "pattern 3 is redundant")]
    assert warnings("fun f 0 = 1\n  | f 0 = 2\n  | f _ = 3") == [(2, 5, "pattern 2 is redundant")]
    assert warnings("val f = fn (true, _) => 1 | (false, _) => 2 | (_, 0) => 3") == [(1, 47, "pattern 3 is redundant")]


def test_both_warnings_in_source_order():
    assert warnings("fun f x = case x of 1 => 2 | 1 => 3") == [
        (1, 11, "matches are not exhaustive"), (1, 30, "pattern 2 is redundant")]


def test_val_patterns_that_may_fail_warn():
    assert warnings("val SOME y = Int.fromString \"3\"") == [(1, 5, "pattern is not exhaustive")]
    assert warnings("val (a, [b]) = (1, [2])") == [(1, 5, "pattern is not exhaustive")]
    assert warnings("val (a, {x, y}) = (1, {x = 2, y = 3})") == []


def test_handlers_are_not_warned_for_exhaustiveness_but_for_redundancy():
    assert warnings("fun f x = x handle Div => 0") == []
    assert warnings("fun f x = x handle Fail _ => 1 | Fail \"a\" => 2") == [(1, 34, "pattern 2 is redundant")]


def test_exhaustive_matches_do_not_warn():
    src = """
datatype t = A | B of int | C of t * t
fun a true = 0 | a false = 1
fun b [] = 0 | b [x] = x | b (x :: y :: rest) = x + y
fun c (NONE, _) = 0 | c (SOME _, true) = 1 | c (SOME x, false) = x
fun d A = 0 | d (B n) = n | d (C (A, _)) = 1 | d (C (_, _)) = 2
fun e (ref 0) = 0 | e (ref n) = n
fun f {x = 1, y} = y | f {x, y} = x + y
fun g "a" = 1 | g _ = 2
fun h #"a" = 1 | h _ = 2
fun i (x as (_, _)) = x
fun j (Fail m) = m | j _ = "other"
"""
    assert warnings(src) == []


# ---- trees


def test_complete_constructor_switch_has_no_default():
    m = match_of("fun f [] = 0 | f (x :: _) = x", "f")
    assert isinstance(m.tree, t.Switch) and m.tree.kind == "con" and m.tree.default is None
    assert [(key.name, sub) for key, sub in m.tree.cases] == [("nil", t.Leaf(0)), ("::", t.Leaf(1))]


def test_constants_and_exceptions_always_have_a_default():
    m = match_of("fun f 0 = 1 | f 1 = 2 | f _ = 3", "f")
    assert m.tree.kind == "int" and [k for k, _ in m.tree.cases] == [0, 1] and m.tree.default == t.Leaf(2)
    m = match_of("fun g #\"a\" = 1", "g")
    assert m.tree.kind == "char" and m.tree.default == t.Fail()
    m = match_of("fun h Div = 1 | h (Fail s) = 2", "h")
    assert m.tree.kind == "exn" and [k.name for k, _ in m.tree.cases] == ["Div", "Fail"]


def test_records_tuples_refs_and_single_constructors_need_no_test():
    src = "datatype box = Box of int * string\nfun f (Box (n, s), {a, b}, ref r) = n"
    m = match_of(src, "f")
    assert m.tree == t.Leaf(0)
    paths = {var.name: path.steps for var, path in m.arms[0].bindings}
    assert paths == {"n": (0, "arg", 0), "s": (0, "arg", 1), "a": (1, 0), "b": (1, 1), "r": (2, "deref")}


def test_curried_clauses_match_on_every_parameter():
    m = match_of("fun f 0 _ = 0 | f _ 0 = 1 | f x y = x + y", "f")
    assert len(m.roots) == 2
    assert m.tree.path.root == m.roots[0] and m.tree.default.path.root == m.roots[1]
    assert [(v.name, p.root) for v, p in m.arms[2].bindings] == [("x", m.roots[0]), ("y", m.roots[1])]


def test_layered_patterns_bind_the_whole_and_the_parts():
    m = match_of("fun f (whole as (x :: _)) = whole | f [] = []", "f")
    assert [(v.name, p.steps) for v, p in m.arms[0].bindings] == [("whole", ()), ("x", ("cons", 0))]


def test_plain_variables_need_no_match():
    fn = function("fun f x y = x", "f")
    assert isinstance(fn.body, t.Fn) and isinstance(fn.body.body, t.VarRef) and fn.param.name == "x"
    fn = function("val g = fn _ => 1", "g")
    assert isinstance(fn.body, t.Const)


def test_case_and_handle_bind_their_root():
    src = "fun f x = (case x of SOME y => y | NONE => raise Div) handle Div => 0"
    body = function(src, "f").body
    assert isinstance(body, t.Handle) and body.match.failure == "reraise"
    assert isinstance(body.body, t.Case) and body.body.match.failure == "Match"


def test_val_pattern_tree():
    (dec,) = elaborate_program("val (a, SOME b) = (1, SOME 2)", "t.sml").decs
    assert isinstance(dec, t.ValDec) and dec.tree.kind == "con" and dec.tree.path.steps == (1,)
    assert [(v.name, p.steps) for v, p in dec.bindings] == [("a", (0,)), ("b", (1, "arg"))]


# ---- property: the tree does what trying the rules in order does

DATATYPE = "datatype s = Leaf | One of int | Two of s * bool\n"


def _pattern(depth: int) -> st.SearchStrategy:
    leaves = st.sampled_from([("_",), ("var",), ("Leaf",)]) | st.tuples(
        st.just("One"), st.sampled_from([0, 1, 2, None]))
    if depth == 0:
        return leaves
    return leaves | st.tuples(st.just("Two"), _pattern(depth - 1), st.sampled_from([True, False, None]))


def _text(pat, names) -> str:
    kind = pat[0]
    if kind == "_":
        return "_"
    if kind == "var":
        return f"x{next(names)}"
    if kind == "Leaf":
        return "Leaf"
    if kind == "One":
        return "One " + ("_" if pat[1] is None else str(pat[1]))
    flag = "_" if pat[2] is None else str(pat[2]).lower()
    return f"Two ({_text(pat[1], names)}, {flag})"


def _values(depth: int) -> list:
    out: list = [("Leaf", None)] + [("One", n) for n in range(4)]
    if depth > 0:
        out += [("Two", (v, (b, None))) for v in _values(depth - 1) for b in ("true", "false")]
    return out


def _matches(pat, value) -> bool:
    kind = pat[0]
    if kind in ("_", "var"):
        return True
    if kind != value[0]:
        return False
    if kind == "One":
        return pat[1] is None or pat[1] == value[1]
    if kind == "Two":
        inner, (flag, _) = value[1]
        return _matches(pat[1], inner) and (pat[2] is None or str(pat[2]).lower() == flag)
    return True


def _run(tree: t.Tree, roots: dict) -> int | None:
    while isinstance(tree, t.Switch):
        value = roots[tree.path.root]
        for step in tree.path.steps:
            value = value[1] if step == "arg" else value[step]
        key = value if tree.kind == "int" else value[0]
        tree = next((sub for k, sub in tree.cases if (k if tree.kind == "int" else k.name) == key), tree.default)
    return tree.arm if isinstance(tree, t.Leaf) else None


@given(st.lists(_pattern(2), min_size=1, max_size=5))
@settings(max_examples=200, deadline=None)
def test_decision_trees_agree_with_first_match(pats):
    names = count()
    rules = " | ".join(f"{_text(p, names)} => {i}" for i, p in enumerate(pats))
    src = f"{DATATYPE}val f = fn {rules}"
    program = elaborate_program(src, "t.sml")
    fn = program.decs[-1].expr
    values = _values(3)
    expected = [next((i for i, p in enumerate(pats) if _matches(p, v)), None) for v in values]
    if isinstance(fn.body, t.Match):
        got = [_run(fn.body.tree, {fn.body.roots[0]: v}) for v in values]
        assert got == expected
    else:
        assert set(expected) == {0}
    messages = [w.message for w in program.warnings]
    assert ("matches are not exhaustive" in messages) == (None in expected)
    redundant = {i + 1 for i in range(len(pats)) if i not in expected}
    assert {int(m.split()[1]) for m in messages if m.endswith("redundant")} == redundant


# ---- differential: the same warnings as Poly/ML, line by line

POLY = shutil.which("poly")

WARNING_CORPUS = """\
fun f x = case x of 1 => 2 | 1 => 3;
val g = fn [] => 0 | (_ :: _) => 1 | [_] => 2;
fun h (SOME x) = x;
fun k x = x handle Div => 0 | Div => 1;
fun opt x = let val SOME y = x in y end;
fun ok (true, _) = 0 | ok (false, n) = n;
datatype t = A | B of int;
fun u A = 0 | u (B 0) = 1;
"""


@pytest.mark.skipif(POLY is None, reason="Poly/ML is not installed")
def test_warnings_agree_with_poly_ml(tmp_path):
    path = tmp_path / "w.sml"
    path.write_text(WARNING_CORPUS)
    run = subprocess.run([POLY, "--script", str(path)], check=False, capture_output=True, text=True, timeout=60)
    theirs = set()
    for line in (run.stdout + run.stderr).splitlines():
        found = re.match(r".*w\.sml:(\d+): warning: (.*?)\.? Found near", line)
        if found:
            theirs.add((int(found.group(1)), found.group(2).lower().rstrip(".")))
    ours = {(line, message) for line, _, message in warnings(WARNING_CORPUS)}
    assert theirs and ours == theirs
