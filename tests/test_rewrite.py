"""The rewrite driver, the substitution helpers and the `simplify` pass written with them."""

from __future__ import annotations

import io

import pytest

from hpgrem import ir

from hpgrem.ir import ml

from hpgrem.ir import parlog
from hpgrem.ir.rewrite import Rewriter
from hpgrem.passes.simplify import Simplify
from hpgrem.verify import verify

S = ir.Span("t", 1, 1)


def test_rules_apply_bottom_up_to_a_fixpoint_and_are_counted():
    def fold_add(e: ml.Prim):  # (a + b) with both literal -> a literal
        if e.op == "int.+" and all(isinstance(a, ml.Lit) for a in e.args):
            return ml.Lit(e.args[0].value + e.args[1].value)
        return None

    nested = ml.Prim("int.+", (ml.Prim("int.+", (ml.Lit(1), ml.Lit(2))), ml.Prim("int.+", (ml.Lit(3), ml.Lit(4)))))
    r = Rewriter([(ml.Prim, fold_add)])
    assert r.rewrite(nested) == ml.Lit(10)
    assert r.fired == {"fold_add": 3}


def test_a_table_that_never_settles_is_reported():
    flip = Rewriter([(ml.Lit, lambda e: ml.Lit(1 - e.value))])
    with pytest.raises(RuntimeError, match="fixpoint"):
        flip.rewrite(ml.Lit(0))


def test_substitute_and_renumber_clause_variables():
    x, y, z = parlog.Var("X", 0), parlog.Var("Y", 1), parlog.Var("Z", 2)
    clause = parlog.Clause((x, z), (), parlog.Call("p/2", (z, parlog.Int(1)), S), 3, S)
    renumbered = parlog.renumber(clause)
    assert renumbered.nvars == 2 and renumbered.head == (parlog.Var("X", 0), parlog.Var("Z", 1))
    assert parlog.substitute_vars(clause, {2: parlog.Atom("a")}).body.args[0] == parlog.Atom("a")
    assert y not in list(ir.walk(clause))


def test_substitute_locals():
    body = ml.Prim("int.+", (ml.Local("x"), ml.Local("y")))
    assert ml.substitute_locals(body, {"x": ml.Lit(1)}) == ml.Prim("int.+", (ml.Lit(1), ml.Local("y")))


def _clause_body(body) -> ir.Module:
    rel = parlog.Relation("main/0", "main", (), ((parlog.Clause((), (), body, 0, S),),), S)
    return ir.Module("t", {"main/0": rel}, ir.Entry("main/0", ()), "parlog")


def test_simplify_splices_conjunctions_and_drops_true():
    a, b, c, d = (parlog.Call("write/1", (parlog.Atom(n),), S) for n in "abcd")
    true = parlog.Call("true/0", (), S)
    body = parlog.Conj(parlog.ConjOp.PARALLEL, (a, parlog.Conj(parlog.ConjOp.PARALLEL, (b, true, c)),
                                        parlog.Conj(parlog.ConjOp.SEQUENTIAL, (d, true))))
    p = Simplify()
    out = p.apply(_clause_body(body))
    assert out.rules["main/0"].groups[0][0].body == parlog.Conj(parlog.ConjOp.PARALLEL, (a, b, c, d))
    assert p.fired == {"splice_conjunctions": 1, "drop_true": 2}
    assert verify(out) == []


def test_simplify_ml_keeps_effects_and_order():
    seq = ml.Sequence((ml.Lit(1), ml.Prim("print", (ml.Lit("a"),)),
                       ml.Sequence((ml.Local("u"), ml.Prim("print", (ml.Lit("b"),)))), ml.Lit(None)))
    body = ml.Let("u", ml.Lit(None), ml.If(ml.Construct("bool", 1, None), seq, ml.Lit(None)))
    fn = ml.Function("ml:main", "main", (), 0, body, S)
    p = Simplify()
    out = p.apply(ir.Module("t", {fn.key: fn}, ir.Entry(fn.key, ()), "ml"))
    assert out.rules[fn.key].body == ml.Sequence((ml.Prim("print", (ml.Lit("a"),)),
                                                  ml.Prim("print", (ml.Lit("b"),)), ml.Lit(None)))
    assert p.fired == {"propagate_copies": 1, "constant_if": 1, "flatten_sequence": 2}
    from hpgrem.passes import run_passes
    from pam.machine import Machine
    stream = io.StringIO()
    Machine(run_passes(out, []), stream=stream).run()  # the machine reads the analyses' annotations
    assert stream.getvalue() == "ab"
