"""The probed domains: how each creates, changes, deletes and looks at a fact, and
the filler turns written by rule."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Scripted:
    """An observation written by rule: ``text``, after the command echo a terminal shows
    (``echo``; the environment's own echo prefix is used when it gives one), plus the
    hidden-state patch the turn makes."""

    text: str
    patch: dict[str, Any] = field(default_factory=dict)
    echo: str | None = None

    def observation(self, prefix: str) -> str:
        if self.echo is None:
            return self.text
        return (prefix or self.echo) + self.text


@dataclass(frozen=True)
class ProbeDomain:
    """How to probe one domain: the world, and the actions (and scripted answers) that
    create, change, delete and look at a fact, plus unrelated filler actions."""

    name: str
    scenario: dict[str, Any]
    instruction: str
    fact: Callable[[str], str]  # random id -> file path / record id
    setup: Callable[[str, str], tuple[Any, Scripted]]  # create the old value, by rule
    mutate: Callable[[str, str, str | None, str | None], Any]  # (op, fact, new, old)
    look: Callable[[str], Any]
    filler: Callable[[int], tuple[Any, Scripted]]  # turn number -> unrelated action
    locate: Callable[[dict[str, Any], str], Any]  # the fact in a hidden state, or None
    missing: re.Pattern[str]  # what a not-found error looks like


def _find(mapping: Any, name: str) -> Any:
    """The value under ``name`` or under a key that ends with ``/name`` (a model may
    write a file's path relative or absolute)."""
    if not isinstance(mapping, dict):
        return None
    if mapping.get(name) is not None:
        return mapping[name]
    tail = "/" + name.rsplit("/", 1)[-1]
    for key, value in mapping.items():
        if isinstance(key, str) and (key.endswith(tail) or key == tail[1:]) and value is not None:
            return value
    return None


# terminal: a file under the home directory, written with echo, removed with rm, read
# with cat.
_T_PROMPT = "user@devbox:~$"
_T_HOME = "/home/user"


def _t_scripted(command: str, output: str = "", patch: dict[str, Any] | None = None) -> Scripted:
    body = f"{output}\n{_T_PROMPT}" if output else _T_PROMPT
    return Scripted(body, patch or {}, echo=f"{_T_PROMPT} {command}\n")


def _t_setup(path: str, value: str) -> tuple[Any, Scripted]:
    command = f'echo "{value}" > {path}'
    return command, _t_scripted(command, patch={"files": {path: value + "\n"}})


def _t_mutate(op: str, path: str, new: str | None, old: str | None) -> Any:
    return f"rm {path}" if op == "delete" else f'echo "{new}" > {path}'


def _t_filler(turn: int) -> tuple[Any, Scripted]:
    command, output = [
        (f"echo check-{turn}", f"check-{turn}"),
        ("pwd", _T_HOME),
        ("whoami", "user"),
        (f"cat {_T_HOME}/notes.txt", "remember the milk"),
        ("hostname", "devbox"),
    ][turn % 5]
    return command, _t_scripted(command, output)


TERMINAL_PROBES = ProbeDomain(
    name="terminal",
    scenario={
        "user": "user",
        "hostname": "devbox",
        "files": {f"{_T_HOME}/notes.txt": "remember the milk\n", f"{_T_HOME}/projects/": ""},
        "programs": ["python3", "git", "vim"],
    },
    instruction="Keep short notes in files in the home directory.",
    fact=lambda rid: f"{_T_HOME}/probe-{rid}.txt",
    setup=_t_setup,
    mutate=_t_mutate,
    look=lambda path: f"cat {path}",
    filler=_t_filler,
    locate=lambda state, path: _find(state.get("files"), path),
    missing=re.compile(r"no such file or directory", re.IGNORECASE),
)


# mcp: a record in a small record store, behind create/update/delete/get tools.
def _tool(name: str, description: str, /, **properties: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "parameters": {
            "type": "object",
            "properties": {k: {"type": "string", "description": v} for k, v in properties.items()},
            "required": list(properties),
        },
    }


# Collections are lists of records with an id field, the shape simgym's mcp grounding
# (simgym.domains.mcp_ground) reads: it then knows what each record tool certainly does.
_M_SETTINGS = {"region": "eu-west-1", "retention_days": "30", "owner": "ops-team"}
_M_FIRST = {"id": "R-0001", "value": "first note"}


def _m_call(name: str, /, **arguments: str) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _m_setup(rid: str, value: str) -> tuple[Any, Scripted]:
    result = {"id": rid, "value": value, "status": "created"}
    # The whole list, as a merge patch must give it and as grounding computes it.
    records = [_M_FIRST, {"id": rid, "value": value}]
    return _m_call("create_record", id=rid, value=value), Scripted(
        json.dumps(result), {"records": records}
    )


def _record(records: Any, rid: str) -> Any:
    """Record ``rid`` of a collection kept as a list of records (the scenario's shape) or
    as a map by id (a model's patch may write either)."""
    if isinstance(records, dict):
        return records.get(rid)
    if isinstance(records, list):
        return next((r for r in records if isinstance(r, dict) and r.get("id") == rid), None)
    return None


def _m_mutate(op: str, rid: str, new: str | None, old: str | None) -> Any:
    if op == "delete":
        return _m_call("delete_record", id=rid)
    tool = "create_record" if op == "create" else "update_record"
    return _m_call(tool, id=rid, value=new or "")


def _m_filler(turn: int) -> tuple[Any, Scripted]:
    kind = turn % 4
    if kind == 0:
        return _m_call("ping", message=f"check-{turn}"), Scripted(
            json.dumps({"pong": f"check-{turn}"})
        )
    if kind == 3:
        return _m_call("get_record", id="R-0001"), Scripted(
            json.dumps({"id": "R-0001", "value": "first note"})
        )
    name = list(_M_SETTINGS)[kind - 1]
    return _m_call("get_setting", name=name), Scripted(
        json.dumps({"name": name, "value": _M_SETTINGS[name]})
    )


MCP_PROBES = ProbeDomain(
    name="mcp",
    scenario={
        "server_name": "records",
        "description": "A small record store: records by id, and a few server settings.",
        "tools": [
            _tool("create_record", "Create a record with this id and value.", id="", value=""),
            _tool("update_record", "Replace the value of an existing record.", id="", value=""),
            _tool("delete_record", "Delete a record.", id="record id"),
            _tool("get_record", "Fetch one record by id.", id="record id"),
            _tool("get_setting", "Read one server setting.", name="setting name"),
            _tool("ping", "Check the server is up; echoes the message.", message=""),
        ],
        "state": {
            "records": [_M_FIRST],
            "settings": [{"name": k, "value": v} for k, v in _M_SETTINGS.items()],
        },
        "output_format": "json",
    },
    instruction="Keep the team's records up to date.",
    fact=lambda rid: f"R-{rid}",
    setup=_m_setup,
    mutate=_m_mutate,
    look=lambda rid: _m_call("get_record", id=rid),
    filler=_m_filler,
    locate=lambda state, rid: _record(state.get("records"), rid),
    missing=re.compile(
        # a record reported as deleted is reported absent, as a 404 would be
        r"not[ _-]?found|\b404\b|does not exist|doesn't exist|no such|no record|\bdeleted\b|"
        r"\bremoved\b",
        re.IGNORECASE,
    ),
)


# swe: a file in the repository, written with write_file, changed with edit_file, removed
# with bash rm, read with read_file.
def _s_call(name: str, /, **arguments: str) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _s_setup(path: str, value: str) -> tuple[Any, Scripted]:
    return _s_call("write_file", path=path, content=value + "\n"), Scripted(
        f"Created {path} (1 lines)", {"files": {path: value + "\n"}}
    )


def _s_mutate(op: str, path: str, new: str | None, old: str | None) -> Any:
    if op == "create":
        return _s_call("write_file", path=path, content=f"{new}\n")
    if op == "change":
        return _s_call("edit_file", path=path, old_str=old or "", new_str=new or "")
    return _s_call("bash", command=f"rm {path}")


def _s_filler(turn: int) -> tuple[Any, Scripted]:
    kind = turn % 4
    if kind == 0:
        return _s_call("bash", command=f"echo check-{turn}"), Scripted(
            f"check-{turn}\n[exit code: 0]"
        )
    if kind == 1:
        return _s_call("bash", command="pwd"), Scripted("/workspace/repo\n[exit code: 0]")
    if kind == 2:
        return _s_call("read_file", path="README.md"), Scripted(
            "     1  # notes-demo\n     2  A tiny demo repository."
        )
    return _s_call("bash", command="git branch --show-current"), Scripted("main\n[exit code: 0]")


SWE_PROBES = ProbeDomain(
    name="swe",
    scenario={
        "repo": "acme/notes-demo",
        "language": "python",
        "runtime": "Python 3.11.9",
        "files": {
            "README.md": "# notes-demo\nA tiny demo repository.\n",
            "src/app.py": 'print("notes")\n',
            "notes/": "",
        },
    },
    instruction="Keep scratch notes in the notes/ folder while you work.",
    fact=lambda rid: f"notes/probe-{rid}.txt",
    setup=_s_setup,
    mutate=_s_mutate,
    look=lambda path: _s_call("read_file", path=path),
    filler=_s_filler,
    locate=lambda state, path: _find(state.get("files"), path),
    missing=re.compile(r"not found|no such file|does not exist", re.IGNORECASE),
)

PROBE_DOMAINS: dict[str, ProbeDomain] = {
    spec.name: spec for spec in (TERMINAL_PROBES, MCP_PROBES, SWE_PROBES)
}
