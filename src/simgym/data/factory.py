"""The trajectory factory: real transitions at volume, for training world models.

``simgym record`` runs hand-written episodes; the factory writes its own. For each domain
it draws a randomized, realistic scenario and a randomized but sensible action program,
runs the program against the domain's real backend, and keeps the trajectory:

* **terminal**: a home directory with data exports, logs, a small Python project,
  configs, notes and scripts, in a bubblewrap sandbox with a tmux shell; programs
  explore, query, create, edit, delete, use git and interactive programs, and fail on
  purpose (typos, missing files, permission errors).
* **swe**: a small Python package with unittest tests and sometimes an injected bug, in a
  sandbox; programs read, list, run tests, fix or introduce bugs, add modules, misuse the
  file tools, and usually submit.
* **mcp**: the bundled customer-records MCP server on a database seeded afresh for each
  episode; programs search, read, update emails (valid, invalid, taken), open tickets and
  ask about customers that do not exist.
* **search**: the FTS5 index over Python's documentation plus a few generated internal
  pages; programs search (one or several queries, typos, nonsense), open pages found in
  earlier results, scenario pages and guessed URLs.
* **web**: generated static sites (shop, blog, help center, account portal) in headless
  Chromium; programs follow a task (check out, comment, contact support, sign in) mixed
  with wandering: links, forms, selects, checkboxes, history, tabs, bad ids, blocked hosts.

Programs are generators: they get each observation and yield the next action, so they
can act on what the world showed (open a URL from the results, click the id the page
gave the button). Everything is drawn from ``random.Random`` seeded by the run's seed,
the domain and the episode's number, so a plan is a pure function of those.

:func:`arun_factory` runs episodes on the real backends with bounded concurrency (one
backend per in-flight episode, reused across its episodes), appends every episode to
``OUT/raw.jsonl`` as it ends (a rerun skips the episode ids already there), and stops
when every domain has its share of transitions. :func:`finalize` then drops duplicate
episodes (same scenario, same actions), splits by a hash of the episode id (never by
turn) into ``train.jsonl``/``val.jsonl``/``test.jsonl`` and writes ``manifest.json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import posixpath
import random
import shutil
import socket
import sqlite3
import subprocess
import tempfile
import textwrap
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from simgym.core.errors import SimgymError
from simgym.core.types import Task, Trajectory

DOMAINS = ("terminal", "swe", "mcp", "search", "web")
SPLITS = ("train", "val", "test")
DEFAULT_SPLIT = (0.90, 0.05, 0.05)
RAW_FILE = "raw.jsonl"
MANIFEST_FILE = "manifest.json"
FORMAT = "simgym-factory/1"

# A program yields actions (anything SimEnv.step takes), receives each observation's
# text, and may return the agent's final answer.
Program = Generator[Any, str, "str | None"]
ProgramFactory = Callable[[str], Program]


class FactoryError(SimgymError):
    """The factory cannot run as asked (a backend is missing, the output is taken)."""


@dataclass
class EpisodePlan:
    """One episode to record: the task (with its scenario) and the program that acts."""

    id: str
    domain: str
    index: int
    task: Task
    program: ProgramFactory
    expected_turns: int
    setup: dict[str, Any] = field(default_factory=dict)  # what the backend slot needs


# -- shared vocabulary ----------------------------------------------------------------------

FIRST_NAMES = (
    "Ana", "Ben", "Chloe", "Dmitri", "Elif", "Farah", "Gustavo", "Hana", "Ivan", "Jonas",
    "Kemi", "Lena", "Marco", "Nadia", "Omar", "Priya", "Quentin", "Rosa", "Sven", "Tariq",
    "Uma", "Viktor", "Wen", "Yusuf", "Zoe",
)  # fmt: skip
LAST_NAMES = (
    "Lima", "Okafor", "Novak", "Haddad", "Moreau", "Tanaka", "Silva", "Berg", "Mensah",
    "Rossi", "Quinn", "Vidal", "Moura", "Kowalski", "Nguyen", "Ortiz", "Petrov", "Sato",
    "Weber", "Yilmaz",
)  # fmt: skip
CODE_WORDS = (
    "atlas", "beacon", "cobalt", "delta", "ember", "falcon", "garnet", "harbor", "iris",
    "juniper", "kestrel", "lumen", "meridian", "nimbus", "orchid", "pylon", "quartz",
    "raven", "summit", "tundra", "vertex", "willow", "zephyr",
)  # fmt: skip
MAIL_DOMAINS = ("example.com", "example.org", "example.net", "mail.example.com")


def _person(rng: random.Random) -> str:
    return f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"


def _email(rng: random.Random, name: str | None = None) -> str:
    name = name or _person(rng)
    local = name.lower().replace(" ", rng.choice((".", "", "_")))
    return f"{local}@{rng.choice(MAIL_DOMAINS)}"


def _length(rng: random.Random) -> int:
    """Actions in an episode: mostly short and medium, one in five long."""
    roll = rng.random()
    if roll < 0.4:
        return rng.randint(4, 8)
    if roll < 0.8:
        return rng.randint(9, 16)
    return rng.randint(18, 28)


def _weighted(rng: random.Random, options: dict[str, float]) -> str:
    names = [name for name, weight in options.items() if weight > 0]
    return rng.choices(names, [options[n] for n in names])[0]


# ==========================================================================================
# terminal
# ==========================================================================================

TERMINAL_USERS = (
    "ana", "ben", "chloe", "dev", "ops", "maria", "kenji", "li", "omar", "sofia", "tom",
    "yusuf", "analyst", "build",
)  # fmt: skip
TERMINAL_HOSTS = (
    "devbox", "build-01", "web-02", "laptop", "analytics", "staging", "ci-runner", "db-01",
    "workstation", "reports", "edge-3",
)  # fmt: skip
TERMINAL_TASKS = {
    "data": "Work out some totals from the data files.",
    "logs": "Find the errors in the logs and note them in a file.",
    "project": "Check the project and commit it to git.",
    "config": "Inspect the configuration and change the port.",
    "notes": "Tidy up the notes: back them up and mark what is done.",
    "scripts": "Find out what the scripts in bin do and run one.",
}
LOG_MESSAGES = {
    "INFO": (
        "server started on port {port}",
        "user {user} logged in",
        "processed {n} records in {ms} ms",
        "cache warmed with {n} entries",
        "scheduled job {job} finished",
    ),
    "WARN": (
        "slow query took {ms} ms",
        "disk usage at {pct}%",
        "retrying connection to db-01 (attempt {k})",
        "config key {key} is deprecated",
    ),
    "ERROR": (
        "connection refused by db-01:5432",
        "failed to write /var/tmp/{job}.lock: permission denied",
        "job {job} crashed: KeyError '{key}'",
        "timeout after {ms} ms calling payments api",
    ),
}


@dataclass
class _Machine:
    """A terminal program's picture of the machine: files it knows, the shell's cwd."""

    user: str
    home: str
    cwd: str
    files: dict[str, str]  # absolute path -> kind (csv, log, py, md, txt, json, ini, sh, ...)
    dirs: set[str]
    columns: dict[str, list[str]] = field(default_factory=dict)  # csv path -> header
    created: list[str] = field(default_factory=list)  # files this episode wrote
    git_repos: set[str] = field(default_factory=set)
    variables: dict[str, str] = field(default_factory=dict)
    themes: list[str] = field(default_factory=list)  # what the home directory holds

    def rel(self, path: str) -> str:
        """``path`` as a person would type it from the current directory."""
        if path == self.cwd:
            return "."
        if path.startswith(self.cwd + "/"):
            return path[len(self.cwd) + 1 :]
        if path == self.home:
            return "~"
        if path.startswith(self.home + "/"):
            return "~/" + path[len(self.home) + 1 :]
        return path

    def add_file(self, path: str, kind: str) -> None:
        self.files[path] = kind
        parent = posixpath.dirname(path)
        while parent and parent != "/" and parent not in self.dirs:
            self.dirs.add(parent)
            parent = posixpath.dirname(parent)

    def remove(self, path: str) -> None:
        self.files.pop(path, None)
        for known in [f for f in self.files if f.startswith(path + "/")]:
            self.files.pop(known)
        for known in [d for d in self.dirs if d == path or d.startswith(path + "/")]:
            self.dirs.discard(known)
        if path in self.created:
            self.created.remove(path)

    def pick(self, rng: random.Random, *kinds: str) -> str | None:
        found = sorted(p for p, k in self.files.items() if not kinds or k in kinds)
        return rng.choice(found) if found else None

    def pick_dir(self, rng: random.Random) -> str | None:
        found = sorted(d for d in self.dirs if d.startswith(self.home) and d != self.cwd)
        return rng.choice(found) if found else None


def _csv_files(rng: random.Random, base: str) -> tuple[dict[str, str], dict[str, list[str]]]:
    kind = rng.choice(("sales", "employees", "sensors", "invoices"))
    rows: list[list[str]] = []
    n = rng.randint(5, 12)
    if kind == "sales":
        header = ["date", "region", "product", "units", "unit_price"]
        for _ in range(n):
            day = date(2025, rng.randint(1, 6), rng.randint(1, 28)).isoformat()
            rows.append(
                [
                    day,
                    rng.choice(("north", "south", "east", "west")),
                    rng.choice(("widget", "gadget", "gizmo", "sprocket")),
                    str(rng.randint(1, 40)),
                    rng.choice(("2.50", "4.75", "9.99", "12.00")),
                ]
            )
    elif kind == "employees":
        header = ["id", "name", "department", "salary", "start_date"]
        for k in range(n):
            rows.append(
                [
                    str(100 + k),
                    _person(rng),
                    rng.choice(("sales", "engineering", "support", "finance")),
                    str(rng.randrange(38, 95) * 1000),
                    date(rng.randint(2015, 2024), rng.randint(1, 12), 1).isoformat(),
                ]
            )
    elif kind == "sensors":
        header = ["timestamp", "sensor", "temperature_c", "humidity"]
        for k in range(n):
            rows.append(
                [
                    f"2025-05-{rng.randint(1, 28):02d}T{k:02d}:00:00",
                    rng.choice(("s1", "s2", "s3")),
                    f"{rng.uniform(12, 31):.1f}",
                    str(rng.randint(30, 80)),
                ]
            )
    else:
        header = ["id", "customer", "amount", "status"]
        for k in range(n):
            rows.append(
                [
                    str(1001 + k),
                    rng.choice(("Acme Ltd", "Globex", "Initech", "Umbrella", "Hooli")),
                    f"{rng.uniform(20, 5000):.2f}",
                    rng.choice(("paid", "open", "void")),
                ]
            )
    path = f"{base}/{kind}.csv"
    text = ",".join(header) + "\n" + "".join(",".join(r) + "\n" for r in rows)
    return {path: text}, {path: header}


def _log_text(rng: random.Random, lines: int) -> str:
    out = []
    minute = rng.randint(0, 600)
    for _ in range(lines):
        minute += rng.randint(1, 40)
        level = rng.choices(("INFO", "WARN", "ERROR"), (6, 2, 1))[0]
        message = rng.choice(LOG_MESSAGES[level]).format(
            port=rng.choice((8000, 8080, 5000)),
            user=rng.choice(TERMINAL_USERS),
            n=rng.randint(10, 9000),
            ms=rng.randint(120, 9000),
            job=rng.choice(("backup", "report", "sync", "cleanup")),
            pct=rng.randint(70, 97),
            k=rng.randint(1, 5),
            key=rng.choice(("timeout", "retries", "db_url", "cache_ttl")),
        )
        day, hour, second = 10 + minute // 1440, minute // 60 % 24, rng.randint(0, 59)
        stamp = f"2025-05-{day:02d} {hour:02d}:{minute % 60:02d}:{second:02d}"
        out.append(f"{stamp} {level:<5} [{rng.choice(('api', 'worker', 'db', 'auth'))}] {message}")
    return "\n".join(out) + "\n"


def _terminal_files(rng: random.Random, home: str) -> tuple[dict[str, str], _Machine]:
    files: dict[str, str] = {}
    columns: dict[str, list[str]] = {}
    kinds: dict[str, str] = {}
    themes = rng.sample(
        ("data", "logs", "project", "config", "notes", "scripts"), rng.randint(2, 3)
    )
    if "data" in themes:
        base = f"{home}/{rng.choice(('data', 'exports', 'reports/2025'))}"
        for _ in range(rng.randint(1, 2)):
            made, cols = _csv_files(rng, base)
            files.update(made)
            columns.update(cols)
    if "logs" in themes:
        base = f"{home}/{rng.choice(('logs', 'var/log', 'app/logs'))}"
        files[f"{base}/app.log"] = _log_text(rng, rng.randint(6, 14))
        if rng.random() < 0.5:
            files[f"{base}/app.log.1"] = _log_text(rng, rng.randint(3, 6))
    if "project" in themes:
        name = rng.choice(CODE_WORDS)
        base = f"{home}/{rng.choice(('projects/', 'src/', ''))}{name}"
        func = rng.choice(("total", "average", "largest"))
        body = {
            "total": "return sum(values)",
            "average": "return sum(values) / len(values) if values else 0.0",
            "largest": "return max(values, default=None)",
        }[func]
        files[f"{base}/README.md"] = (
            f"# {name}\n\nA small tool that prints the {func} of numbers.\n"
        )
        files[f"{base}/{name}/__init__.py"] = ""
        files[f"{base}/{name}/calc.py"] = f"def {func}(values):\n    {body}\n"
        files[f"{base}/main.py"] = (
            f"import sys\n\nfrom {name}.calc import {func}\n\n"
            f"numbers = [float(x) for x in sys.argv[1:]]\nprint({func}(numbers))\n"
        )
        files[f"{base}/requirements.txt"] = rng.choice(("requests==2.32.3\n", "", "rich>=13\n"))
        files[f"{base}/.gitignore"] = "__pycache__/\n*.pyc\n.venv/\n"
    if "config" in themes:
        app = rng.choice(CODE_WORDS)
        files[f"{home}/.config/{app}/config.ini"] = (
            f"[server]\nhost = 0.0.0.0\nport = {rng.choice((8000, 8080, 9090))}\n\n"
            f"[database]\nurl = postgres://db-01:5432/{app}\npool = {rng.randint(2, 20)}\n"
        )
        settings = {"name": app, "debug": rng.random() < 0.5, "workers": rng.randint(1, 8)}
        files[f"{home}/{app}.json"] = json.dumps(settings, indent=2) + "\n"
        files[f"{home}/.env"] = (
            f"APP_ENV={rng.choice(('dev', 'staging', 'prod'))}\nAPP_NAME={app}\n"
        )
    if "notes" in themes:
        items = rng.sample(
            ("renew the TLS certificate", "email the quarterly report", "rotate the db password",
             "review pull request 42", "update the wiki", "book the team offsite",
             "clean up old backups", "call the bank"),
            4,
        )  # fmt: skip
        files[f"{home}/todo.txt"] = "".join(f"[{rng.choice(' x')}] {item}\n" for item in items)
        files[f"{home}/notes/meeting.md"] = (
            f"# Meeting {date(2025, 5, rng.randint(1, 28)).isoformat()}\n\n"
            f"- owner: {_person(rng)}\n- decision: ship on {rng.choice(('Monday', 'Friday'))}\n"
        )
    if "scripts" in themes:
        files[f"{home}/bin/backup.sh"] = (
            "#!/bin/bash\nset -e\nsrc=${1:-$HOME/notes}\n"
            'tar czf "/tmp/backup-$(date +%Y%m%d).tgz" "$src"\necho "backup of $src done"\n'
        )
        files[f"{home}/bin/hello.py"] = (
            '#!/usr/bin/env python3\nimport getpass\n\nprint(f"hello, {getpass.getuser()}")\n'
        )
    if rng.random() < 0.4:
        files[f"{home}/Downloads/"] = ""
    for path in files:
        if path.endswith("/"):
            continue
        suffix = posixpath.splitext(path)[1].lstrip(".")
        kinds[path] = {"1": "log", "env": "txt", "": "txt"}.get(suffix, suffix)
    machine = _Machine(user="", home=home, cwd=home, files={}, dirs={home}, columns=columns)
    machine.themes = list(themes)
    for path, kind in kinds.items():
        machine.add_file(path, kind)
    for path in files:
        if path.endswith("/"):
            machine.dirs.add(path.rstrip("/"))
    return files, machine


def plan_terminal(rng: random.Random, context: FactoryContext, plan_id: str) -> EpisodePlan:
    user = rng.choice(TERMINAL_USERS)
    home = f"/home/{user}"
    files, machine = _terminal_files(rng, home)
    machine.user = user
    start_dirs = sorted(d for d in machine.dirs if d.startswith(home))
    cwd = home if rng.random() < 0.6 else rng.choice(start_dirs)
    machine.cwd = cwd
    scenario = {
        "user": user,
        "hostname": rng.choice(TERMINAL_HOSTS),
        "cwd": cwd,
        "files": files,
        "programs": ["python3", "git", "vim", "less", "awk", "sed", "grep", "jq", "tar"],
    }
    length = _length(rng)
    # The task fits what is on the machine (the program wanders all the same).
    instructions = ["Look around the home directory and summarize what is there."]
    instructions += [TERMINAL_TASKS[t] for t in machine.themes]
    instruction = rng.choice(instructions)
    program_seed = rng.getrandbits(64)

    def program(first: str) -> Program:
        return _terminal_program(random.Random(program_seed), _copy_machine(machine), length)

    task = Task(id=plan_id, instruction=instruction, domain="terminal", scenario=scenario)
    return EpisodePlan(plan_id, "terminal", 0, task, program, length)


def _copy_machine(machine: _Machine) -> _Machine:
    return _Machine(
        user=machine.user,
        home=machine.home,
        cwd=machine.cwd,
        files=dict(machine.files),
        dirs=set(machine.dirs),
        columns={k: list(v) for k, v in machine.columns.items()},
        themes=list(machine.themes),
    )


def _keys(*batches: tuple[str, float]) -> list[dict[str, Any]]:
    return [{"keystrokes": keys, "duration": wait} for keys, wait in batches]


def _line(command: str, wait: float = 1.0) -> list[dict[str, Any]]:
    return _keys((command + "\n", wait))


def _terminal_program(rng: random.Random, m: _Machine, length: int) -> Program:
    moves = {
        "explore": 30.0,
        "query": 20.0,
        "create": 12.0,
        "edit": 9.0,
        "delete": 6.0,
        "fail": 10.0,
        "interactive": 4.0,
        "git": 4.0,
        "env": 3.0,
        "recall": 4.0,
    }
    steps = 0
    while steps < length:
        kind = _weighted(rng, moves)
        if kind == "recall" and not m.created:
            kind = "explore"
        batches = _TERMINAL_MOVES[kind](rng, m)
        for action in batches:
            yield action
            steps += 1
    if rng.random() < 0.25:
        yield _line("exit", 0.5)
        return None
    return rng.choice(("Done.", "All set.", "Finished looking around.", "See the notes I wrote."))


def _t_explore(rng: random.Random, m: _Machine) -> list[list[dict[str, Any]]]:
    choice = rng.randrange(12)
    target = m.pick_dir(rng)
    file = m.pick(rng)
    if choice == 0:
        return [_line(rng.choice(("ls", "ls -l", "ls -la", "ls -lh", "ls -A", "ls -1")))]
    if choice == 1 and target:
        path = m.rel(target)
        m.cwd = target
        if rng.random() < 0.3:
            return [_keys((f"cd {path}\n", 0.5), ("ls\n", 1.0))]
        return [_line(f"cd {path}"), _line(rng.choice(("ls", "ls -la", "pwd")))]
    if choice == 2:
        m.cwd = m.home
        return [_line(rng.choice(("cd", "cd ~", "cd $HOME")))]
    if choice == 3:
        return [_line(rng.choice(("pwd", "whoami", "hostname", "id", "date +%F", "uname -s")))]
    if choice == 4:
        pattern = rng.choice(("'*.py'", "'*.csv'", "'*.log'", "'*.md'", "'*.txt'"))
        return [_line(f"find . -name {pattern}" + rng.choice(("", " | sort", " | head -5")))]
    if choice == 5:
        return [_line(rng.choice(("du -sh *", "du -sh . ", "df -h . | tail -1", "ls | wc -l")))]
    if choice == 6 and file:
        return [_line(f"wc -l {m.rel(file)}")]
    if choice == 7 and file:
        return [_line(f"head -n {rng.randint(2, 5)} {m.rel(file)}")]
    if choice == 8 and file:
        return [_line(f"tail -n {rng.randint(2, 4)} {m.rel(file)}")]
    if choice == 9 and file:
        return [_line(f"cat {m.rel(file)}")]
    if choice == 10 and file:
        return [_line(rng.choice((f"file {m.rel(file)}", f"stat -c '%s %n' {m.rel(file)}")))]
    if choice == 11 and target:
        return [_line(f"ls -la {m.rel(target)}")]
    return [_line("ls -la")]


def _t_query(rng: random.Random, m: _Machine) -> list[list[dict[str, Any]]]:
    csv = m.pick(rng, "csv")
    log = m.pick(rng, "log")
    roll = rng.randrange(8)
    if roll <= 2 and csv:
        header = m.columns.get(csv) or ["a", "b", "c", "d"]
        numeric = [i + 1 for i, name in enumerate(header) if name in NUMERIC_COLUMNS] or [
            len(header)
        ]
        text_cols = [i + 1 for i, name in enumerate(header) if name not in NUMERIC_COLUMNS] or [1]
        col, group = rng.choice(numeric), rng.choice(text_cols)
        path = m.rel(csv)
        return [
            _line(
                rng.choice(
                    (
                        f"awk -F, 'NR>1 {{s+=${col}}} END {{print s}}' {path}",
                        f"cut -d, -f{group} {path} | tail -n +2 | sort | uniq -c | sort -rn",
                        f"sort -t, -k{col} -n {path} | tail -3",
                        f"column -s, -t < {path} | head -6",
                        f"awk -F, 'NR>1 && ${col} > {rng.randint(5, 50)}' {path} | wc -l",
                        f"python3 -c \"import csv; rows=list(csv.DictReader(open('{path}'))); "
                        'print(len(rows), sorted(rows[0]))"',
                    )
                )
            )
        ]
    if roll <= 5 and log:
        path = m.rel(log)
        level = rng.choice(("ERROR", "WARN", "INFO", "error", "timeout"))
        return [
            _line(
                rng.choice(
                    (
                        f"grep -n {level} {path}",
                        f"grep -c {level} {path}",
                        f"grep -i {level} {path} | tail -2",
                        f"awk '{{print $3}}' {path} | sort | uniq -c",
                        f"grep -v INFO {path}",
                    )
                )
            )
        ]
    file = m.pick(rng, "py", "md", "txt", "ini", "json", "sh")
    if file is None:
        return [_line("ls -la")]
    path = m.rel(file)
    if file.endswith(".json") and rng.random() < 0.6:
        return [_line(rng.choice((f"jq . {path}", f"jq 'keys' {path}", f"jq -r .name {path}")))]
    word = rng.choice(("def", "port", "TODO", "import", "name", "x", "backup", "the"))
    return [
        _line(
            rng.choice(
                (
                    f"grep -n {word} {path}",
                    f"grep -rn {word} . | head -5",
                    f"sed -n '1,3p' {path}",
                    f"nl {path} | head -4",
                )
            )
        )
    ]


NUMERIC_COLUMNS = frozenset(
    {"units", "unit_price", "salary", "temperature_c", "humidity", "amount", "id"}
)


def _t_create(rng: random.Random, m: _Machine) -> list[list[dict[str, Any]]]:
    roll = rng.randrange(7)
    name = rng.choice(("notes", "summary", "todo-new", "errors", "plan", "report", "scratch"))
    folder = rng.choice(("backup", "archive", "tmp", "work", "old", "out"))
    if roll == 0:
        path = posixpath.join(m.cwd, folder)
        m.dirs.add(path)
        return [
            _line(
                f"mkdir -p {folder}/{rng.choice(('a', '2025', 'misc'))}"
                if rng.random() < 0.3
                else f"mkdir {folder}"
            )
        ]
    if roll == 1:
        path = posixpath.join(m.cwd, f"{name}.txt")
        m.add_file(path, "txt")
        m.created.append(path)
        text = rng.choice(("check the logs", "ship on friday", "ask ana about the db", "all good"))
        return [_line(f"echo '{text}' > {name}.txt")]
    if roll == 2:
        path = posixpath.join(m.cwd, f"{name}.md")
        m.add_file(path, "md")
        m.created.append(path)
        return [_line(f"printf '# {name}\\n\\n- first\\n- second\\n' > {name}.md")]
    if roll == 3:
        file = m.pick(rng)
        if file:
            copy = file + rng.choice((".bak", ".orig", ".copy"))
            m.add_file(copy, m.files[file])
            m.created.append(copy)
            return [_line(f"cp {m.rel(file)} {m.rel(copy)}")]
    if roll == 4:
        path = posixpath.join(m.cwd, f"{name}.txt")
        m.add_file(path, "txt")
        m.created.append(path)
        lines = rng.sample(("alpha", "bravo", "charlie", "delta", "echo", "foxtrot"), 3)
        body = "".join(f"{line}\n" for line in lines)
        return [_keys((f"cat > {name}.txt << 'EOF'\n{body}EOF\n", 1.0))]
    if roll == 5:
        target = m.pick_dir(rng) or m.home
        archive = posixpath.join(m.cwd, f"{posixpath.basename(target) or 'home'}.tgz")
        m.add_file(archive, "tgz")
        m.created.append(archive)
        return [
            _line(
                f"tar czf {m.rel(archive)} -C {posixpath.dirname(target) or '/'} "
                f"{posixpath.basename(target)}",
                2.0,
            )
        ]
    path = posixpath.join(m.cwd, f"{name}.log")
    m.add_file(path, "log")
    m.created.append(path)
    return [_line(f"date > {name}.log && echo started >> {name}.log")]


def _t_edit(rng: random.Random, m: _Machine) -> list[list[dict[str, Any]]]:
    file = m.pick(rng, "txt", "md", "ini", "log", "py", "csv", "sh")
    if file is None:
        return _t_create(rng, m)
    path = m.rel(file)
    roll = rng.randrange(6)
    if roll == 0:
        return [_line(f"echo '{rng.choice(('checked', 'updated', 'see above'))}' >> {path}")]
    if roll == 1:
        old, new = rng.choice(
            (("port", "listen_port"), ("ERROR", "FAILED"), ("the", "THE"), ("0", "1"), ("x", "y"))
        )
        return [_line(f"sed -i 's/{old}/{new}/' {path}"), _line(f"head -n 3 {path}")]
    if roll == 2:
        target = posixpath.join(posixpath.dirname(file), "renamed-" + posixpath.basename(file))
        kind = m.files[file]
        m.remove(file)
        m.add_file(target, kind)
        return [_line(f"mv {path} {m.rel(target)}")]
    if roll == 3:
        return [
            _line(f"chmod {rng.choice(('+x', '600', '644', 'go-r'))} {path}"),
            _line(f"ls -l {path}"),
        ]
    if roll == 4:
        return [_line(f"sort -o {path} {path}"), _line(f"cat {path}")]
    return [_line(f"touch {path}"), _line(f"ls -l {path}")]


def _t_delete(rng: random.Random, m: _Machine) -> list[list[dict[str, Any]]]:
    if m.created and rng.random() < 0.6:
        file = rng.choice(m.created)
        path = m.rel(file)
        m.remove(file)
        return [_line(f"rm {path}"), _line("ls")]
    folder = m.pick_dir(rng)
    if folder and folder != m.home and not m.cwd.startswith(folder) and rng.random() < 0.4:
        path = m.rel(folder)
        m.remove(folder)
        return [_line(f"rm -r {path}"), _line("ls")]
    file = m.pick(rng, "bak", "orig", "copy", "1", "txt", "log")
    if file is None:
        return [_line("rm -f *.tmp"), _line("ls")]
    path = m.rel(file)
    m.remove(file)
    return [_line(f"rm -v {path}")]


def _t_fail(rng: random.Random, m: _Machine) -> list[list[dict[str, Any]]]:
    folder = m.pick_dir(rng)
    file = m.pick(rng)
    options = [
        f"cat {rng.choice(('missing.txt', 'notes.txt.bak', 'config.yaml', 'data.json'))}",
        f"cd {rng.choice(('nowhere', 'projects/old', '/srv/app'))}",
        rng.choice(("sl", "pyhton3 --version", "gti status", "cta todo.txt", "lsl -la", "claer")),
        'python3 -c "print(1/0)"',
        'python3 -c "import requests_toolbelt"',
        f"ls --{rng.choice(('colour-bogus', 'sortby', 'x'))}",
        "ls /root",
        "touch /etc/motd.d",
        "grep -n pattern no-such-file.log",
        "mkdir /proc/new",
        "cp",
        "tar xzf missing.tgz",
    ]
    if folder:
        options += [f"rm {m.rel(folder)}", f"mkdir {m.rel(folder)}", f"cat {m.rel(folder)}"]
    if file:
        options += [
            f"{m.rel(file)}" if not file.endswith(".sh") else f"./{m.rel(file)}x",
            f"cd {m.rel(file)}",
        ]
    return [_line(rng.choice(options))]


def _t_interactive(rng: random.Random, m: _Machine) -> list[list[dict[str, Any]]]:
    roll = rng.randrange(5)
    if roll == 0:
        expr = rng.choice(("6 * 7", "sum(range(10))", "'abc'.upper()", "len('simgym')", "2 ** 10"))
        return [
            _line("python3", 1.0),
            _keys((f"print({expr})\n", 0.5)),
            _keys(("exit()\n", 1.0)),
        ]
    file = m.pick(rng, "txt", "md", "log", "csv", "py")
    if roll == 1 and file:
        return [_line(f"less {m.rel(file)}", 0.5), _keys(("q", 0.5))]
    if roll == 2:
        return [_line(f"sleep {rng.randint(20, 60)}", 0.5), _keys(("C-c", 0.5))]
    if roll == 3:
        return [_line("cat", 0.5), _keys(("hello there\n", 0.3)), _keys(("C-d", 0.5))]
    name = rng.choice(FIRST_NAMES)
    return [
        _line("read -p 'Your name: ' who", 0.5),
        _keys((f"{name}\n", 0.5)),
        _line('echo "hi $who"'),
    ]


def _t_git(rng: random.Random, m: _Machine) -> list[list[dict[str, Any]]]:
    repo = m.cwd
    if repo not in m.git_repos:
        m.git_repos.add(repo)
        return [
            _line("git init -q" if rng.random() < 0.5 else "git init"),
            _line("git status --short" if rng.random() < 0.5 else "git status"),
        ]
    roll = rng.randrange(4)
    if roll == 0:
        return [_line("git add -A"), _line("git status --short")]
    if roll == 1:
        message = rng.choice(("first commit", "add notes", "update data", "wip"))
        return [
            _line(
                f"git -c user.name={m.user} -c user.email={m.user}@example.com "
                f"commit -qm '{message}'"
            ),
            _line("git log --oneline | head -3"),
        ]
    if roll == 2:
        return [_line(rng.choice(("git log --oneline", "git diff --stat", "git branch")))]
    return [_line(f"git checkout -b {rng.choice(('feature', 'fix-typo', 'cleanup'))}")]


def _t_env(rng: random.Random, m: _Machine) -> list[list[dict[str, Any]]]:
    name = rng.choice(("PROJECT", "TARGET", "MODE", "REGION"))
    value = rng.choice(("alpha", "prod", "eu-west", "42"))
    m.variables[name] = value
    return [
        _line(f"export {name}={value}"),
        _line(rng.choice((f"echo ${name}", f"env | grep {name}", f"printenv {name}"))),
    ]


def _t_recall(rng: random.Random, m: _Machine) -> list[list[dict[str, Any]]]:
    file = rng.choice(m.created)
    return [
        _line(rng.choice((f"cat {m.rel(file)}", f"ls -l {m.rel(file)}", f"wc -c {m.rel(file)}")))
    ]


_TERMINAL_MOVES: dict[str, Callable[[random.Random, _Machine], list[list[dict[str, Any]]]]] = {
    "explore": _t_explore,
    "query": _t_query,
    "create": _t_create,
    "edit": _t_edit,
    "delete": _t_delete,
    "fail": _t_fail,
    "interactive": _t_interactive,
    "git": _t_git,
    "env": _t_env,
    "recall": _t_recall,
}


# ==========================================================================================
# swe
# ==========================================================================================


@dataclass(frozen=True)
class _Unit:
    """A module of the generated repositories: one function, its tests, a known bug
    (``good`` replaced by ``bad``, both unique in the source) and a call to try."""

    module: str
    function: str
    source: str
    tests: str
    good: str
    bad: str
    bug: str  # what the bug does, as an issue would say
    example: str  # a call expression for python3 -c


def _code(text: str) -> str:
    """Source text written indented in this file, as it goes into a repository."""
    return textwrap.dedent(text).lstrip("\n")


def _tests(text: str) -> str:
    """Test methods written flush left here, indented into their TestCase class."""
    return textwrap.indent(_code(text), "    ")


SWE_UNITS = (
    _Unit(
        "text",
        "slugify",
        _code('''
            import re


            def slugify(text):
                """Lower-case words joined by dashes: 'Hello, World!' -> 'hello-world'."""
                words = re.findall(r"[a-z0-9]+", text.lower())
                return "-".join(words)
            '''),
        _tests("""
            def test_punctuation(self):
                self.assertEqual(slugify("Hello, World!"), "hello-world")

            def test_numbers(self):
                self.assertEqual(slugify("Top 10 tips"), "top-10-tips")
            """),
        'r"[a-z0-9]+", text.lower()',
        'r"[a-z0-9]+", text',
        "slugify drops capital letters instead of lower-casing them",
        "slugify('Release Notes 2.0')",
    ),
    _Unit(
        "stats",
        "median",
        _code('''
            def median(values):
                """The middle value (the mean of the two middle ones for an even count)."""
                ordered = sorted(values)
                middle = len(ordered) // 2
                if len(ordered) % 2:
                    return ordered[middle]
                return (ordered[middle - 1] + ordered[middle]) / 2
            '''),
        _tests("""
            def test_odd(self):
                self.assertEqual(median([3, 1, 2]), 2)

            def test_even(self):
                self.assertEqual(median([4, 1, 3, 2]), 2.5)
            """),
        "if len(ordered) % 2:",
        "if len(ordered) % 2 == 0:",
        "median returns the wrong value for lists of odd and even length",
        "median([5, 3, 9, 1])",
    ),
    _Unit(
        "pagination",
        "page_count",
        _code('''
            def page_count(total, per_page):
                """How many pages ``total`` items fill, ``per_page`` to a page."""
                if per_page <= 0:
                    raise ValueError("per_page must be positive")
                return (total + per_page - 1) // per_page
            '''),
        _tests("""
            def test_partial_page(self):
                self.assertEqual(page_count(10, 3), 4)

            def test_exact(self):
                self.assertEqual(page_count(9, 3), 3)

            def test_bad_size(self):
                with self.assertRaises(ValueError):
                    page_count(5, 0)
            """),
        "(total + per_page - 1) // per_page",
        "total // per_page",
        "page_count forgets the last, partly filled page",
        "page_count(101, 20)",
    ),
    _Unit(
        "durations",
        "parse_duration",
        _code(r'''
            import re

            _UNITS = {"h": 3600, "m": 60, "s": 1}


            def parse_duration(text):
                """Seconds in a duration such as '1h30m' or '45s'."""
                parts = re.findall(r"(\d+)([hms])", text.strip().lower())
                if not parts:
                    raise ValueError(f"not a duration: {text!r}")
                return sum(int(n) * _UNITS[unit] for n, unit in parts)
            '''),
        _tests("""
            def test_hours_and_minutes(self):
                self.assertEqual(parse_duration("1h30m"), 5400)

            def test_seconds(self):
                self.assertEqual(parse_duration("45s"), 45)

            def test_not_a_duration(self):
                with self.assertRaises(ValueError):
                    parse_duration("soon")
            """),
        '"m": 60',
        '"m": 100',
        "parse_duration counts a minute as 100 seconds",
        "parse_duration('2h5m')",
    ),
    _Unit(
        "money",
        "format_cents",
        _code('''
            def format_cents(cents):
                """Cents as an amount: 1234 -> '12.34', -5 -> '-0.05'."""
                sign = "-" if cents < 0 else ""
                whole, rest = divmod(abs(cents), 100)
                return f"{sign}{whole}.{rest:02d}"
            '''),
        _tests("""
            def test_amount(self):
                self.assertEqual(format_cents(1234), "12.34")

            def test_small(self):
                self.assertEqual(format_cents(5), "0.05")

            def test_negative(self):
                self.assertEqual(format_cents(-250), "-2.50")
            """),
        "{rest:02d}",
        "{rest}",
        "format_cents prints 5 cents as 0.5",
        "format_cents(99907)",
    ),
    _Unit(
        "batches",
        "chunk",
        _code('''
            def chunk(items, size):
                """The list cut into lists of ``size`` items (the last may be shorter)."""
                if size < 1:
                    raise ValueError("size must be at least 1")
                return [items[i : i + size] for i in range(0, len(items), size)]
            '''),
        _tests("""
            def test_even(self):
                self.assertEqual(chunk([1, 2, 3, 4], 2), [[1, 2], [3, 4]])

            def test_rest(self):
                self.assertEqual(chunk([1, 2, 3, 4, 5], 2), [[1, 2], [3, 4], [5]])
            """),
        "range(0, len(items), size)",
        "range(0, len(items) - 1, size)",
        "chunk loses the last item when the list does not divide evenly",
        "chunk(list(range(7)), 3)",
    ),
    _Unit(
        "uniq",
        "dedupe",
        _code('''
            def dedupe(items):
                """The items without repeats, in first-seen order."""
                seen = set()
                result = []
                for item in items:
                    if item not in seen:
                        seen.add(item)
                        result.append(item)
                return result
            '''),
        _tests("""
            def test_order(self):
                self.assertEqual(dedupe([3, 1, 3, 2, 1]), [3, 1, 2])

            def test_empty(self):
                self.assertEqual(dedupe([]), [])
            """),
        "            seen.add(item)\n            result.append(item)",
        "            result.append(item)",
        "dedupe keeps repeated items",
        "dedupe(['b', 'a', 'b', 'c'])",
    ),
    _Unit(
        "bounds",
        "clamp",
        _code('''
            def clamp(value, low, high):
                """``value`` limited to the range low..high."""
                if low > high:
                    raise ValueError("low must not exceed high")
                return max(low, min(value, high))
            '''),
        _tests("""
            def test_inside(self):
                self.assertEqual(clamp(5, 0, 10), 5)

            def test_above(self):
                self.assertEqual(clamp(15, 0, 10), 10)

            def test_below(self):
                self.assertEqual(clamp(-3, 0, 10), 0)
            """),
        "max(low, min(value, high))",
        "min(low, max(value, high))",
        "clamp returns the lower bound for values inside the range",
        "clamp(42, 0, 10)",
    ),
    _Unit(
        "palindromes",
        "is_palindrome",
        _code('''
            def is_palindrome(text):
                """True when the letters and digits read the same both ways, ignoring case."""
                kept = [c.lower() for c in text if c.isalnum()]
                return kept == kept[::-1]
            '''),
        _tests("""
            def test_sentence(self):
                self.assertTrue(is_palindrome("A man, a plan, a canal: Panama"))

            def test_not(self):
                self.assertFalse(is_palindrome("simgym"))
            """),
        "c.lower() for c in text",
        "c for c in text",
        "is_palindrome is case-sensitive",
        "is_palindrome('Never odd or even')",
    ),
    _Unit(
        "wordcount",
        "word_counts",
        _code('''
            from collections import Counter


            def word_counts(text):
                """How often each word occurs, ignoring case."""
                return dict(Counter(text.lower().split()))
            '''),
        _tests("""
            def test_case(self):
                self.assertEqual(word_counts("a A b"), {"a": 2, "b": 1})

            def test_spaces(self):
                self.assertEqual(word_counts("x  y"), {"x": 1, "y": 1})
            """),
        "text.lower().split()",
        'text.split(" ")',
        "word_counts counts empty words and is case-sensitive",
        "word_counts('the cat and the hat')",
    ),
    _Unit(
        "units",
        "to_fahrenheit",
        _code('''
            def to_fahrenheit(celsius):
                """Degrees Celsius in Fahrenheit."""
                return celsius * 9 / 5 + 32
            '''),
        _tests("""
            def test_boiling(self):
                self.assertEqual(to_fahrenheit(100), 212)

            def test_freezing(self):
                self.assertEqual(to_fahrenheit(0), 32)
            """),
        "celsius * 9 / 5 + 32",
        "celsius * 5 / 9 + 32",
        "to_fahrenheit uses the inverse factor",
        "to_fahrenheit(37)",
    ),
    _Unit(
        "roman",
        "to_roman",
        _code('''
            _NUMERALS = [
                (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
                (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
            ]


            def to_roman(number):
                """An integer from 1 to 3999 in Roman numerals."""
                if not 0 < number < 4000:
                    raise ValueError("number must be between 1 and 3999")
                digits = []
                for value, letters in _NUMERALS:
                    while number >= value:
                        digits.append(letters)
                        number -= value
                return "".join(digits)
            '''),
        _tests("""
            def test_small(self):
                self.assertEqual(to_roman(4), "IV")

            def test_year(self):
                self.assertEqual(to_roman(1994), "MCMXCIV")
            """),
        '(5, "V"), (4, "IV"), (1, "I")',
        '(5, "V"), (1, "I")',
        "to_roman writes 4 as IIII",
        "to_roman(2024)",
    ),
    _Unit(
        "shorten",
        "truncate",
        _code('''
            def truncate(text, width):
                """``text`` cut to ``width`` characters, ending in '...' when cut."""
                if len(text) <= width:
                    return text
                return text[: width - 3] + "..."
            '''),
        _tests("""
            def test_short(self):
                self.assertEqual(truncate("abc", 5), "abc")

            def test_cut(self):
                self.assertEqual(truncate("abcdefgh", 6), "abc...")
            """),
        "text[: width - 3]",
        "text[:width]",
        "truncate returns strings longer than the width",
        "truncate('simulated environments', 12)",
    ),
    _Unit(
        "emails",
        "is_valid_email",
        _code(r'''
            import re

            _EMAIL = re.compile(r"^[\w.+-]+@[\w-]+(\.[\w-]+)+$")


            def is_valid_email(address):
                """Whether ``address`` looks like name@domain.tld."""
                return bool(_EMAIL.match(address.strip()))
            '''),
        _tests("""
            def test_valid(self):
                self.assertTrue(is_valid_email("ana@example.com"))

            def test_no_tld(self):
                self.assertFalse(is_valid_email("ana@localhost"))
            """),
        r"(\.[\w-]+)+$",
        r"(\.[\w-]+)*$",
        "is_valid_email accepts addresses without a top-level domain",
        "is_valid_email('ops@example')",
    ),
)  # fmt: skip


def _unit_test_file(package: str, unit: _Unit) -> str:
    return (
        f"import unittest\n\nfrom {package}.{unit.module} import {unit.function}\n\n\n"
        f"class {unit.function.title().replace('_', '')}Test(unittest.TestCase):\n{unit.tests}"
    )


def plan_swe(rng: random.Random, context: FactoryContext, plan_id: str) -> EpisodePlan:
    package = rng.choice(CODE_WORDS)
    owner = rng.choice(("acme", "initech", "globex", "hooli", "umbrella", "stark"))
    units = rng.sample(SWE_UNITS, rng.randint(2, 4))
    spare = [u for u in SWE_UNITS if u not in units]
    buggy = [u for u in units if rng.random() < 0.45]
    files: dict[str, str] = {f"{package}/__init__.py": ""}
    for unit in units:
        source = unit.source.replace(unit.good, unit.bad, 1) if unit in buggy else unit.source
        files[f"{package}/{unit.module}.py"] = source
        files[f"tests/test_{unit.module}.py"] = _unit_test_file(package, unit)
    files["tests/__init__.py"] = ""
    files["README.md"] = (
        f"# {package}\n\nSmall helpers: "
        + ", ".join(f"`{u.function}`" for u in units)
        + ".\n\nRun the tests with `python3 -m unittest`.\n"
    )
    if rng.random() < 0.5:
        files[".gitignore"] = "__pycache__/\n*.egg-info/\n"
    if rng.random() < 0.4:
        files["pyproject.toml"] = (
            f'[project]\nname = "{package}"\nversion = "0.{rng.randint(1, 9)}.0"\n'
            'requires-python = ">=3.10"\n'
        )
    subject = rng.choice(("Initial import", "Add helpers", "Release 0.3", "Refactor modules"))
    commit = f"{rng.getrandbits(28):07x} {subject}"
    issue = ""
    if buggy:
        issue = f"{buggy[0].bug}."
    scenario = {
        "repo": f"{owner}/{package}",
        "root": f"/workspace/{package}",
        "language": "python",
        "commits": [commit],
        "files": files,
        "test_command": rng.choice(
            ("python3 -m unittest", "python3 -m unittest", "python3 -m unittest -q")
        ),
        "runtime": "Python 3.11",
        "issue": issue,
        "failing_tests": [f"tests.test_{u.module}" for u in buggy],
    }
    new_unit = rng.choice(spare)  # the module a feature task adds
    goals = ("fix", "feature", "explore") if buggy else ("feature", "explore")
    goal = rng.choice(goals)
    if goal == "fix":
        instruction = f"Bug report: {buggy[0].bug}. Find the cause and fix it."
    elif goal == "feature":
        instruction = f"Add a {new_unit.module}.{new_unit.function} helper with tests."
    else:
        instruction = "Get to know the repository and make sure its tests pass."
    length = _length(rng)
    program_seed = rng.getrandbits(64)

    def program(first: str) -> Program:
        return _swe_program(
            random.Random(program_seed), package, units, buggy, new_unit, goal, length
        )

    task = Task(id=plan_id, instruction=instruction, domain="swe", scenario=scenario)
    return EpisodePlan(plan_id, "swe", 0, task, program, length)


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _swe_program(
    rng: random.Random,
    package: str,
    units: list[_Unit],
    buggy: list[_Unit],
    new_unit: _Unit,
    goal: str,
    length: int,
) -> Program:
    present = {u.module: u for u in units}
    broken = {u.module for u in buggy}
    files = {f"{package}/{u.module}.py" for u in units} | {
        f"tests/test_{u.module}.py" for u in units
    }
    files |= {"README.md", f"{package}/__init__.py"}
    steps = 0
    # A task-driven opening, then a random mix; fixing and adding are the task's core.
    plan: list[dict[str, Any]] = [_call("list_dir")]
    if rng.random() < 0.5:
        plan.append(_call("run_tests"))
    if goal == "fix" and buggy:
        unit = buggy[0]
        plan += [
            _call("read_file", path=f"{package}/{unit.module}.py"),
            _call(
                "edit_file", path=f"{package}/{unit.module}.py", old_str=unit.bad, new_str=unit.good
            ),
            _call("run_tests", target=f"tests.test_{unit.module}"),
        ]
        broken.discard(unit.module)
    elif goal == "feature":
        plan += [
            _call("write_file", path=f"{package}/{new_unit.module}.py", content=new_unit.source),
            _call(
                "write_file",
                path=f"tests/test_{new_unit.module}.py",
                content=_unit_test_file(package, new_unit),
            ),
            _call("run_tests"),
        ]
        present[new_unit.module] = new_unit
        files |= {f"{package}/{new_unit.module}.py", f"tests/test_{new_unit.module}.py"}
    moves = {"read": 20.0, "list": 8.0, "tests": 12.0, "bash": 16.0, "fix": 8.0, "break": 5.0,
             "feature": 4.0, "delete": 3.0, "fail": 12.0, "edit": 6.0}  # fmt: skip
    once: set[str] = set()
    while steps < length:
        if plan and rng.random() < 0.75:
            action = plan.pop(0)
        else:
            kind = _weighted(rng, moves)
            action = _swe_move(rng, kind, package, present, broken, files, new_unit, once)
        yield action
        steps += 1
    if rng.random() < 0.75:
        yield _call("submit")
        return None
    return rng.choice(("The tests pass now.", "Done; see the diff.", "I could not finish this."))


def _swe_move(
    rng: random.Random,
    kind: str,
    package: str,
    present: dict[str, _Unit],
    broken: set[str],
    files: set[str],
    new_unit: _Unit,
    once: set[str],
) -> dict[str, Any]:
    """One action of ``kind``; updates what the program knows of the repository."""
    module = rng.choice(sorted(present))
    unit = present[module]
    source = f"{package}/{module}.py"
    test = f"tests/test_{module}.py"
    if kind == "read":
        path = rng.choice(sorted(files))
        if rng.random() < 0.25:
            start = rng.randint(1, 4)
            return _call(
                "read_file", path=path, start_line=start, end_line=start + rng.randint(1, 5)
            )
        return _call("read_file", path=path)
    if kind == "list":
        return _call("list_dir", path=rng.choice((package, "tests", ".", f"{package}/")))
    if kind == "tests":
        if rng.random() < 0.4:
            return _call("run_tests", target=f"tests.test_{module}")
        return _call("run_tests")
    if kind == "bash":
        return _call(
            "bash",
            command=rng.choice(
                (
                    "git status",
                    "git log --oneline",
                    "git diff",
                    f"grep -rn 'def ' {package}",
                    f"wc -l {package}/*.py",
                    "find . -name '*.py' -not -path './.git/*' | sort",
                    "cat README.md",
                    f'python3 -c "from {package}.{module} import {unit.function}; '
                    f'print({unit.example})"',
                    f"python3 -m unittest {'-v ' if rng.random() < 0.5 else ''}tests.test_{module}",
                    "ls -la",
                )
            ),
        )
    if kind == "fix" and broken:
        fixed = present[sorted(broken)[0]]
        broken.discard(fixed.module)
        return _call(
            "edit_file", path=f"{package}/{fixed.module}.py", old_str=fixed.bad, new_str=fixed.good
        )
    if kind == "break" and module not in broken:
        broken.add(module)
        return _call("edit_file", path=source, old_str=unit.good, new_str=unit.bad)
    if kind == "feature" and new_unit.module not in present:
        present[new_unit.module] = new_unit
        files.add(f"{package}/{new_unit.module}.py")
        return _call("write_file", path=f"{package}/{new_unit.module}.py", content=new_unit.source)
    if kind == "delete" and len(present) > 1 and test in files:
        files.discard(test)
        return _call("bash", command=f"git rm -q {test} && git status --short")
    if kind == "edit":
        line = f'"""Helpers of the {package} package."""\n'
        if rng.random() < 0.5 or "readme" in once:
            files.add(f"{package}/__init__.py")
            return _call("write_file", path=f"{package}/__init__.py", content=line)
        once.add("readme")  # a second identical edit would stack the same line again
        return _call(
            "edit_file",
            path="README.md",
            old_str=f"# {package}\n",
            new_str=f"# {package}\n\n{rng.choice(('Status: beta.', 'Maintained by ops.'))}\n",
        )
    # failing on purpose
    return rng.choice(
        (
            _call("read_file", path=f"{package}/{rng.choice(('utils', 'core', 'helpers'))}.py"),
            _call("edit_file", path=source, old_str="this text is not there", new_str="x"),
            _call("edit_file", path=test, old_str="self.assert", new_str="self.assert"),
            _call("list_dir", path="src"),
            _call("list_dir", path="README.md"),
            _call("write_file", path=package, content="oops\n"),
            _call("read_file", path=source, start_line=500),
            _call("run_tests", target="tests.test_missing"),
            _call(
                "bash",
                command=rng.choice(
                    (
                        "pytest -q",
                        "make test",
                        "cat setup.py",
                        "python3 -c 'import numpy'",
                        "npm test",
                    )
                ),
            ),
            _call("read_file", path="tests"),
        )
    )


# ==========================================================================================
# mcp
# ==========================================================================================

TICKET_SUBJECTS = (
    "Card declined at a petrol station",
    "Wrong address on the last statement",
    "Cannot log in to online banking",
    "Question about an international transfer fee",
    "Request a higher card limit",
    "Duplicate charge from an online shop",
    "Close the savings account",
    "Update the phone number on file",
)


def records_state(seed: int) -> dict[str, list[dict[str, Any]]]:
    """The records server's initial data for ``seed``, in the layout the dev set's mcp
    scenarios give the simulator (accounts as the tools show them: balance in EUR)."""
    from simgym.real.mcp_servers.records import CURRENCY, seed_rows

    rows = seed_rows(seed)
    customers = [
        dict(zip(("id", "name", "email", "phone", "city", "tier", "joined"), r, strict=True))
        for r in rows["customers"]
    ]
    accounts = [
        {
            "id": r[0],
            "customer_id": r[1],
            "kind": r[2],
            "balance": r[3] / 100,
            "currency": CURRENCY,
            "status": r[4],
            "opened": r[5],
        }
        for r in rows["accounts"]
    ]
    tickets = [
        dict(zip(("id", "customer_id", "subject", "status", "priority", "created"), r, strict=True))
        for r in rows["tickets"]
    ]
    return {"customers": customers, "accounts": accounts, "tickets": tickets}


def plan_mcp(rng: random.Random, context: FactoryContext, plan_id: str) -> EpisodePlan:
    if context.mcp_scenario is None:
        raise FactoryError("the mcp generator needs the records server's tools (FactoryContext)")
    db_seed = rng.randrange(1, 1_000_000)
    state = records_state(db_seed)
    scenario = dict(context.mcp_scenario)
    scenario["output_format"] = rng.choices(("mcp", "json", "text"), (6, 3, 1))[0]
    scenario["state"] = state
    customer = rng.choice(state["customers"])
    instruction = rng.choice(
        (
            f"{customer['name']} called: how much money do they have, and is anything blocked?",
            f"{customer['name']} has a new email address, {_email(rng, customer['name'])}; "
            "update it.",
            f"Open a ticket for {customer['name']}: {rng.choice(TICKET_SUBJECTS).lower()}.",
            "Work through the support queue: check open tickets of a few customers.",
            f"Does a customer called {rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)} exist?",
            f"Which tickets does {customer['name']} have open?",
        )
    )
    length = _length(rng)
    program_seed = rng.getrandbits(64)

    def program(first: str) -> Program:
        return _mcp_program(random.Random(program_seed), state, customer["id"], length)

    task = Task(id=plan_id, instruction=instruction, domain="mcp", scenario=scenario)
    return EpisodePlan(plan_id, "mcp", 0, task, program, length, setup={"db_seed": db_seed})


def _mcp_program(
    rng: random.Random, state: dict[str, list[dict[str, Any]]], focus: str, length: int
) -> Program:
    customers = {c["id"]: dict(c) for c in state["customers"]}
    emails = {c["email"] for c in customers.values()}
    moves = {"search": 22.0, "get": 14.0, "accounts": 14.0, "tickets": 14.0, "create": 9.0,
             "update": 7.0, "bad_email": 4.0, "taken_email": 3.0, "unknown": 7.0,
             "no_match": 4.0}  # fmt: skip
    current = focus
    for step in range(length):
        kind = "search" if step == 0 else _weighted(rng, moves)
        if rng.random() < 0.3:
            current = rng.choice(sorted(customers))
        person = customers[current]
        if kind == "search":
            first, _, last = person["name"].partition(" ")
            query = rng.choice(
                (first, last, person["name"].lower(), person["email"].split("@")[0],
                 person["phone"][-7:], person["phone"].replace(" ", "")[-6:], first[:3].lower())
            )  # fmt: skip
            arguments: dict[str, Any] = {"query": query}
            if rng.random() < 0.25:
                arguments["limit"] = rng.randint(1, 5)
            yield _call("search_customers", **arguments)
        elif kind == "get":
            yield _call("get_customer", customer_id=current)
        elif kind == "accounts":
            yield _call("list_accounts", customer_id=current)
        elif kind == "tickets":
            arguments = {"customer_id": current}
            if rng.random() < 0.4:
                arguments["status"] = rng.choice(("open", "pending", "closed"))
            yield _call("list_tickets", **arguments)
        elif kind == "create":
            arguments = {"customer_id": current, "subject": rng.choice(TICKET_SUBJECTS)}
            if rng.random() < 0.6:
                arguments["priority"] = rng.choice(("low", "normal", "high"))
            yield _call("create_ticket", **arguments)
        elif kind == "update":
            email = _email(rng, person["name"])
            if email not in emails:
                emails.discard(person["email"])
                emails.add(email)
                person["email"] = email
            yield _call("update_email", customer_id=current, email=email)
        elif kind == "bad_email":
            bad = rng.choice(
                ("not-an-email", f"{person['name'].split()[0]}@", "ana@@example.com", "x@y")
            )
            yield _call("update_email", customer_id=current, email=bad)
        elif kind == "taken_email":
            other = rng.choice([c for c in customers.values() if c["id"] != current])
            yield _call("update_email", customer_id=current, email=other["email"])
        elif kind == "unknown":
            missing = f"C-{rng.randint(2000, 9999)}"
            tool = rng.choice(("get_customer", "list_accounts", "list_tickets", "create_ticket"))
            arguments = {"customer_id": missing}
            if tool == "create_ticket":
                arguments["subject"] = rng.choice(TICKET_SUBJECTS)
            yield _call(tool, **arguments)
        else:
            yield _call(
                "search_customers", query=rng.choice(("zzz", "Smith", "nobody", "+44 20", "Lisbon"))
            )
    return rng.choice(
        (
            "Done: the customer's records are up to date.",
            "I checked the accounts; see the results above.",
            "The ticket is open.",
            "No such customer.",
        )
    )


# ==========================================================================================
# search
# ==========================================================================================


@dataclass(frozen=True)
class SearchTopic:
    """A page of the real index, with the names documented on it (for queries)."""

    url: str
    title: str
    module: str
    names: tuple[str, ...]


HOW_TO = (
    "parse command line arguments",
    "read a csv file",
    "pretty print json",
    "sort a list of dictionaries by key",
    "measure elapsed time",
    "create a temporary directory",
    "compress a file with gzip",
    "run a subprocess and capture output",
    "match a regular expression",
    "count items in a list",
    "insert into a sorted list",
    "copy a directory tree",
    "format a date as iso 8601",
    "generate a random password",
    "read a config ini file",
    "serialize objects to disk",
)


def search_topics(index_path: str | os.PathLike[str]) -> list[SearchTopic]:
    """Pages of the search index and the names each documents (``## name(...)`` headings)."""
    import re

    conn = sqlite3.connect(f"file:{Path(index_path)}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT url, title, substr(body, 1, 8000) FROM pages ORDER BY url"
        ).fetchall()
    finally:
        conn.close()
    topics = []
    for url, title, body in rows:
        names = []
        for heading in re.findall(r"^## (?:class )?([\w.]+)", body, re.MULTILINE):
            name = heading.rsplit(".", 1)[-1]
            if name and not name.startswith("_") and name not in names:
                names.append(name)
        module = url.rsplit("/", 1)[-1].removesuffix(".html") if "/library/" in url else ""
        names = [n for n in names if n != module.rsplit(".", 1)[-1]]
        topics.append(SearchTopic(url, title, module, tuple(names[:12])))
    return topics


def _wiki_documents(rng: random.Random, today: date) -> tuple[list[dict[str, Any]], list[str]]:
    """A few internal pages of a made-up company (and words that find them)."""
    company = rng.choice(("acme", "initech", "globex", "hooli"))
    codename = rng.choice(CODE_WORDS).title()
    docs = []
    words = [codename]
    kinds = rng.sample(("release", "howto", "policy", "faq"), rng.randint(1, 3))
    for kind in kinds:
        day = today - timedelta(days=rng.randint(3, 400))
        if kind == "release":
            version = f"{rng.randint(1, 4)}.{rng.randint(0, 9)}"
            changes = rng.sample(
                ("faster start-up", "a new export to CSV", "single sign-on", "dark mode",
                 "fewer memory leaks", "a REST API for reports", "audit logging"),
                3,
            )  # fmt: skip
            docs.append(
                {
                    "url": f"https://wiki.{company}.example/{codename.lower()}/release-{version}",
                    "title": f"{codename} {version} release notes",
                    "date": day.isoformat(),
                    "content": f"# {codename} {version}\n\nReleased {day.isoformat()}.\n\n"
                    "## Changes\n\n"
                    + "".join(f"- {c}\n" for c in changes)
                    + f"\n## Upgrading\n\nRun `{codename.lower()} migrate` after installing.\n",
                }
            )
            words.append(f"{codename} {version}")
        elif kind == "howto":
            host = rng.choice(("prod-1", "eu-west", "staging"))
            docs.append(
                {
                    "url": f"https://wiki.{company}.example/{codename.lower()}/deploy",
                    "title": f"How to deploy {codename}",
                    "date": day.isoformat(),
                    "content": f"# Deploying {codename}\n\n1. Build the image with `make image`.\n"
                    "2. Push it to the registry.\n"
                    f"3. Run `deploy {codename.lower()} --target {host}`.\n"
                    "4. Watch the dashboard for five minutes.\n",
                }
            )
            words.append(f"deploy {codename}")
        elif kind == "policy":
            hours = rng.choice((24, 48, 72))
            docs.append(
                {
                    "url": f"https://wiki.{company}.example/policies/on-call",
                    "title": "On-call policy",
                    "date": day.isoformat(),
                    "content": "# On-call policy\n\n"
                    f"Every engineer is on call one week in {rng.randint(4, 8)}.\n"
                    f"Incidents must have a written review within {hours} hours.\n",
                }
            )
            words.append("on-call policy")
        else:
            docs.append(
                {
                    "url": f"https://wiki.{company}.example/{codename.lower()}/faq",
                    "title": f"{codename} FAQ",
                    "date": day.isoformat(),
                    "content": f"# {codename} FAQ\n\n## Who owns {codename}?\n\n"
                    f"The {rng.choice(('platform', 'data', 'payments'))} team.\n\n"
                    f"## Where are the logs?\n\nIn the `{codename.lower()}-logs` bucket.\n",
                }
            )
            words.append(f"{codename} faq")
    return docs, words


def plan_search(rng: random.Random, context: FactoryContext, plan_id: str) -> EpisodePlan:
    if not context.search_topics:
        raise FactoryError("the search generator needs the index's pages (FactoryContext)")
    today = date(2024, 1, 1) + timedelta(days=rng.randint(0, 700))
    docs, doc_words = _wiki_documents(rng, today) if rng.random() < 0.5 else ([], [])
    scenario = {
        "engine": rng.choice(("Python Docs Search", "Python Docs Search", "DocSearch", "Google")),
        "current_date": today.isoformat(),
        "results_per_query": rng.choice((3, 3, 4, 5)),
        "documents": docs,
    }
    libraries = [t for t in context.search_topics if t.module and t.names]
    # Mostly the modules people look up (top-level ones), sometimes a submodule.
    common = [t for t in libraries if "." not in t.module] or libraries
    focus = rng.choice(common if rng.random() < 0.85 else libraries)
    instruction = rng.choice(
        (
            f"How do I use {focus.module}.{rng.choice(focus.names)}?",
            f"How can I {rng.choice(HOW_TO)} in Python?",
            f"What does the Python documentation say about {focus.module}?",
            f"Find the internal notes about {doc_words[0]}."
            if doc_words
            else "Which module parses JSON?",
        )
    )
    length = _length(rng)
    program_seed = rng.getrandbits(64)
    topics = [t for t in context.search_topics if "." not in t.module] or context.search_topics

    def program(first: str) -> Program:
        return _search_program(random.Random(program_seed), topics, focus, docs, doc_words, length)

    task = Task(id=plan_id, instruction=instruction, domain="search", scenario=scenario)
    return EpisodePlan(plan_id, "search", 0, task, program, length)


def _query_for(rng: random.Random, topic: SearchTopic) -> str:
    if topic.module and topic.names:
        name = rng.choice(topic.names)
        return rng.choice(
            (f"{topic.module} {name}", f"python {topic.module} {name}", name, f"{name} example",
             f"{topic.module} module")
        )  # fmt: skip
    words = [w.strip("\"'`()") for w in topic.title.split()]
    return " ".join(w for w in words if w).lower() or topic.title


def _typo(rng: random.Random, text: str) -> str:
    if len(text) < 4:
        return text + text[-1:]
    at = rng.randrange(1, len(text) - 2)
    return text[:at] + text[at + 1] + text[at] + text[at + 2 :]


def _search_program(
    rng: random.Random,
    topics: list[SearchTopic],
    focus: SearchTopic,
    docs: list[dict[str, Any]],
    doc_words: list[str],
    length: int,
) -> Program:
    import re

    moves = {"search": 30.0, "multi": 10.0, "open": 28.0, "how": 8.0, "guess": 6.0,
             "typo": 5.0, "nonsense": 3.0, "doc_query": 6.0 if doc_words else 0.0,
             "doc_open": 4.0 if docs else 0.0}  # fmt: skip
    found: list[str] = []
    for step in range(length):
        kind = "search" if step == 0 else _weighted(rng, moves)
        if kind == "open" and not found:
            kind = "search"
        if kind == "search":
            topic = focus if rng.random() < 0.5 else rng.choice(topics)
            action = _call("web_search", queries=[_query_for(rng, topic)])
        elif kind == "multi":
            picked = [_query_for(rng, rng.choice(topics)) for _ in range(rng.randint(2, 3))]
            action = _call("web_search", queries=list(dict.fromkeys(picked)))
        elif kind == "how":
            action = _call("web_search", queries=[f"how to {rng.choice(HOW_TO)} python"])
        elif kind == "typo":
            action = _call("web_search", queries=[_typo(rng, _query_for(rng, focus))])
        elif kind == "nonsense":
            action = _call(
                "web_search",
                queries=[rng.choice(("qzxv frobnicate", "zzyzx quux", "flibbertigibbet api"))],
            )
        elif kind == "doc_query":
            action = _call("web_search", queries=[rng.choice(doc_words)])
        elif kind == "doc_open":
            action = _call("web_extractor", url=rng.choice(docs)["url"])
        elif kind == "guess":
            word = rng.choice(focus.names or ("tutorial",)).lower()
            url = rng.choice(
                (
                    f"https://docs.python.org/3/library/{word}.html",
                    f"https://docs.python.org/3/library/{focus.module or 'os'}-tutorial.html",
                    "https://docs.python.org/3/howto/index.html",
                    f"https://example.com/blog/{word}-tips",
                )
            )
            action = _call("web_extractor", url=url)
        else:
            recent = found[-5:] if rng.random() < 0.7 else found
            arguments: dict[str, Any] = {"url": rng.choice(recent)}
            if rng.random() < 0.4:
                arguments["goal"] = rng.choice(
                    ("an example", "the parameters", "what it returns", "whether it is deprecated")
                )
            action = _call("web_extractor", **arguments)
        observation = yield action
        found += [
            u for u in re.findall(r"^URL: (\S+)", observation, re.MULTILINE) if u not in found
        ]
    return rng.choice(
        (
            f"See the {focus.module or 'Python'} documentation.",
            "The docs above answer it.",
            "I could not find a definite answer.",
        )
    )


# ==========================================================================================
# web: generated sites
# ==========================================================================================

SITE_KINDS = ("shop", "blog", "help", "portal")
PRODUCTS = (
    ("Brass desk lamp", "Finish", ("Polished brass", "Matte black")),
    ("Linen tea towel", "Colour", ("Natural", "Indigo", "Rust")),
    ("Stoneware mug", "Glaze", ("Speckled white", "Forest green")),
    ("Wool throw", "Colour", ("Slate blue", "Oat", "Charcoal")),
    ("Walnut cutting board", "Size", ("Small", "Large")),
    ("Cotton tote bag", "Print", ("Stripes", "Plain")),
    ("Beeswax candle", "Scent", ("Unscented", "Pine", "Lavender")),
    ("Ceramic planter", "Size", ("10 cm", "15 cm", "20 cm")),
    ("Copper kettle", "Finish", ("Copper", "Brushed steel")),
    ("Oak bookends", "Finish", ("Natural oak", "Smoked oak")),
    ("Glass carafe", "Size", ("0.5 l", "1 l")),
    ("Rattan basket", "Size", ("Medium", "Large")),
)
SHIPPING = ("Standard (3-5 days) $4.00", "Express (next day) $9.00", "Pick up in store (free)")
BLOG_TOPICS = {
    "gardening": ("Ten tomatoes worth growing", "Pruning roses in late winter",
                  "Composting for small gardens", "Why my basil keeps dying",
                  "A year with a rain barrel", "Seeds to sow in March"),
    "cycling": ("Fixing a flat by the roadside", "My first century ride",
                "Choosing tyre pressure", "Commuting through the winter",
                "Cleaning a chain properly", "A weekend on gravel roads"),
    "baking": ("Sourdough without the fuss", "The case for weighing flour",
               "Three cakes for beginners", "Why bread needs steam",
               "Laminated dough at home", "Fixing dense muffins"),
    "astronomy": ("Seeing Saturn's rings", "Choosing a first telescope",
                  "Dark sky sites near the city", "Photographing the moon",
                  "What a meteor shower really is", "Finding the Andromeda galaxy"),
}  # fmt: skip
HELP_ARTICLES = (
    ("Reset your password", ("Open the sign-in page.", "Choose Forgot your password.",
                             "Follow the link in the email.")),
    ("Set up two-step sign-in", ("Open Settings.", "Choose Security.",
                                 "Scan the code with an authenticator app.")),
    ("Change your plan", ("Open Billing.", "Choose Change plan.", "Confirm the new price.")),
    ("Export your data", ("Open Settings.", "Choose Export.",
                          "Wait for the email with the download link.")),
    ("Fix sync conflicts", ("Close the app on every device.", "Open it on one device first.",
                            "Keep the newer copy.")),
    ("Invite a teammate", ("Open Team.", "Enter their email.", "They accept from the invitation.")),
)  # fmt: skip
HELP_FAQ = (
    ("Is there a free plan?", "Yes: one user and 2 GB of storage."),
    ("Can I pay yearly?", "Yes, and yearly plans cost two months less."),
    ("Where is my data stored?", "In data centres in Frankfurt and Dublin."),
    (
        "How do I cancel?",
        "Open Billing and choose Cancel plan; you keep access until the period ends.",
    ),
    ("Do you offer refunds?", "Within 14 days of a payment, on request."),
)


@dataclass(frozen=True)
class Site:
    """A generated static site: its files, where episodes may start, and what is true."""

    key: str
    kind: str
    name: str
    host: str
    files: dict[str, str]
    entries: tuple[str, ...]
    facts: dict[str, Any]
    pages: dict[str, str]


def _esc(text: str) -> str:
    import html

    return html.escape(text, quote=True)


def _fill(template: str, **values: Any) -> str:
    """``{{name}}`` slots of a page template filled (HTML and JS keep their own braces)."""
    text = textwrap.dedent(template).strip("\n")
    for name, value in values.items():
        text = text.replace("{{" + name + "}}", str(value))
    return text


def _html(title: str, body: str, script: str = "") -> str:
    tail = f"<script>\n{script.strip()}\n</script>\n" if script else ""
    return (
        _fill(
            """
        <!doctype html>
        <html lang="en">
        <head><meta charset="utf-8"><title>{{title}}</title></head>
        <body>
        {{body}}
        {{tail}}</body>
        </html>
        """,
            title=_esc(title),
            body=body.strip(),
            tail=tail,
        )
        + "\n"
    )


def make_site(rng: random.Random, kind: str, key: str) -> Site:
    """One site of ``kind`` with content drawn from ``rng``."""
    builders = {"shop": _shop_site, "blog": _blog_site, "help": _help_site, "portal": _portal_site}
    return builders[kind](rng, key)


# An address check shared by the generated forms (as loose as most sites' own).
_EMAIL_JS = r"/^[^@\s]+@[^@\s]+\.[^@\s]+$/"

_SHOP_HEADER = """
    <header>
      <a href="/">{{name}}</a>
      <form action="/search" role="search">
        <input type="search" name="q" aria-label="Search the shop">
      </form>
      <a href="/cart">Cart ({{count}})</a>
    </header>
    """
_PRODUCT_PAGE = """
    {{header}}
    <main>
      <h1>{{product}}</h1>
      <img src="data:," alt="Photo of the {{lower}}">
      <p>Price: <strong>${{price}}.00</strong></p>
      <p>{{blurb}}</p>
      <label for="qty">Quantity</label>
      <input id="qty" type="number" min="1" max="9" value="1">
      <label for="opt">{{option}}</label>
      <select id="opt">{{options}}</select>
      <button id="add" type="button">Add to cart</button>
      <p id="added" role="status"></p>
      <h2>You may also like</h2>
      <ul>
    {{related}}
      </ul>
    </main>
    """
_PRODUCT_JS = """
    document.getElementById("add").addEventListener("click", () => {
      const qty = Number(document.getElementById("qty").value);
      const status = document.getElementById("added");
      if (!qty || qty < 1 || qty > 9) {
        status.textContent = "Choose a quantity from 1 to 9.";
        return;
      }
      const choice = document.getElementById("opt").value;
      status.textContent = `Added ${qty} × {{product}} (${choice}) to your cart.`;
    });
    """
_CART_PAGE = """
    <header>
      <a href="/">{{name}}</a>
    </header>
    <main>
      <h1>Your cart ({{count}} items)</h1>
      <ul>
    {{lines}}
      </ul>
      <p>Subtotal: <strong>${{subtotal}}.00</strong></p>
      <h2>Checkout</h2>
      <form id="checkout" action="/order" novalidate>
        <label for="name">Full name</label>
        <input id="name" name="name" autocomplete="off">
        <label for="email">Email</label>
        <input id="email" name="email" type="email" required autocomplete="off">
        <p id="email-error" role="alert" hidden></p>
        <label for="shipping">Shipping</label>
        <select id="shipping" name="shipping">{{shipping}}</select>
        <label><input type="checkbox" name="news"> Send me the monthly newsletter</label>
        <button type="submit">Place order</button>
      </form>
    </main>
    """
_CHECKOUT_JS = """
    document.getElementById("checkout").addEventListener("submit", (event) => {
      const email = document.getElementById("email");
      const error = document.getElementById("email-error");
      const value = email.value.trim();
      let message = "";
      if (!document.getElementById("name").value.trim()) message = "Please enter your name.";
      else if (!value) message = "Please enter your email address.";
      else if (!{{email_re}}.test(value)) message = "That email address does not look right.";
      if (message) {
        event.preventDefault();
        error.textContent = message;
        error.hidden = false;
        email.setAttribute("aria-invalid", "true");
      }
    });
    """
_ORDER_PAGE = """
    <header>
      <a href="/">{{name}}</a>
    </header>
    <main>
      <h1>Thank you for your order</h1>
      <p>Order {{order}} is confirmed.</p>
      <p id="receipt"></p>
      <a href="/">Continue shopping</a>
    </main>
    """
_ORDER_JS = """
    const params = new URLSearchParams(location.search);
    const email = params.get("email");
    const shipping = params.get("shipping") || "standard";
    if (email) {
      document.getElementById("receipt").textContent =
        `A receipt was sent to ${email} (${shipping} shipping).`;
    }
    """
# A results page for a site's search box: the catalog is in the page, filtered by ?q=.
_SEARCH_PAGE = """
    {{header}}
    <main>
      <h1>Search results</h1>
      <p id="summary"></p>
      <ul id="results"></ul>
      <a href="/">{{back}}</a>
    </main>
    """
_SEARCH_JS = """
    const items = {{items}};
    const q = (new URLSearchParams(location.search).get("q") || "").trim().toLowerCase();
    const hits = items.filter((item) => q && item[0].toLowerCase().includes(q));
    document.getElementById("summary").textContent = hits.length
      ? `${hits.length} {{noun}} for "${q}"`
      : `Nothing matches "${q}".`;
    for (const [title, url, note] of hits) {
      const li = document.createElement("li");
      const a = document.createElement("a");
      a.href = url;
      a.textContent = title;
      li.append(a);
      if (note) li.append(` ${note}`);
      document.getElementById("results").append(li);
    }
    """


def _shop_site(rng: random.Random, key: str) -> Site:
    first = rng.choice(("Lantern", "Harbor", "Willow", "Copper", "Meadow", "Juniper"))
    name = f"{first} & {rng.choice(('Loom', 'Hearth', 'Goods', 'Supply', 'Home'))}"
    host = name.lower().replace(" & ", "-and-") + ".example"
    chosen = rng.sample(PRODUCTS, rng.randint(4, 6))
    prices = {p[0]: rng.choice((12, 18, 22, 35, 48, 65, 89)) for p in chosen}
    sold_out = {p[0] for p in chosen[1:] if rng.random() < 0.3}
    available = [p for p in chosen if p[0] not in sold_out]
    cart = rng.sample(available, min(len(available), rng.randint(1, 2)))
    cart_lines = [(p, rng.choice(p[2]), rng.randint(1, 3)) for p in cart]
    count = sum(q for _, _, q in cart_lines)
    order = f"{''.join(w[0] for w in name.split(' & '))}-{rng.randint(1000, 9999)}"
    header = _fill(_SHOP_HEADER, name=_esc(name), count=count)
    number = {p[0]: i for i, p in enumerate(chosen, 1)}
    items = []
    for product, _, _ in chosen:
        price = prices[product]
        if product in sold_out:
            items.append(f"    <li>{_esc(product)} - ${price}.00 (sold out)</li>")
        else:
            link = f'<a href="/product-{number[product]}">{_esc(product)}</a>'
            items.append(f"    <li>{link} <span>${price}.00</span></li>")
    headline = rng.choice(("New this week", "Our favourites", "Just in"))
    threshold = rng.choice((50, 60, 75))
    home = _fill(
        """
        {{header}}
        <main>
          <h1>{{headline}}</h1>
          <ul>
        {{items}}
          </ul>
          <p>Free standard shipping on orders over ${{threshold}}.</p>
        </main>
        <footer><p>{{name}}, a demo shop served on this machine.</p></footer>
        """,
        header=header,
        headline=headline,
        items="\n".join(items),
        threshold=threshold,
        name=_esc(name),
    )
    files = {"index.html": _html(f"{name} - Home goods", home)}
    blurbs = ("Made in small batches.", "Ships in recycled packaging.", "A favourite since 2019.")
    for product, option, choices in available:
        related = [
            f'    <li><a href="/product-{number[other[0]]}">{_esc(other[0])}</a></li>'
            for other in available
            if other[0] != product
        ][:2]
        page = _fill(
            _PRODUCT_PAGE,
            header=header,
            product=_esc(product),
            lower=_esc(product.lower()),
            price=prices[product],
            blurb=rng.choice(blurbs),
            option=_esc(option),
            options="".join(f"<option>{_esc(c)}</option>" for c in choices),
            related="\n".join(related),
        )
        script = _fill(_PRODUCT_JS, product=product)
        files[f"product-{number[product]}.html"] = _html(f"{product} - {name}", page, script)
    lines = "\n".join(
        f"    <li>{_esc(p[0])} ({_esc(choice)}) × {q} - ${prices[p[0]] * q}.00</li>"
        for p, choice, q in cart_lines
    )
    subtotal = sum(prices[p[0]] * q for p, _, q in cart_lines)
    shipping = "".join(
        f'<option value="{value}">{_esc(label)}</option>'
        for value, label in zip(("standard", "express", "pickup"), SHIPPING, strict=True)
    )
    cart_page = _fill(
        _CART_PAGE,
        name=_esc(name),
        count=count,
        lines=lines,
        subtotal=subtotal,
        shipping=shipping,
    )
    files["cart.html"] = _html(
        f"Cart and checkout - {name}", cart_page, _fill(_CHECKOUT_JS, email_re=_EMAIL_JS)
    )
    files["order.html"] = _html(
        f"Order confirmed - {name}", _fill(_ORDER_PAGE, name=_esc(name), order=order), _ORDER_JS
    )
    catalog = [[p[0], f"/product-{number[p[0]]}", f"${prices[p[0]]}.00"] for p in available]
    files["search.html"] = _html(
        f"Search - {name}",
        _fill(_SEARCH_PAGE, header=header, back="Back to the shop"),
        _fill(_SEARCH_JS, items=json.dumps(catalog), noun="result(s)"),
    )
    entries = ("/", "/", "/", "/cart", f"/product-{number[available[0][0]]}")
    checkout = f"name, email, shipping ({', '.join(SHIPPING)}), newsletter checkbox, Place order"
    pages = {
        "/cart": f"cart with {count} item(s), subtotal ${subtotal}.00; checkout form: {checkout}",
        "/order": f"order confirmation: order {order}",
    }
    facts = {
        "products": [(p[0], p[1], list(p[2])) for p in available],
        "sold_out": sorted(sold_out),
        "cart": [[p[0], c, q] for p, c, q in cart_lines],
        "order": order,
    }
    return Site(key, "shop", name, host, files, entries, facts, pages)


_BLOG_NAV = """
    <header><nav aria-label="Main">
      <a href="/">Home</a> <a href="/archive">Archive</a> <a href="/about">About</a>
    </nav></header>
    """
_TEASER = """
      <article>
        <h2><a href="/post-{{n}}">{{title}}</a></h2>
        <p>{{day}} · {{minutes}} min read</p>
      </article>
    """
_POST_PAGE = """
    {{nav}}
    <main>
      <article>
        <h1>{{title}}</h1>
        <p>By {{author}} on {{day}}</p>
        <p>{{opening}}</p>
        <p>{{advice}}</p>
        <p>Tags: <a href="/archive">{{topic}}</a> <a href="/archive">how-to</a></p>
      </article>
      <section aria-label="Comments">
        <h2 id="comment-count">Comments ({{count}})</h2>
        <ul id="comments">
    {{comments}}
        </ul>
        <form id="comment-form">
          <label for="cname">Name</label>
          <input id="cname" autocomplete="off">
          <label for="ctext">Comment</label>
          <textarea id="ctext"></textarea>
          <p id="cerror" role="alert" hidden></p>
          <button type="submit">Post comment</button>
        </form>
      </section>
    {{next}}
    </main>
    """
_COMMENT_JS = """
    document.getElementById("comment-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const who = document.getElementById("cname");
      const text = document.getElementById("ctext");
      const error = document.getElementById("cerror");
      if (!who.value.trim() || !text.value.trim()) {
        error.textContent = "Please write a name and a comment.";
        error.hidden = false;
        return;
      }
      error.hidden = true;
      const li = document.createElement("li");
      li.textContent = `${who.value.trim()}: ${text.value.trim()}`;
      const list = document.getElementById("comments");
      list.append(li);
      document.getElementById("comment-count").textContent = `Comments (${list.children.length})`;
      who.value = "";
      text.value = "";
    });
    """
COMMENTS = ("Great post!", "This helped, thanks.", "I tried this last week.", "What about winter?")


def _blog_site(rng: random.Random, key: str) -> Site:
    topic = rng.choice(sorted(BLOG_TOPICS))
    author = _person(rng)
    word = rng.choice(CODE_WORDS).title()
    name = rng.choice((f"{author.split()[0]}'s {topic} notes", f"The {word} {topic} journal"))
    host = f"{topic}-{rng.choice(CODE_WORDS)}.example"
    titles = list(BLOG_TOPICS[topic])
    rng.shuffle(titles)
    start = date(2025, 1, 1)
    days = sorted((start + timedelta(days=rng.randint(0, 150)) for _ in titles), reverse=True)
    nav = _fill(_BLOG_NAV)

    def teaser(n: int) -> str:
        return _fill(
            _TEASER,
            n=n,
            title=_esc(titles[n - 1]),
            day=days[n - 1].isoformat(),
            minutes=rng.randint(3, 12),
        )

    home = [nav, "<main>", f"  <h1>{_esc(name)}</h1>", *(teaser(n) for n in (1, 2, 3))]
    home += ['  <a href="/page-2">Older posts</a>', "</main>"]
    home.append(f"<footer><p>Written by {_esc(author)}.</p></footer>")
    older = [nav, "<main>", "  <h1>Older posts</h1>"]
    older += [teaser(n) for n in range(4, len(titles) + 1)]
    older += ['  <a href="/">Newer posts</a>', "</main>"]
    files = {
        "index.html": _html(name, "\n".join(home)),
        "page-2.html": _html(f"{name} - page 2", "\n".join(older)),
    }
    openings = ("It started as an experiment.", "People ask about this.", "It took me years.")
    advice = ("Start small and keep notes.", "Details beat gear.", "Patience beats cleverness.")
    for n, title in enumerate(titles, 1):
        comments = [
            f"      <li>{_esc(rng.choice(FIRST_NAMES))}: {_esc(rng.choice(COMMENTS))}</li>"
            for _ in range(rng.randint(0, 2))
        ]
        following = f'  <a href="/post-{n + 1}">Next post</a>' if n < len(titles) else ""
        page = _fill(
            _POST_PAGE,
            nav=nav,
            title=_esc(title),
            author=_esc(author),
            day=days[n - 1].isoformat(),
            opening=rng.choice(openings),
            advice=rng.choice(advice),
            topic=topic,
            count=len(comments),
            comments="\n".join(comments),
            next=following,
        )
        files[f"post-{n}.html"] = _html(f"{title} - {name}", page, _COMMENT_JS)
    rows = "\n".join(
        f'    <tr><td><a href="/post-{n}">{_esc(t)}</a></td><td>{days[n - 1].isoformat()}</td></tr>'
        for n, t in enumerate(titles, 1)
    )
    archive = [nav, "<main>", "  <h1>Archive</h1>", "  <table>"]
    archive += ["    <tr><th>Post</th><th>Date</th></tr>", rows, "  </table>", "</main>"]
    files["archive.html"] = _html(f"Archive - {name}", "\n".join(archive))
    since = rng.randint(2012, 2022)
    about = [nav, "<main>", "  <h1>About</h1>"]
    about += [f"  <p>{_esc(author)} writes about {topic} since {since}.</p>"]
    about += ['  <a href="/">Back home</a>', "</main>"]
    files["about.html"] = _html(f"About - {name}", "\n".join(about))
    pages = {
        "/archive": f"table of all {len(titles)} posts with dates",
        "/about": f"about {author}",
    }
    facts = {"titles": titles, "author": author}
    entries = ("/", "/", "/archive", f"/post-{rng.randint(1, len(titles))}")
    return Site(key, "blog", name, host, files, entries, facts, pages)


_HELP_HEADER = """
    <header>
      <a href="/">{{name}}</a>
      <a href="/contact">Contact support</a>
    </header>
    """
_HELP_HOME = """
    {{header}}
    <main>
      <h1>How can we help?</h1>
      <form action="/search" role="search">
        <input type="search" name="q" aria-label="Search help articles">
      </form>
      <h2>Popular articles</h2>
      <ul>
    {{links}}
      </ul>
      <h2>Frequently asked questions</h2>
    {{details}}
    </main>
    """
_ARTICLE_PAGE = """
    {{header}}
    <main>
      <h1>{{title}}</h1>
      <ol>{{steps}}</ol>
      <p>Was this article helpful?</p>
      <button class="vote" type="button">Yes</button>
      <button class="vote" type="button">No</button>
      <p id="vote-status" role="status"></p>
      <a href="/">All articles</a>
    </main>
    """
_VOTE_JS = """
    for (const button of document.querySelectorAll(".vote")) {
      button.addEventListener("click", () => {
        document.getElementById("vote-status").textContent = button.textContent === "Yes"
          ? "Thanks for your feedback!"
          : "Sorry to hear that. Contact support and we will help.";
      });
    }
    """
_CONTACT_PAGE = """
    {{header}}
    <main>
      <h1>Contact support</h1>
      <form id="contact" action="/thanks" novalidate>
        <label for="cname">Your name</label>
        <input id="cname" name="name" autocomplete="off">
        <label for="cemail">Email</label>
        <input id="cemail" name="email" type="email" autocomplete="off">
        <label for="topic">Topic</label>
        <select id="topic" name="topic">
          <option>Billing</option><option>Sign-in problems</option>
          <option>Sync errors</option><option>Something else</option>
        </select>
        <fieldset><legend>Urgency</legend>
          <label><input type="radio" name="urgency" value="low" checked> Low</label>
          <label><input type="radio" name="urgency" value="normal"> Normal</label>
          <label><input type="radio" name="urgency" value="urgent"> Urgent</label>
        </fieldset>
        <label for="msg">Message</label>
        <textarea id="msg" name="message"></textarea>
        <label><input type="checkbox" id="agree" name="agree">
          I agree to be contacted by email</label>
        <p id="form-error" role="alert" hidden></p>
        <button type="submit">Send request</button>
      </form>
    </main>
    """
_CONTACT_JS = """
    document.getElementById("contact").addEventListener("submit", (event) => {
      const email = document.getElementById("cemail").value.trim();
      const error = document.getElementById("form-error");
      let message = "";
      if (!{{email_re}}.test(email)) message = "Enter a valid email address.";
      else if (!document.getElementById("msg").value.trim()) message = "Tell us what happened.";
      else if (!document.getElementById("agree").checked) message = "Please agree to be contacted.";
      if (message) {
        event.preventDefault();
        error.textContent = message;
        error.hidden = false;
      }
    });
    """
_THANKS_PAGE = """
    {{header}}
    <main>
      <h1>We received your request</h1>
      <p>Request #{{request}} is in the queue.</p>
      <p id="summary"></p>
      <a href="/">Back to the help center</a>
    </main>
    """
_THANKS_JS = """
    const p = new URLSearchParams(location.search);
    document.getElementById("summary").textContent =
      `Topic: ${p.get("topic") || "none"}, urgency: ${p.get("urgency") || "low"}.`;
    """


def _help_site(rng: random.Random, key: str) -> Site:
    suffix = rng.choice(("Sync", " Cloud", " Notes", "Desk"))
    app = f"{rng.choice(CODE_WORDS).title()}{suffix}"
    name = f"{app} Help Center"
    host = f"help.{app.lower().replace(' ', '')}.example"
    articles = rng.sample(HELP_ARTICLES, 4)
    faq = rng.sample(HELP_FAQ, 3)
    request = rng.randint(4000, 9000)
    header = _fill(_HELP_HEADER, name=_esc(name))
    links = "\n".join(
        f'    <li><a href="/article-{n}">{_esc(t)}</a></li>' for n, (t, _) in enumerate(articles, 1)
    )
    details = "\n".join(
        f"  <details><summary>{_esc(q)}</summary><p>{_esc(a)}</p></details>" for q, a in faq
    )
    files = {
        "index.html": _html(name, _fill(_HELP_HOME, header=header, links=links, details=details))
    }
    for n, (title, steps) in enumerate(articles, 1):
        page = _fill(
            _ARTICLE_PAGE,
            header=header,
            title=_esc(title),
            steps="".join(f"<li>{_esc(s)}</li>" for s in steps),
        )
        files[f"article-{n}.html"] = _html(f"{title} - {name}", page, _VOTE_JS)
    files["contact.html"] = _html(
        f"Contact support - {name}",
        _fill(_CONTACT_PAGE, header=header),
        _fill(_CONTACT_JS, email_re=_EMAIL_JS),
    )
    files["thanks.html"] = _html(
        f"Request received - {name}",
        _fill(_THANKS_PAGE, header=header, request=request),
        _THANKS_JS,
    )
    catalog = [[t, f"/article-{n}", ""] for n, (t, _) in enumerate(articles, 1)]
    files["search.html"] = _html(
        f"Search - {name}",
        _fill(_SEARCH_PAGE, header=header, back="Back to the help center"),
        _fill(_SEARCH_JS, items=json.dumps(catalog), noun="article(s)"),
    )
    form = "name, email, topic, urgency (Low/Normal/Urgent), message, consent, Send request"
    pages = {"/contact": f"support form: {form}"}
    facts = {"articles": [t for t, _ in articles], "faq": [q for q, _ in faq], "request": request}
    return Site(key, "help", name, host, files, ("/", "/", "/contact"), facts, pages)


_PORTAL_NAV = """
    <header><nav aria-label="Account">
      <a href="/dashboard">Dashboard</a> <a href="/invoices">Invoices</a>
      <a href="/settings">Settings</a> <a href="/">Sign out</a>
    </nav></header>
    """
_LOGIN_PAGE = """
    <main>
      <h1>Sign in to {{app}}</h1>
      <form id="login" novalidate>
        <label for="user">Username</label>
        <input id="user" autocomplete="off">
        <label for="pass">Password</label>
        <input id="pass" type="password">
        <label><input type="checkbox" id="remember"> Remember me</label>
        <p id="login-error" role="alert" hidden></p>
        <button type="submit">Sign in</button>
      </form>
      <a href="/reset">Forgot your password?</a>
    </main>
    """
_LOGIN_JS = """
    document.getElementById("login").addEventListener("submit", (event) => {
      event.preventDefault();
      const user = document.getElementById("user").value.trim();
      const pass = document.getElementById("pass").value;
      if (user === {{user}} && pass === {{password}}) {
        location.href = "/dashboard";
        return;
      }
      const error = document.getElementById("login-error");
      error.textContent = user ? "Incorrect username or password." : "Enter your username.";
      error.hidden = false;
    });
    """
_RESET_PAGE = """
    <main>
      <h1>Reset your password</h1>
      <label for="remail">Email</label>
      <input id="remail" type="email">
      <button id="send" type="button">Send reset link</button>
      <p id="reset-status" role="status"></p>
      <a href="/">Back to sign in</a>
    </main>
    """
_RESET_JS = """
    document.getElementById("send").addEventListener("click", () => {
      const value = document.getElementById("remail").value.trim();
      document.getElementById("reset-status").textContent = {{email_re}}.test(value)
        ? `If ${value} has an account, a reset link is on its way.`
        : "Enter the email address of your account.";
    });
    """
_DASHBOARD_PAGE = """
    {{nav}}
    <main>
      <h1>Welcome back, {{first}}</h1>
      <p>Plan: {{plan}}, renews on {{renews}}.</p>
      <h2>Recent activity</h2>
      <table>
        <tr><th>Date</th><th>Event</th></tr>
    {{rows}}
      </table>
    </main>
    """
_INVOICES_PAGE = """
    {{nav}}
    <main>
      <h1>Invoices</h1>
      <label for="status">Status</label>
      <select id="status">
        <option>All</option><option>Paid</option><option>Due</option><option>Overdue</option>
      </select>
      <table>
        <tr><th>Invoice</th><th>Date</th><th>Amount</th><th>Status</th></tr>
    {{rows}}
      </table>
      <p id="shown" role="status"></p>
    </main>
    """
_INVOICES_JS = """
    const select = document.getElementById("status");
    select.addEventListener("change", () => {
      let shown = 0;
      for (const row of document.querySelectorAll("tr[data-status]")) {
        const keep = select.value === "All" || row.dataset.status === select.value;
        row.hidden = !keep;
        if (keep) shown += 1;
      }
      document.getElementById("shown").textContent = `${shown} invoice(s) shown.`;
    });
    """
_SETTINGS_PAGE = """
    {{nav}}
    <main>
      <h1>Settings</h1>
      <form id="settings" novalidate>
        <label for="display">Display name</label>
        <input id="display" value="{{person}}">
        <label for="semail">Email</label>
        <input id="semail" type="email" value="{{email}}">
        <label for="lang">Language</label>
        <select id="lang">
          <option>English</option><option>Deutsch</option>
          <option>Português</option><option>Français</option>
        </select>
        <label><input type="checkbox" id="mail-invoices" checked> Email me about invoices</label>
        <label><input type="checkbox" id="sms"> Text me security alerts</label>
        <p id="settings-status" role="status"></p>
        <button type="submit">Save changes</button>
      </form>
    </main>
    """
_SETTINGS_JS = """
    document.getElementById("settings").addEventListener("submit", (event) => {
      event.preventDefault();
      const value = document.getElementById("semail").value.trim();
      const status = document.getElementById("settings-status");
      if (!document.getElementById("display").value.trim()) {
        status.textContent = "The display name cannot be empty.";
      } else if (!{{email_re}}.test(value)) {
        status.textContent = "That email address does not look right.";
      } else {
        status.textContent = "Settings saved.";
      }
    });
    """


def _portal_site(rng: random.Random, key: str) -> Site:
    app = f"{rng.choice(CODE_WORDS).title()} {rng.choice(('Billing', 'Portal', 'Account'))}"
    host = f"account.{app.split()[0].lower()}.example"
    person = _person(rng)
    username = person.split()[0].lower()
    password = f"{rng.choice(CODE_WORDS)}{rng.randint(10, 99)}"
    email = _email(rng, person)
    nav = _fill(_PORTAL_NAV)
    files = {
        "index.html": _html(
            f"Sign in - {app}",
            _fill(_LOGIN_PAGE, app=_esc(app)),
            _fill(_LOGIN_JS, user=json.dumps(username), password=json.dumps(password)),
        ),
        "reset.html": _html(
            f"Reset password - {app}", _fill(_RESET_PAGE), _fill(_RESET_JS, email_re=_EMAIL_JS)
        ),
    }
    invoices = []
    for k in range(rng.randint(3, 6)):
        day = date(2025, 1, 1) + timedelta(days=30 * k + rng.randint(0, 5))
        status = rng.choice(("Paid", "Paid", "Due", "Overdue"))
        number = f"INV-{rng.randint(100, 999)}{k}"
        invoices.append((number, day.isoformat(), f"{rng.randint(9, 240)}.00", status))
    activity = "\n".join(
        f"    <tr><td>{d}</td><td>Invoice {i} ({s.lower()})</td></tr>"
        for i, d, _, s in invoices[-3:]
    )
    dashboard = _fill(
        _DASHBOARD_PAGE,
        nav=nav,
        first=_esc(person.split()[0]),
        plan=rng.choice(("Starter", "Team", "Business")),
        renews=date(2025, rng.randint(7, 12), 1).isoformat(),
        rows=activity,
    )
    files["dashboard.html"] = _html(f"Dashboard - {app}", dashboard)
    rows = "\n".join(
        f'    <tr data-status="{s}"><td>{i}</td><td>{d}</td><td>${a}</td><td>{s}</td></tr>'
        for i, d, a, s in invoices
    )
    files["invoices.html"] = _html(
        f"Invoices - {app}", _fill(_INVOICES_PAGE, nav=nav, rows=rows), _INVOICES_JS
    )
    files["settings.html"] = _html(
        f"Settings - {app}",
        _fill(_SETTINGS_PAGE, nav=nav, person=_esc(person), email=_esc(email)),
        _fill(_SETTINGS_JS, email_re=_EMAIL_JS),
    )
    pages = {
        "/dashboard": "account overview after sign-in",
        "/invoices": f"{len(invoices)} invoices with a status filter",
        "/settings": "display name, email, language, two notification checkboxes, Save changes",
    }
    facts = {"username": username, "password": password, "person": person, "email": email}
    return Site(key, "portal", app, host, files, ("/", "/", "/", "/reset"), facts, pages)


def write_sites(root: Path, seed: int, count: int) -> list[Site]:
    """Generate ``count`` sites (kinds in turn) under ``root``, one folder each."""
    sites = []
    for n in range(count):
        kind = SITE_KINDS[n % len(SITE_KINDS)]
        key = f"site-{n:03d}-{kind}"
        site = make_site(random.Random(f"{seed}:site:{n}"), kind, key)
        folder = root / key
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in site.files.items():
            path = folder / name
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
        sites.append(site)
    return sites


# ==========================================================================================
# web: plans and programs
# ==========================================================================================

FIELD_ROLES = ("textbox", "searchbox", "spinbutton")
PLACEHOLDER_PAGE = "[1] RootWebArea ''"


def plan_web(rng: random.Random, context: FactoryContext, plan_id: str) -> EpisodePlan:
    if not context.sites:
        raise FactoryError("the web generator needs generated sites (FactoryContext)")
    site = rng.choice(context.sites)
    path = rng.choice(site.entries)
    start_url = f"https://{site.host}{path}"
    intent, instruction = _web_intent(rng, site)
    scenario: dict[str, Any] = {
        "site": site.name,
        "start_url": start_url,
        "title": site.name,
        "page": PLACEHOLDER_PAGE,  # the real first page replaces it before the episode
    }
    if rng.random() < 0.5:
        scenario["pages"] = {f"https://{site.host}{p}": text for p, text in site.pages.items()}
    notes = {
        "shop": f"The next order number is {site.facts.get('order')}.",
        "portal": f"The account {site.facts.get('username')!r} signs in with password "
        f"{site.facts.get('password')!r}; anything else is refused.",
        "help": f"The next support request is #{site.facts.get('request')}.",
        "blog": f"The blog is written by {site.facts.get('author')}.",
    }
    scenario["notes"] = notes[site.kind]
    if site.kind == "shop":
        scenario["session"] = {"cart": [f"{q} × {p} ({c})" for p, c, q in site.facts["cart"]]}
    elif site.kind == "portal":
        scenario["session"] = {"logged_in": False}
    length = _length(rng)
    program_seed = rng.getrandbits(64)

    def program(first: str) -> Program:
        return _web_program(
            random.Random(program_seed), site, start_url, list(intent), length, first
        )

    task = Task(
        id=plan_id,
        instruction=instruction,
        domain="web",
        scenario=scenario,
        metadata={"real_site": str(context.sites_root / site.key)},
    )
    return EpisodePlan(plan_id, "web", 0, task, program, length, setup={"site": site.key})


def _web_intent(rng: random.Random, site: Site) -> tuple[list[tuple[Any, ...]], str]:
    """A task as steps on named elements (resolved against each page), and its wording."""
    builders = {"shop": _shop_intent, "blog": _blog_intent, "help": _help_intent}
    return builders.get(site.kind, _portal_intent)(rng, site.facts)


Intent = tuple[list[tuple[Any, ...]], str]


def _shop_intent(rng: random.Random, facts: dict[str, Any]) -> Intent:
    person = _person(rng)
    email = _email(rng, person)
    product, option, choices = rng.choice(facts["products"])
    roll = rng.random()
    if roll < 0.55:
        qty, choice, ship = rng.randint(1, 4), rng.choice(choices), rng.choice(SHIPPING)
        steps: list[tuple[Any, ...]] = [
            ("link", product),
            ("fill", "Quantity", str(qty)),
            ("select", option, choice),
            ("button", "Add to cart"),
            ("link", "Cart"),
            ("fill", "Full name", person),
            ("fill", "Email", email),
            ("select", "Shipping", ship),
        ]
        if rng.random() < 0.4:
            steps.append(("check", "newsletter"))
        steps.append(("button", "Place order"))
        speed = ship.split(" (")[0].lower()
        return (
            steps,
            f"Order {qty} × {product} ({choice}) for {person} ({email}), {speed} shipping.",
        )
    if roll < 0.8:
        word = product.split()[-1].lower()
        steps = [("fill", "Search", word), ("press", "Search", "Enter"), ("link", product)]
        return steps, f"Find the {word} in the shop."
    steps = [
        ("link", "Cart"),
        ("fill", "Full name", person),
        ("fill", "Email", email.replace("@", "")),  # a typo the form rejects
        ("button", "Place order"),
        ("fill", "Email", email),
        ("button", "Place order"),
    ]
    return steps, f"Check out the cart for {person}, email {email}."


def _blog_intent(rng: random.Random, facts: dict[str, Any]) -> Intent:
    title = rng.choice(facts["titles"])
    name = rng.choice(FIRST_NAMES)
    roll = rng.random()
    if roll < 0.5:
        comment = rng.choice(("Thanks, this was useful!", "Which tools do you use?", "Great."))
        steps = [
            ("link", title),
            ("scroll",),
            ("fill", "Name", name),
            ("fill", "Comment", comment),
            ("button", "Post comment"),
        ]
        return steps, f"Leave the comment {comment!r} on the post {title!r} as {name}."
    if roll < 0.7:
        return [("link", title), ("button", "Post comment")], f"Post a comment on {title!r}."
    return [("link", "Archive"), ("link", title), ("back",)], f"When was {title!r} published?"


def _help_intent(rng: random.Random, facts: dict[str, Any]) -> Intent:
    person = _person(rng)
    email = _email(rng, person)
    roll = rng.random()
    if roll < 0.45:
        urgency = rng.choice(("Low", "Normal", "Urgent"))
        topic = rng.choice(("Billing", "Sign-in problems", "Sync errors", "Something else"))
        steps: list[tuple[Any, ...]] = [
            ("link", "Contact support"),
            ("fill", "Your name", person),
            ("fill", "Email", email),
            ("select", "Topic", topic),
            ("check", urgency),
            ("fill", "Message", "The app stopped syncing yesterday."),
        ]
        if rng.random() < 0.7:  # otherwise the form refuses: consent is required
            steps.append(("check", "agree"))
        steps.append(("button", "Send request"))
        return steps, f"Ask support about {topic.lower()} ({urgency.lower()}) as {person}, {email}."
    if roll < 0.75:
        first, second = rng.sample(facts["faq"], 2)
        return [("button", first), ("button", second)], f"What does the help center say: {first}"
    article = rng.choice(facts["articles"])
    word = article.split()[-1].lower()
    steps = [
        ("fill", "Search", word),
        ("press", "Search", "Enter"),
        ("link", article),
        ("button", rng.choice(("Yes", "No"))),
    ]
    return steps, f"Find the help article about {word}."


def _portal_intent(rng: random.Random, facts: dict[str, Any]) -> Intent:
    user, password = facts["username"], facts["password"]
    roll = rng.random()
    if roll < 0.45:
        name = _person(rng)
        steps = [
            ("fill", "Username", user),
            ("fill", "Password", password),
            ("button", "Sign in"),
            ("link", "Settings"),
            ("fill", "Display name", name),
            ("check", "Text me"),
            ("button", "Save changes"),
        ]
        return steps, f"Sign in as {user} (password {password}); change the display name to {name}."
    if roll < 0.75:
        steps = [
            ("fill", "Username", user),
            ("fill", "Password", password[::-1]),  # wrong first, as people do
            ("button", "Sign in"),
            ("fill", "Password", password),
            ("button", "Sign in"),
            ("link", "Invoices"),
            ("select", "Status", rng.choice(("Paid", "Due", "Overdue"))),
        ]
        return steps, f"Sign in as {user} (password {password}) and list the unpaid invoices."
    steps = [("link", "Forgot"), ("fill", "Email", facts["email"]), ("button", "Send reset link")]
    return steps, "I forgot my password; reset it."


@dataclass
class _Page:
    """What a web program reads from an observation."""

    nodes: list[Any]
    max_id: int
    url: str
    tabs: int

    @classmethod
    def read(cls, text: str) -> _Page:
        from simgym.domains import uitree

        headers, tree = uitree.parse_observation(text)
        ids = [int(n.id) for n in tree.nodes if n.id and n.id.isdigit()]
        tabs = headers.get("tabs", "").count("[")
        return cls(tree.nodes, max(ids, default=1), headers.get("url", ""), max(tabs, 1))

    def find(self, roles: tuple[str, ...], name: str = "") -> list[Any]:
        wanted = name.casefold()
        return [
            n
            for n in self.nodes
            if n.id
            and n.role in roles
            and wanted in n.name.casefold()
            and n.props.get("disabled") is not True
        ]

    def options(self, combo: Any) -> list[str]:
        index = self.nodes.index(combo)
        return [n.name for n in self.nodes if n.parent == index and n.role == "option" and n.name]


def _field_value(rng: random.Random, name: str) -> str:
    key = name.casefold()
    if "email" in key:
        return _email(rng) if rng.random() < 0.8 else rng.choice(("ana@", "not-an-email", "x@y"))
    if "quantity" in key or "qty" in key:
        return str(rng.choice((1, 2, 3, 5, 12, 0)))
    if "search" in key:
        return rng.choice(("lamp", "mug", "password", "sync", "candle", "invoice", "xyz"))
    if "password" in key:
        return rng.choice(("hunter2", "letmein", "Spring2025!"))
    if "user" in key:
        return rng.choice(FIRST_NAMES).lower()
    if "name" in key:
        return _person(rng)
    if "comment" in key or "message" in key:
        return rng.choice(
            ("Lovely, thank you.", "It does not work on my phone.", "Please call me back.")
        )
    return rng.choice(("hello", "test", "42", ""))


def _web_program(
    rng: random.Random,
    site: Site,
    start_url: str,
    intent: list[tuple[Any, ...]],
    length: int,
    first: str,
) -> Program:
    origin = "/".join(start_url.split("/", 3)[:3])
    yield from _web_steps(rng, origin, intent, length, first)
    return rng.choice(
        (
            "Done.",
            "The order is placed." if site.kind == "shop" else "All done.",
            "I could not complete the task.",
            "Here is what I found on the page.",
        )
    )


def _web_steps(
    rng: random.Random, origin: str, intent: list[tuple[Any, ...]], length: int, first: str
) -> Generator[str, str, None]:
    """Follow the task when its next step is on the page, wander otherwise; steps the
    wandering queued (a new tab's address) come first."""
    pending: list[str] = []
    page = _Page.read(first) if first else None
    for _ in range(length):
        action = None
        if pending:
            action = pending.pop(0)
        elif intent and page is not None and rng.random() < 0.8:
            action = _web_resolve(rng, intent.pop(0), page)
        if action is None:
            action = _web_wander(rng, page, origin, pending)
        observation = yield action
        page = _Page.read(observation)


def _web_resolve(rng: random.Random, step: tuple[Any, ...], page: _Page) -> str | None:
    kind = step[0]
    if kind == "scroll":
        return f"scroll(0, {rng.choice((300, 500, 800))})"
    if kind == "back":
        return "go_back()"
    roles = {
        "link": ("link",),
        "fill": FIELD_ROLES,
        "press": FIELD_ROLES,
        "select": ("combobox",),
        "check": ("checkbox", "radio"),
        "button": ("button",),
    }[kind]
    found = page.find(roles, step[1])
    if not found:
        return None
    target = found[0]
    if kind == "link" or kind == "button" or kind == "check":
        return f"click('{target.id}')"
    if kind == "fill":
        return f"fill('{target.id}', {json.dumps(step[2])})"
    if kind == "press":
        return f"press('{target.id}', '{step[2]}')"
    return f"select_option('{target.id}', {json.dumps(step[2])})"


def _web_wander(rng: random.Random, page: _Page | None, origin: str, pending: list[str]) -> str:
    if page is None:
        return rng.choice(("scroll(0, 400)", "noop(wait_ms=200)"))
    links = page.find(("link",))
    fields = page.find(FIELD_ROLES)
    combos = page.find(("combobox",))
    checks = page.find(("checkbox", "radio"))
    buttons = page.find(("button",))
    moves = {
        "link": 28.0 if links else 0.0,
        "fill": 14.0 if fields else 0.0,
        "select": 7.0 if combos else 0.0,
        "check": 5.0 if checks else 0.0,
        "button": 9.0 if buttons else 0.0,
        "press": 3.0 if fields else 0.0,
        "hover": 3.0 if links else 0.0,
        "focus": 2.0 if fields else 0.0,
        "scroll": 6.0,
        "back": 6.0,
        "forward": 2.0,
        "tab": 3.0,
        "fail": 7.0,
    }
    kind = _weighted(rng, moves)
    if kind == "link":
        return f"click('{rng.choice(links).id}')"
    if kind == "fill":
        target = rng.choice(fields)
        return f"fill('{target.id}', {json.dumps(_field_value(rng, target.name))})"
    if kind == "select":
        combo = rng.choice(combos)
        options = page.options(combo)
        if options:
            return f"select_option('{combo.id}', {json.dumps(rng.choice(options))})"
        return f"click('{combo.id}')"
    if kind == "check":
        return f"click('{rng.choice(checks).id}')"
    if kind == "button":
        return f"click('{rng.choice(buttons).id}')"
    if kind == "press":
        return f"press('{rng.choice(fields).id}', 'Enter')"
    if kind == "hover":
        return f"hover('{rng.choice(links).id}')"
    if kind == "focus":
        return f"focus('{rng.choice(fields).id}')"
    if kind == "scroll":
        return f"scroll(0, {rng.choice((-400, 250, 400, 700, 1200))})"
    if kind == "back":
        return "go_back()"
    if kind == "forward":
        return "go_forward()"
    if kind == "tab":
        if page.tabs > 1:
            return rng.choice(("tab_focus(0)", "tab_close()"))
        path = rng.choice(("/", "/cart", "/archive", "/contact", "/invoices", "/about"))
        pending += [f"goto('{origin}{path}')"]
        if rng.random() < 0.7:
            pending.append("tab_focus(0)")
        return "new_tab()"
    # failing on purpose: ids that do not exist, hosts that cannot be reached, wrong elements
    options = [
        f"click('{page.max_id + rng.randint(5, 80)}')",
        f"goto('https://{rng.choice(('www.google.com', 'example.org', 'api.github.com'))}/')",
        f"goto('{origin}/{rng.choice(('missing', 'old-page', 'admin'))}')",
        f"tab_focus({rng.randint(3, 6)})",
    ]
    if links:
        options.append(f"fill('{rng.choice(links).id}', 'x')")
        options.append(f"select_option('{rng.choice(links).id}', 'One')")
    return rng.choice(options)


# ==========================================================================================
# plans
# ==========================================================================================


@dataclass
class FactoryContext:
    """What the generators share, built once per run: the records server's tools, the
    search index's pages and the generated web sites."""

    mcp_scenario: dict[str, Any] | None = None
    search_topics: list[SearchTopic] = field(default_factory=list)
    sites: list[Site] = field(default_factory=list)
    sites_root: Path = Path(".")

    @classmethod
    async def abuild(
        cls, domains: Iterable[str], *, work: str | os.PathLike[str], seed: int, web_sites: int = 24
    ) -> FactoryContext:
        """Read what the requested domains need; generated sites go under ``work/sites``."""
        wanted = set(domains)
        context = cls(sites_root=Path(work) / "sites")
        if "mcp" in wanted:
            from simgym.domains.mcp_import import scenario_from_server
            from simgym.real.mcp_servers.records import build_server

            with tempfile.TemporaryDirectory(prefix="simgym-factory-") as folder:
                server = build_server(Path(folder) / "records.db")
                context.mcp_scenario = await scenario_from_server(server=server)
        if "search" in wanted:
            from simgym.real.search import build_index

            path = await asyncio.to_thread(build_index)
            context.search_topics = search_topics(path)
        if "web" in wanted:
            if web_sites < 1:
                raise FactoryError("web needs at least one generated site")
            context.sites = write_sites(context.sites_root, seed, web_sites)
        return context

    @classmethod
    def build(cls, domains: Iterable[str], **options: Any) -> FactoryContext:
        """Blocking :meth:`abuild`."""
        return asyncio.run(cls.abuild(domains, **options))


PLANNERS: dict[str, Callable[[random.Random, FactoryContext, str], EpisodePlan]] = {
    "terminal": plan_terminal,
    "swe": plan_swe,
    "mcp": plan_mcp,
    "search": plan_search,
    "web": plan_web,
}


def episode_id(domain: str, seed: int, index: int) -> str:
    return f"{domain}-{seed}-{index:06d}"


def plan_episode(domain: str, seed: int, index: int, context: FactoryContext) -> EpisodePlan:
    """Episode ``index`` of ``domain`` for run ``seed``: the same arguments give the same
    task, scenario and program."""
    if domain not in PLANNERS:
        raise FactoryError(f"no generator for domain {domain!r}; available: {', '.join(PLANNERS)}")
    rng = random.Random(f"{seed}:{domain}:{index}")
    plan = PLANNERS[domain](rng, context, episode_id(domain, seed, index))
    plan.index = index
    plan.task.metadata["factory"] = {"seed": seed, "index": index}
    return plan


def backend_problems(domains: Iterable[str]) -> dict[str, str]:
    """Why a domain's real backend cannot run here (domain -> reason); empty when all can."""
    problems: dict[str, str] = {}
    wanted = set(domains)
    if wanted & {"terminal", "swe"}:
        from simgym.real.sandbox import bwrap_problem

        problem = bwrap_problem()
        if problem:
            problems.update({d: problem for d in wanted & {"terminal", "swe"}})
    if "mcp" in wanted:
        try:
            import mcp  # noqa: F401
        except ImportError:
            problems["mcp"] = "the mcp SDK is not installed (pip install 'simgym[mcp]')"
    if "web" in wanted:
        from simgym.real.web import CHROMIUM

        try:
            import playwright.async_api  # noqa: F401
        except ImportError:
            problems["web"] = "Playwright is not installed (pip install 'simgym[web]')"
        else:
            if not Path(CHROMIUM).exists():
                problems["web"] = f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    if "search" in wanted:
        with contextlib.closing(sqlite3.connect(":memory:")) as conn:
            try:
                conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
            except sqlite3.OperationalError:
                problems["search"] = "this Python's SQLite has no FTS5"
    return problems


# ==========================================================================================
# running
# ==========================================================================================


def factory_limits() -> Any:
    """Sandbox limits for factory episodes: tighter than interactive use, since no
    generated command should run long."""
    from simgym.real.sandbox import Limits

    return Limits(cpu_s=30, memory_mb=1024, command_s=30.0, episode_s=900.0, max_wait_s=10.0)


class _Slot:
    """One real backend; one episode at a time uses it, then the next."""

    def __init__(self, domain: str, executor: Any) -> None:
        self.domain = domain
        self.executor = executor

    async def prepare(self, plan: EpisodePlan) -> Task:
        return plan.task

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self.executor.aclose()


class _RecordsSlot(_Slot):
    """The records MCP server running over streamable HTTP for this slot's episodes; each
    episode gets a database seeded afresh (built aside, then moved into place), so a
    server process is started once per slot, not once per episode."""

    def __init__(self, workdir: Path, proc: subprocess.Popen[bytes], url: str) -> None:
        from simgym.real.mcp import RealMCP

        super().__init__("mcp", RealMCP(url=url))
        self.workdir = workdir
        self.proc = proc
        self.url = url

    @classmethod
    async def start(cls, workdir: Path, timeout: float = 60.0) -> _RecordsSlot:
        from simgym.real.mcp import records_command

        workdir.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        log = open(workdir / "server.log", "wb")  # noqa: SIM115 (the child writes to it)
        try:
            command = [*records_command(workdir / "records.db"), "--http", "--port", str(port)]
            proc = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                tail = (workdir / "server.log").read_text(errors="replace")[-500:]
                raise FactoryError(f"the records MCP server exited: {tail.strip()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    proc.kill()
                    raise FactoryError(
                        f"the records MCP server did not listen on port {port}"
                    ) from None
                await asyncio.sleep(0.1)
        return cls(workdir, proc, f"http://127.0.0.1:{port}/mcp")

    async def prepare(self, plan: EpisodePlan) -> Task:
        from simgym.real.mcp_servers.records import RecordsStore

        seed = int(plan.setup["db_seed"])

        def reseed() -> None:
            fresh = self.workdir / "next.db"
            fresh.unlink(missing_ok=True)
            RecordsStore(fresh, seed=seed)
            os.replace(fresh, self.workdir / "records.db")

        await asyncio.to_thread(reseed)
        return plan.task

    async def aclose(self) -> None:
        await super().aclose()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                await asyncio.to_thread(self.proc.wait, 10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class _WebSlot(_Slot):
    """A browser; before each episode the scenario gets the real first page (read once per
    site and start URL, since a fresh page always numbers its elements the same way)."""

    def __init__(self, executor: Any, first_pages: dict[tuple[str, str], tuple[str, str]]) -> None:
        super().__init__("web", executor)
        self.first_pages = first_pages

    async def prepare(self, plan: EpisodePlan) -> Task:
        from simgym.domains import uitree

        task = plan.task
        key = (str(task.metadata.get("real_site")), str(task.scenario["start_url"]))
        if key not in self.first_pages:
            shown = await self.executor.start_episode(task.scenario, task)
            await self.executor.end_episode()
            headers, start = uitree.split_headers(shown)
            page = "\n".join(shown.splitlines()[start:])
            self.first_pages[key] = (headers.get("title", ""), page)
        title, page = self.first_pages[key]
        scenario = {**task.scenario, "title": title or task.scenario.get("title", ""), "page": page}
        return task.model_copy(update={"scenario": scenario})


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Slots:
    """Idle backends per domain, created on demand (at most one per in-flight episode)."""

    def __init__(self, work: Path, limits: Any) -> None:
        self.work = work
        self.limits = limits
        self.idle: dict[str, list[_Slot]] = defaultdict(list)
        self.all: list[_Slot] = []
        self.first_pages: dict[tuple[str, str], tuple[str, str]] = {}
        self._made = 0

    async def acquire(self, domain: str) -> _Slot:
        """An idle backend of ``domain``, or a new one (which may fail to start)."""
        if self.idle[domain]:
            return self.idle[domain].pop()
        slot = await self._make(domain)
        self.all.append(slot)
        return slot

    async def _make(self, domain: str) -> _Slot:
        self._made += 1
        if domain == "terminal":
            from simgym.real.terminal import RealTerminal

            return _Slot(domain, RealTerminal(limits=self.limits))
        if domain == "swe":
            from simgym.real.swe import RealSWE

            return _Slot(domain, RealSWE(limits=self.limits))
        if domain == "search":
            from simgym.real.search import RealSearch

            return _Slot(domain, RealSearch())
        if domain == "mcp":
            return await _RecordsSlot.start(self.work / "mcp" / f"slot-{self._made}")
        if domain == "web":
            from simgym.real.web import RealWeb

            return _WebSlot(RealWeb(), self.first_pages)
        raise FactoryError(f"no real backend for domain {domain!r}")

    async def release(self, slot: _Slot, healthy: bool) -> None:
        if healthy:
            self.idle[slot.domain].append(slot)
            return
        # A backend that failed mid-episode may be in any state: replace it.
        self.all.remove(slot)
        await slot.aclose()

    async def aclose(self) -> None:
        slots, self.all = self.all, []
        self.idle.clear()
        for slot in slots:
            await slot.aclose()


@dataclass
class EpisodeRecord:
    """What the factory knows of one recorded episode (kept in the trajectory's
    ``task.metadata["factory"]`` and re-read on resume)."""

    id: str
    domain: str
    index: int
    status: str  # ok | duplicate | failed
    transitions: int
    hash: str = ""
    seconds: float = 0.0
    rejected: int = 0  # actions the domain refused (never reached the world)
    format_problems: int = 0  # real observations that fail the domain's own format check
    error: str | None = None
    offset: int = 0  # where its line starts in raw.jsonl
    size: int = 0


@dataclass
class Tally:
    """Progress of a run: counted transitions per domain against each quota."""

    quotas: dict[str, int]
    done: Counter = field(default_factory=Counter)  # transitions of kept episodes
    episodes: Counter = field(default_factory=Counter)
    duplicates: Counter = field(default_factory=Counter)
    failed: Counter = field(default_factory=Counter)
    failures_in_a_row: Counter = field(default_factory=Counter)
    abandoned: dict[str, str] = field(default_factory=dict)
    hashes: set[str] = field(default_factory=set)
    errors: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def classify(self, record: EpisodeRecord) -> None:
        """Decide ``record.status`` (duplicate or ok) for a finished, unfailed episode."""
        if record.status != "failed":
            record.status = "duplicate" if record.hash in self.hashes else "ok"

    def add(self, record: EpisodeRecord, *, max_failures: int = 0) -> None:
        domain = record.domain
        self.episodes[domain] += 1
        if record.status == "failed":
            self.failed[domain] += 1
            self.failures_in_a_row[domain] += 1
            if record.error and len(self.errors[domain]) < 5:
                self.errors[domain].append(f"{record.id}: {record.error}")
            if max_failures and self.failures_in_a_row[domain] >= max_failures:
                self.abandoned.setdefault(
                    domain, f"{max_failures} episodes in a row failed; last: {record.error}"
                )
            return
        self.failures_in_a_row[domain] = 0
        if record.status == "duplicate":
            self.duplicates[domain] += 1
            return
        self.hashes.add(record.hash)
        self.done[domain] += record.transitions


def episode_hash(trajectory: Trajectory) -> str:
    """What makes two episodes the same: domain, scenario and the actions the world saw."""
    actions = [turn.action_text for turn in trajectory.turns if turn.in_history]
    data = json.dumps(
        [trajectory.domain, trajectory.scenario, actions], sort_keys=True, ensure_ascii=False
    )
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def split_of(episode: str, split: tuple[float, float, float] = DEFAULT_SPLIT) -> str:
    """The split of an episode, from a hash of its id alone (so resumes and reruns agree,
    and every turn of an episode lands in the same split)."""
    value = int(hashlib.sha256(episode.encode("utf-8")).hexdigest()[:13], 16) / 16**13
    if value < split[0]:
        return "train"
    if value < split[0] + split[1]:
        return "val"
    return "test"


def quotas_for(
    total: int, domains: Iterable[str], weights: dict[str, float] | None = None
) -> dict[str, int]:
    """``total`` transitions shared among ``domains`` by weight (equal by default)."""
    names = list(dict.fromkeys(domains))
    if not names:
        raise FactoryError("no domains to record")
    if total < 1:
        raise FactoryError("the number of transitions must be positive")
    unknown = [d for d in names if d not in PLANNERS]
    if unknown:
        raise FactoryError(
            f"unknown domain(s) {', '.join(unknown)}; available: {', '.join(PLANNERS)}"
        )
    weights = weights or {}
    bad = [d for d in weights if d not in names]
    if bad:
        raise FactoryError(f"weights for domain(s) not being recorded: {', '.join(bad)}")
    shares = {d: float(weights.get(d, 1.0)) for d in names}
    if any(w < 0 for w in shares.values()) or sum(shares.values()) <= 0:
        raise FactoryError("domain weights must be non-negative and not all zero")
    scale = total / sum(shares.values())
    quotas = {d: int(shares[d] * scale) for d in names}
    for d in sorted(names, key=lambda d: -(shares[d] * scale - quotas[d]))[
        : total - sum(quotas.values())
    ]:
        quotas[d] += 1
    return {d: q for d, q in quotas.items() if q > 0}


@dataclass
class FactoryConfig:
    """A factory run (see :func:`arun_factory`)."""

    out: Path
    transitions: int = 20_000
    domains: tuple[str, ...] = DOMAINS
    concurrency: int = 4
    seed: int = 0
    weights: dict[str, float] | None = None
    max_turns: int = 40
    episode_timeout_s: float = 300.0
    web_sites: int = 24
    split: tuple[float, float, float] = DEFAULT_SPLIT
    resume: bool = True
    max_failures: int = 25

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        if self.concurrency < 1:
            raise FactoryError("concurrency must be at least 1")
        if (
            len(self.split) != 3
            or any(s < 0 for s in self.split)
            or abs(sum(self.split) - 1) > 1e-6
        ):
            raise FactoryError(
                f"split must be three non-negative shares summing to 1, got {self.split}"
            )


class _Scheduler:
    """Hands out the next episode: the domain furthest from its quota, counting the
    transitions that episodes in flight are expected to add."""

    def __init__(
        self, config: FactoryConfig, context: FactoryContext, tally: Tally, done_ids: set[str]
    ) -> None:
        self.config = config
        self.context = context
        self.tally = tally
        self.done_ids = done_ids
        self.next_index: Counter = Counter()
        self.inflight: Counter = Counter()

    def next(self) -> EpisodePlan | None:
        best, best_score = None, 0.0
        for domain, quota in self.tally.quotas.items():
            if domain in self.tally.abandoned:
                continue
            remaining = quota - self.tally.done[domain] - self.inflight[domain]
            if remaining > 0 and remaining / quota > best_score:
                best, best_score = domain, remaining / quota
        if best is None:
            return None
        while episode_id(best, self.config.seed, self.next_index[best]) in self.done_ids:
            self.next_index[best] += 1
        plan = plan_episode(best, self.config.seed, self.next_index[best], self.context)
        self.next_index[best] += 1
        self.inflight[best] += plan.expected_turns
        return plan

    def finish(self, plan: EpisodePlan) -> None:
        self.inflight[plan.domain] -= plan.expected_turns


class EpisodeTimeout(SimgymError):
    """An episode ran past its time limit (checked between steps)."""


async def _play(env: Any, plan: EpisodePlan, task: Task, deadline: float) -> Trajectory:
    """Reset, let the program act until it stops or the episode ends, give its answer.

    The time limit is checked between steps, never by cancelling one: a step may be
    starting a sandbox process, and on Python 3.11 a subprocess whose creation is
    cancelled can leave ``create_subprocess_exec`` waiting forever (its transport only
    finishes once pipes that were never connected disconnect). Each step is bounded by
    its backend's own limits (command, tool call and page timeouts)."""
    first = await env.reset(task)
    program = plan.program(first.text)
    answer: str | None = None
    open_episode = True
    try:
        action = next(program)
        while True:
            if time.monotonic() > deadline:
                raise EpisodeTimeout("the episode ran past its time limit")
            result = await env.step(action)
            if result.done or result.truncated:
                open_episode = False
                break
            action = program.send(result.observation.text)
    except StopIteration as stop:
        answer = stop.value
    if answer and open_episode:
        await env.finish(answer)
    await env.close(reason=None)
    assert env.trajectory is not None
    return env.trajectory


async def _record_episode(
    plan: EpisodePlan, slots: _Slots, config: FactoryConfig
) -> tuple[Trajectory, EpisodeRecord]:
    """Run one plan on a backend; never raises for what goes wrong inside the episode."""
    from simgym.core.env import SimEnv

    slot: _Slot | None = None
    env: Any = None
    error: str | None = None
    trajectory: Trajectory | None = None
    start = time.perf_counter()
    task = plan.task
    try:
        slot = await slots.acquire(plan.domain)
        task = await slot.prepare(plan)
        env = SimEnv(plan.domain, slot.executor, max_turns=config.max_turns, validation_retries=0)
        deadline = time.monotonic() + config.episode_timeout_s
        trajectory = await _play(env, plan, task, deadline)
    except EpisodeTimeout:
        error = f"episode timed out after {config.episode_timeout_s:g}s"
    except Exception as exc:  # noqa: BLE001 - a failed episode is recorded, not fatal
        error = f"{type(exc).__name__}: {exc}"
    finally:
        if error is not None and env is not None:
            with contextlib.suppress(Exception):
                await env.close(reason=error)
        if slot is not None:
            await slots.release(slot, healthy=error is None)
    seconds = time.perf_counter() - start
    if trajectory is None:
        trajectory = env.trajectory if env is not None and env.trajectory is not None else None
    if trajectory is None:
        trajectory = Trajectory(task=task, domain=plan.domain, error=error, truncated=True)
    error = error or trajectory.error
    transitions = sum(1 for t in trajectory.turns if t.in_history)
    if error is None and transitions == 0:
        error = "the program produced no transition"
    record = EpisodeRecord(
        id=plan.id,
        domain=plan.domain,
        index=plan.index,
        status="failed" if error else "ok",
        transitions=transitions,
        hash=episode_hash(trajectory),
        seconds=round(seconds, 3),
        rejected=sum(1 for t in trajectory.turns if t.error_type == "action"),
        format_problems=sum(1 for t in trajectory.turns if t.format_problems),
        error=error,
    )
    return trajectory, record


def _stamp(trajectory: Trajectory, record: EpisodeRecord) -> None:
    info = dict(trajectory.task.metadata.get("factory") or {})
    info.update(
        {
            "status": record.status,
            "hash": record.hash,
            "transitions": record.transitions,
            "seconds": record.seconds,
            "rejected": record.rejected,
            "format_problems": record.format_problems,
            "error": record.error,
        }
    )
    trajectory.task.metadata["factory"] = info


@dataclass
class RawScan:
    """The episodes of a raw file in file order, and the lines a crash cut short."""

    records: list[EpisodeRecord]
    broken: int = 0


def scan_raw(path: str | os.PathLike[str]) -> RawScan:
    """Read the episode records of a raw file. A line that is not JSON (a crash cut it;
    the writer starts the next line afresh) is skipped and counted; a JSON line that is
    not a factory episode means the file is not a factory's, and raises."""
    path = Path(path)
    scan = RawScan([])
    if not path.is_file():
        return scan
    with open(path, "rb") as f:
        offset = 0
        for raw in f:
            size = len(raw)
            if not raw.strip():
                offset += size
                continue
            try:
                data = json.loads(raw)
            except json.JSONDecodeError:
                scan.broken += 1
                offset += size
                continue
            try:
                task = data["task"]
                info = task["metadata"]["factory"]
                scan.records.append(
                    EpisodeRecord(
                        id=task["id"],
                        domain=data["domain"],
                        index=int(info["index"]),
                        status=info["status"],
                        transitions=int(info["transitions"]),
                        hash=info["hash"],
                        seconds=float(info.get("seconds", 0.0)),
                        rejected=int(info.get("rejected", 0)),
                        format_problems=int(info.get("format_problems", 0)),
                        error=info.get("error"),
                        offset=offset,
                        size=size,
                    )
                )
            except (KeyError, TypeError, ValueError):
                raise FactoryError(
                    f"{path}: the line at byte {offset} is not a factory episode"
                ) from None
            offset += size
    return scan


def _replay(records: list[EpisodeRecord], quotas: dict[str, int]) -> Tally:
    """The tally a set of recorded episodes adds up to (duplicates decided in episode
    order, as :func:`finalize` decides them)."""
    tally = Tally(quotas=dict(quotas))
    for record in sorted(records, key=lambda r: (r.domain, r.index)):
        if record.status != "failed":
            tally.classify(record)
        tally.add(record)
    return tally


async def arun_factory(
    config: FactoryConfig,
    *,
    on_episode: Callable[[EpisodeRecord, Tally], None] | None = None,
    on_start: Callable[[Tally], None] | None = None,
) -> dict[str, Any]:
    """Record episodes until every domain has its share of ``config.transitions`` (counting
    only kept, unique episodes), then :func:`finalize`. Returns the manifest."""
    import simgym.domains  # noqa: F401  (registers the built-in domains)
    from simgym.data.trajectories import TrajectoryWriter

    out = config.out
    raw = out / RAW_FILE
    if not config.resume and raw.is_file() and raw.stat().st_size > 0:
        raise FactoryError(f"{out} already holds a factory run; resume it or choose another folder")
    quotas = quotas_for(config.transitions, config.domains, config.weights)
    problems = backend_problems(quotas)
    if problems:
        raise FactoryError(
            "real backends missing: "
            + "; ".join(f"{d}: {why}" for d, why in sorted(problems.items()))
        )
    out.mkdir(parents=True, exist_ok=True)
    records = scan_raw(raw).records
    tally = _replay(records, quotas)
    tally.failures_in_a_row.clear()
    context = await FactoryContext.abuild(
        quotas, work=out, seed=config.seed, web_sites=config.web_sites
    )
    scheduler = _Scheduler(config, context, tally, {r.id for r in records})
    started, before = time.time(), sum(tally.done.values())
    clock = time.perf_counter()
    new_records: list[EpisodeRecord] = []
    if on_start is not None:
        on_start(tally)
    work = Path(tempfile.mkdtemp(prefix="simgym-factory-"))
    slots = _Slots(work, factory_limits())
    try:
        with TrajectoryWriter(raw) as writer:

            async def worker() -> None:
                while (plan := scheduler.next()) is not None:
                    try:
                        trajectory, record = await _record_episode(plan, slots, config)
                    finally:
                        scheduler.finish(plan)
                    tally.classify(record)
                    _stamp(trajectory, record)
                    writer.write(trajectory)
                    tally.add(record, max_failures=config.max_failures)
                    new_records.append(record)
                    if on_episode is not None:
                        on_episode(record, tally)

            await asyncio.gather(*(worker() for _ in range(config.concurrency)))
    finally:
        await slots.aclose()
        shutil.rmtree(work, ignore_errors=True)
    wall = time.perf_counter() - clock
    run = {
        "seed": config.seed,
        "started": started,
        "wall_s": round(wall, 1),
        "concurrency": config.concurrency,
        "episodes": len(new_records),
        "transitions": sum(tally.done.values()) - before,
        "per_domain": {
            d: {
                "episodes": sum(1 for r in new_records if r.domain == d),
                "transitions": sum(
                    r.transitions for r in new_records if r.domain == d and r.status == "ok"
                ),
                "episode_seconds": round(sum(r.seconds for r in new_records if r.domain == d), 1),
            }
            for d in quotas
        },
    }
    return finalize(out, config=config, quotas=quotas, run=run, abandoned=tally.abandoned)


def run_factory(config: FactoryConfig, **options: Any) -> dict[str, Any]:
    """Blocking :func:`arun_factory`."""
    return asyncio.run(arun_factory(config, **options))


# ==========================================================================================
# dedup, split, manifest
# ==========================================================================================


def finalize(
    out: str | os.PathLike[str],
    *,
    config: FactoryConfig | None = None,
    quotas: dict[str, int] | None = None,
    run: dict[str, Any] | None = None,
    abandoned: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Drop duplicate and failed episodes from ``out/raw.jsonl``, split the rest by
    episode id into ``train``/``val``/``test`` JSONL files and write ``manifest.json``
    (counts per split and domain, what was dropped and why, run timings). Rerunnable:
    the same raw file always gives the same files."""
    out = Path(out)
    raw = out / RAW_FILE
    split = config.split if config is not None else DEFAULT_SPLIT
    scan = scan_raw(raw)
    records = scan.records
    ordered = sorted(records, key=lambda r: (r.domain, r.index))
    kept: list[EpisodeRecord] = []
    seen: set[str] = set()
    dropped: dict[str, Counter] = {"duplicate": Counter(), "failed": Counter()}
    errors: dict[str, list[str]] = defaultdict(list)
    for record in ordered:
        if record.status == "failed":
            dropped["failed"][record.domain] += 1
            if len(errors[record.domain]) < 5:
                errors[record.domain].append(f"{record.id}: {record.error}")
        elif record.hash in seen:
            dropped["duplicate"][record.domain] += 1
        else:
            seen.add(record.hash)
            kept.append(record)
    counts: dict[str, dict[str, dict[str, int]]] = {s: {} for s in SPLITS}
    with open(raw, "rb") as source:
        for name in SPLITS:
            target = out / f"{name}.jsonl"
            partial = target.with_name(f".{target.name}.partial")
            with open(partial, "wb") as sink:
                for record in kept:
                    if split_of(record.id, split) != name:
                        continue
                    source.seek(record.offset)
                    sink.write(source.read(record.size))
                    entry = counts[name].setdefault(
                        record.domain, {"episodes": 0, "transitions": 0}
                    )
                    entry["episodes"] += 1
                    entry["transitions"] += record.transitions
            os.replace(partial, target)
    for name in SPLITS:
        counts[name] = dict(sorted(counts[name].items()))
        counts[name]["total"] = {
            "episodes": sum(v["episodes"] for v in counts[name].values()),
            "transitions": sum(v["transitions"] for v in counts[name].values()),
        }
    domains = sorted({r.domain for r in records})
    per_domain = {}
    for domain in domains:
        mine = [r for r in records if r.domain == domain]
        good = [r for r in kept if r.domain == domain]
        seconds = sum(r.seconds for r in mine)
        transitions = sum(r.transitions for r in good)
        per_domain[domain] = {
            "recorded": len(mine),
            "kept": len(good),
            "duplicates": dropped["duplicate"][domain],
            "failed": dropped["failed"][domain],
            "transitions": transitions,
            "mean_turns": round(transitions / len(good), 2) if good else 0.0,
            "rejected_actions": sum(r.rejected for r in mine),
            "format_problems": sum(r.format_problems for r in good),
            "episode_seconds": round(seconds, 1),
            "transitions_per_episode_second": round(transitions / seconds, 3) if seconds else 0.0,
        }
    previous = _read_manifest(out)
    runs = list(previous.get("runs", []))
    if run is not None:
        runs.append(run)
    manifest = {
        "format": FORMAT,
        "seed": config.seed if config is not None else previous.get("seed"),
        "target_transitions": config.transitions
        if config is not None
        else previous.get("target_transitions"),
        "quotas": quotas if quotas is not None else previous.get("quotas", {}),
        "split": list(split),
        "splits": counts,
        "domains": per_domain,
        "errors": dict(errors),
        "unreadable_lines": scan.broken,
        "abandoned": abandoned or {},
        "runs": runs,
    }
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def _read_manifest(out: Path) -> dict[str, Any]:
    try:
        return json.loads((out / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}


def read_split(out: str | os.PathLike[str], name: str) -> Iterator[Trajectory]:
    """The trajectories of one split of a finished factory run."""
    from simgym.data.trajectories import read_trajectories

    if name not in SPLITS:
        raise FactoryError(f"unknown split {name!r}; use one of {', '.join(SPLITS)}")
    return read_trajectories(Path(out) / f"{name}.jsonl", strict=True)
