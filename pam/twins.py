"""Traced twins: a hot loop written once, and its copy for a traced run made from it.

An untraced run must pay nothing for tracing, so a loop that a traced run reports from (the
PE's reduction loop, PARLOG's run-here) has two versions. Both come from one template, the
plain function itself, in which a traced-only line is a comment starting `#+ ` and a line that
only the plain version runs ends with `#-`. `traced_twin(function, **extra)` compiles the
traced version: the `#+ ` lines uncommented, the `#-` lines made `pass`, at the template's own
file and line numbers (so a traceback or a profile of the twin points at the template).

A closure's free variables keep their values in the twin; `extra` names the values its traced
lines use besides (a tracer). The template is our own source, never an input's.
"""

from __future__ import annotations

import inspect
import textwrap

TRACED = "#+ "
PLAIN = "#-"


def traced_source(lines: list[str]) -> list[str]:
    """The template's lines as the traced twin has them."""
    out = []
    for line in lines:
        body = line.lstrip()
        indent = line[:len(line) - len(body)]
        if body.startswith(TRACED):
            out.append(indent + body[len(TRACED):])
        elif body.rstrip().endswith(PLAIN):
            out.append(indent + "pass")
        else:
            out.append(line.rstrip("\n"))
    return out


def traced_twin(function, **extra):
    """The traced twin of `function` (see the module's docstring)."""
    lines, first = inspect.getsourcelines(function)
    body = textwrap.dedent("".join(lines)).splitlines()
    free = function.__code__.co_freevars
    cells = dict(zip(free, (c.cell_contents for c in function.__closure__ or ())))
    names = [*free, *extra]
    # a factory of the names the twin closes over, its def at the template's own first line
    head = f"def _twin_factory({', '.join(names)}):"
    source = "\n" * (first - 2) + head + "\n" + "\n".join("    " + line for line in traced_source(body)) \
        + f"\n    return {function.__name__}\n"
    # in the template's own module globals, so that the twin sees them as they are when it runs
    namespace = function.__globals__
    exec(compile(source, function.__code__.co_filename, "exec"), namespace)
    twin = namespace.pop("_twin_factory")(**cells, **extra)
    twin.__qualname__ = function.__qualname__ + " (traced)"
    twin.__doc__ = function.__doc__
    return twin


__all__ = ["traced_twin"]
