"""Dependencies point one way: checked on the source, imports inside functions included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "simgym"

# package -> the simgym packages its modules may import (besides itself)
ALLOWED = {
    "core": set(),
    "domains": {"core"},
    "experience": {"core"},
    "perturb": {"core", "domains"},
    "rewards": {"core", "worldmodels"},
    "worlds": {"core", "domains"},
}


def simgym_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "simgym":
                found.add(parts[1] if len(parts) > 1 else "")
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_below_it(package):
    bad = {}
    for path in sorted((SRC / package).rglob("*.py")):
        if path.name == "__main__.py":
            continue  # `python -m simgym.PACKAGE` is a command line: the top of the house
        extra = simgym_imports(path) - ALLOWED[package] - {package}
        if extra:
            bad[str(path.relative_to(SRC))] = sorted(extra)
    assert not bad, f"{package} imports above itself: {bad}"
