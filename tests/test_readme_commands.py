"""Every ``simgym`` command line in README.md and the docs site runs as written.

The README and the docs (``docs/**/*.md``: tutorials, how-tos, the guide pages that hold
each feature's reference) are where new users copy commands from, so each one is checked
against the
real command tree (typer's click commands, walked from :data:`simgym.cli.app`): the
subcommand path exists, every flag is an option of that command, an option that takes a
value has one, required options are given and the positional arguments fit. Nothing is
run: the commands start servers, train models and need files that are not there.

Command lines come from fenced code blocks (backslash continuations joined, ``#``
comments dropped) and get the whole check. Inline code spans in prose often name a
command without all it needs (`simgym export -f awb`, `simgym bench infer`), so for
them only the subcommand path and the flags are checked. The README's cheat sheet uses a little
notation, which is read as meant: ``[--flag X]`` is optional, ``play|run`` and
``--mcp | --openenv`` are alternatives, ``...`` elides arguments (then only the flags
are checked), and upper-case words (``URL``, ``FILE``) are placeholders for values.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer.main

from simgym.cli import app

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
# The pages people copy commands from; generated pages (the CLI reference) are not here.
DOC_PAGES = sorted((REPO / "docs").rglob("*.md"))
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
INLINE = re.compile(r"`([^`]+)`")
SHELL_LANGS = ("", "sh", "bash", "shell", "console")
COMMAND_ENDS = {"&&", "||", ";", ">", ">>", "2>&1"}


@dataclass(frozen=True)
class CommandLine:
    line: int  # where it starts in README.md, for the failure message
    text: str
    args: tuple[str, ...]  # what follows the program name ``simgym``
    complete: bool = True  # False for a mention in prose: required parts may be left out


def _is_simgym(token: str) -> bool:
    return token == "simgym" or token.endswith("/simgym")


def _simgym_args(text: str) -> tuple[str, ...] | None:
    """The arguments of the simgym command in one shell line, or None when there is none
    (a Python line, prose in backticks, another program)."""
    try:
        tokens = shlex.split(text, comments=True)
    except ValueError:
        return None  # not shell (an unbalanced quote in Python or prose)
    start = next((i for i, t in enumerate(tokens) if _is_simgym(t)), None)
    if start is None:
        return None
    # Only a command position counts: first, after env assignments, a pipe or `&&`.
    before = tokens[:start]
    separators = ("|", "&&", "||", ";")
    if before and not (before[-1] in separators or all(re.match(r"^\w+=", t) for t in before)):
        return None
    args: list[str] = []
    for i, token in enumerate(tokens[start + 1 :], start + 1):
        following = tokens[i + 1] if i + 1 < len(tokens) else ""
        # "|" between two flags is the cheat sheet's "either"; anywhere else it is a pipe.
        if token in COMMAND_ENDS or (token == "|" and not following.startswith("-")):
            break
        if token != "|":
            args.append(token.strip("[]"))  # [--quick] and [-w openai ...] are optional
    return tuple(a for a in args if a)


def command_lines(text: str) -> list[CommandLine]:
    found: list[CommandLine] = []
    for block in FENCE.finditer(text):
        lang = text[block.start() : text.index("\n", block.start())].strip("`").strip()
        if lang not in SHELL_LANGS:
            continue
        first = text.count("\n", 0, block.start(1)) + 1
        # Join backslash continuations, remembering where each logical line started.
        logical: list[tuple[int, str]] = []
        pending: tuple[int, str] | None = None
        for offset, raw in enumerate(block.group(1).split("\n")):
            start, head = pending if pending else (first + offset, "")
            if raw.rstrip().endswith("\\"):
                pending = (start, head + raw.rstrip()[:-1] + " ")
                continue
            pending = None
            logical.append((start, head + raw))
        for number, line in logical:
            args = _simgym_args(line)
            if args is not None:
                found.append(CommandLine(number, line.strip(), args))
    outside = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    for span in INLINE.finditer(outside):
        line = " ".join(span.group(1).split("\n"))
        args = _simgym_args(line)
        if args is not None:
            number = outside.count("\n", 0, span.start()) + 1
            found.append(CommandLine(number, line.strip(), args, complete=False))
    return found


# -- the command tree -------------------------------------------------------------------


def _is_group(command: Any) -> bool:
    return hasattr(command, "commands")


def _options(command: Any) -> dict[str, Any]:
    """Every spelling of every option (``--out``, ``-o``, ``--no-color``, ``--help``)."""
    import click

    params = command.get_params(click.Context(command))
    return {
        name: p
        for p in params
        if p.param_type_name == "option"
        for name in (*p.opts, *p.secondary_opts)
    }


def _takes_value(option: Any) -> bool:
    return not (option.is_flag or option.count)


def _required(option: Any) -> bool:
    # `serve` checks --out in its body (so --help works without it); its help ends in
    # "; required" ("required to listen beyond loopback" is a condition, not this).
    return bool(option.required or re.search(r"(^|; )required$", option.help or ""))


def problems(entry: CommandLine, root: Any) -> list[str]:
    """What would make this command line fail (an empty list: it runs as written)."""
    args = list(entry.args)
    commands = [("simgym", root)]
    while args and all(_is_group(c) for _, c in commands) and not args[0].startswith("-"):
        names = args.pop(0).split("|")  # play|run: check each alternative
        found = []
        for path, group in commands:
            for name in names:
                if name not in group.commands:
                    return [f"{path} has no subcommand {name!r} (has: {sorted(group.commands)})"]
                found.append((f"{path} {name}", group.commands[name]))
        commands = found
    errors: list[str] = []
    for path, command in commands:
        errors += _check_leaf(path, command, args, complete=entry.complete)
    return errors


def _check_leaf(path: str, command: Any, args: list[str], *, complete: bool) -> list[str]:
    options, errors = _options(command), []
    given: set[int] = set()
    positionals: list[str] = []
    elided = "..." in args
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if token == "...":
            continue
        if not (token.startswith("-") and len(token) > 1):
            positionals.append(token)
            continue
        name, has_inline, _ = token.partition("=")
        option = options.get(name)
        if option is None:
            errors.append(f"{path}: no option {name}")
            continue
        given.add(id(option))
        if not _takes_value(option):
            continue
        if has_inline:
            continue
        if i < len(args):
            i += 1  # the option's value (values are checked by the command when it runs)
        else:
            errors.append(f"{path}: {name} needs a value")
    if _is_group(command) or elided or not complete:
        return errors  # a bare group prints its help; "..." or a mention leaves parts out
    for option in {id(o): o for o in options.values()}.values():
        if _required(option) and id(option) not in given:
            errors.append(f"{path}: the required option {option.opts[0]} is missing")
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    least = sum(max(p.nargs, 1) for p in arguments if p.required)
    most = None if any(p.nargs == -1 for p in arguments) else sum(p.nargs for p in arguments)
    if len(positionals) < least or (most is not None and len(positionals) > most):
        errors.append(
            f"{path}: {len(positionals)} positional arguments {positionals}, "
            f"expected {least}{'+' if most is None else f'..{most}'}"
        )
    return errors


# -- the tests ---------------------------------------------------------------------------

ROOT = typer.main.get_command(app)
LINES = command_lines(README.read_text(encoding="utf-8"))
DOC_LINES = [
    (page.relative_to(REPO).as_posix(), entry)
    for page in DOC_PAGES
    for entry in command_lines(page.read_text(encoding="utf-8"))
]


def test_the_readme_has_command_lines() -> None:
    """The README's own commands: the two that work on a fresh machine, and a few more."""
    joined = [entry.text for entry in LINES]
    assert any(
        t.startswith("bash scripts/setup.sh && .venv/bin/simgym play terminal") for t in joined
    )
    assert any(t.startswith("printf") and "play terminal" in t for t in joined)  # a pipe
    assert {entry.args[0] for entry in LINES if entry.args} >= {"play", "run", "view", "doctor"}


def test_the_docs_have_command_lines_of_every_kind() -> None:
    """The extraction itself: if it found nothing, every other test would pass vacuously."""
    assert len(DOC_LINES) >= 100
    first_words = {entry.args[0] for _, entry in DOC_LINES if entry.args}
    assert {"play", "run", "serve", "bench", "export", "record", "train", "world"} <= first_words
    joined = [entry.text for _, entry in DOC_LINES]
    assert any("bench infer -d ./AgentWorldBench" in t for t in joined)  # a continued line
    assert any(t.startswith("printf") and "play terminal" in t for t in joined)  # a pipe


@pytest.mark.parametrize("entry", LINES, ids=lambda e: f"README.md:{e.line}")
def test_readme_command_runs_as_written(entry: CommandLine) -> None:
    assert problems(entry, ROOT) == [], entry.text


@pytest.mark.parametrize("page_entry", DOC_LINES, ids=lambda pe: f"{pe[0]}:{pe[1].line}")
def test_docs_command_runs_as_written(page_entry: tuple[str, CommandLine]) -> None:
    page, entry = page_entry
    assert problems(entry, ROOT) == [], f"{page}:{entry.line}: {entry.text}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("simgym serve --mcp --domain mcp", "required option --out is missing"),
        ("simgym run tasks.jsonl -o r.jsonl --agent-modle x", "no option --agent-modle"),
        ("simgym bench inferr -d x -o y", "no subcommand 'inferr'"),
        ("simgym bench compare a.jsonl", "1 positional arguments"),
        ("simgym play|runn terminal", "no subcommand 'runn'"),
    ],
)
def test_the_checker_catches_what_fails(text: str, expected: str) -> None:
    """The checker is not a rubber stamp: broken command lines are reported."""
    entry = CommandLine(0, text, _simgym_args(text) or ())
    assert any(expected in problem for problem in problems(entry, ROOT)), problems(entry, ROOT)
