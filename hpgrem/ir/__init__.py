"""HPGREM: the heterogeneous graph-rewriting intermediate form (docs/ir.md).

One core (`hpgrem.ir.core`: spans, the node protocol, the walks, rules, the module), the dialect
table (`hpgrem.ir.dialects`) and one module per dialect (`parlog`, `ml`), each registering its
node kinds; each dialect's checks are in `parlog_dialect` and `ml_dialect` (found through the
table). Every name of the core and the two dialects' node modules is importable from here.
"""

from hpgrem.ir.core import (IN, MODULE_FACTS, NL, NO_SPAN, NODE_KINDS, OUT, Entry, Inline, JsonPath, Module, Node,
                            Rule, Span, check_value, fold, inline, schema, source_lines, transform, use_counts, walk,
                            walk_all, walk_paths, walk_tree)
from hpgrem.ir.dialects import DIALECTS, DialectSpec, UnknownDialect, dialect, register_dialect
from hpgrem.ir.ml import (INT_MAX, INT_MIN, Apply, BasisException, CallKnown, ConRep, Construct, Expr, Function,
                          Global, Handle, If, Let, Lit, Local, MakeClosure, NewException, Packet, Par, Part,
                          PartStep, Prim, Raise, Sequence, SetGlobal, Switch, SwitchTest, Tuple, While,
                          free_locals, rename_locals, substitute_locals)
from hpgrem.ir.parlog import (CONS, CONSTRUCTS, NIL, SEARCH, AllSolutions, Atom, Body, Call, Clause, Conj, ConjOp, Float, Int, Relation, Struct,
                              Term, Var, calls_in, make_list, quote_atom, relation_key, renumber,
                              substitute_vars, term_vars)

__all__ = [name for name in dir() if not name.startswith("_")]
