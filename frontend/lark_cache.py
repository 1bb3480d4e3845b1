"""Where a front end's Lark parser keeps its tables between runs (`Lark(..., cache=...)`).

Building the LALR tables of ml.lark takes about 0.3 s; Lark can store them, as a pickle, and
load them on the next run. Lark's own default (`cache=True`) is a file in the shared temporary
directory under a predictable name, which another user of the machine could plant: loading a
pickle runs code. So the tables go in the user's own cache directory
(`$XDG_CACHE_HOME/hpgrem`, else `~/.cache/hpgrem`, an absolute path, never the working
directory), made private (0700), and used only when it is owned by the user and writable by no
one else; otherwise there is no cache and the tables are built each run. Lark checks the
grammar's hash stored in the file, so a changed grammar rebuilds it."""

from __future__ import annotations

import os
import sys


def lark_cache(name: str) -> str | bool:
    """The cache file for the grammar `name` (for Lark's `cache`), or False: no cache."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            return False
        base = os.path.join(home, ".cache")
    folder = os.path.join(base, "hpgrem")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        st = os.lstat(folder)
    except OSError:
        return False
    if not os.path.isdir(folder) or os.path.islink(folder) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        return False
    return os.path.join(folder, f"{name}-{sys.version_info[0]}.{sys.version_info[1]}.lark-cache")
