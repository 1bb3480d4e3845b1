"""The trace viewer: one self-contained HTML file (docs/teaching.md).

The page inlines its script and style from `viewer/` and embeds the trace as JSON; it fetches
nothing (its Content-Security-Policy forbids it), so it works offline and can be mailed to a
student. Trace text reaches the page only as data: the JSON is escaped so that no goal text can
close the script element, the script writes every text with `textContent`, and the policy lets
only the page's own script and style run (by their SHA-256).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

_PLACEHOLDER = re.compile(r"\{\{(TITLE|CSS|TRACE|JS|STYLE_HASH|SCRIPT_HASH)\}\}")

# Characters a JSON text may hold that would end or confuse an HTML script element (`</script>`,
# `<!--`) or a JavaScript string (the two line separators), written as JSON escapes instead.
_SCRIPT_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


# The page's script, in the order it runs: each file is a part of one function body (they share
# its scope, and nothing reaches the page's global scope but `window.hpgremViewer`).
_SCRIPT = ("replay.js", "graph.js", "timeline.js", "viewer.js")


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("viewer", name).read_text(encoding="utf-8")


def _script() -> str:
    parts = "\n".join(_asset(name) for name in _SCRIPT)
    return f'"use strict";\n(function () {{\n{parts}}})();\n'


def trace_json(header: dict[str, Any], events: list[dict[str, Any]]) -> str:
    """The trace as one JSON text that is safe inside an HTML `<script>` element.

    Raises ValueError when the trace holds a number JSON cannot write (NaN, infinity)."""
    try:
        text = json.dumps(
            {"header": header, "events": events},
            ensure_ascii=False,
            allow_nan=False,
            separators=(",", ":"),
        )
    except ValueError as error:
        raise ValueError(f"the trace cannot be embedded: {error}") from None
    return text.translate(_SCRIPT_ESCAPES)


def _csp_hash(text: str) -> str:
    """A Content-Security-Policy source that allows exactly the inline element holding `text`."""
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def viewer_html(header: dict[str, Any], events: list[dict[str, Any]]) -> str:
    """The viewer page for a trace: `header` is the stream's first line, `events` the lines
    after it (a final `end` line may be included; it is not a step)."""
    title = f"hpgrem trace: {header.get('program', '')}"
    css, script = _asset("viewer.css"), _script()
    parts = {
        "TITLE": html.escape(title),
        "CSS": css,
        "TRACE": trace_json(header, events),
        "JS": script,
        "STYLE_HASH": _csp_hash(css),
        "SCRIPT_HASH": _csp_hash(script),
    }
    # One pass over the template alone: text substituted in is never scanned again.
    return _PLACEHOLDER.sub(lambda m: parts[m[1]], _asset("viewer.html"))


def write_viewer(header: dict[str, Any], events: list[dict[str, Any]], path: str | Path) -> None:
    """Write the viewer page for a trace to `path` (UTF-8)."""
    Path(path).write_text(viewer_html(header, events), encoding="utf-8")
