"""HPGREM: the heterogeneous graph-rewriting intermediate form (docs/ir.md).

The core (`hpgrem.ir.core`: spans, the node protocol, the walks, rules, the module) and the
dialect table (`hpgrem.ir.dialects`) are importable from here. Each dialect is a folder of its
own (`hpgrem.ir.parlog`, `hpgrem.ir.ml`, `hpgrem.ir.tensor`): its `__init__` holds the node kinds,
its `dialect.py` the hooks the verifier, the `.hpg` reader and the printer call. Importing the
core loads no dialect.
"""

from hpgrem.ir.core import (IN, MODULE_FACTS, NL, NO_SPAN, NODE_KINDS, OUT, Entry, Inline, JsonPath, Module, Node,
                            Rule, Span, check_value, fold, inline, schema, source_lines, transform, use_counts, walk,
                            walk_all, walk_paths, walk_tree)
from hpgrem.ir.dialects import DIALECTS, Dialect, DialectSpec, UnknownDialect, dialect, register_dialect

__all__ = [name for name in dir() if not name.startswith("_")]
