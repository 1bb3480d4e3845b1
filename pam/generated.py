"""Generated code, loaded: the one way a runtime turns the Python it generated into steps.

A runtime generates Python source from a validated module (never from an input's raw text:
pam/ml/codegen.py, pam/parlog/relation_code.py, pam/parlog/search.py). `GeneratedCode` compiles
it once, under a file name of its own, and registers it for `--profile` (pam/profile.py:
`names(*keep)` names its functions); `run(namespace)` executes it in a namespace of a PE's own
(its runtime's values and functions), as often as there are PEs, and returns the namespace.
"""

from __future__ import annotations

from pam.profile import register_code


class GeneratedCode:
    __slots__ = ("source", "filename", "code")

    def __init__(self, source: str, filename: str, names, *keep) -> None:
        self.source = source
        self.filename = filename
        self.code = compile(source, filename, "exec")
        register_code(filename, names, *keep)

    def run(self, namespace: dict) -> dict:
        exec(self.code, namespace)
        return namespace


__all__ = ["GeneratedCode"]
