"""Programs at the depths real code reaches (issue 21): a raise through 100,000 nested handlers,
and recursion 1,000,000 deep (known functions and closures), end as Poly/ML ends them (the
expected outputs are `poly --script`'s) or with exit 4 naming the limit, never exit 70 (an
internal error)."""

from __future__ import annotations

import pytest

from conftest import hpgrem

HANDLERS = ("exception Deep of int\n"
            "fun nest 0 = raise Deep 0\n"
            "  | nest n = (nest (n - 1) handle Fail _ => 0) + 1\n"
            "fun apply f x = f x\n"
            "fun nestf 0 = raise Deep 7\n"
            "  | nestf n = (apply nestf (n - 1) handle Fail _ => 0) + 1\n"
            'val _ = print (Int.toString (nest 100000 handle Deep k => k) ^ "\\n")\n'
            'val _ = print (Int.toString (nestf 100000 handle Deep k => k) ^ "\\n")\n')
DEEP = ("fun down 0 = 0\n"
        "  | down n = 1 + down (n - 1)\n"
        "fun build 0 = [] | build n = n :: build (n - 1)\n"
        "fun len [] = 0 | len (_ :: r) = 1 + len r\n"
        "fun apply f x = f x\n"
        "fun downf 0 = 0 | downf n = 1 + apply downf (n - 1)\n"
        'val _ = print (Int.toString (down 1000000) ^ "\\n")\n'
        'val _ = print (Int.toString (len (build 1000000)) ^ "\\n")\n'
        'val _ = print (Int.toString (downf 1000000) ^ "\\n")\n')


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
@pytest.mark.parametrize("text, expected", [(HANDLERS, "0\n7\n"), (DEEP, "1000000\n1000000\n1000000\n")])
def test_deep_programs_end_as_poly_ml_or_name_the_limit(text, expected, opt, tmp_path):
    path = tmp_path / "deep.sml"
    path.write_text(text)
    r = hpgrem("run", opt, str(path), timeout=600)
    assert r.returncode in (0, 4), r.stderr
    if r.returncode == 0:
        assert r.stdout == expected
    else:
        assert "limit" in r.stderr and "Traceback" not in r.stderr
