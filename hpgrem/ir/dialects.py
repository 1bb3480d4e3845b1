"""The dialect table: every dialect a module may be written in, and what each needs checked.

A dialect is a Python module that registers its node kinds (`@node("name")`, hpgrem/ir/core.py)
and a `DialectSpec`: its name and its hooks, the checks that only it knows (what the machine
takes for granted of its nodes, its types, what may be the entry). The verifier, the `.hpg`
reader and writer and the printer find a module's dialect here by name and call its hooks;
none of them names a dialect. The table is lazy (name -> "module:attribute", as the pass and
runtime tables are): a dialect's module is imported when a module of that dialect, or one of
its node kinds, is first met.

A dialect from outside the project (a test file, a plug-in) registers itself at import with
`register_dialect(spec)`, and its runtime with `pam.runtimes.register_runtime`. A process that
meets a dialect the table lacks (a `.hpg` file read by the command line, each rank under
`mpiexec`) first imports the plug-ins named in the environment variable HPGREM_PLUGINS (Python
files or module names, separated by the path separator). One module holds rules of one dialect;
a program of two dialects is two modules.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from hpgrem.ir.core import NODE_KINDS, Node, Rule

if TYPE_CHECKING:
    from hpgrem.ir.core import Module

DIALECTS: dict[str, str | DialectSpec] = {
    "parlog": "hpgrem.ir.parlog.dialect:DIALECT",
    "ml": "hpgrem.ir.ml.dialect:DIALECT",
    "tensor": "hpgrem.ir.tensor.dialect:DIALECT",
}
"""Dialect name -> its `DialectSpec`, or "module:attribute" where it is found (imported once)."""


class UnknownDialect(ValueError):
    """A dialect name that the table does not hold."""


@dataclass(frozen=True, slots=True)
class DialectSpec:
    """A dialect's name and its hooks (each optional: a dialect without one has nothing of the
    kind to check).

    - `representation(rule, path, module)`: problems of `rule` (at JSON path `path`, such as
      `$.rules[3]`) that the structural checks cannot see and the machine takes for granted,
      each as `at PATH: what`; run on a rule that passed the structural checks and its own
      `check(module)`.
    - `module_problems(module)`: problems of the module as a whole (ML: a global read but never set).
    - `entry_problem(module, target)`: why the rule `target` cannot be the entry, or None.
    - `type_problem(module)`: for a module that verifies, None when it has types, else where
      and why it has none (the `.hpg` reader refuses such a file).
    """

    name: str
    representation: Callable[[Rule, str, Module], Iterable[str]] | None = None
    module_problems: Callable[[Module], Iterable[str]] | None = None
    entry_problem: Callable[[Module, Rule], str | None] | None = None
    type_problem: Callable[[Module], str | None] | None = None

    def kinds(self) -> dict[str, type[Node]]:
        """The dialect's node kinds by qualified name."""
        return {k: cls for k, cls in NODE_KINDS.items() if cls.dialect == self.name}

    def rule_kinds(self) -> dict[str, type[Node]]:
        """The dialect's rule kinds (what a module of the dialect maps its keys to)."""
        return {k: cls for k, cls in self.kinds().items() if issubclass(cls, Rule)}


def register_dialect(spec: DialectSpec | str, where: str | None = None) -> None:
    """Add a dialect to the table: a `DialectSpec` (its node kinds registered already), or a
    name and the "module:attribute" of its spec, imported when first needed. Registering the
    same thing again is harmless (a module imported twice); another spec for a taken name is
    a ValueError."""
    name, value = (spec.name, spec) if isinstance(spec, DialectSpec) else (spec, where)
    if not isinstance(value, (DialectSpec, str)):
        raise TypeError("register_dialect takes a DialectSpec, or a name and 'module:attribute'")
    old = DIALECTS.get(name)
    if old is not None and old is not value and old != value:
        if not (isinstance(old, str) and isinstance(value, DialectSpec) and _load(old) is value):
            raise ValueError(f"dialect {name!r} is registered already")
    DIALECTS[name] = value


PLUGINS = "HPGREM_PLUGINS"
_plugins_loaded = False


def load_plugins() -> None:
    """Import, once, the plug-ins HPGREM_PLUGINS names: each a Python file (imported under its
    stem) or a module name; they register their dialects and runtimes as they are imported."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for entry in filter(None, os.environ.get(PLUGINS, "").split(os.pathsep)):
        if not entry.endswith(".py"):
            importlib.import_module(entry)
            continue
        path = Path(entry).resolve()
        if any(getattr(m, "__file__", None) and Path(m.__file__).resolve() == path for m in list(sys.modules.values())):
            continue  # imported already (a test file under pytest)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"{PLUGINS}: {entry} is not a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        spec.loader.exec_module(module)


def dialect(name: str) -> DialectSpec:
    """The spec of dialect `name` (its module imported, so its node kinds are registered);
    UnknownDialect if the table has none of that name, even after the plug-ins are loaded."""
    if type(name) is str and name not in DIALECTS:
        load_plugins()
    value = DIALECTS.get(name) if type(name) is str else None
    if value is None:
        raise UnknownDialect(f"unknown dialect {name!r} (dialects: {', '.join(sorted(DIALECTS))})")
    if isinstance(value, str):
        value = DIALECTS[name] = _load(value)
    return value


def _load(where: str) -> DialectSpec:
    module_name, attribute = where.split(":")
    return getattr(importlib.import_module(module_name), attribute)


def node_kind(kind: str) -> type[Node] | None:
    """The node class of a qualified kind (`ml.Let`), its dialect loaded if need be; None for
    a kind no dialect has."""
    cls = NODE_KINDS.get(kind)
    if cls is None and "." in kind:
        try:
            dialect(kind.split(".", 1)[0])
        except UnknownDialect:
            return None
        cls = NODE_KINDS.get(kind)
    return cls
