"""Dialect runtimes: what the machine needs from a language, and which runtime a module gets.

A runtime compiles a module's rules once (per machine) and loads them onto each PE. At load
time it registers, with the PE's Net (when there is one), the task kinds that may travel
(pam.task.TaskKind) and the codecs of its values (pam.pack.Codec), and may append hooks
(pam.driver). The machine itself imports no language: the default runtime of a module is found
by its language in a lazy table, as the compiler's passes are.
"""

from __future__ import annotations

import importlib
from typing import Protocol

# language -> "module:Class"; the class is made with the module it runs.
RUNTIMES: dict[str, str] = {
    "parlog": "pam.parlog.rules:ParlogRuntime",
    "ml": "pam.ml.loader:MLRuntime",
}


class Runtime(Protocol):
    batch: int  # steps a simulated PE runs between looks at its messages
    encoding: str  # optional (UTF-8): how output becomes bytes on a byte stream (ML: a byte a char)

    def load(self, pe, timeout: float | None = None) -> dict:
        """The module's steps on `pe` by key (pam.step); registers what distribution needs.
        `timeout` is the run's time limit, for code that loops without returning to the PE."""

    def entry_task(self, pe, outputs: list):
        """The task that runs the module's entry on `pe`, binding `outputs` (fresh variables)."""

    def show(self, value, names: dict) -> str:
        """The text of an output variable's value in the final bindings (`Name = Text`)."""


def runtime_for(module) -> Runtime:
    """The default runtime of `module`, by its language."""
    module_name, cls = RUNTIMES[module.language].split(":")
    return getattr(importlib.import_module(module_name), cls)(module)
