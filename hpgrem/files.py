"""Reading a user's file: the one place where a missing file, a folder, an unreadable file or
text that is not UTF-8 becomes a one-line error (`error`, the caller's own kind: a UsageError
or a subclass), never a traceback. `kind` names what the file should have been ("data file",
"configuration file"); the messages are `PATH: no such KIND`, `PATH: is a directory, not a
KIND`, `PATH: cannot read: REASON` and `PATH: not UTF-8 text (byte N)`."""

from __future__ import annotations

from os import PathLike

from hpgrem.errors import UsageError


def read_bytes(path: str | PathLike, error: type[Exception] = UsageError, kind: str = "file",
               utf8: bool = False) -> bytes:
    """The file's bytes; with `utf8`, only if they are UTF-8 text."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise error(f"{path}: no such {kind}") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory" + ("" if kind == "file" else f", not a {kind}")) from None
    except OSError as e:
        raise error(f"{path}: cannot read: {e.strerror or e}") from None
    if utf8:
        _decoded(path, data, error)
    return data


def _decoded(path, data: bytes, error: type[Exception]) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 text (byte {e.start})") from None


def read_text(path: str | PathLike, error: type[Exception] = UsageError, kind: str = "file") -> str:
    """The file's text, its line ends made `\\n` (as Python's text files read them)."""
    text = _decoded(path, read_bytes(path, error, kind), error)
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


__all__ = ["read_bytes", "read_text"]
