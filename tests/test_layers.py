"""Dependencies point one way, down the house's layers: checked on the source, imports
inside functions included (only ``if TYPE_CHECKING:`` blocks, which never run, are left out),
and so are modules named by a literal string to ``importlib.import_module`` (an upward import
written as a string is still upward).

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


def _import_module_name(node: ast.Call) -> str | None:
    """The module a call ``importlib.import_module("simgym.x")`` (or a bare
    ``import_module("simgym.x")``) names, when it is a literal string."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if called != "import_module" or not node.args:
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


def imports_of(path: Path, src: Path = SRC, *, type_only: bool = False) -> list[tuple[str, int]]:
    """The simgym modules ``path`` imports, with line numbers.

    Args:
        path: a source file under ``src``.
        src: the ``simgym`` package folder.
        type_only: also count imports under ``if TYPE_CHECKING:`` (they never run, but a
            cycle through them is still a knot in the design).

    Returns:
        ``(module name, line)`` for each import statement's names and each literal
        ``import_module`` string that names a simgym module.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = set() if type_only else _type_checking_nodes(tree)
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
        elif isinstance(node, ast.Call) and (named := _import_module_name(node)):
            names = [named]
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


def _module_of(name: str, src: Path) -> str | None:
    """The module (file) an imported name is: ``simgym.a.b`` as ``a/b.py`` or the package
    ``a/b/__init__.py``; None for a name inside a module (``simgym.a.b.SomeClass``)."""
    relative = name.split(".")[1:]
    if not relative:
        return name  # simgym itself
    if (src.joinpath(*relative[:-1]) / f"{relative[-1]}.py").exists():
        return name
    if (src.joinpath(*relative) / "__init__.py").exists():
        return name
    return None


def module_graph(
    src: Path = SRC, *, type_only: bool = False, across_units: bool = True
) -> dict[str, set[str]]:
    """Edges between modules (files) of ``src``.

    Args:
        src: the ``simgym`` package folder.
        type_only: include imports under ``if TYPE_CHECKING:``.
        across_units: include edges between modules of different units (False keeps
            only those inside one top-level package).

    Returns:
        module name -> the modules it imports. A submodule using its own package
        (``simgym.core.env`` importing ``simgym.core``) is no edge: the package's lazy
        ``__init__`` is how its parts are reached.
    """
    edges: dict[str, set[str]] = defaultdict(set)
    for path in sorted(src.rglob("*.py")):
        module = _module_name(path, src)
        for name, _ in imports_of(path, src, type_only=type_only):
            target = _module_of(name, src)
            if not target or target == module or module.startswith(target + "."):
                continue
            if across_units or _unit(target) == _unit(module):
                edges[module].add(target)
    return edges


def layer_counts(src: Path = SRC) -> dict[str, object]:
    """The numbers the house is judged by: module cycles (type-only imports included),
    imports into a higher layer (``import_module`` strings included), the largest module."""
    groups = cycles(module_graph(src, type_only=True))
    _, upward = unit_graph(src)
    sizes = {
        str(p.relative_to(src)): len(p.read_text(encoding="utf-8").splitlines())
        for p in src.rglob("*.py")
    }
    largest = max(sizes, key=sizes.__getitem__) if sizes else ""
    return {
        "module_cycles": len(groups),
        "modules_in_cycles": sum(len(g) for g in groups),
        "cycles": groups,
        "upward_imports": len(upward),
        "upward": upward,
        "largest_module": largest,
        "largest_module_lines": sizes.get(largest, 0),
    }


# Module cycles counted with type-only imports, as found when this count was added; the
# number may only go down (lower it when you break one).
MODULE_CYCLES_CEILING = 2


def test_modules_within_a_package_form_no_cycle():
    edges = module_graph(across_units=False)
    assert not cycles(edges), f"module cycles: {cycles(edges)}"


def test_layer_counts(capsys):
    counts = layer_counts()
    with capsys.disabled():  # shown with `pytest -s`: the numbers a closing note quotes
        print(
            f"\nlayers: {counts['module_cycles']} module cycles "
            f"({counts['modules_in_cycles']} modules, type-only imports included), "
            f"{counts['upward_imports']} upward imports, largest module "
            f"{counts['largest_module']} ({counts['largest_module_lines']} lines)"
        )
        for group in counts["cycles"]:  # type: ignore[attr-defined]
            print("  cycle: " + " -> ".join(group))
    assert counts["upward_imports"] == 0, counts["upward"]
    assert counts["module_cycles"] <= MODULE_CYCLES_CEILING, counts["cycles"]


def test_the_counts_see_a_string_import_a_type_only_cycle_and_the_largest_module(tmp_path):
    src = tmp_path / "simgym"
    (src / "core").mkdir(parents=True)
    (src / "cli").mkdir()
    (src / "__init__.py").write_text("", encoding="utf-8")
    (src / "cli" / "__init__.py").write_text("", encoding="utf-8")
    (src / "core" / "__init__.py").write_text("", encoding="utf-8")
    (src / "core" / "a.py").write_text(
        "import importlib\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from simgym.core.b import B\n"
        "def f():\n"
        "    return importlib.import_module('simgym.cli').run\n",
        encoding="utf-8",
    )
    (src / "core" / "b.py").write_text("from simgym.core import a\n" + "x = 1\n" * 9)
    counts = layer_counts(src)
    assert counts["upward"] == ["core/a.py:6 core -> simgym.cli"]
    assert counts["cycles"] == [["simgym.core.a", "simgym.core.b"]]
    assert (counts["largest_module"], counts["largest_module_lines"]) == ("core/b.py", 10)
    # without the type-only import there is no cycle, and the checks that gate the tree
    # (runtime imports only) agree
    assert not cycles(module_graph(src))


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
