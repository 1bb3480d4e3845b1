"""Notes invalidated by fingerprint (hpgrem/passes/__init__.py, "Stamps").

The pass manager stamps, beside the notes a pass that is no analysis writes of a rule, the rule's
fingerprint; a later pass that changes the rule drops the other passes' notes of it, and only of
it. So `--passes ml-ranges,ml-inline` leaves no `ml-ranges` note of a body ml-inline rewrote,
and keeps those of the bodies it left alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import pytest
from conftest import ROOT, compile_source, hpgrem

from hpgrem import passes
from hpgrem.ir import ml
from hpgrem.serialize import dumps, loads

EXAMPLES = sorted((ROOT / "examples" / "ml").glob("*.sml"))
RANGES = "ml-ranges."


def _ranges_notes(module) -> dict[str, dict[str, object]]:
    return {k: {n: v for n, v in notes.items() if n.startswith(RANGES)}
            for k, notes in module.annotations.items() if any(n.startswith(RANGES) for n in notes)}


def _digest(value) -> str:
    return value if isinstance(value, str) else value[0]  # `once` is the digest; the others start with it


# ---- the examples ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ranged():
    """Each example after ml-ranges alone (its notes stamped), stopped there."""
    return {p.name: compile_source(p.read_text(), str(p.relative_to(ROOT)), passes=("ml-ranges",), after="ml-ranges")
            for p in EXAMPLES}


def test_ranges_then_inline_leaves_no_stale_note():
    stale = {}
    for path in EXAMPLES:
        module = compile_source(path.read_text(), str(path.relative_to(ROOT)), passes=("ml-ranges", "ml-inline"))
        stale[path.name] = passes.stale_notes(module)
        # the machine's notion (ml-ranges' digest of a body) agrees: every note kept is its body's
        for key, notes in _ranges_notes(module).items():
            assert all(_digest(v) == ml.fingerprint(module.rules[key].body) for v in notes.values()), (path.name, key)
        # the manager's fingerprint is the ML dialect's digest, of the whole rule
        assert all(passes.fingerprint(f) == ml.fingerprint(f) for f in module.rules.values())
    assert stale == {p.name: [] for p in EXAMPLES}


def test_without_the_manager_ml_inline_leaves_stale_notes(ranged):
    """What the stamps guard against: ml-inline applied outside the manager keeps ml-ranges
    notes of bodies it rewrote (17 over the examples when this was written)."""
    stale = 0
    for module in ranged.values():
        raw = passes.get_pass("ml-inline").apply(module)
        stale += len(passes.stale_notes(raw))
        assert {k for k, _ in passes.stale_notes(raw)} == {
            k for k, notes in _ranges_notes(raw).items() if k in raw.rules
            and any(_digest(v) != ml.fingerprint(raw.rules[k].body) for v in notes.values())}
    assert stale > 0


def test_ml_inline_drops_the_notes_of_the_rules_it_changed_only(ranged):
    dropped = kept = 0
    for name, module in ranged.items():
        after = passes.run_passes(module, ["ml-inline"], analyses=False)
        assert passes.stale_notes(after) == [], name
        old, new = _ranges_notes(module), _ranges_notes(after)
        for key, notes in old.items():
            if key not in after.rules:
                assert key not in after.annotations, (name, key)  # a removed rule's notes go with it
            elif passes.fingerprint(after.rules[key]) != passes.fingerprint(module.rules[key]):
                assert key not in new, (name, key)  # changed: its ml-ranges notes went
                assert passes.STAMP not in after.annotations.get(key, {})
                dropped += 1
            else:
                assert new[key] == notes, (name, key)  # unchanged: kept as they were, still stamped
                assert after.annotations[key][passes.STAMP] == module.annotations[key][passes.STAMP]
                kept += 1
        # the analyses' notes carry no stamp; the module facts neither
        assert all(passes.STAMP not in notes or any(n.startswith(RANGES) for n in notes)
                   for notes in after.annotations.values())
    assert dropped > 0 and kept > dropped


# ---- the manager on a tiny module --------------------------------------------------------------

@dataclass(frozen=True)
class Noter:
    """A test pass that records a note of every rule and changes none."""

    name: str = "noter"
    records: tuple[str, ...] = ("fact",)

    def apply(self, module):
        return passes.annotated(module, self, {k: {"fact": r.name} for k, r in module.rules.items()})


@dataclass(frozen=True)
class Renames:
    """A test pass that changes the rule named `f` (its name) and records a note of it."""

    name: str = "renames"
    records: tuple[str, ...] = ("mark",)
    preserves: tuple[str, ...] = ()

    def apply(self, module):
        key = next(k for k, r in module.rules.items() if r.name == "f")
        module = replace(module, rules={**module.rules, key: replace(module.rules[key], name="f2")})
        return passes.annotated(module, self, {key: {"mark": 1}})


@dataclass(frozen=True)
class RenamesPreserving(Renames):
    """Renames, declaring that the notes of `noter` stay true of the rules it changes."""

    name: str = "renames-preserving"
    preserves: tuple[str, ...] = ("noter",)


@dataclass(frozen=True)
class Rebuilds:
    """A test pass that rebuilds every rule as it was (new objects, the same structure)."""

    name: str = "rebuilds"

    def apply(self, module):
        return replace(module, rules={k: replace(r) for k, r in module.rules.items()})


@pytest.fixture
def test_passes(monkeypatch):
    for name, cls in (("noter", Noter), ("renames", Renames), ("renames-preserving", RenamesPreserving),
                      ("rebuilds", Rebuilds)):
        monkeypatch.setitem(passes.PASS_TABLE, name, cls)


def _tiny():
    module = compile_source("fun f x = x + 1\nfun g x = x * 2\nval _ = print (Int.toString (f 1 + g 2))\n",
                            "t.sml", opt=0)
    f = next(k for k, r in module.rules.items() if r.name == "f")
    g = next(k for k, r in module.rules.items() if r.name == "g")
    return module, f, g


def test_a_pass_that_changes_a_rule_drops_its_other_owners_notes_only(test_passes):
    module, f, g = _tiny()
    noted = passes.run_passes(module, ["noter"], analyses=False)
    assert noted.annotations[f][passes.STAMP] == passes.fingerprint(noted.rules[f])
    after = passes.run_passes(module, ["noter", "renames"])
    assert "noter.fact" not in after.annotations[f]  # f changed: noter's note of it went
    assert after.annotation(f, "renames.mark") == 1  # the note of the pass that changed it stays
    assert after.annotation(f, passes.STAMP) == passes.fingerprint(after.rules[f])  # stamped anew
    assert after.annotation(g, "noter.fact") == "g"  # g did not change: its note stays
    assert after.annotation(g, passes.STAMP) == noted.annotations[g][passes.STAMP]
    assert after.annotation(f, "ml-kinds.kind") is not None  # the analyses ran again at the end
    assert passes.stale_notes(after) == []


def test_preserves_keeps_another_pass_notes_of_a_changed_rule(test_passes):
    module, f, _ = _tiny()
    after = passes.run_passes(module, ["noter", "renames-preserving"], analyses=False)
    assert after.annotation(f, "noter.fact") == "f" and after.annotation(f, "renames-preserving.mark") == 1
    assert after.annotation(f, passes.STAMP) == passes.fingerprint(after.rules[f])


def test_a_rule_rebuilt_as_it_was_keeps_its_notes(test_passes):
    module, f, _ = _tiny()
    noted = passes.run_passes(module, ["noter"], analyses=False)
    after = passes.run_passes(module, ["noter", "rebuilds"], analyses=False)
    assert after.rules[f] is not noted.rules[f]
    mine = lambda m: {k: {n: v for n, v in notes.items() if not n.startswith("ml-kinds.")}
                      for k, notes in m.annotations.items() if k in m.rules}
    assert mine(after) == mine(noted)  # ml-kinds' notes go (an analysis's: any change of a rule)


def test_a_hand_edited_hpg_loses_the_notes_whose_stamp_is_not_their_rule(test_passes):
    module, f, g = _tiny()
    noted = passes.run_passes(module, ["noter"], analyses=False)
    doc = json.loads(dumps(noted))
    doc["annotations"][f][passes.STAMP] = "0" * 16  # as if f were edited after the notes were made
    del doc["annotations"][g][passes.STAMP]  # a note with no stamp is trusted no more
    loaded = loads(json.dumps(doc))
    assert sorted(passes.stale_notes(loaded)) == sorted([(f, "noter.fact"), (g, "noter.fact")])
    after = passes.run_passes(loaded, [], analyses=False)
    assert all("noter.fact" not in after.annotations.get(k, {}) and passes.STAMP not in after.annotations.get(k, {})
               for k in (f, g))
    assert after.annotation(f, "ml-kinds.kind") is not None  # an analysis's notes are not stamped
    kept = passes.run_passes(loads(dumps(noted)), [], analyses=False)  # a faithful file keeps them
    assert kept.annotation(f, "noter.fact") == "f" and kept.annotation(g, "noter.fact") == "g"


def test_the_stamp_owner_is_no_pass_name():
    with pytest.raises(ValueError):
        passes.register_pass(passes.owner_of(passes.STAMP), Noter)


# ---- the examples still print what they should -------------------------------------------------

@pytest.mark.parametrize("name", ["fib", "primes", "queens", "life", "local_types", "strings"])
def test_examples_print_their_output(name):
    path = ROOT / "examples" / "ml" / f"{name}.sml"
    expected = path.with_suffix(".out").read_text()
    for flags in (["-O2"], ["--passes", "ml-ranges,ml-inline"]):
        r = hpgrem("run", *flags, str(path))
        assert (r.returncode, r.stdout) == (0, expected), (flags, r.stderr)
