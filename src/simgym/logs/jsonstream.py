"""Streaming reads with the standard library only: lines of a file as bytes with their
numbers, and the items of one named array inside a large JSON document (a HAR's
"entries", an OCEL file's "events") decoded one at a time, never the whole document."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

_CHUNK = 1 << 16
_DECODER = json.JSONDecoder()


def numbered_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number, raw line) for the non-blank lines of a file, read lazily."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if raw.strip():
                yield number, raw


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
            # read at least as much again as is buffered: one huge item costs linear time
            chunk = f.read(max(_CHUNK, len(stripped)))
            eof = not chunk
            buffer = stripped + chunk
