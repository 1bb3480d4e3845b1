"""HPGREM: the heterogeneous graph-rewriting intermediate form (docs/ir.md).

One core (`hpgrem.ir.core`: spans, the node protocol, rules, annotations, the module) and one
module per dialect (`parlog`, `ml`), each registering its node kinds. Every name is importable
from here.
"""

from hpgrem.ir.core import (IN, MODULE_FACTS, NL, NO_SPAN, NODE_KINDS, OUT, Dialect, Entry, Inline, Module,
                            Node, Rule, Span, check_value, inline, schema, transform, walk)
from hpgrem.ir.ml import (INT_MAX, INT_MIN, Apply, BasisException, CallKnown, ConRep, Construct, Expr, Function,
                          Global, Handle, If, Let, Lit, Local, MakeClosure, NewException, Packet, Par, Part,
                          PartStep, Prim, Raise, Sequence, SetGlobal, Switch, SwitchTest, Tuple, While,
                          rename_locals, substitute_locals)
from hpgrem.ir.parlog import (CONS, NIL, Atom, Body, Call, Clause, Conj, ConjOp, Float, Int, Relation, Struct,
                              Term, Var, calls_in, make_list, quote_atom, relation_key, renumber,
                              substitute_vars, term_vars)

__all__ = [name for name in dir() if not name.startswith("_")]
