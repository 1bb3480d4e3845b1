"""Values named once: the IR is a graph. A node object used in several places is one value that
means exactly what copies would; every structural consumer (walk, transform, verifier, type
check, printer, `.hpg`) does work linear in the distinct nodes, and `.hpg` keeps the sharing.

The chains below have n distinct nodes and 2^n paths: a consumer that works per path would not
finish for n = 60. The counts asserted are visits (calls of `children()`) and text sizes,
never times.
"""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_ir import modules

from hpgrem import ir

from hpgrem.ir import ml

from hpgrem.ir import parlog
from hpgrem.ir import Span
from hpgrem.ir.core import Node
from hpgrem.printer import module_text
from hpgrem.serialize import HpgFormatError, dumps, loads
from hpgrem.verify import verify

ROOT = Path(__file__).resolve().parents[1]
S = Span("dag.sml", 1, 1)


def ml_chain(n: int) -> ir.Module:
    """`main` builds x0 = (1, 1) (a tuple), x(k+1) = (xk, xk): n + 2 distinct nodes, 2^n paths."""
    x: ml.Expr = ml.Lit(1, S)
    for _ in range(n):
        x = ml.Tuple((x, x), (), S)
    body = ml.Sequence((x, ml.Lit(None, S)), S)
    main = ml.Function("ml:main", "main", (), 0, body, S)
    return ir.Module("dag.sml", {main.key: main}, ir.Entry(main.key, ()), "ml", {}, {1: "val it = ..."})


def parlog_chain(n: int) -> ir.Module:
    """`main :- X = tN` with t0 = a, t(k+1) = f(tk, tk)."""
    t: parlog.Term = parlog.Atom("a", S)
    for _ in range(n):
        t = parlog.Struct("f", (t, t), S)
    call = parlog.Call("=/2", (parlog.Var("X", 0, S), t), S)
    clause = parlog.Clause((), (), call, 1, S)
    main = parlog.Relation("main/0", "main", (), ((clause,),), S)
    return ir.Module("dag.par", {main.key: main}, ir.Entry(main.key, ()), "parlog")


CHAINS = {"ml": ml_chain, "parlog": parlog_chain}


class Visits:
    """Counts the calls of `Node.children()` (every walk of every consumer makes them)."""

    def __init__(self, monkeypatch):
        self.count = 0
        original = Node.children

        def counting(node):
            self.count += 1
            return original(node)
        monkeypatch.setattr(Node, "children", counting)


def _work(module: ir.Module) -> tuple[str, str]:
    assert verify(module) == []
    text = dumps(module)
    back = loads(text)  # the ML type check runs here
    assert back == module
    assert dumps(back) == text
    return text, module_text(module)


@pytest.mark.parametrize("dialect", sorted(CHAINS))
def test_a_chain_of_60_shared_nodes_verifies_prints_and_round_trips(dialect):
    module = CHAINS[dialect](60)
    text, printed = _work(module)
    assert len(text) < 200 * 60 + 2000
    assert printed.count(" = ") >= 59 and len(printed) < 100 * 60 + 1000
    back = loads(text)
    top = next(iter(back.rules.values()))
    shared = [x for x in ir.walk(top) if isinstance(x, (ml.Tuple, parlog.Struct))]
    assert len(shared) == 60 and all(x.children()[0] is x.children()[1] for x in shared)


@pytest.mark.parametrize("dialect", sorted(CHAINS))
@settings(max_examples=12, deadline=None)
@given(n=st.integers(1, 40))
def test_work_and_size_grow_linearly_with_distinct_nodes(dialect, n):
    with pytest.MonkeyPatch.context() as mp:
        visits = Visits(mp)
        text, printed = _work(CHAINS[dialect](n))
        per_node = visits.count / (n + 3)
    assert per_node < 60, per_node
    base, _ = _work(CHAINS[dialect](0))
    assert len(text) - len(base) <= 120 * n
    assert printed.count("\n") < 12


def test_the_hpg_text_holds_each_shared_node_once():
    doc = json.loads(dumps(ml_chain(3)))
    assert [x["kind"] for x in doc["nodes"]] == ["ml.Lit", "ml.Tuple", "ml.Tuple"]
    assert doc["nodes"][1]["items"] == [{"ref": 0}, {"ref": 0}]
    body = doc["rules"][0]["body"]
    assert body["exprs"][0]["items"] == [{"ref": 2}, {"ref": 2}]
    assert doc["version"] == 3 and doc["lines"] == [[1, "val it = ..."]]


def test_walk_visits_each_distinct_node_once_and_walk_tree_each_path():
    x = ml.Lit(1)
    pair = ml.Tuple((x, x))
    top = ml.Tuple((pair, pair, x))
    assert [n.kind for n in ir.walk(top)] == ["ml.Tuple", "ml.Tuple", "ml.Lit"]
    assert len(list(ir.walk_tree(top))) == 1 + 2 * 3 + 1
    counts = ir.use_counts((top,))
    assert counts[id(pair)] == 2 and counts[id(x)] == 3 and counts[id(top)] == 1


def test_transform_calls_its_function_once_per_distinct_node_and_keeps_sharing():
    x = ml.Lit(1)
    top = ml.Tuple((ml.Tuple((x, x)), ml.Tuple((x, x))))
    seen: list[Node] = []

    def bump(n):
        seen.append(n)
        return ml.Lit(n.value + 1) if isinstance(n, ml.Lit) else n
    out = ir.transform(top, bump)
    assert len(seen) == 4  # x once, the two inner tuples, the top
    a, b = out.items
    assert a.items[0] is a.items[1] is b.items[0] and a.items[0] == ml.Lit(2)


def test_fold_computes_once_per_distinct_node():
    t: parlog.Term = parlog.Atom("a")
    for _ in range(100):
        t = parlog.Struct("f", (t, t))
    paths = ir.fold(t, lambda n, kids: 1 + sum(kids))
    assert paths == 2 ** 101 - 1  # the tree's size, computed on the graph


def test_the_printer_names_a_shared_node_once():
    x = ml.Prim("int.+", (ml.Lit(1), ml.Lit(2)))
    text = "\n".join(ir_lines(ml.Tuple((x, x, ml.Lit(3)))))
    assert text == "(%1 = int.+(1, 2), %1, 3)"


def ir_lines(node):
    from hpgrem.printer import lines
    return lines(node)


def test_a_shared_leaf_prints_in_place():
    v = parlog.Var("X", 0)
    from hpgrem.printer import text
    assert text(parlog.Struct("f", (v, v))) == "f(X, X)"


# ---------------------------------------------------------------------------------------------
# References in untrusted .hpg files


def _doc(module=None) -> dict:
    return json.loads(dumps(module or ml_chain(2)))


def _refused(doc, *words):
    with pytest.raises(HpgFormatError) as e:
        loads(json.dumps(doc))
    for w in words:
        assert w in str(e.value), str(e.value)
    return str(e.value)


def test_a_forward_or_self_reference_is_refused():
    doc = _doc()
    doc["nodes"][1]["items"][0] = {"ref": 1}
    _refused(doc, "$.nodes[1].items[0]", "not an earlier entry")
    doc = _doc()
    doc["nodes"][0] = {"kind": "ml.Tuple", "items": [{"ref": 2}], "order": [], "span": ["f", 1, 1]}
    _refused(doc, "$.nodes[0].items[0]", "not an earlier entry")


def test_a_reference_to_a_node_of_the_wrong_kind_is_refused():
    doc = _doc(parlog_chain(2))
    doc["nodes"][0] = {"kind": "parlog.Call", "target": "true/0", "args": [], "span": ["f", 1, 1], "placement": None}
    _refused(doc, "$.nodes[1].args[0]", "a reference to a parlog.Call node, which cannot stand here")


def test_a_reference_stands_only_where_a_node_may():
    doc = _doc()
    doc["rules"][0]["key"] = {"ref": 0}
    _refused(doc, "$.rules[0].key", "expected str")
    doc = _doc()
    doc["nodes"][1]["span"] = {"ref": 0}
    _refused(doc, "$.nodes[1].span")
    doc = _doc()
    doc["nodes"].append({"ref": 0})
    _refused(doc, "$.nodes[2]", "expected a node")
    doc = _doc()
    doc["nodes"][1]["items"][0] = {"ref": 0, "kind": "ml.Lit"}
    _refused(doc, "$.nodes[1].items[0]")
    doc = _doc()
    doc["nodes"][1]["items"][0] = {"ref": "0"}
    _refused(doc, "$.nodes[1].items[0]", '{"ref": N}')


def test_the_source_lines_are_checked():
    doc = _doc()
    doc["lines"] = [[2, "b"], [1, "a"]]
    _refused(doc, "$.lines[1][0]", "rise")
    doc["lines"] = [[1, "x" * 10_000]]
    _refused(doc, "$.lines[0][1]", "at most")
    doc["lines"] = [["1", "a"]]
    _refused(doc, "$.lines[0][0]")
    doc["lines"] = {"1": "a"}
    _refused(doc, "$.lines")


def test_a_version_2_file_is_refused_as_older():
    doc = _doc()
    doc["version"] = 2
    _refused(doc, "version 2 is an older format", "compile the program again")


def test_an_unknown_dialect_is_refused_with_the_known_ones():
    doc = _doc()
    doc["dialect"] = "quantum"
    _refused(doc, "$.dialect", "unknown dialect 'quantum'", "ml, parlog, tensor")


# ---------------------------------------------------------------------------------------------
# Sharing changes cost, never meaning


def hash_consed(module: ir.Module) -> ir.Module:
    """The module with every two equal nodes of a rule made one object (the first one's span
    kept: spans do not take part in equality)."""
    def shape(value):
        if isinstance(value, Node):
            return id(value)
        if type(value) is tuple:
            return tuple(shape(v) for v in value)
        return type(value), repr(value)

    def cons(table: dict):
        def at(n: Node, kids: list) -> Node:
            new = n.rebuild(kids) if any(a is not b for a, b in zip(kids, n.children())) else n
            key = (type(new), tuple(shape(getattr(new, f.name)) for f in dataclasses.fields(new) if f.compare))
            return table.setdefault(key, new)
        return at
    rules = {k: ir.fold(r, cons({})) for k, r in module.rules.items()}
    return ir.Module(module.source, rules, module.entry, module.dialect, dict(module.annotations),
                     dict(module.source_lines))


def _shared(module: ir.Module) -> int:
    return sum(1 for n in ir.use_counts(list(module.rules.values())).values() if n > 1)


@pytest.mark.parametrize("program", ["ml/bst.sml", "ml/eval.sml", "ml/polymorphism.sml", "parlog/accumulate.par",
                                     "parlog/ackermann.par", "parlog/deep_guards.par", "parlog/deriv.par",
                                     "parlog/mergesort.par"])
@pytest.mark.parametrize("opt", [0, 2])
def test_a_hash_consed_module_means_what_the_tree_did(program, opt):
    """Every equal subexpression made one object: it verifies, passes the type check, writes a
    smaller `.hpg` that reads back to the same graph, and runs with the same output."""
    from hpgrem.driver.pipeline import Options, compile_file
    from pam.machine import Machine

    tree = compile_file(str(ROOT / "examples" / program), Options(opt=opt)).module
    dag = hash_consed(tree)
    assert _shared(dag) > _shared(tree)
    assert dag == tree and verify(dag) == []
    text = dumps(dag)
    assert len(text) < len(dumps(tree))
    back = loads(text)
    assert back.rules == tree.rules and back.annotations == tree.annotations and _shared(back) == _shared(dag)
    outputs = []
    for module in (tree, back):
        out = io.StringIO()
        Machine(module, stream=out).run()
        outputs.append(out.getvalue())
    assert outputs[0] == outputs[1] and outputs[0]


def test_the_rewriter_rewrites_a_shared_node_once_and_keeps_it_shared():
    from hpgrem.ir.rewrite import Rewriter

    def fold_add(n):
        a, b = n.args
        if n.op == "int.+" and isinstance(a, ml.Lit) and isinstance(b, ml.Lit):
            return ml.Lit(a.value + b.value)
        return None
    x: ml.Expr = ml.Prim("int.+", (ml.Lit(1), ml.Lit(1)))
    for _ in range(40):
        x = ml.Prim("int.+", (x, x))
    rw = Rewriter([(ml.Prim, fold_add)])
    assert rw.rewrite(x) == ml.Lit(2 ** 41)
    assert rw.fired["fold_add"] == 41


@pytest.mark.parametrize("name", ["ml", "parlog"])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_random_graphs_round_trip_with_their_sharing(name, data):
    """Random modules (tests/test_ir.py's generator) with every two equal nodes made one."""
    module = hash_consed(data.draw(modules(name)))
    text = dumps(module)
    try:
        back = loads(text)
    except HpgFormatError as e:
        # as in tests/test_ir.py: random nodes can make an ill-typed ML body (a closure of a
        # function of no arguments), which loading refuses, as it must
        assume(not str(e).startswith("ill-typed .hpg file"))
        raise
    assert dumps(back) == text and repr(back.rules) == repr(module.rules)  # repr: NaN is not == itself
    assert _shared(back) == _shared(module)


def test_a_compiled_module_keeps_the_source_lines_its_spans_name(tmp_path):
    from hpgrem.driver.pipeline import Options, compile_text
    from hpgrem.ir.core import MAX_SOURCE_LINE
    long_comment = "% " + "x" * 1000
    text = f"{long_comment}\nmode p(^).\np(X) <- X = 1. {long_comment}\n\nmain <- p(X), write(X), nl.\n"
    module = compile_text(text, str(tmp_path / "p.par"), Options(opt=1)).complete()
    source = text.splitlines()
    assert set(module.source_lines) == {3, 5}
    assert module.source_lines[5] == source[4]
    assert module.source_lines[3] == source[2][:MAX_SOURCE_LINE] and len(module.source_lines[3]) == MAX_SOURCE_LINE
    back = loads(dumps(module))
    assert back.source_lines == module.source_lines
    assert json.loads(dumps(module))["lines"] == [[3, source[2][:MAX_SOURCE_LINE]], [5, source[4]]]


def test_a_line_with_a_bare_carriage_return_round_trips(tmp_path):
    """Lines end at \\n only (as the front ends count them), so a \\r may stand inside one."""
    from hpgrem.driver.pipeline import Options, compile_text
    text = "mode p(^).\np(X) <- X = 1. % a\rb\nmain <- p(X), write(X), nl.\n"
    module = compile_text(text, str(tmp_path / "p.par"), Options(opt=1)).complete()
    assert module.source_lines[2] == "p(X) <- X = 1. % a\rb"
    assert loads(dumps(module)).source_lines == module.source_lines


# ---------------------------------------------------------------------------------------------
# Every ML pass and the ML code generator work on the graph (issue 27)


def ml_program_chain(n: int, shape: str) -> ir.Module:
    """`main` prints a value built by a chain of n shared nodes (2^n paths): "sum" adds
    x(k+1) = xk + xk from x0 = a + 1 (`a` a let-bound 1), printing 2^(n+1); "tuple" pairs
    x(k+1) = (xk, xk) from x0 = (a, a + 1) and takes the first field n times, then the second,
    printing 2."""
    a = ml.Local("a", S)
    x: ml.Expr = ml.Prim("int.+", (a, ml.Lit(1, S)), S) if shape == "sum" else ml.Tuple((a, ml.Prim("int.+", (a, ml.Lit(1, S)), S)), (), S)
    for _ in range(n):
        x = ml.Prim("int.+", (x, x), S) if shape == "sum" else ml.Tuple((x, x), (), S)
    if shape == "tuple":
        for _ in range(n):
            x = ml.Part(x, 0, S)
        x = ml.Part(x, 1, S)
    shown = ml.Prim("print", (ml.Prim("Int.toString", (x,), S),), S)
    body = ml.Let("a", ml.Lit(1, S), ml.Sequence((shown, ml.Lit(None, S)), S), S)
    main = ml.Function("ml:main", "main", (), 0, body, S)
    return ir.Module("dag.sml", {main.key: main}, ir.Entry(main.key, ()), "ml", {}, {1: "val it = ..."})


ML_PASSES = ("ml-flatten", "ml-grain", "ml-inline", "simplify", "prune-unreachable", "ml-switch", "ml-ranges",
             "ml-batch-counts", "ml-kinds")


class CodegenVisits:
    """Counts the expressions the ML code generator compiles (`FunctionCompiler._expr`) and the
    nodes the passes visit (`Node.children()`), apart."""

    def __init__(self, monkeypatch):
        from pam.ml import codegen
        self.children = self.exprs = 0
        children, expr = Node.children, codegen.FunctionCompiler._expr

        def counting_children(node):
            self.children += 1
            return children(node)

        def counting_expr(compiler, e):
            self.exprs += 1
            return expr(compiler, e)
        monkeypatch.setattr(Node, "children", counting_children)
        monkeypatch.setattr(codegen.FunctionCompiler, "_expr", counting_expr)


def _passes_and_code(n: int, shape: str, names: tuple[str, ...]) -> tuple[int, int, int, ir.Module]:
    """(nodes the passes visit, expressions compiled, characters of code) for the chain."""
    from hpgrem.passes import run_passes
    from pam.ml.codegen import generate

    with pytest.MonkeyPatch.context() as mp:
        visits = CodegenVisits(mp)
        module = run_passes(ml_program_chain(n, shape), names)
        passes = visits.children
        source, _, _ = generate(module)
    assert verify(module) == []
    return passes, visits.exprs, len(source), module


@pytest.mark.parametrize("shape", ["sum", "tuple"])
@pytest.mark.parametrize("names", [(), ("-O2",), *((name,) for name in ML_PASSES)], ids=lambda x: "+".join(x) or "O0")
def test_every_ml_pass_and_the_code_generator_work_linearly_on_a_chain_of_16_shared_nodes(shape, names):
    from hpgrem.passes import level
    from pam.machine import Machine

    names = level(2) if names == ("-O2",) else names
    small = _passes_and_code(8, shape, names)
    large = _passes_and_code(16, shape, names)
    # twice the distinct nodes (2^8 times the paths): at most about twice the work and code
    for a, b in zip(small[:3], large[:3]):
        assert b <= 2 * a + 400, (small[:3], large[:3])
    out = io.StringIO()
    Machine(large[3], stream=out).run()
    assert out.getvalue() == ("131072" if shape == "sum" else "2")


def test_the_code_generator_computes_a_long_shared_value_once_and_a_short_one_in_place():
    from hpgrem.passes import run_passes
    from pam.ml.codegen import generate

    source, _, _ = generate(run_passes(ml_program_chain(16, "tuple"), ()))
    assert source.count("_t") < 200 and len(source) < 5000
    a = ml.Local("a", S)
    pair = ml.Tuple((a, a), (), S)
    body = ml.Let("a", ml.Lit(1, S), ml.Tuple((pair, pair), (), S), S)
    main = ml.Function("ml:main", "main", (), 0, body, S)
    module = ir.Module("dag.sml", {main.key: main}, ir.Entry(main.key, ()), "ml", {}, {})
    source, _, _ = generate(run_passes(module, ()))
    assert "((v0, v0), (v0, v0))" in source  # written at each place, as copies would be


def test_a_shared_value_is_computed_again_where_what_it_reads_may_differ():
    """A shared node over a local: computed once where it is met again (a long one named), but
    again inside each branch (a name set in one may not be set in the other) and after its
    local is bound again (a graph may use one name in two places)."""
    from hpgrem.passes import level, run_passes
    from pam.machine import Machine
    from pam.ml.codegen import generate

    y = ml.Local("y", S)
    shared: ml.Expr = ml.Prim("int.+", (y, ml.Lit(1, S)), S)
    for _ in range(5):
        shared = ml.Tuple((shared, shared), (), S)

    def show(k: int) -> ml.Expr:
        x = ml.Tuple((shared, shared), (), S)
        for _ in range(6):
            x = ml.Part(x, 0, S)
        return ml.Let("y", ml.Lit(k, S), ml.Prim("print", (ml.Prim("Int.toString", (x,), S),), S), S)
    test = ml.Prim("int.<", (ml.Lit(3, S), ml.Lit(4, S)), S)
    body = ml.Sequence((show(1), show(10), ml.If(test, show(20), show(30), S), ml.If(test, show(40), show(50), S),
                        ml.Lit(None, S)), S)
    main = ml.Function("ml:main", "main", (), 0, body, S)
    module = ir.Module("dag.sml", {main.key: main}, ir.Entry(main.key, ()), "ml", {}, {})
    assert verify(module) == []
    for opt in (0, 2):
        out = io.StringIO()
        Machine(run_passes(module, level(opt)), stream=out).run()
        assert out.getvalue() == "2112141"
    source, _, _ = generate(run_passes(module, ()))
    assert source.count(" := v0 + 1)") == 6  # once per binding of y, not once per path


# ---------------------------------------------------------------------------------------------
# Every PARLOG pass and the PARLOG code generator work on the graph (issue 27)


def _pv(name: str, index: int) -> parlog.Var:
    return parlog.Var(name, index, S)


def _call(target: str, *args) -> parlog.Call:
    return parlog.Call(target, tuple(args), S)


def _shared_chain(n: int, leaf: parlog.Term) -> parlog.Term:
    """t0 = g(leaf), t(k+1) = f(tk, tk): n + 1 distinct structures, 2^n paths."""
    t: parlog.Term = parlog.Struct("g", (leaf,), S)
    for _ in range(n):
        t = parlog.Struct("f", (t, t), S)
    return t


def parlog_program_chain(n: int) -> ir.Module:
    """A PARLOG program whose clauses hold chains of n shared structures (2^n paths), each over
    a clause variable, printing 777:

        main <- X = t(n, V), V = 7, left(X, A), write(A), check(X, C), write(C),
                rep(2, V, L), L = [Y|_], left(Y, B), write(B).
        left(f(L, _), A) <- left(L, A).         left(g(V), A) <- A = V.
        check(t(n, W), C) <- C = W.             (a head pattern of shared nodes)
        rep(0, _, Out) <- Out = [].
        rep(N, T, [t(n, T)|Out]) <- N > 0 : N1 is N - 1, rep(N1, T, Out).  (a loop, a list built in place)
    """
    v, x, a, c, lst, y, b = (_pv(name, i) for i, name in enumerate("VXACLYB"))
    body = parlog.Conj(parlog.ConjOp.PARALLEL, (
        _call("=/2", x, _shared_chain(n, v)), _call("=/2", v, parlog.Int(7, S)), _call("left/2", x, a),
        _call("write/1", a), _call("check/2", x, c), _call("write/1", c),
        _call("rep/3", parlog.Int(2, S), v, lst), _call("=/2", lst, parlog.Struct("[|]", (y, _pv("_", 7)), S)),
        _call("left/2", y, b), _call("write/1", b)))
    main = parlog.Relation("main/0", "main", (), ((parlog.Clause((), (), body, 8, S),),), S)
    rest, last, leaf, out = _pv("L", 0), _pv("A", 1), _pv("V", 0), _pv("A", 1)
    left = parlog.Relation("left/2", "left", ("?", "^"), ((
        parlog.Clause((parlog.Struct("f", (rest, _pv("_", 2)), S), last), (), _call("left/2", rest, last), 3, S),
        parlog.Clause((parlog.Struct("g", (leaf,), S), out), (), _call("=/2", out, leaf), 2, S)),), S)
    w, found = _pv("W", 0), _pv("C", 1)
    check = parlog.Relation("check/2", "check", ("?", "^"), ((
        parlog.Clause((_shared_chain(n, w), found), (), _call("=/2", found, w), 2, S),),), S)
    count, item, tail, less = _pv("N", 0), _pv("T", 1), _pv("Out", 2), _pv("N1", 3)
    rep = parlog.Relation("rep/3", "rep", ("?", "?", "^"), ((
        parlog.Clause((parlog.Int(0, S), _pv("_", 0), _pv("Out", 1)), (), _call("=/2", _pv("Out", 1), parlog.Atom("[]", S)),
                      2, S),
        parlog.Clause((count, item, parlog.Struct("[|]", (_shared_chain(n, item), tail), S)),
                      (_call(">/2", count, parlog.Int(0, S)),),
                      parlog.Conj(parlog.ConjOp.PARALLEL, (
                          _call("is/2", less, parlog.Struct("-", (count, parlog.Int(1, S)), S)),
                          _call("rep/3", less, item, tail))), 4, S)),), S)
    rules = {r.key: r for r in (main, left, check, rep)}
    return ir.Module("dag.par", rules, ir.Entry(main.key, ()), "parlog", {}, {1: "main <- ..."})


PARLOG_PASSES = ("order-nodes", "index-rules", "tail-loop", "dest-passing", "lift", "schedule", "simplify",
                 "prune-unreachable", "aggregate", "granularity", "flow")


class TermVisits:
    """Counts the reads of a PARLOG structure's arguments (`Struct.args`: every walk of a term
    makes them, `children()` too) and the structures the code generator builds
    (`ClauseCode._build`)."""

    def __init__(self, monkeypatch):
        from pam.parlog import clause_code
        self.reads = self.builds = 0
        slot = parlog.Struct.__dict__["args"]
        build = clause_code.ClauseCode._build

        def read(node):
            self.reads += 1
            return slot.__get__(node)

        def counting_build(code, t, level):
            self.builds += 1
            return build(code, t, level)
        monkeypatch.setattr(parlog.Struct, "args", property(read, slot.__set__))
        monkeypatch.setattr(clause_code.ClauseCode, "_build", counting_build)


def _parlog_passes_and_code(n: int, names: tuple[str, ...], **flags) -> tuple[int, int, int, int, ir.Module]:
    """(structure reads of the passes, reads and builds of the code generator, characters of
    code) for the chain."""
    from hpgrem.passes import run_passes
    from pam.parlog.rules import RuleCompiler

    module = parlog_program_chain(n)
    assert verify(module) == []
    with pytest.MonkeyPatch.context() as mp:
        visits = TermVisits(mp)
        module = run_passes(module, names)
        passes, visits.reads = visits.reads, 0
        compiler = RuleCompiler(module, **flags)
    assert verify(module) == []
    return passes, visits.reads, visits.builds, len(compiler.source), module


@pytest.mark.parametrize("names", [(), ("-O2",), *((name,) for name in PARLOG_PASSES)], ids=lambda x: "+".join(x) or "O0")
def test_every_parlog_pass_and_the_code_generator_work_linearly_on_chains_of_16_shared_nodes(names):
    from hpgrem.passes import level
    from pam.machine import Machine

    names = level(2) if names == ("-O2",) else names
    small = _parlog_passes_and_code(8, names)
    large = _parlog_passes_and_code(16, names)
    # twice the distinct nodes (2^8 times the paths): at most about twice the work and code
    for a, b in zip(small[:4], large[:4]):
        assert b <= 2 * a + 400, (small[:4], large[:4])
    out = io.StringIO()
    Machine(large[4], stream=out).run()
    assert out.getvalue() == "777"


@pytest.mark.parametrize("flags", [{"counting": True}, {"tracing": True}], ids=["counting", "tracing"])
def test_the_counting_and_the_tracing_parlog_code_are_linear_too(flags):
    from hpgrem.passes import level
    from pam.machine import Machine
    from pam.parlog.rules import ParlogRuntime
    from pam.trace import Trace

    small = _parlog_passes_and_code(8, level(2), **flags)
    large = _parlog_passes_and_code(16, level(2), **flags)
    for a, b in zip(small[1:4], large[1:4]):
        assert b <= 2 * a + 400, (small[:4], large[:4])
    out = io.StringIO()
    if flags.get("tracing"):  # the machine makes the tracing runtime itself
        trace = Trace({"program": "dag.par", "language": "parlog", "pes": 1, "opt": 2})
        Machine(large[4], stream=out, trace=trace).run()
        assert trace.events
    else:
        Machine(large[4], stream=out, runtime=ParlogRuntime(large[4], **flags)).run()
    assert out.getvalue() == "777"


SEARCH_SOURCE = """left(g(A), A).
left(f(L, _), A) :- left(L, A).
mk(A) :- X = f(g(B), g(B)), B = 7, left(X, A).
main <- set(L, A, mk(A)) & write(L).
"""


def parlog_search_chain(n: int) -> ir.Module:
    """SEARCH_SOURCE with `mk`'s f(g(B), g(B)) made t(n, B): a chain of n shared structures
    that an all-solutions clause builds; it prints [7]."""
    from conftest import compile_source
    from hpgrem.passes import run_passes

    module = compile_source(SEARCH_SOURCE, "dag.par", opt=0)

    def chained(x):
        if isinstance(x, parlog.Struct) and x.name == "f" and isinstance(x.args[0], parlog.Struct):
            return _shared_chain(n, x.args[0].args[0])
        return x
    rules = {k: ir.transform(r, chained) if k == "mk/1" else r for k, r in module.rules.items()}
    assert rules["mk/1"] is not module.rules["mk/1"]
    return run_passes(dataclasses.replace(module, rules=rules, annotations={}), ())


def test_the_all_solutions_code_is_linear_in_a_chain_of_shared_nodes():
    from pam.machine import Machine
    from pam.parlog.rules import RuleCompiler

    sizes = []
    for n in (8, 16):
        module = parlog_search_chain(n)
        assert verify(module) == []
        with pytest.MonkeyPatch.context() as mp:
            visits = TermVisits(mp)
            compiler = RuleCompiler(module)
        sizes.append((visits.reads, len(compiler.searches.source)))
        out = io.StringIO()
        Machine(module, stream=out).run()
        assert out.getvalue() == "[7]"
    (a, b), (c, d) = sizes
    assert c <= 2 * a + 400 and d <= 2 * b + 400, sizes


def test_the_parlog_code_builds_a_shared_structure_once_and_matches_a_shared_pattern_once():
    from hpgrem.passes import run_passes
    from pam.parlog.rules import RuleCompiler

    source = RuleCompiler(run_passes(parlog_program_chain(16), ())).source
    main = source[source.index("def R0"):source.index("def R1")]
    assert main.count("Struct(") == 17  # t(16, V): g(V) and sixteen f(t, t), each built once
    check = source[source.index("def R2"):source.index("def R3")]
    assert check.count("match_eq(") == 16  # each f(s, s) of the pattern: its second place equals its first


@pytest.mark.parametrize("opt", [0, 2])
def test_a_shared_structure_built_in_a_branch_is_built_again_after_it(opt):
    """At -O0 `X is N + 1` builds its `N + 1` only where N is no integer (the evaluator's
    branch): the same node used after it is built again there, not read from the branch not
    taken (which would fail with an unset name)."""
    from conftest import compile_source
    from pam.machine import Machine
    from pam.parlog.rules import RuleCompiler

    text = "mode q(?, ^).\nq(N, R) <- X is N + 1, R = f(X, N + 1).\nmain <- q(3, R), write(R).\n"
    module = compile_source(text, "dag.par", opt=opt)
    dag = hash_consed(module)
    assert _shared(dag) > _shared(module)
    outputs = []
    for m in (module, dag):
        out = io.StringIO()
        Machine(m, stream=out).run()
        outputs.append(out.getvalue())
    assert outputs == ["f(4,3+1)", "f(4,3+1)"]
    if opt == 0:
        source = RuleCompiler(dag).source
        q = source[source.index(f"def {RuleCompiler(dag).proc_names['q/2']}("):]
        q = q[:q.index("return None")]
        assert q.count("Struct(K") == 3  # N + 1 in the branch and again after it, f(X, N + 1)


def _tensor_chain(n: int):
    """A tensor step whose logits are doubled n times, each `add` reading the one before twice."""
    from hpgrem.ir.tensor.build import GraphBuilder

    b = GraphBuilder()
    w = b.param("w", (4, 5), "float32")
    x = b.op("matmul", b.input("x", (2, 3, 4), "float32"), w)
    targets = b.input("targets", (2, 3), "int64")
    for _ in range(n):
        x = b.op("add", x, x)
    b.op_parts("cross_entropy", x, targets, names=("loss",), name="cross_entropy")
    return b.module("chain", outputs=("loss",))


def test_a_tensor_chain_stays_linear_through_autodiff_and_data_parallel():
    """The tensor dialect names each value once (a flat SSA list): the gradient of a chain of
    n shared values, and its data-parallel lowering (plain and ZeRO-2), grow by a constant per
    link, not per path."""
    from backend.layout import Layout
    from backend.tensor.layout import lower
    from hpgrem.passes import run_passes

    sizes = {}
    for n in (8, 16):
        step = run_passes(_tensor_chain(n), ["tensor-autodiff"], analyses=False)
        lowered = [lower(step, Layout(dp=2, zero=z)).stages[0] for z in (0, 2)]
        sizes[n] = [len(next(iter(m.rules.values())).values) for m in (step, *lowered)]
    for small, big in zip(sizes[8], sizes[16]):
        assert big - small <= 2 * 8, sizes  # two values a link at most: the add and its gradient
