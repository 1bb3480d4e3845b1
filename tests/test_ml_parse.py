"""The ML lexer and parser: tokens, chunks, the fixity table, SML's disambiguation of `fn`,
`case` and `handle`, spans, and the errors of unsupported constructs, with their positions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpgrem.diagnostics import CompileError
from frontend.ml import syntax as s
from frontend.ml.lexer import split_chunks, tokenize
from frontend.ml.parser import parse_program


def decs(src: str) -> list[s.Dec]:
    return [d for chunk in parse_program(src, "t.sml") for d in chunk.decs]


def exp(src: str) -> s.Exp:
    """The expression `src` (parsed as the right side of a `val`)."""
    dec = decs("val it = " + src)[0]
    return dec.binds[0].exp


def error(src: str) -> tuple[int, int, str]:
    with pytest.raises(CompileError) as info:
        parse_program(src, "t.sml")
    d = info.value.diagnostics[0]
    return d.span.line, d.span.col, d.message


def sx(e) -> str:
    """A syntax tree as an s-expression, to compare shapes."""
    if isinstance(e, s.EConst):
        return repr(e.value) if e.kind in ("string", "char") else str(e.value)
    if isinstance(e, s.EVar):
        return e.name
    if isinstance(e, s.EInfix):
        return f"({e.op} {sx(e.left)} {sx(e.right)})"
    if isinstance(e, s.EApp):
        return f"({sx(e.fn)} {sx(e.arg)})"
    if isinstance(e, (s.EAndalso, s.EOrelse)):
        return f"({'andalso' if isinstance(e, s.EAndalso) else 'orelse'} {sx(e.left)} {sx(e.right)})"
    if isinstance(e, s.EAnnot):
        return f"(: {sx(e.exp)})"
    if isinstance(e, (s.ECase, s.EHandle)):
        head = f"case {sx(e.exp)}" if isinstance(e, s.ECase) else f"handle {sx(e.exp)}"
        return f"({head} " + " | ".join(f"{sx(r.pat)} => {sx(r.exp)}" for r in e.match.rules) + ")"
    if isinstance(e, s.EFn):
        return "(fn " + " | ".join(f"{sx(r.pat)} => {sx(r.exp)}" for r in e.match.rules) + ")"
    if isinstance(e, s.EIf):
        return f"(if {sx(e.cond)} {sx(e.then)} {sx(e.else_)})"
    if isinstance(e, s.ERaise):
        return f"(raise {sx(e.exp)})"
    if isinstance(e, (s.ETuple, s.PTuple, s.EList, s.PList, s.ESeq)):
        return type(e).__name__[1:].lower() + "[" + ", ".join(sx(i) for i in e.items) + "]"
    if isinstance(e, (s.PVar,)):
        return e.name
    if isinstance(e, s.PWild):
        return "_"
    if isinstance(e, s.PConst):
        return str(e.value)
    if isinstance(e, s.PCon):
        return f"({e.name} {sx(e.arg)})"
    if isinstance(e, s.PLayer):
        return f"({e.name} as {sx(e.pat)})"
    if isinstance(e, s.PAnnot):
        return f"(: {sx(e.pat)})"
    if isinstance(e, s.ESelector):
        return f"#{e.label}"
    return type(e).__name__


# ---- lexical structure


def test_nested_comments_negative_literals_and_reals():
    e = exp("(* a (* nested *) comment *) ~5 + 1.5 + 1E3 + 2.0e~3 + ~0x1F")
    assert sx(e) == "(+ (+ (+ (+ -5 1.5) 1000.0) 0.002) -31)"


def test_tilde_apart_from_a_digit_is_the_negation_function():
    assert sx(exp("~ 5")) == "(~ 5)"
    assert sx(exp("~x")) == "(~ x)"


def test_strings_and_chars_with_sml_escapes():
    e = exp(r'"a\tb\n\065\^A\u0041\\\"gap\   \end" ^ str #"\n"')
    assert e.left.value == 'a\tb\nA\x01A\\"gapend'
    assert e.right.arg.value == "\n" and e.right.arg.kind == "char"


def test_identifiers_with_primes_long_identifiers_and_symbolic_names():
    kinds = [(t.type, str(t)) for t in tokenize("x' x'' Int.toString :=! <> #x", "t.sml")]
    assert kinds == [("ID", "x'"), ("ID", "x''"), ("LONGID", "Int.toString"), ("SYMID", ":=!"),
                     ("NE", "<>"), ("HASH", "#"), ("ID", "x")]


def test_type_variables_and_equality_type_variables():
    assert [(t.type, str(t)) for t in tokenize("'a ''b", "t.sml")] == [("TYVAR", "'a"), ("TYVAR", "''b")]


def test_chunks_split_only_at_top_level_semicolons():
    chunks = split_chunks("val a = (1; 2); val b = let val x = 1; in x end;; val c = 3", "t.sml")
    assert [c.span.col for c in chunks] == [1, 17, 51]
    assert [len(chunk.decs) for chunk in parse_program("val a = 1 val b = 2; fun f x = x", "t.sml")] == [2, 1]


def test_top_level_expression_is_val_it():
    (dec,) = decs('print "hi"')
    assert isinstance(dec, s.DVal) and dec.binds[0].pat == s.PVar("it", dec.span)


# ---- the fixity table


@pytest.mark.parametrize("src, shape", [
    ("1 + 2 * 3", "(+ 1 (* 2 3))"),
    ("1 - 2 - 3", "(- (- 1 2) 3)"),
    ("a :: b @ c", "(:: a (@ b c))"),
    ("a @ b :: c", "(@ a (:: b c))"),
    ("f o g o h", "(o (o f g) h)"),
    ("r := 1 + 2", "(:= r (+ 1 2))"),
    ("a = b <> c", "(<> (= a b) c)"),
    ("x before y := 2", "(before x (:= y 2))"),
    ("s ^ t = u", "(= (^ s t) u)"),
    ("f x y + g z", "(+ ((f x) y) (g z))"),
    ("a div b mod c", "(mod (div a b) c)"),
    ("op + (1, 2)", "(+ tuple[1, 2])"),
    ("a orelse b andalso c", "(orelse a (andalso b c))"),
    ("a andalso b orelse c", "(orelse (andalso a b) c)"),
    ("x : bool andalso y", "(andalso (: x) y)"),
    ("1 + 2 : int", "(: (+ 1 2))"),
    ("#x r + 1", "(+ (#x r) 1)"),
])
def test_fixity_table(src, shape):
    assert sx(exp(src)) == shape


_LEVELS = {"before": (0, "l"), ":=": (3, "l"), "o": (3, "l"), "=": (4, "l"), "<": (4, "l"),
           "<>": (4, "l"), "::": (5, "r"), "@": (5, "r"), "+": (6, "l"), "-": (6, "l"), "^": (6, "l"),
           "*": (7, "l"), "div": (7, "l"), "mod": (7, "l")}

_trees = st.recursive(st.sampled_from(["a", "b", "c", "1"]),
                      lambda sub: st.tuples(st.sampled_from(sorted(_LEVELS)), sub, sub), max_leaves=8)


def _minimal(tree) -> tuple[str, int]:
    """Print with only the parentheses the fixity table needs; returns (text, level)."""
    if isinstance(tree, str):
        return tree, 99
    op, left, right = tree
    level, assoc = _LEVELS[op]
    (lt, ll), (rt, rl) = _minimal(left), _minimal(right)
    if ll < level or (ll == level and assoc == "r"):
        lt = f"({lt})"
    if rl < level or (rl == level and assoc == "l"):
        rt = f"({rt})"
    return f"{lt} {op} {rt}", level


def _shape(tree) -> str:
    return tree if isinstance(tree, str) else f"({tree[0]} {_shape(tree[1])} {_shape(tree[2])})"


@given(_trees)
@settings(max_examples=150, deadline=None)
def test_minimal_parentheses_read_back_as_the_same_tree(tree):
    assert sx(exp(_minimal(tree)[0])) == _shape(tree)


@given(st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=255), max_size=20))
@settings(max_examples=100, deadline=None)
def test_string_literals_round_trip(text):
    # a string holds printable ASCII; every other character is written as an escape (Poly/ML)
    literal = '"' + "".join(c if c.isascii() and c.isalnum() else f"\\{ord(c):03d}" for c in text) + '"'
    assert exp(literal).value == text


# ---- a match extends as far to the right as possible


def test_nested_case_takes_the_following_rules():
    e = exp("case a of A => case b of B => 1 | C => 2")
    assert sx(e) == "(case a A => (case b B => 1 | C => 2))"


def test_parenthesised_case_leaves_the_rules_to_the_outer_one():
    e = exp("case a of A => (case b of B => 1) | C => 2")
    assert sx(e) == "(case a A => (case b B => 1) | C => 2)"


def test_fn_in_a_rule_takes_the_following_rules():
    assert sx(exp("case a of A => fn x => x | y => y")) == "(case a A => (fn x => x | y => y))"


def test_handle_in_a_rule_takes_the_following_rules():
    e = exp("case a of A => f x handle E => 1 | B => 2")
    assert sx(e) == "(case a A => (handle (f x) E => 1 | B => 2))"


def test_handle_binds_looser_than_orelse_and_raise_extends_right():
    assert sx(exp("a orelse b handle E => c")) == "(handle (orelse a b) E => c)"
    assert sx(exp("raise E handle F => 1")) == "(raise (handle E F => 1))"
    assert sx(exp("x > 0 orelse raise Fail")) == "(orelse (> x 0) (raise Fail))"


def test_else_branch_ending_in_fn_takes_the_following_rules():
    e = exp("case a of A => if p then 1 else fn x => x | B => 2")
    assert sx(e) == "(case a A => (if p 1 (fn x => x | B => 2)))"


def test_else_branch_without_match_leaves_the_bar_to_the_case():
    e = exp("case a of A => if p then 1 else 2 | B => 3")
    assert sx(e) == "(case a A => (if p 1 2) | B => 3)"


def test_fn_body_takes_type_annotation_and_handle():
    assert sx(exp("fn x => x : int")) == "(fn x => (: x))"
    assert sx(exp("fn x => f x handle E => 0")) == "(fn x => (handle (f x) E => 0))"


def test_case_in_a_fun_clause_swallows_the_next_clause():
    # SML reads `| f y = 3` as a rule of the case, which then lacks its `=>`.
    assert error("fun f x = case x of 1 => 2 | f y = 3") == (1, 34, "syntax error: unexpected '=' (expected '=>')")


def test_fun_clauses_and_curried_arguments():
    (dec,) = decs("fun f 0 y = y | f n y = f (n - 1) y")
    assert isinstance(dec, s.DFun) and [len(c.args) for c in dec.binds[0].clauses] == [2, 2]


# ---- patterns, types and declarations


def test_patterns():
    (dec,) = decs("fun f (x :: (y as (_, 1)) :: rest, [a, b], {l = ~1, m}, SOME (z : int)) = 0")
    pats = dec.binds[0].clauses[0].args[0].items
    assert [sx(p) for p in pats] == ["(:: tuple[x, (:: tuple[(y as tuple[_, 1]), rest])])", "list[a, b]",
                                     "PRecord", "(SOME (: z))"]
    assert pats[2].fields[0] == ("l", s.PConst(-1, "int", pats[2].fields[0][1].span))


def test_typed_layered_pattern_keeps_the_type_on_the_pattern():
    (dec,) = decs("val x : int * int as (a, b) = (1, 2)")
    layer = dec.binds[0].pat
    assert isinstance(layer, s.PLayer) and isinstance(layer.pat, s.PAnnot)


def test_types():
    (dec,) = decs("type ('a, 'b) t = ('a -> 'b) * 'a list -> {x: int, y: ''c} option")
    ty = dec.binds[0].ty
    assert isinstance(ty, s.TyArrow) and isinstance(ty.arg, s.TyTuple)
    assert isinstance(ty.result, s.TyCon) and ty.result.name == "option"


def test_datatypes_exceptions_local_and_val_rec():
    ds = decs("datatype 'a t = A | B of 'a t and u = C of int\n"
              "exception E exception F of string\n"
              "local val x = 1 in val y = x end\n"
              "val rec f = fn 0 => 1 | n => n")
    assert [type(d).__name__ for d in ds] == ["DDatatype", "DException", "DException", "DLocal", "DVal"]
    assert [c.name for c in ds[0].binds[0].cons] == ["A", "B"] and ds[4].rec_from == 0


def test_every_node_has_the_position_of_its_first_character():
    (dec,) = decs("val f =\n  fn (a, b) =>\n    let val c = a in c + b end")
    fn = dec.binds[0].exp
    assert (fn.span.line, fn.span.col) == (2, 3)
    rule = fn.match.rules[0]
    assert (rule.pat.span.line, rule.pat.span.col) == (2, 6)
    assert (rule.exp.span.line, rule.exp.span.col) == (3, 5)
    plus = rule.exp.body
    assert (plus.span.col, plus.op_span.col) == (22, 24)


# ---- errors


@pytest.mark.parametrize("src, where, message", [
    ("structure S = struct end", (1, 1), "structures, signatures and functors are not supported"),
    ("val x = 1\nsignature S = sig end", (2, 1), "structures, signatures and functors are not supported"),
    ("functor F () = struct end", (1, 1), "structures, signatures and functors are not supported"),
    ("open List", (1, 1), "'open' is not supported"),
    ("abstype t = A with end", (1, 1), "'abstype' is not supported"),
    ("datatype t = A of u withtype u = int", (1, 21), "'withtype' is not supported"),
    ("fun f {x, ...} = x", (1, 11), "flexible records ('...') are not supported"),
    ("infix 5 ++", (1, 1), "fixity declarations are not supported: the fixity table is fixed"),
    ("val x = 0w12", (1, 9), "words (0w...) are not supported"),
    ("val v = #[1]", (1, 9), "vectors are not supported"),
])
def test_not_supported_at_its_location(src, where, message):
    line, col, text = error(src)
    assert (line, col) == where and text.startswith(message)


@pytest.mark.parametrize("src, where, message", [
    ("val = 3", (1, 5), "syntax error: unexpected '='"),
    ("val x = (1, 2", (1, 14), "syntax error: unexpected end of input"),
    ("val x = let in end", (1, 16), "syntax error: unexpected 'end'"),
    ('val s = "abc', (1, 9), "unterminated string"),
    ("val s = (* open\n comment", (1, 9), "unterminated comment"),
    (r'val s = "\q"', (1, 10), "illegal escape sequence '\\q' in string"),
    ('val c = #"ab"', (1, 9), "a character constant must contain exactly one character"),
    ("fun f x = 1 | g y = 2", (1, 15), "clauses of one function must all define f, not g"),
    ("val (a, b) as c = (1, 2)", (1, 5), "only a variable can be bound by 'as'"),
    ("val r = {a = 1, a = 2}", (1, 21), "label a appears twice in this record"),
    ("val x = #0 p", (1, 10), "a numeric label must be a positive integer, not 0"),
])
def test_syntax_errors_at_their_location(src, where, message):
    line, col, text = error(src)
    assert (line, col) == where and text.startswith(message)


def test_a_lexical_error_belongs_to_its_chunk():
    chunks = split_chunks('val a = 1; val b = "open', "t.sml")
    assert chunks[0].error is None and chunks[1].error.message == "unterminated string"
