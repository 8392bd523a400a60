"""Files replaced whole, atomically: a reader sees the old contents or the new, never half.

The new contents go to a temporary file beside the target (same directory, so the same
file system) that ``os.replace`` then puts in its place. A failed write leaves the target
as it was and removes the temporary file.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import IO, Any, BinaryIO, Literal, TextIO, overload

StrPath = str | os.PathLike[str]


@overload
def replacing(
    path: StrPath, *, binary: Literal[False] = False, fsync: bool = False
) -> AbstractContextManager[TextIO]: ...
@overload
def replacing(
    path: StrPath, *, binary: Literal[True], fsync: bool = False
) -> AbstractContextManager[BinaryIO]: ...
def replacing(
    path: StrPath, *, binary: bool = False, fsync: bool = False
) -> AbstractContextManager[IO[Any]]:
    """A file to write ``path``'s new contents into (UTF-8 text, or bytes with ``binary``);
    ``path`` gets them when the block ends without an error. ``fsync`` waits for the disk
    before the swap, so the new contents survive the machine going down."""
    return _replacing(Path(path), binary, fsync)


def write_atomic(path: StrPath, data: str | bytes, *, fsync: bool = False) -> None:
    """Replace ``path``'s contents with ``data`` (text is written as UTF-8)."""
    if isinstance(data, bytes):
        with replacing(path, binary=True, fsync=fsync) as f:
            f.write(data)
    else:
        with replacing(path, fsync=fsync) as f:
            f.write(data)


@contextmanager
def _replacing(path: Path, binary: bool, fsync: bool) -> Iterator[IO[Any]]:
    # A fresh name per writer, so two writers never share a temporary file; created with
    # open(..., "x"), not mkstemp, so the file gets the usual permissions (umask), not 0600.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "xb") if binary else open(tmp, "x", encoding="utf-8") as f:
            yield f
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
