"""Streaming reads with the standard library only: lines of a file as bytes with their
numbers, and the items of one named array inside a large JSON document (a HAR's
"entries", an OCEL file's "events") decoded one at a time, never the whole document."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

from simgym.core.errors import SimgymError

_CHUNK = 1 << 16
_DECODER = json.JSONDecoder()
# The longest line (JSONL) or array item (HAR, OCEL) read. Decoding costs a few times the
# text in memory (a 200 MB line took 672 MB), so a longer one is refused before it is read
# whole. An OTLP export line of 512 spans is well under 10 MB.
MAX_LINE_BYTES = 64 << 20


class LineTooLong(SimgymError):
    """A line or array item beyond :data:`MAX_LINE_BYTES`."""


def numbered_lines(path: Path, max_bytes: int | None = None) -> Iterator[tuple[int, bytes]]:
    """(line number, raw line) for the non-blank lines of a file, read lazily. A line
    longer than ``max_bytes`` (default :data:`MAX_LINE_BYTES`) raises :class:`LineTooLong`
    naming the file and line, before more than that is read."""
    limit = MAX_LINE_BYTES if max_bytes is None else max_bytes
    with open(path, "rb") as f:
        number = 0
        while raw := f.readline(limit + 1):
            number += 1
            if len(raw) > limit and not (len(raw) == limit + 1 and raw.endswith(b"\n")):
                raise LineTooLong(
                    f"{path}:{number}: a line longer than {_size(limit)}; simgym reads one "
                    "record (or one OTLP export) a line: split the file"
                )
            if raw.strip():
                yield number, raw


def _size(n: int) -> str:
    return f"{n / (1 << 20):g} MiB" if n >= 1 << 20 else f"{n:,} bytes"


def iter_array(path: Path, key: str) -> Iterator[object]:
    """The items of the first array stored under ``"key":`` in the JSON file at ``path``,
    decoded one by one from a sliding buffer. A key in a string is never matched (quotes
    inside JSON strings are escaped); the first such key anywhere is the one read. Raises
    ValueError on a malformed item (the rest of the array cannot be found after one)."""
    pattern = re.compile(r'"' + re.escape(key) + r'"\s*:\s*\[')
    with open(path, encoding="utf-8") as f:
        buffer = ""
        position = -1
        while position < 0:
            chunk = f.read(_CHUNK)
            if not chunk:
                return
            buffer += chunk
            match = pattern.search(buffer)
            if match:
                position = match.end()
            else:
                buffer = buffer[-(len(key) + 64) :]
        buffer = buffer[position:]
        eof = False
        while True:
            stripped = buffer.lstrip()
            if stripped.startswith(","):
                stripped = stripped[1:].lstrip()
            if stripped.startswith("]"):
                return
            if stripped:
                try:
                    item, end = _DECODER.raw_decode(stripped)
                except json.JSONDecodeError:
                    if eof:
                        raise
                else:
                    # a number at the end of the buffer may still go on in the next chunk
                    if end < len(stripped) or eof:
                        yield item
                        buffer = stripped[end:]
                        continue
            if eof:
                if stripped:
                    raise ValueError(f"unterminated array {key!r} in {path}")
                return
            if len(stripped) > MAX_LINE_BYTES:
                raise LineTooLong(
                    f"{path}: an item of {key!r} longer than {_size(MAX_LINE_BYTES)}; refusing "
                    "to read it whole"
                )
            # read at least as much again as is buffered: one huge item costs linear time
            chunk = f.read(max(_CHUNK, len(stripped)))
            eof = not chunk
            buffer = stripped + chunk
