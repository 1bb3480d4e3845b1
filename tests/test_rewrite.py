"""The rewrite driver, the substitution helpers and the `simplify` pass written with them."""

from __future__ import annotations

import io

import pytest

from hpgrem import ir
from hpgrem.ir.rewrite import Rewriter
from hpgrem.passes.simplify import Simplify
from hpgrem.verify import verify

S = ir.Span("t", 1, 1)


def test_rules_apply_bottom_up_to_a_fixpoint_and_are_counted():
    def fold_add(e: ir.Prim):  # (a + b) with both literal -> a literal
        if e.op == "int.+" and all(isinstance(a, ir.Lit) for a in e.args):
            return ir.Lit(e.args[0].value + e.args[1].value)
        return None

    nested = ir.Prim("int.+", (ir.Prim("int.+", (ir.Lit(1), ir.Lit(2))), ir.Prim("int.+", (ir.Lit(3), ir.Lit(4)))))
    r = Rewriter([(ir.Prim, fold_add)])
    assert r.rewrite(nested) == ir.Lit(10)
    assert r.fired == {"fold_add": 3}


def test_a_table_that_never_settles_is_reported():
    flip = Rewriter([(ir.Lit, lambda e: ir.Lit(1 - e.value))])
    with pytest.raises(RuntimeError, match="fixpoint"):
        flip.rewrite(ir.Lit(0))


def test_substitute_and_renumber_clause_variables():
    x, y, z = ir.Var("X", 0), ir.Var("Y", 1), ir.Var("Z", 2)
    clause = ir.Clause((x, z), (), ir.Call("p/2", (z, ir.Int(1)), S), 3, S)
    renumbered = ir.renumber(clause)
    assert renumbered.nvars == 2 and renumbered.head == (ir.Var("X", 0), ir.Var("Z", 1))
    assert ir.substitute_vars(clause, {2: ir.Atom("a")}).body.args[0] == ir.Atom("a")
    assert y not in list(ir.walk(clause))


def test_substitute_locals():
    body = ir.Prim("int.+", (ir.Local("x"), ir.Local("y")))
    assert ir.substitute_locals(body, {"x": ir.Lit(1)}) == ir.Prim("int.+", (ir.Lit(1), ir.Local("y")))


def _clause_body(body) -> ir.Module:
    rel = ir.Relation("main/0", "main", (), ((ir.Clause((), (), body, 0, S),),), S)
    return ir.Module("t", {"main/0": rel}, ir.Entry("main/0", ()))


def test_simplify_splices_conjunctions_and_drops_true():
    a, b, c, d = (ir.Call("write/1", (ir.Atom(n),), S) for n in "abcd")
    true = ir.Call("true/0", (), S)
    body = ir.Conj(ir.ConjOp.PARALLEL, (a, ir.Conj(ir.ConjOp.PARALLEL, (b, true, c)),
                                        ir.Conj(ir.ConjOp.SEQUENTIAL, (d, true))))
    p = Simplify()
    out = p.apply(_clause_body(body))
    assert out.rules["main/0"].groups[0][0].body == ir.Conj(ir.ConjOp.PARALLEL, (a, b, c, d))
    assert p.fired == {"splice_conjunctions": 1, "drop_true": 2}
    assert verify(out) == []


def test_simplify_ml_keeps_effects_and_order():
    seq = ir.Sequence((ir.Lit(1), ir.Prim("print", (ir.Lit("a"),)),
                       ir.Sequence((ir.Local("u"), ir.Prim("print", (ir.Lit("b"),)))), ir.Lit(None)))
    body = ir.Let("u", ir.Lit(None), ir.If(ir.Construct("bool", 1, None), seq, ir.Lit(None)))
    fn = ir.Function("ml:main", "main", (), 0, body, S)
    p = Simplify()
    out = p.apply(ir.Module("t", {fn.key: fn}, ir.Entry(fn.key, ()), "ml"))
    assert out.rules[fn.key].body == ir.Sequence((ir.Prim("print", (ir.Lit("a"),)),
                                                  ir.Prim("print", (ir.Lit("b"),)), ir.Lit(None)))
    assert p.fired == {"propagate_copies": 1, "constant_if": 1, "flatten_sequence": 2}
    from hpgrem.passes import run_passes
    from pam.machine import Machine
    stream = io.StringIO()
    Machine(run_passes(out, []), stream=stream).run()  # the machine reads the analyses' annotations
    assert stream.getvalue() == "ab"
