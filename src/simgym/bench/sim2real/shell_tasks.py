"""Task sets for sim2real on a real terminal: a bash shell in a bubblewrap sandbox.

The second environment of the experiment (the first is the records MCP server,
:mod:`~simgym.bench.sim2real.tasks`). Each task carries its machine as a ``terminal``
scenario: a user ``dev`` whose home holds a small project (notes, a configuration file, a
to-do list, logs, an archive directory). The real backend
(:class:`~simgym.real.terminal.RealTerminal`) builds that machine in a fresh sandbox for
every episode and types the agent's keystrokes into a live shell; the twin is the
``terminal`` domain on a world model with grounding, whose hidden state holds the same
files. Both report the files at the end as ``{"files": {path: content}}``, so one set of
``state`` checks scores an episode on either.

Two disjoint sets, generated deterministically: held-out machines (:func:`shell_heldout_tasks`,
one seed, never trained on) and training machines (:func:`shell_training_tasks`, other
seeds: other file names, codes, keys and lines). Lookups ask for a value only that machine
has (a random key, a code word's file, a line count); changes are scored with ``state``
checks on the files; lookups pass when the answer holds the value as a whole token
(``regex``: ``KEY=value`` and ``notes/budget.txt`` pass, ``x123`` does not for ``123``), a
count when it is the only number in the answer. Each task's reference plan
(``metadata["solution"]``) is a list of ``send_keys`` calls and an answer; plan steps may
``read`` a value from what the terminal shows (a regular expression with one group), which
later steps use as ``{name}``: the :class:`~simgym.bench.sim2real.ReaderAgent` follows the
plan that way, so its answers come from the world, never from the task.
"""

from __future__ import annotations

import random
import re
import string
from dataclasses import dataclass
from typing import Any

from simgym.bench.sim2real.plans import (
    Generated,
    Maker,
    file_absent,
    file_is,
    number_answer,
    token_answer,
)
from simgym.bench.sim2real.tasks import checked_change

SHELL_DOMAIN = "terminal"
HOME = "/home/dev"
HELDOUT_SEED = 4242  # the held-out machines; fixed forever
HELDOUT_PREFIX = "sh-heldout-"
TRAIN_PREFIX = "sh-train-"

TOPICS = ("budget", "roadmap", "hiring", "security", "launch", "migration", "offsite", "vendor")
TODO_LINES = (
    "renew the TLS certificate",
    "answer the auditor's email",
    "rotate the backup tapes",
    "book the team dinner",
    "update the on-call rota",
    "clean up the staging bucket",
    "review the vendor contract",
    "archive last quarter's logs",
)
LOG_EVENTS = ("started", "request served", "cache miss", "retrying", "job done", "user login")


@dataclass(frozen=True)
class Pools:
    """What a set's instructions name: the held-out and training sets draw from disjoint
    pools, so no held-out instruction is a training one (the machines differ besides)."""

    keys: tuple[str, ...]  # configuration keys
    lines: tuple[str, ...]  # lines to write or append
    names: tuple[str, ...]  # files to create
    old_logs: tuple[str, ...]  # the log to move into the archive
    logs: tuple[str, ...]  # the log to count


HELDOUT_POOLS = Pools(
    keys=("DB_PASSWORD", "API_TOKEN", "CACHE_SECRET", "SMTP_PASSWORD"),
    lines=(
        "send the weekly report",
        "check the disk alerts",
        "order new badges",
        "plan the data migration",
    ),
    names=("summary", "status"),
    old_logs=("old",),
    logs=("today",),
)
TRAIN_POOLS = Pools(
    keys=("SIGNING_KEY", "SESSION_SECRET", "QUEUE_PASSWORD", "WEBHOOK_TOKEN", "S3_ACCESS_KEY"),
    lines=(
        "call the landlord",
        "fix the flaky test",
        "write the release notes",
        "water the office plants",
        "renew the domain name",
        "print the invoices",
        "reset the office router",
        "file the travel expenses",
    ),
    names=("memo", "digest", "handover", "checklist"),
    old_logs=("january", "previous", "stale", "rotated"),
    logs=("api", "worker", "cron", "mail"),
)


def _token(rng: random.Random, size: int = 10) -> str:
    return "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(size))


def shell_world(seed: int, pools: Pools = TRAIN_POOLS) -> dict[str, Any]:
    """One machine, a pure function of ``seed`` and ``pools``: the ``terminal`` scenario
    (user, host, files) and the facts its tasks ask about."""
    rng = random.Random(f"sim2real-shell-{seed}")
    notes = rng.sample(TOPICS, 4)
    code = f"PRJ-{rng.randrange(1000, 9999)}"
    holder = rng.choice(notes)
    files: dict[str, str] = {f"{HOME}/notes/": "", f"{HOME}/logs/": "", f"{HOME}/archive/": ""}
    for topic in notes:
        lines = [f"{topic} notes", f"owner: {rng.choice(('ana', 'ben', 'caro', 'dev'))}"]
        if topic == holder:
            lines.append(f"tracked under {code}")
        lines.append(f"next review in {rng.randrange(2, 9)} weeks")
        files[f"{HOME}/notes/{topic}.txt"] = "\n".join(lines) + "\n"
    secrets = {key: _token(rng) for key in pools.keys}
    files[f"{HOME}/config/"] = ""
    files[f"{HOME}/config/app.env"] = "".join(f"{k}={v}\n" for k, v in secrets.items())
    todo = rng.sample(TODO_LINES, 3)
    files[f"{HOME}/todo.txt"] = "".join(f"{line}\n" for line in todo)
    old_log = f"logs/{rng.choice(pools.old_logs)}.log"
    log = f"logs/{rng.choice(pools.logs)}.log"
    log_lines = rng.randrange(11, 60)
    files[f"{HOME}/{old_log}"] = "".join(
        f"2025-01-{i + 1:02d} {rng.choice(LOG_EVENTS)}\n" for i in range(rng.randrange(3, 9))
    )
    files[f"{HOME}/{log}"] = "".join(
        f"12:{i:02d} {rng.choice(LOG_EVENTS)}\n" for i in range(log_lines)
    )
    scenario = {"user": "dev", "hostname": f"box{seed % 100:02d}", "files": files}
    facts = {
        "pools": pools,
        "code": code,
        "holder": f"{holder}.txt",
        "secrets": secrets,
        "todo": files[f"{HOME}/todo.txt"],
        "old_log": old_log,
        "old_log_text": files[f"{HOME}/{old_log}"],
        "log": log,
        "log_lines": log_lines,
    }
    return {"scenario": scenario, "facts": facts}


def _keys(text: str, **read: str) -> dict[str, Any]:
    step: dict[str, Any] = {"name": "send_keys", "arguments": {"keystrokes": text + "\n"}}
    if read:
        step["read"] = read
    return step


def _config_value(rng: random.Random, facts: dict[str, Any]) -> tuple[str, Any]:
    key = rng.choice(facts["pools"].keys)
    value = facts["secrets"][key]
    solution = [_keys("cat config/app.env", value=rf"{key}=(\S+)"), {"answer": "{value}"}]
    return f"What is the value of {key} in config/app.env?", token_answer(value, solution)


def _write_file(rng: random.Random, facts: dict[str, Any]) -> tuple[str, Any]:
    line = rng.choice(facts["pools"].lines)
    name = f"{rng.choice(facts['pools'].names)}.txt"
    solution = [_keys(f"echo '{line}' > {name}"), {"answer": "Done."}]
    text = f"Create a file named {name} in your home directory containing the single line: {line}"
    return text, checked_change([file_is(f"{HOME}/{name}", line + "\n")], solution)


def _append_line(rng: random.Random, facts: dict[str, Any]) -> tuple[str, Any]:
    line = rng.choice(facts["pools"].lines)
    solution = [_keys(f"echo '{line}' >> todo.txt"), {"answer": "Done."}]
    text = f"Add the line '{line}' to the end of todo.txt."
    check = file_is(f"{HOME}/todo.txt", facts["todo"] + line + "\n")
    return text, checked_change([check], solution)


def _find_code(rng: random.Random, facts: dict[str, Any]) -> tuple[str, Any]:
    solution = [
        _keys(f"grep -l {facts['code']} notes/*", file=r"notes/(\S+\.txt)"),
        {"answer": "{file}"},
    ]
    text = f"Which file in the notes directory mentions {facts['code']}? Give its file name."
    return text, token_answer(facts["holder"], solution)


def _move_file(rng: random.Random, facts: dict[str, Any]) -> tuple[str, Any]:
    old = facts["old_log"]
    solution = [_keys(f"mv {old} archive/"), {"answer": "Done."}]
    checks = [
        file_is(f"{HOME}/archive/{old.split('/')[-1]}", facts["old_log_text"]),
        file_absent(f"{HOME}/{old}"),
    ]
    return f"Move {old} into the archive directory.", checked_change(checks, solution)


def _count_lines(rng: random.Random, facts: dict[str, Any]) -> tuple[str, Any]:
    log = facts["log"]
    solution = [_keys(f"wc -l {log}", count=rf"(\d+) {re.escape(log)}"), {"answer": "{count}"}]
    text = f"How many lines does {log} have? Answer with the number."
    return text, number_answer(facts["log_lines"], solution)


def _backup_then_append(rng: random.Random, facts: dict[str, Any]) -> tuple[str, Any]:
    line = rng.choice(facts["pools"].lines)
    solution = [
        _keys("cp todo.txt todo.bak"),
        _keys(f"echo '{line}' >> todo.txt"),
        {"answer": "Done."},
    ]
    text = f"Back up todo.txt as todo.bak, then add the line '{line}' to the end of todo.txt."
    checks = [
        file_is(f"{HOME}/todo.bak", facts["todo"]),
        file_is(f"{HOME}/todo.txt", facts["todo"] + line + "\n"),
    ]
    return text, checked_change(checks, solution)


# In this order a set's first tasks cover every kind.
SHELL_KINDS: dict[str, Maker] = {
    "config_value": _config_value,
    "write_file": _write_file,
    "find_code": _find_code,
    "append_line": _append_line,
    "count_lines": _count_lines,
    "move_file": _move_file,
    "backup_then_append": _backup_then_append,
}


SHELL = Generated(
    shell_world,
    SHELL_KINDS,
    SHELL_DOMAIN,
    "shell",
    HELDOUT_SEED,
    (HELDOUT_PREFIX, TRAIN_PREFIX),
    (HELDOUT_POOLS, TRAIN_POOLS),
)
shell_heldout_tasks = SHELL.heldout  # the two task sets, as the suites take them
shell_training_tasks = SHELL.training
