"""The pass tables and the pass manager.

A pass is a module of this package with a class whose `name` is its table key and whose
`apply(module)` returns the new module. It declares (class attributes, all optional but `name`):

- `dialects`: the dialects whose modules it applies to; the manager skips it on any other
  (absent: every dialect);
- `records`: the short names of the annotations it writes. Annotations are owned: a note is
  stored as `annotations[rule key]["OWNER.name"]` (`granularity.cost`, `index-rules.switch`),
  so two owners may use the same short name; a pass writes only its own namespace, through
  `annotated(module, self, notes)`, and the manager refuses any other change of a note;
- `requires`: the analyses run before it when their notes are not current;
- `preserves`: the analyses, and the other passes, whose notes stay true after it changes the
  rules. A pass that leaves the rules as they were (the same objects: it only recorded notes)
  invalidates nothing; one that changes them invalidates every other analysis, whose notes are
  then dropped, on the rules of the pass's dialects only; and a rule it changed loses the notes
  of every other pass (see "Stamps" below);
- `options`: {field: Option(help)}, fields of the pass's dataclass that `--pass-option
  NAME.FIELD=VALUE` sets (their type and default are the field's).

An *analysis* is a pass that only records notes (docs/ir.md); its notes are a function of the
rules. The analyses the machine reads always run, last, and so does every analysis a pass
required that a later pass invalidated, so the module handed to the machine carries current
notes whatever passes ran.

Stamps: the notes of a pass that is no analysis (`ml-ranges.overflow`, `index-rules.switch`)
describe the rule they are about as it was when they were written. So the manager writes beside
them, under the reserved name STAMP (`passes.fingerprint`, owned by no pass), the rule's
`fingerprint` (a digest of its structure) then; after a pass, every rule whose fingerprint is no
longer its stamp loses the notes of the passes other than that pass and those it `preserves`,
and is stamped again; the notes of the rules it did not change stay. A module handed to
`run_passes` may come from a `.hpg` file, which anyone may have edited: its notes whose stamp is
missing or not the rule's fingerprint are dropped first (`drop_stale_notes`). The notes of
analyses and the module facts (`annotations[""]`) carry no stamp: an analysis's notes go when
any rule changes, as said above.

`-O0` runs no optimizing pass, `-O1` the default list, `-O2` all. The tables import lazily, so
the driver can select passes without loading them (listing their options loads them).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:  # the tables are read without loading the IR
    from hpgrem.ir import Module

# name -> "module:Class" (or the class itself, `register_pass`); the passes, in the order `-O2`
# runs them (the lowerings excepted).
PASS_TABLE: dict[str, str | type] = {
    "ml-flatten": "hpgrem.passes.ml.flatten:MLFlatten",
    "ml-grain": "hpgrem.passes.ml.grain:MLGrain",
    "ml-inline": "hpgrem.passes.ml.inline:MLInline",
    "simplify": "hpgrem.passes.simplify:Simplify",
    "prune-unreachable": "hpgrem.passes.prune:PruneUnreachable",
    "order-nodes": "hpgrem.passes.parlog.order_nodes:OrderNodes",
    "index-rules": "hpgrem.passes.parlog.index_rules:IndexRules",
    "tail-loop": "hpgrem.passes.parlog.tail_loop:TailLoop",
    "dest-passing": "hpgrem.passes.parlog.dest_passing:DestPassing",
    "lift": "hpgrem.passes.parlog.lift:Lift",
    "schedule": "hpgrem.passes.parlog.schedule:Schedule",
    "ml-switch": "hpgrem.passes.ml.switch:MLSwitch",
    "ml-ranges": "hpgrem.passes.ml.ranges:MLRanges",
    "ml-batch-counts": "hpgrem.passes.ml.batch_counts:MLBatchCounts",
    "aggregate": "hpgrem.passes.aggregate:Aggregate",
    "tensor-autodiff": "hpgrem.passes.tensor.autodiff:TensorAutodiff",
    "tensor-data-parallel": "hpgrem.passes.tensor.data_parallel:DataParallel",
    "tensor-parallel": "hpgrem.passes.tensor.tensor_parallel:TensorParallel",
    "tensor-pipeline": "hpgrem.passes.tensor.pipeline:Pipeline",
    "tensor-recompute": "hpgrem.passes.tensor.recompute:Recompute",
    "tensor-offload": "hpgrem.passes.tensor.offload:Offload",
}

ANALYSIS_TABLE: dict[str, str | type] = {
    "granularity": "hpgrem.passes.parlog.granularity:Granularity",
    "ml-kinds": "hpgrem.passes.ml.kinds:MLKinds",
    "flow": "hpgrem.passes.parlog.flow:DataFlow",
}

# Lowerings change what a module computes (a forward graph gains its gradients; a step is split
# over data-parallel ranks): they run when named (`--passes`, the trainer), never by a level.
LOWERINGS: frozenset[str] = frozenset({"tensor-autodiff", "tensor-data-parallel", "tensor-parallel", "tensor-pipeline",
                                     "tensor-recompute", "tensor-offload"})

LEVELS: dict[int, tuple[str, ...]] = {
    0: (),
    1: ("prune-unreachable",),
    2: tuple(name for name in PASS_TABLE if name not in LOWERINGS),
}

MACHINE_ANALYSES: tuple[str, ...] = ("granularity", "ml-kinds")
"""What the machine reads of every module (pam/parlog/rules.py, pam/ml/annotations.py): it runs
no analysis of its own."""


@dataclass(frozen=True, slots=True)
class Option:
    """A pass option: a field of the pass's dataclass (its type and default are the field's),
    with one line of help and, for a number, the least value that makes sense."""

    help: str
    minimum: int | float | None = None


class Pass(Protocol):
    """What a pass or an analysis declares (only `name` and `apply` are required)."""

    name: str
    dialects: tuple[str, ...]  # absent: every dialect
    records: tuple[str, ...]  # absent: none
    requires: tuple[str, ...]  # absent: none
    preserves: tuple[str, ...]  # absent: none (when it changes the rules)
    options: ClassVar[Mapping[str, Option]]  # absent: none

    def apply(self, module: Module) -> Module: ...


class PassError(ValueError):
    """A pass option that does not exist or a value it cannot take (a usage error, one line)."""


PassOptions = Mapping[str, Mapping[str, object]]
"""Option values by pass name, then by option name."""


def passes_table() -> dict[str, str | type]:
    """Every optimizing pass by name, in the order `-O2` runs them: the manager's own, then
    those the dialects' records bring (a plug-in's: hpgrem/ir/dialects.py)."""
    from hpgrem.ir.dialects import DIALECTS
    return {**PASS_TABLE, **{name: cls for d in DIALECTS.values() for name, cls in d.passes}}


def analyses_table() -> dict[str, str | type]:
    """Every analysis by name: the manager's own, then the dialects' records'."""
    from hpgrem.ir.dialects import DIALECTS
    return {**ANALYSIS_TABLE, **{name: cls for d in DIALECTS.values() for name, cls in d.analyses}}


def level(opt: int) -> tuple[str, ...]:
    """The optimizing passes of `-O<opt>`: at `-O2`, the dialects' records' passes too (each
    runs on modules of its own dialects only)."""
    if opt < 2:
        return LEVELS[max(0, opt)]
    return LEVELS[2] + tuple(n for n in passes_table() if n not in PASS_TABLE and n not in LOWERINGS)


def register_pass(name: str, cls: str | type, *, analysis: bool = False) -> None:
    """Add the pass (or, with `analysis`, the analysis) `cls` (a class, or "module:Class"
    imported when first needed) under `name`, run when named (`--passes`), at no level: a
    dialect's passes that `-O2` should run are named in its record (hpgrem/ir/dialects.py)."""
    if not isinstance(cls, (str, type)):
        raise TypeError("register_pass takes a class or 'module:Class'")
    if name in passes_table() or name in analyses_table() or name == owner_of(STAMP):
        raise ValueError(f"a pass named {name!r} is already registered")
    (ANALYSIS_TABLE if analysis else PASS_TABLE)[name] = cls


def is_pass(name: str) -> bool:
    """Is `name` an optimizing pass or analysis? A name the tables lack may be a plug-in's
    (HPGREM_PLUGINS, hpgrem/ir/dialects.py), loaded first."""
    def known() -> bool:
        return name in passes_table() or name in analyses_table()

    if known():
        return True
    from hpgrem.ir.dialects import load_plugins
    load_plugins()
    return known()


def pass_class(name: str) -> type:
    """The class of the optimizing pass or analysis `name` (KeyError if there is none)."""
    passes = passes_table()
    entry = passes[name] if name in passes else analyses_table()[name]
    if isinstance(entry, type):
        return entry
    module_name, cls = entry.split(":")
    return getattr(importlib.import_module(module_name), cls)


def get_pass(name: str, options: Mapping[str, object] | None = None) -> Pass:
    """An instance of the optimizing pass or analysis `name` with `options` set (KeyError if
    there is none)."""
    return pass_class(name)(**(options or {}))


def declared_options(name: str) -> dict[str, tuple[type, object, Option]]:
    """The options of pass `name`: option -> (type, default, declaration)."""
    cls = pass_class(name)
    declared = getattr(cls, "options", {})
    if not declared:
        return {}
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    return {key: (hints[key], fields[key].default, opt) for key, opt in declared.items()}


def parse_option(text: str) -> tuple[str, str, object]:
    """`NAME.KEY=VALUE` -> (pass, option, value of the option's type); PassError (one line)
    for an unknown pass or option or a value it cannot take."""
    target, eq, raw = text.partition("=")
    name, dot, key = target.rpartition(".")
    if not eq or not dot or not name or not key:
        raise PassError(f"--pass-option {text!r}: expected PASS.OPTION=VALUE")
    if not is_pass(name):
        raise PassError(f"--pass-option {text!r}: unknown pass '{name}'")
    options = declared_options(name)
    if key not in options:
        known = ", ".join(options) if options else "none"
        raise PassError(f"--pass-option {text!r}: {name} has no option '{key}' (its options: {known})")
    kind, _, opt = options[key]
    return name, key, _value(text, raw, kind, opt)


def _value(text: str, raw: str, kind: type, opt: Option) -> object:
    word = raw.strip().lower()
    if kind is bool:
        if word in ("true", "yes", "on", "1"):
            return True
        if word in ("false", "no", "off", "0"):
            return False
        raise PassError(f"--pass-option {text!r}: expected true or false")
    if kind is str:
        return raw
    noun = "an integer" if kind is int else "a finite number"
    try:
        value = int(word) if kind is int else float(word)
    except ValueError:
        raise PassError(f"--pass-option {text!r}: expected {noun}") from None
    if not math.isfinite(value) or opt.minimum is not None and value < opt.minimum:
        low = f" of at least {opt.minimum}" if opt.minimum is not None else ""
        raise PassError(f"--pass-option {text!r}: expected {noun}{low}")
    return value


def options_help() -> list[str]:
    """One line per option of every pass and analysis (`hpgrem ir --help`)."""
    lines = []
    for name in (*passes_table(), *analyses_table()):
        for key, (kind, default, opt) in declared_options(name).items():
            lines.append(f"  {name}.{key}={kind.__name__.upper()} (default {default}): {opt.help}")
    return lines


# ---------------------------------------------------------------------------------------------
# The manager


def run_passes(module: Module, names: tuple[str, ...] | list[str], *, analyses: bool = True,
               options: PassOptions | None = None) -> Module:
    """Apply the optimizing passes `names` in order (each on a module of its dialects only),
    each after the analyses it requires, with `options` (pass -> option -> value); then, with
    `analyses`, the analyses the machine reads and those required earlier that are no longer
    current."""
    options = options or {}
    module = drop_stale_notes(module)  # a `.hpg` file's notes are trusted only where stamped
    current: set[str] = set()
    required: list[str] = []
    for name in names:
        p = get_pass(name, options.get(name))
        if not _applies(p, module):
            continue
        for needed in getattr(p, "requires", ()):
            if needed not in required:
                required.append(needed)
            if needed not in current:
                module = _run(get_pass(needed, options.get(needed)), module, current)
        module = _run(p, module, current)
    if analyses:
        for name in (*MACHINE_ANALYSES, *required):
            if name not in current:
                a = get_pass(name, options.get(name))
                if _applies(a, module):
                    module = _run(a, module, current)
    return module


def _applies(p: Pass, module: Module) -> bool:
    dialects = getattr(p, "dialects", None)
    return dialects is None or module.dialect in dialects


def _run(p: Pass, module: Module, current: set[str]) -> Module:
    """`p` applied to `module`; `current` (the analyses whose notes are true) updated. While a
    compile trace records (hpgrem.ir.rewrite.recording), what an optimizing pass changed is
    written to it."""
    from hpgrem.ir.rewrite import active_log

    analyses = analyses_table()
    log = active_log()
    if log is None:
        out = p.apply(module)
    else:
        log.pass_name = p.name
        mark = len(log.entries)
        out = p.apply(module)
        if p.name not in analyses and out is not module:
            _log_changes(log, mark, p, module, out)
    if p.name in analyses:
        current.add(p.name)
    if out is module:
        return module
    _check_notes(p, module, out)
    out = _drop_removed_rules_annotations(out)
    out = _restamp(p, module, out)
    if out.entry is module.entry and out.rules.keys() == module.rules.keys() \
            and all(out.rules[k] is r for k, r in module.rules.items()):
        return out  # the rules are as they were: every analysis's notes stay true
    invalidated = set(analyses) - set(getattr(p, "preserves", ())) - {p.name}
    current -= invalidated
    return _forget(out, invalidated, getattr(p, "dialects", None))


def _log_changes(log, mark: int, p: Pass, before: Module, after: Module) -> None:
    """Write to the compile trace `log` what pass `p` changed from `before` to `after`: where
    its rewrite rules recorded nothing since entry `mark`, the rules it added, changed or
    removed, compared rule by rule; and the notes it set."""
    from hpgrem.ir.rewrite import node_text

    if len(log.entries) == mark:
        for key, rule in after.rules.items():
            old = before.rules.get(key)
            if old is None:
                log.add("added", key, "", node_text(rule), rule.span)
            elif old is not rule:
                log.add("rule", key, node_text(old), node_text(rule), rule.span)
        for key, rule in before.rules.items():
            if key not in after.rules:
                log.add("removed", key, node_text(rule), "", rule.span)
    own = f"{p.name}."
    for key, notes in after.annotations.items():
        old = before.annotations.get(key, {})
        if notes is old:
            continue
        rule = after.rules.get(key)
        for name, value in notes.items():
            if name.startswith(own) and (name not in old or old[name] != value):
                log.add("note", key, f"{name}={old[name]!r}" if name in old else "", f"{name}={value!r}",
                        getattr(rule, "span", None))


def annotated(module: Module, owner: Pass, notes: dict[str, dict[str, object]]) -> Module:
    """`module` with `notes` (rule key -> {short name: value}) of `owner` (a pass: its `name`
    is the namespace, its `records` the names it may use) added to a copy of its annotations."""
    records = getattr(owner, "records", ())
    merged = dict(module.annotations)  # the notes of rules it says nothing about are shared
    for key, values in notes.items():
        for short in values:
            if short not in records:
                raise ValueError(f"pass {owner.name} records {short!r}, which it does not declare in `records`")
        merged[key] = {**merged.get(key, {}), **{f"{owner.name}.{short}": v for short, v in values.items()}}
    return replace(module, annotations=merged)


STAMP = "passes.fingerprint"
"""The reserved note (owned by no pass) where the manager stamps a rule's `fingerprint` beside
the notes of passes that are not analyses, as the rule was when they were written."""


def fingerprint(rule) -> str:
    """A digest of a rule's structure (its nodes' kinds and attributes, spans left out), linear
    in its distinct nodes (the IR is a graph: a shared node is digested once, as its copies
    would be). Any dialect's: the ML dialect's `fingerprint` (hpgrem.ir.ml) is the same digest,
    which `ml-ranges` records of a body."""
    import hashlib

    from hpgrem.ir.core import fold

    def digest(x, children: list[bytes]) -> bytes:
        h = hashlib.blake2b(f"{x.kind}{tuple(x.attributes().values())!r}{len(children)};".encode(), digest_size=8)
        for c in children:
            h.update(c)
        return h.digest()
    return fold(rule, digest).hex()


def _stamped(name: str, analyses) -> bool:
    """Is the note `name` one the manager stamps (a pass's, not one of `analyses`' nor the stamp)?"""
    return name != STAMP and owner_of(name) not in analyses


def stale_notes(module: Module) -> list[tuple[str, str]]:
    """The (rule key, note) pairs of `module` whose stamp is missing or not the rule's
    fingerprint now: notes that may describe another rule. None, after `run_passes`."""
    analyses = analyses_table()
    out = []
    for key, notes in module.annotations.items():
        rule = module.rules.get(key)
        names = [n for n in notes if _stamped(n, analyses)]
        if rule is None or not names:
            continue
        stamp = notes.get(STAMP)
        if stamp is None or stamp != fingerprint(rule):
            out.extend((key, n) for n in names)
    return out


def drop_stale_notes(module: Module) -> Module:
    """`module` without its `stale_notes` (and the stamps left with no note beside them): what
    a pass recorded of a rule is trusted only for the rule it was stamped with (a `.hpg` file
    may have been edited since)."""
    analyses = analyses_table()
    stale = stale_notes(module)
    orphans = [key for key, notes in module.annotations.items()
               if STAMP in notes and not any(_stamped(n, analyses) for n in notes)]
    if not stale and not orphans:
        return module
    gone: dict[str, set[str]] = {}
    for key, name in stale:
        gone.setdefault(key, set()).add(name)
    notes = {}
    for key, values in module.annotations.items():
        kept = {n: v for n, v in values.items() if n not in gone.get(key, ())}
        if STAMP in kept and not any(_stamped(n, analyses) for n in kept):
            del kept[STAMP]
        if kept:
            notes[key] = kept
    return replace(module, annotations=notes)


def _restamp(p: Pass, before: Module, after: Module) -> Module:
    """`after` (what `p` made of `before`) with its stamps brought up to date: a rule `p`
    changed (its fingerprint is not its stamp) loses the notes of passes other than `p` and
    those `p` preserves; the notes `p` wrote are stamped with the rule they describe. The
    fingerprints of rules `p` kept (the same objects, stamped) are not computed again."""
    keep = {p.name, *getattr(p, "preserves", ())}
    analyses = analyses_table()
    changed: dict[str, dict[str, object]] = {}
    for key, notes in after.annotations.items():
        rule = after.rules.get(key)
        if rule is None or not notes:
            continue
        stamp = notes.get(STAMP)
        if stamp is not None and before.rules.get(key) is rule:
            continue  # the rule it was stamped with (stamps are checked on the way in)
        if not any(_stamped(n, analyses) for n in notes):
            if stamp is not None:  # its notes went (a pass's notes of a removed rule)
                changed[key] = {n: v for n, v in notes.items() if n != STAMP}
            continue
        now = fingerprint(rule)
        if stamp == now:
            continue
        if stamp is None:  # notes `p` wrote now (any other pass's notes are stamped)
            changed[key] = {**notes, STAMP: now}
            continue
        kept = {n: v for n, v in notes.items() if n != STAMP and (not _stamped(n, analyses) or owner_of(n) in keep)}
        if any(_stamped(n, analyses) for n in kept):
            kept[STAMP] = now
        changed[key] = kept
    if not changed:
        return after
    notes = {**after.annotations, **changed}
    return replace(after, annotations={key: values for key, values in notes.items() if values})


def owner_of(name: str) -> str:
    """The pass or analysis that owns the annotation `name` (`granularity` of `granularity.cost`)."""
    return name.partition(".")[0]


def _check_notes(p: Pass, before: Module, after: Module) -> None:
    """A pass may change only its own notes (and those of rules it removed)."""
    if after.annotations is before.annotations:
        return
    own = {f"{p.name}.{short}" for short in getattr(p, "records", ())}
    for key in before.annotations.keys() | after.annotations.keys():
        if key in before.rules and key not in after.rules:
            continue
        old, new = before.annotations.get(key, {}), after.annotations.get(key, {})
        if old is new:
            continue
        for name in (old.keys() | new.keys()) - own:
            if name not in old or name not in new or old[name] is not new[name] and old[name] != new[name]:
                raise AssertionError(f"pass {p.name} changed the annotation {name!r} of {key!r}, "
                                     f"which is not one of its own ({', '.join(sorted(own)) or 'it records none'})")


def _forget(module: Module, analyses: set[str], dialects: tuple[str, ...] | None) -> Module:
    """`module` without the notes of `analyses` (whoever wrote them: a `.hpg` file carries
    notes too) on the rules of `dialects` (all when None) and the module facts."""
    from hpgrem.ir import MODULE_FACTS

    def dropped(key: str, name: str) -> bool:
        if owner_of(name) not in analyses:
            return False
        rule = module.rules.get(key)
        return key == MODULE_FACTS or dialects is None or rule is None or rule.dialect in dialects

    if not any(dropped(key, n) for key, values in module.annotations.items() for n in values):
        return module
    notes = {key: {n: v for n, v in values.items() if not dropped(key, n)} for key, values in module.annotations.items()}
    return replace(module, annotations={key: values for key, values in notes.items() if values})


def _drop_removed_rules_annotations(module: Module) -> Module:
    """Annotations of rules a pass removed go with them."""
    from hpgrem.ir import MODULE_FACTS
    if all(key in module.rules or key == MODULE_FACTS for key in module.annotations):
        return module
    return replace(module, annotations={key: values for key, values in module.annotations.items()
                                        if key in module.rules or key == MODULE_FACTS})
