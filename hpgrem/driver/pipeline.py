"""The pipeline: a program (a file, or source text) -> a verified HPGREM module. The one way
the command line, `hpgrem bench` and the tests compile a program.

The front end is chosen by the file's extension (frontend.front_end_for); a `.hpg` file is read
and verified instead (it is untrusted input). Then the pass manager runs the optimizing passes
the options select and the analyses the machine reads (hpgrem/passes), and the verifier checks
the result. Front ends are imported only when a program needs one: the IR layer of the
`hpgrem` package must not import them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hpgrem.errors import UsageError
from hpgrem.files import read_text

if TYPE_CHECKING:
    from frontend import Compiled
    from hpgrem.ir import Module


# The -O level of `hpgrem run`, `compile`, `ir` and `bench` when none is given (spec/cli.md), and
# of every compilation through this module that names none: what a user runs is what is tested.
DEFAULT_LEVEL = 2


@dataclass(frozen=True)
class Options:
    """What to compile and which passes to run."""

    goal: str | None = None  # a PARLOG conjunction to run instead of main
    opt: int = DEFAULT_LEVEL  # the -O level
    passes: tuple[str, ...] | None = None  # exactly these optimizing passes, in order, instead of the level's
    disable: tuple[str, ...] = ()  # optimizing passes not to run
    after: str | None = None  # stop after this pass (to print the module there)
    pass_options: tuple[str, ...] = ()  # `--pass-option PASS.OPTION=VALUE`, as written


def compile_file(path: str, options: Options = Options()) -> Compiled:
    """Compile the program in `path` (any extension of spec/cli.md)."""
    return _compile(read_program(path, options), path, options)


def read_program(path: str, options: Options = Options()) -> str:
    """The text of the program in `path`, once its kind and `options` are known to fit: the
    command line reads a program once, and its diagnostics quote only that text."""
    _check_kind(path, options)
    return read_source(path)


def compile_text(text: str, file: str, options: Options = Options()) -> Compiled:
    """Compile source text as if read from `file` (whose extension names the language)."""
    _check_kind(file, options)
    return _compile(text, file, options)


def check_text(text: str, file: str) -> Compiled:
    """The front end alone on source text read as `file`."""
    _check_kind(file, Options())
    return _load(text, file, None)


def read_source(path: str) -> str:
    return read_text(path)


def selected_passes(options: Options) -> list[str]:
    """The optimizing passes to run, in order (up to `after`); UsageError for an unknown name."""
    from hpgrem.passes import is_pass, level, passes_table

    named = [*(options.passes or ()), *options.disable] + ([options.after] if options.after else [])
    for name in named:
        if not is_pass(name) or name not in passes_table():
            raise UsageError(f"unknown pass '{name}' (passes: {', '.join(passes_table())})")
    names = [n for n in (options.passes if options.passes is not None else level(options.opt))
             if n not in options.disable]
    if options.after is not None:
        names = names[: names.index(options.after) + 1] if options.after in names else [options.after]
    return names


def pass_options(options: Options) -> dict[str, dict[str, object]]:
    """The `--pass-option`s by pass and option; UsageError (one line) for an unknown pass or
    option or a value it cannot take."""
    from hpgrem.passes import PassError, parse_option

    out: dict[str, dict[str, object]] = {}
    for text in options.pass_options:
        try:
            name, key, value = parse_option(text)
        except PassError as e:
            raise UsageError(str(e)) from None
        out.setdefault(name, {})[key] = value
    return out


def _check_kind(file: str, options: Options) -> None:
    """Refuse, before reading anything, a file of no known kind and options that do not apply."""
    from frontend import extensions, front_end_for

    ext = Path(file).suffix.lower()
    if ext == ".hpg":
        if options.goal is not None:
            raise UsageError("--goal needs the source program, not a compiled .hpg file")
    else:
        front_end = front_end_for(ext)  # a plug-in's (HPGREM_PLUGINS) too
        if front_end is None:
            raise UsageError(f"{file}: unknown file type '{ext}' (expected {', '.join(extensions())} or .hpg)")
        if options.goal is not None and not front_end.goals:
            raise UsageError("--goal is for PARLOG programs; an ML program runs its declarations")
    selected_passes(options)
    pass_options(options)


def _compile(text: str, file: str, options: Options) -> Compiled:
    from hpgrem.ir import source_lines

    compiled = _load(text, file, options.goal)
    if compiled.module is not None:
        kept = compiled.module.source_lines  # a .hpg file's; a program's are its text's
        compiled.module = _optimize(compiled.module, options)
        from_hpg = Path(file).suffix.lower() == ".hpg"
        compiled.module.source_lines = kept if from_hpg else source_lines(compiled.module, text)
    return compiled


def _load(text: str, file: str, goal: str | None) -> Compiled:
    """The front end's result, or the module of a `.hpg` file (read and verified)."""
    from frontend import Compiled, front_end_for

    ext = Path(file).suffix.lower()
    if ext != ".hpg":
        return front_end_for(ext).compile(text, file, goal)
    from hpgrem.serialize import HpgFormatError, loads
    from hpgrem.verify import verify
    try:
        module = loads(text)
    except HpgFormatError as e:
        raise UsageError(f"{file}: {e}") from None
    problems = verify(module)
    if problems:
        raise UsageError(f"{file}: not a valid HPGREM module: {problems[0]}")
    return Compiled(module)


def _optimize(module: Module, options: Options) -> Module:
    """The selected passes, then (unless stopping after a pass) the machine's analyses; a
    module that fails to verify then is a bug in a pass."""
    from hpgrem.passes import run_passes
    from hpgrem.verify import verify

    names = selected_passes(options)
    module = run_passes(module, names, analyses=options.after is None, options=pass_options(options))
    problems = verify(module)
    if problems:
        raise AssertionError(f"the module does not verify after passes {names}: " + "; ".join(problems))
    return module
