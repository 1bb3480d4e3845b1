"""The `.hpg` file format: a module as JSON, tagged by node kind, that round-trips exactly.

`compile` writes it and `run` reads it, so the two can be separate steps. The first key,
`format`, names the format and its version; a reader refuses other versions and malformed files
with `HpgFormatError` (a user error, never a traceback).
"""

from __future__ import annotations

import dataclasses
import json

from hpgrem import ir

FORMAT = "hpgrem"
VERSION = 1

_NODES = {cls.__name__: cls for cls in (
    ir.Span, ir.Var, ir.Atom, ir.Int, ir.Float, ir.Struct, ir.Call, ir.Conj, ir.Clause, ir.Relation, ir.Entry,
    ir.Lit, ir.Local, ir.Global, ir.MakeClosure, ir.CallKnown, ir.Apply, ir.Prim, ir.Construct, ir.Tuple,
    ir.Part, ir.Let, ir.SetGlobal, ir.Sequence, ir.If, ir.Switch, ir.Raise, ir.Handle, ir.While,
    ir.NewException, ir.BasisException, ir.Packet, ir.Par, ir.Function)}


class HpgFormatError(Exception):
    """The file is not a readable `.hpg` module."""


def _encode(x):
    if dataclasses.is_dataclass(x):
        out = {"kind": type(x).__name__}
        for f in dataclasses.fields(x):
            out[f.name] = _encode(getattr(x, f.name))
        return out
    if isinstance(x, float):
        return {"kind": "float", "repr": repr(x)}  # keeps -0.0, inf and nan exact
    if isinstance(x, tuple):
        return [_encode(i) for i in x]
    if isinstance(x, dict):
        return {k: _encode(v) for k, v in x.items()}
    return x


def _decode(x):
    if isinstance(x, list):
        return tuple(_decode(i) for i in x)
    if isinstance(x, dict):
        kind = x.get("kind")
        if kind == "float":
            return float(x["repr"])
        cls = _NODES.get(kind)
        if cls is None:
            raise HpgFormatError(f"unknown node kind {kind!r}")
        fields = {f.name for f in dataclasses.fields(cls)}
        if set(x) - {"kind"} != fields:
            raise HpgFormatError(f"{kind} node has fields {sorted(set(x) - {'kind'})}, expected {sorted(fields)}")
        return cls(**{k: _decode(v) for k, v in x.items() if k != "kind"})
    return x


def dumps(module: ir.Module) -> str:
    """The module as `.hpg` text."""
    doc = {
        "format": FORMAT, "version": VERSION, "language": module.language, "source": module.source,
        "entry": _encode(module.entry),
        "relations": [_encode(r) for r in module.relations.values()],
        "functions": [_encode(f) for f in module.functions.values()],
    }
    return json.dumps(doc, separators=(",", ":")) + "\n"


def loads(text: str) -> ir.Module:
    """A module from `.hpg` text; raises HpgFormatError on anything malformed."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise HpgFormatError(f"not an .hpg file (invalid JSON at line {e.lineno}, column {e.colno})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise HpgFormatError("not an .hpg file (no 'format': 'hpgrem' header)")
    if doc.get("version") != VERSION:
        raise HpgFormatError(f".hpg version {doc.get('version')} is not supported (this hpgrem reads {VERSION})")
    try:
        relations = [_decode(r) for r in doc["relations"]]
        functions = [_decode(f) for f in doc.get("functions", [])]
        entry = _decode(doc["entry"]) if doc["entry"] is not None else None
        module = ir.Module(doc["source"], {r.key: r for r in relations}, entry, doc["language"],
                           {f.key: f for f in functions})
    except (KeyError, TypeError, AttributeError) as e:
        raise HpgFormatError(f"malformed .hpg file ({type(e).__name__}: {e})") from None
    for r in relations:
        if not isinstance(r, ir.Relation):
            raise HpgFormatError("malformed .hpg file (a relation entry is not a Relation)")
    for f in functions:
        if not isinstance(f, ir.Function):
            raise HpgFormatError("malformed .hpg file (a function entry is not a Function)")
    return module
