"""The terminal generator: a home directory with data exports, logs, a small Python
project, configs, notes and scripts, in a bubblewrap sandbox with a tmux shell; programs
explore, query, create, edit, delete, use git and interactive programs, and fail on
purpose (typos, missing files, permission errors).
"""

from __future__ import annotations

import json
import posixpath
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from simgym.core.types import Task
from simgym.data.factory.common import (
    CODE_WORDS,
    FIRST_NAMES,
    EpisodePlan,
    Program,
    _length,
    _person,
    _weighted,
)
from simgym.data.factory.context import FactoryContext

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
        # the sandbox runs at the real time: no clock of the scenario's may claim `date` or
        # the times of `ls -l` in its rows
        "clock": None,
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
