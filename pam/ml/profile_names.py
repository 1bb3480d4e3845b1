"""How ML code is named in a profile (pam/profile.py, docs/profile.md): the loader registers
`code_names` for the source it compiles."""

from __future__ import annotations

import os

from pam.profile import CodeNames, Where, machine

HERE = os.path.dirname(os.path.abspath(__file__))
# this dialect's files by the part of the machine they are; None: charged to their callers
# (the loader's and the values' helpers are the generated code's arithmetic and closures)
FILES = {"task.py": "scheduler", "codecs.py": "distribution", "tracing.py": "trace",
         "codegen.py": "exceptions",  # at run time, only its Regions: what an exception left unrun
         "loader.py": None, "values.py": None, "basis.py": None}


def code_names(analysis) -> CodeNames:
    """Every Python function generated for ML function F has a name that starts with F's
    `FunctionInfo.py` (pam/ml/annotations.py: `f3`; `f3_d`, `f3_b`, `f3_h1`, ...)."""
    infos = analysis.info
    prefixes = {}
    for key, info in infos.items():
        base = infos.get(curried_base(key), info)  # a curried function's parts are the function
        prefixes[info.py] = where(base.key, base.fn)
    return CodeNames(prefixes, basis_functions(), {os.path.join(HERE, f): part for f, part in FILES.items()})


def curried_base(key: str) -> str:
    """`add@24:5#32/curry1` -> `add@24:5#32`: the function that a part was split from."""
    hash_at = key.find("#")
    slash = key.find("/", hash_at + 1) if hash_at >= 0 else -1
    return key[:slash] if slash >= 0 else key


def where(key: str, fn) -> Where:
    """An ML function as the program names it; the basis's (the prelude's, written in ML, and
    the wrappers of those written in Python) as `(basis: NAME)`; the top-level declarations as
    `<top level>`."""
    span = fn.span
    if span.file == "<prelude>":
        return Where(f"(basis: {fn.name})", span.file, span.line, span.col)
    if key.startswith("basis:"):  # a wrapper, made where the program uses the function
        return Where(f"(basis: {fn.name})", kind="basis")
    if key == "ml:main":
        return Where("<top level>", span.file, span.line, span.col)
    return Where(fn.name, span.file, span.line, span.col)


def basis_functions() -> dict:
    """The basis functions written in Python (pam/ml/basis.py) by their code, as `(basis: NAME)`
    (an overloaded operator by its name: `+`); and the loader's functions that are the machine's:
    `print`'s writer, the settling of an exception's counts, the look at the limits."""
    from pam.ml import basis, loader
    out: dict = {}
    for (name, _), fn in basis.OVERLOADED.items():
        out.setdefault(fn.__code__, Where(f"(basis: {name})", kind="basis"))
    for name, fn in basis.PRIMITIVES.items():
        if hasattr(fn, "__code__"):
            out.setdefault(fn.__code__, Where(f"(basis: {name})", kind="basis"))
    out[loader._printer(None).__code__] = machine("output")
    out[loader.make_settle([0], {}).__code__] = machine("exceptions")
    out[loader.drop_traceback.__code__] = machine("exceptions")
    out[loader._ticker(None, [0], [0], None).__code__] = machine("limits")
    return out
