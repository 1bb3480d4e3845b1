"""Dialect runtimes: what the machine needs from a language, and which runtime a module gets.

A runtime compiles a module's rules once (per machine) and loads them onto each PE. At load
time it registers, with the PE's Net (when there is one), the task kinds that may travel
(pam.task.TaskKind), the codecs of its values (pam.pack.Codec) and message kinds of its own
(Net.add_handler), and may append hooks (pam.driver). A runtime may keep counters of its own
(what its code does, for measuring passes): it names them in `counters`, and made with
`counting=True` its code counts them into each PE's `stats.counters` (`--count`). The machine
itself imports no language: the default runtime of a module is named, "module:Class", in its
dialect's record (hpgrem/ir/dialects.py) and imported when first needed.
"""

from __future__ import annotations

import importlib
from typing import Protocol

from hpgrem.ir.dialects import DIALECTS, UnknownDialect, record


class Runtime(Protocol):
    batch: int  # steps a simulated PE runs between looks at its messages
    encoding: str  # optional (UTF-8): how output becomes bytes on a byte stream (ML: a byte a char)
    counters: tuple[str, ...]  # optional (none): the names of the counters its code may keep
    traces: bool  # optional (False): made with `tracing=True`, its code reports its reductions

    def load(self, pe, timeout: float | None = None) -> dict:
        """The module's steps on `pe` by key (pam.step); registers what distribution needs.
        `timeout` is the run's time limit, for code that loops without returning to the PE."""

    def entry_task(self, pe, outputs: list):
        """The task that runs the module's entry on `pe`, binding `outputs` (fresh variables)."""

    def show(self, value, names: dict) -> str:
        """The text of an output variable's value in the final bindings (`Name = Text`)."""


def runtime_for(module, counting: bool = False, tracing: bool = False) -> Runtime:
    """The default runtime of `module`, by its language; with `counting`, one whose code counts
    its `counters` (a runtime that declares none ignores it); with `tracing`, one whose code
    reports its reductions to the PE's tracer (pam.trace), if it has such code (`traces = True`:
    made with `tracing=True`); any other runs its plain code, each step reported as one rewrite."""
    cls = runtime_class(module.language)
    options = {}
    if counting and counters_of(cls):
        options["counting"] = True
    if tracing and getattr(cls, "traces", False):
        options["tracing"] = True
    return cls(module, **options)


class UnknownRuntime(LookupError):
    """A module of a language that no runtime is registered for."""


def runtime_class(language: str) -> type:
    """The runtime class of `language`, from its dialect's record (hpgrem/ir/dialects.py);
    UnknownRuntime, naming the known ones, if it has none."""
    try:
        found = record(language)
    except UnknownDialect:
        found = None
    entry = None if found is None else found.runtime
    if entry is None:
        known = ", ".join(sorted(d.name for d in DIALECTS.values() if d.runtime is not None))
        raise UnknownRuntime(f"no runtime for modules of dialect {language!r} (runtimes: {known}; a dialect "
                             "names its runtime in its record: hpgrem.ir.dialects.Dialect)")
    if isinstance(entry, str):
        module_name, name = entry.split(":")
        entry = getattr(importlib.import_module(module_name), name)
    return entry


def counters_of(runtime) -> tuple[str, ...]:
    """The names of a runtime's (or runtime class's) own counters."""
    return tuple(getattr(runtime, "counters", ()))
