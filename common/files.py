"""Reading a file the user named: its text, or one :class:`UnreadableFile` line saying why not.

Every layer that reads a user-supplied text file (assembly sources, platform and ISA-variant TOML
files, sweep specs and tables) reads it through :func:`read_text`, so a binary file, a file in
another encoding or a missing one is reported the same way: ``PATH: what is wrong``, with the
offset of the first offending byte.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tsar.common.errors import UserError


class UnreadableFile(UserError):
    """A user's file that cannot be read, is binary or is not UTF-8 text."""


def _cannot_read(path: str | os.PathLike[str], what: str, exc: OSError) -> UnreadableFile:
    return UnreadableFile(f"{path}: cannot read {what}: {exc.strerror or exc}")


def read_bytes(path: str | os.PathLike[str], what: str) -> bytes:
    """The bytes of ``path``; :class:`UnreadableFile` (``PATH: cannot read WHAT: reason``) if it
    cannot be read (missing, a directory, no permission...)."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise _cannot_read(path, what, exc) from None


def _line(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def decode_text(data: bytes, path: str | os.PathLike[str], what: str) -> str:
    """``data`` as UTF-8 text (a leading byte-order mark dropped). A NUL byte means binary content,
    any other undecodable byte another encoding; either is an :class:`UnreadableFile` naming the
    file, the byte, its offset and line, and ``what`` the file should have been."""
    nul = data.find(b"\0")
    if nul >= 0:
        raise UnreadableFile(f"{path}: binary content (NUL byte at offset {nul}, line "
                             f"{_line(data, nul)}); expected {what}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(f"{path}: not a UTF-8 text file (byte {data[exc.start]:#04x} at offset "
                             f"{exc.start}, line {_line(data, exc.start)}); expected {what}") from None
    return text.removeprefix("\ufeff")


def read_text(path: str | os.PathLike[str], what: str) -> str:
    """The UTF-8 text of the user's file ``path``, or one :class:`UnreadableFile` line: ``what``
    says what the file should be (``"an assembly source (.s)"``, ``"a platform .toml file"``)."""
    return decode_text(read_bytes(path, what), path, what)


def load_arrays(path: str | os.PathLike[str], what: str) -> Any:
    """A NumPy ``.npy`` array, or the arrays of a ``.npz`` archive as a dict, from the user's file
    ``path`` (pickled objects refused); :class:`UnreadableFile` if it is not one."""
    import zipfile

    import numpy as np

    try:
        with open(path, "rb") as f:
            head = f.read(6)
        if head != b"\x93NUMPY" and not head.startswith(b"PK\x03\x04"):
            raise UnreadableFile(f"{path}: not {what} (neither NumPy .npy nor .npz content)")
        data = np.load(path, allow_pickle=False)
        if isinstance(data, np.lib.npyio.NpzFile):
            with data:
                return {name: data[name] for name in data.files}
        return data
    except OSError as exc:
        if exc.strerror:
            raise _cannot_read(path, what, exc) from None
        reason = str(exc)
    except (ValueError, EOFError, KeyError, zipfile.BadZipFile, NotImplementedError) as exc:
        reason = str(exc)
    first = reason.splitlines()[0].split(". ")[0].rstrip(".") if reason else ""
    raise UnreadableFile(f"{path}: not {what}" + (f" ({first[:100]})" if first else ""))
