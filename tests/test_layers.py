"""Dependencies point one way, down the house's layers: checked on the source, imports
inside functions included (only ``if TYPE_CHECKING:`` blocks, which never run, are left out).

The layer order is declared once, here. A unit is a top-level package or module of
``simgym``; a unit may import its own layer and the layers below it, never one above, and
the units form no cycle (two units of one layer importing each other would be one).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "simgym"

# lowest first; "" is simgym/__init__ (the public face, lazy: it may name anything)
LAYERS: list[set[str]] = [
    {"core"},
    {"domains", "experience"},
    {"worldmodels", "real"},
    {"agents", "rewards", "perturb", "worlds", "build"},
    {"rollout"},
    {"data", "logs"},
    {"safety"},
    {"bench"},
    {"train"},
    {"integrations"},
    {"viewer"},  # reads trajectories and reports; only the command line imports it
    {"cli", "__main__", ""},
]
LAYER = {unit: i for i, units in enumerate(LAYERS) for unit in units}
# `python -m simgym.PACKAGE` entry points are command lines: the top of the house
COMMAND_LINES = {"__main__.py"}


def _module_name(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skipped


def imports_of(path: Path, src: Path = SRC) -> list[tuple[str, int]]:
    """The simgym modules ``path`` imports, with line numbers."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _type_checking_nodes(tree)
    module = _module_name(path, src)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                names = [".".join([*base, node.module] if node.module else base)]
            else:
                names = [node.module or ""]
            names += [f"{names[0]}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] == "simgym":
                found.append((name, node.lineno))
    return found


def unit_graph(src: Path = SRC) -> tuple[dict[str, set[str]], list[str]]:
    """Edges between units, and every import that points into a higher layer."""
    edges: dict[str, set[str]] = defaultdict(set)
    upward = []
    for path in sorted(src.rglob("*.py")):
        if path.name in COMMAND_LINES:
            continue  # a command line sits on top: it may import anything, nothing imports it
        source = _unit(_module_name(path, src))
        for name, line in imports_of(path, src):
            target = _unit(name)
            # `from simgym import x` names a unit by attribute; other names are no unit
            if target == source or target not in LAYER:
                continue
            edges[source].add(target)
            if LAYER[target] > LAYER[source]:
                upward.append(f"{path.relative_to(src)}:{line} {source or 'simgym'} -> {name}")
    return edges, upward


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in list(edges):
        if v not in index:
            visit(v)
    return groups


def test_every_unit_has_a_layer():
    units = {_unit(_module_name(p)) for p in SRC.rglob("*.py")}
    assert units <= set(LAYER), f"declare a layer for: {sorted(units - set(LAYER))}"


def test_no_import_points_into_a_higher_layer():
    _, upward = unit_graph()
    assert not upward, "imports into a higher layer:\n" + "\n".join(upward)


def test_units_form_no_cycle():
    edges, _ = unit_graph()
    assert not cycles(edges), f"import cycles: {cycles(edges)}"


def test_modules_within_a_package_form_no_cycle():
    edges: dict[str, set[str]] = defaultdict(set)
    for path in sorted(SRC.rglob("*.py")):
        module = _module_name(path)
        for name, _ in imports_of(path):
            # the module itself, or the package a `from package import module` names
            target = name if (SRC.parent / (name.replace(".", "/") + ".py")).exists() else None
            if target is None and (SRC.parent / name.replace(".", "/") / "__init__.py").exists():
                target = name
            if target and target != module and _unit(target) == _unit(module):
                if not module.startswith(target + "."):  # a submodule may use its package
                    edges[module].add(target)
    assert not cycles(edges), f"module cycles: {cycles(edges)}"


def test_the_checker_sees_a_planted_upward_import_and_cycle(tmp_path):
    src = tmp_path / "simgym"
    for package, text in (
        ("core", "def f():\n    from simgym.cli import app\n"),  # hidden in a function
        ("cli", "from simgym.core import f\n"),
    ):
        (src / package).mkdir(parents=True)
        (src / package / "__init__.py").write_text(text, encoding="utf-8")
    edges, upward = unit_graph(src)
    assert upward == [
        "core/__init__.py:2 core -> simgym.cli",
        "core/__init__.py:2 core -> simgym.cli.app",
    ]
    assert cycles(edges) == [["cli", "core"]]


def test_import_simgym_loads_only_the_core():
    code = (
        "import sys, simgym\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('simgym'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    heavy = {"real", "train", "bench", "integrations", "rollout", "data", "worldmodels", "cli"}
    assert not {m for m in loaded if _unit(m) in heavy}, sorted(loaded)
    assert "simgym" in loaded
