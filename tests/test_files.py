"""core.files: a file replaced whole, never seen half-written, left as it was on failure."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from simgym.core.files import replacing, write_atomic


def test_text_and_bytes_replace_the_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text("old and longer\n")
    write_atomic(path, "née\n")
    assert path.read_bytes() == "née\n".encode()  # UTF-8 whatever the locale
    write_atomic(path, b"\x00raw")
    assert path.read_bytes() == b"\x00raw"
    with replacing(path, fsync=True) as f:
        f.write("a\n")
        f.write("b\n")
    assert path.read_text() == "a\nb\n"
    assert os.listdir(tmp_path) == ["a.json"]  # no temporary file left


def test_a_failed_write_leaves_the_old_contents(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text("kept\n")
    with pytest.raises(RuntimeError), replacing(path) as f:
        f.write("half")
        raise RuntimeError("cut")
    assert path.read_text() == "kept\n"
    assert os.listdir(tmp_path) == ["rows.jsonl"]


def test_the_new_file_has_the_usual_permissions(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        write_atomic(tmp_path / "new.txt", "x")
    finally:
        os.umask(umask)
    assert (tmp_path / "new.txt").stat().st_mode & 0o777 == 0o644  # not mkstemp's 0600
