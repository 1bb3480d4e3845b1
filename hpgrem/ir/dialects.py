"""The dialect table: every dialect a module may be written in, one `Dialect` record each.

A record names the dialect's pieces across the layers, by "module:attribute" (nothing is
imported until it is needed, and this layer imports no higher one): its `DialectSpec` (its
hooks, in hpgrem/ir/<name>/dialect.py), the front end that compiles its source files and their
extensions (frontend/), the passes it brings (hpgrem/passes/; the built-in dialects' passes are
the pass manager's own table, in the order -O2 runs them) and its runtime (pam/). The front ends'
lookup by extension (frontend.front_end_for), the runtimes' (pam.runtimes.runtime_class) and the
pass manager's (hpgrem.passes) read this one table.

A dialect's module registers its node kinds (`@node("name")`, hpgrem/ir/core.py) and a
`DialectSpec`: its name and its hooks, the checks that only it knows (what the machine takes
for granted of its nodes, its types, what may be the entry). The verifier, the `.hpg` reader
and writer and the printer find a module's dialect here by name and call its hooks; none of
them names a dialect. A dialect's spec is imported when a module of that dialect, or one of its
node kinds, is first met.

A dialect from outside the project (a test file, a plug-in) registers once, at import, with
`register_dialect(Dialect(...))`: its spec, front end, passes and runtime in one record. A
process that meets a dialect or a file extension the table lacks (a `.hpg` file read by the
command line, each rank under `mpiexec`) first imports the plug-ins named in the environment
variable HPGREM_PLUGINS (Python files or module names, separated by the path separator). One
module holds rules of one dialect; a program of two dialects is two modules.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from hpgrem.ir.core import NODE_KINDS, Node, Rule

if TYPE_CHECKING:
    from hpgrem.ir.core import Module

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


@dataclass(frozen=True)
class Dialect:
    """One dialect's pieces across the layers. `spec` is its DialectSpec or where it is
    ("module:attribute"); `front_end` the module whose `compile_program(text, file, goal)`
    compiles its source files, whose extensions are `extensions` (lowercase, `.toy`), `goals`
    whether `--goal` may replace a program's entry; `passes` and `analyses` the passes it
    brings, (name, class or "module:Class") each, in the order -O2 runs them; `runtime` its
    runtime class or "module:Class". Each piece is optional: a dialect without a front end is
    read from `.hpg` files, one without a runtime is compiled but not run."""

    name: str
    spec: str | DialectSpec
    front_end: str | None = None
    extensions: tuple[str, ...] = ()
    goals: bool = False
    passes: tuple[tuple[str, str | type], ...] = ()
    analyses: tuple[tuple[str, str | type], ...] = ()
    runtime: str | type | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.spec, (DialectSpec, str)):
            raise TypeError("a Dialect's spec is a DialectSpec or 'module:attribute'")
        for ext in self.extensions:
            if not (isinstance(ext, str) and ext.startswith(".") and len(ext) > 1 and ext == ext.lower()) \
                    or ext == ".hpg":
                raise ValueError(f"a file extension is a lowercase '.name' other than .hpg, not {ext!r}")
        if self.extensions and self.front_end is None:
            raise ValueError(f"dialect {self.name!r} names extensions but no front end")
        for pair in (*self.passes, *self.analyses):
            if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)
                    and isinstance(pair[1], (str, type))):
                raise TypeError("a dialect's passes are (name, class or 'module:Class') pairs")


DIALECTS: dict[str, Dialect] = {
    "parlog": Dialect("parlog", "hpgrem.ir.parlog.dialect:DIALECT", "frontend.parlog", (".par", ".parlog"),
                      goals=True, runtime="pam.parlog.rules:ParlogRuntime"),
    "ml": Dialect("ml", "hpgrem.ir.ml.dialect:DIALECT", "frontend.ml", (".sml", ".ml"),
                  runtime="pam.ml.loader:MLRuntime"),
    "tensor": Dialect("tensor", "hpgrem.ir.tensor.dialect:DIALECT", runtime="pam.tensor.runtime:TensorRuntime"),
}
"""Dialect name -> its record (the built-in dialects' passes are the pass manager's own table)."""


def register_dialect(record: Dialect | DialectSpec) -> None:
    """Add a dialect to the table: its record (or a DialectSpec alone: a dialect with no front
    end, passes or runtime). Registering the same thing again is harmless (a module imported
    twice); another dialect of a taken name, or an extension another dialect has, is a
    ValueError."""
    if isinstance(record, DialectSpec):
        record = Dialect(record.name, record)
    if not isinstance(record, Dialect):
        raise TypeError("register_dialect takes a Dialect record or a DialectSpec")
    old = DIALECTS.get(record.name)
    if old is not None and old != record:
        raise ValueError(f"dialect {record.name!r} is registered already")
    for other in DIALECTS.values():
        taken = set(other.extensions) & set(record.extensions)
        if other.name != record.name and taken:
            raise ValueError(f"the file extension {sorted(taken)[0]!r} is taken by dialect {other.name!r}")
    DIALECTS[record.name] = record


def record(name: str) -> Dialect:
    """The record of dialect `name`; UnknownDialect if the table has none, even after the
    plug-ins are loaded."""
    if type(name) is str and name not in DIALECTS:
        load_plugins()
    found = DIALECTS.get(name) if type(name) is str else None
    if found is None:
        raise UnknownDialect(f"unknown dialect {name!r} (dialects: {', '.join(sorted(DIALECTS))})")
    return found


def of_extension(ext: str) -> Dialect | None:
    """The dialect whose source files have the extension `ext` (plug-ins loaded if need be)."""
    def find() -> Dialect | None:
        return next((d for d in DIALECTS.values() if ext in d.extensions), None)

    found = find()
    if found is None:
        load_plugins()
        found = find()
    return found


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
    found = record(name)
    if isinstance(found.spec, str):
        spec = _load(found.spec)
        DIALECTS[name] = found = replace(found, spec=spec)
    return found.spec


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
