"""SWE: a coding agent works in a software repository through tools; the world model
prints what each tool prints.

Actions are tool calls ``{"name", "arguments"}`` on seven repository tools, validated
against their JSON schemas (:func:`tools` gives them as :class:`ToolSpec` for an agent).
Each tool's observation:

- ``bash {command, timeout?}``: the output, then a last line ``[exit code: N]``.
- ``read_file {path, start_line?, end_line?}``: numbered lines, ``    12  text`` (the
  number right-aligned in 6 columns, two spaces); ``(empty file)`` for an empty file.
- ``write_file {path, content}``: ``Created PATH (N lines)`` or ``Overwrote PATH (N lines)``.
- ``edit_file {path, old_str, new_str}``: ``Edited PATH``, then the changed lines and a
  few around them, numbered as by ``read_file``.
- ``list_dir {path?}``: one entry a line, directories ending in ``/``.
- ``run_tests {target?}``: the test runner's output with its summary line (pytest,
  unittest, jest, go test, cargo test, ...), then ``[exit code: N]``.
- ``submit {}``: the ``git diff`` of all changes (or ``No changes.``), then ``[submitted]``.

A file tool that fails prints one line ``Error: ...`` (``Error: file not found: PATH``,
``Error: old_str not found in PATH``). ``submit`` is simulated (the world shows the final
diff) and then ends the episode. Free text is not a final answer here: a plain text line
is a ``bash`` command, as a person types it in ``simgym play``. Paths are relative to the
repository root (absolute paths inside it are accepted); validation normalizes them to
the relative form and rejects paths that leave the root. A few tool names other agent
harnesses use map onto these (``execute_bash``, ``str_replace_editor``, ``finish``).
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from simgym.core.domain import Demonstration, Domain, ScenarioBase, register_domain
from simgym.core.errors import ActionError
from simgym.core.safeload import loads_json
from simgym.core.state import STRING, STRING_LIST, STRING_MAP, object_schema
from simgym.core.types import Action, ToolSpec
from simgym.domains import swe_ground

MAX_TIMEOUT_S = 3600
_PATH = {"type": "string", "minLength": 1}
_LINE = {"type": "integer", "minimum": 1}


def _schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    # Unknown arguments are errors: a typo like "file" for "path" should not pass silently.
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="bash",
        description="Run a shell command in the repository root (a fresh shell each call). "
        "Prints stdout and stderr, then [exit code: N].",
        parameters=_schema(
            {
                "command": {"type": "string", "minLength": 1},
                "timeout": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_S},
            },
            ("command",),
        ),
    ),
    ToolSpec(
        name="read_file",
        description="Show a file with line numbers, optionally only lines start_line..end_line.",
        parameters=_schema(
            {"path": _PATH, "start_line": _LINE, "end_line": _LINE},
            ("path",),
        ),
    ),
    ToolSpec(
        name="write_file",
        description="Create a file or replace its whole content.",
        parameters=_schema({"path": _PATH, "content": {"type": "string"}}, ("path", "content")),
    ),
    ToolSpec(
        name="edit_file",
        description="Replace the one exact occurrence of old_str in a file with new_str.",
        parameters=_schema(
            {
                "path": _PATH,
                "old_str": {"type": "string", "minLength": 1},
                "new_str": {"type": "string"},
            },
            ("path", "old_str", "new_str"),
        ),
    ),
    ToolSpec(
        name="list_dir",
        description="List a directory (default: the repository root); directories end in /.",
        parameters=_schema({"path": _PATH}),
    ),
    ToolSpec(
        name="run_tests",
        description="Run the repository's test command, optionally on one target "
        "(a file, test id or package).",
        parameters=_schema({"target": {"type": "string", "minLength": 1}}),
    ),
    ToolSpec(
        name="submit",
        description="Finish: submit the changes made so far. Shows the final diff.",
        parameters=_schema({}),
    ),
)
_BY_NAME = {tool.name: tool for tool in TOOLS}
_PATH_TOOLS = ("read_file", "write_file", "edit_file", "list_dir")
# Names other agent harnesses give the same tools.
_BASH_ALIASES = ("execute_bash", "shell", "run_command", "terminal")
_EDITOR_ALIASES = ("str_replace_editor", "str_replace_based_edit_tool")
_SUBMIT_ALIASES = ("finish",)


def tools() -> list[ToolSpec]:
    """The repository tools, for an agent's tool list (``[t.to_openai() for t in tools()]``)."""
    return list(TOOLS)


class SWEScenario(ScenarioBase):
    """A repository checked out at ``root``: its files, tests and toolchain (hidden state)."""

    repo: str = Field("acme/project", description="repository name, e.g. owner/name")
    language: str = "python"
    root: str = Field("/workspace/repo", description="absolute path of the checkout")
    branch: str = "main"
    commits: list[str] = Field(
        default_factory=list, description="recent commits, newest first: 'sha subject'"
    )
    files: dict[str, str] = Field(
        default_factory=dict,
        description="path (relative to root) -> content; a path ending in '/' is a directory",
    )
    test_command: str = "python -m pytest -q"
    failing_tests: list[str] = Field(
        default_factory=list, description="tests that fail at the start"
    )
    issue: str = Field("", description="the bug report or change request, as true state")
    runtime: str = Field("", description="toolchain, e.g. 'Python 3.11.9'")
    packages: dict[str, str] = Field(
        default_factory=dict, description="installed packages: name -> version"
    )

    @field_validator("root")
    @classmethod
    def _absolute_root(cls, value: str) -> str:
        root = posixpath.normpath(value.strip())
        if not root.startswith("/") or root == "/":
            raise ValueError("root must be an absolute directory other than /")
        return root

    @model_validator(mode="after")
    def _relative_files(self) -> SWEScenario:
        normalized: dict[str, str] = {}
        for path, content in self.files.items():
            directory = path.endswith("/")
            try:
                rel = relative_path(path, self.root)
            except ActionError as exc:
                raise ValueError(f"files: {exc}") from None
            normalized[rel + "/" if directory and rel != "." else rel] = content
        self.files = normalized
        return self

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` (relative, normalized) is a directory the scenario describes."""
        if path == ".":
            return True
        return path + "/" in self.files or any(p.startswith(path + "/") for p in self.files)

    def head(self) -> str:
        return self.commits[0] if self.commits else ""


def relative_path(path: str, root: str) -> str:
    """``path`` relative to the repository root, normalized; raises :class:`ActionError`
    when it is empty or leaves the root."""
    raw = path.strip()
    if not raw:
        raise ActionError("path is empty")
    if "\x00" in raw:
        raise ActionError("path contains a NUL byte")
    if raw.startswith("/"):
        full = posixpath.normpath(raw)
        if full != root and not full.startswith(root + "/"):
            raise ActionError(f"path {path!r} is outside the repository root {root}")
        return posixpath.relpath(full, root)
    rel = posixpath.normpath(raw)
    if rel == ".." or rel.startswith("../"):
        raise ActionError(f"path {path!r} escapes the repository root {root}")
    return rel


# -- actions ----------------------------------------------------------------------------


def _validate(action: Action, scenario: SWEScenario) -> Action:
    if action.kind == "text":
        command = (action.text or "").rstrip("\n")
        return _validate(Action.tool_call("bash", {"command": command}), scenario)
    if action.kind != "tool_call":
        raise ActionError(
            'the swe domain takes tool calls: {"name": "bash", "arguments": {"command": "ls"}}'
        )
    action = _canonical(action, scenario)
    tool = _BY_NAME.get(action.name or "")
    if tool is None:
        raise ActionError(
            f"unknown tool {action.name!r}: the repository tools are {', '.join(_BY_NAME)}"
        )
    tool.check_arguments(action.arguments)
    args = dict(action.arguments)
    if tool.name == "bash" and not args["command"].strip():
        raise ActionError("bash: the command is blank")
    if tool.name in _PATH_TOOLS and "path" in args:
        args["path"] = relative_path(args["path"], scenario.root)
    start, end = args.get("start_line"), args.get("end_line")
    if start is not None and end is not None and end < start:
        raise ActionError(f"read_file: end_line {end} is before start_line {start}")
    return Action.tool_call(tool.name, args)


def _canonical(action: Action, scenario: SWEScenario) -> Action:
    """Map another harness's tool names onto ours; anything else passes unchanged."""
    name, args = action.name or "", action.arguments
    if name in _BASH_ALIASES:
        return Action.tool_call("bash", args)
    if name in _SUBMIT_ALIASES:
        return Action.tool_call("submit", {})
    if name not in _EDITOR_ALIASES:
        return action
    command, path = args.get("command"), args.get("path")
    if not isinstance(path, str):
        raise ActionError(f"{name}: 'path' (a string) is required")
    if command == "view":
        if path.endswith("/") or scenario.is_dir(relative_path(path, scenario.root)):
            return Action.tool_call("list_dir", {"path": path})
        view = args.get("view_range") or []
        lines = dict(zip(("start_line", "end_line"), view, strict=False))
        if lines.get("end_line") == -1:  # the editor's "to the end of the file"
            del lines["end_line"]
        return Action.tool_call("read_file", {"path": path, **lines})
    if command == "create":
        return Action.tool_call("write_file", {"path": path, "content": args.get("file_text")})
    if command == "str_replace":
        return Action.tool_call(
            "edit_file",
            {"path": path, "old_str": args.get("old_str"), "new_str": args.get("new_str", "")},
        )
    raise ActionError(
        f"{name}: command {command!r} is not supported; use read_file, write_file or edit_file"
    )


def _render(action: Action, scenario: SWEScenario) -> str:
    return json.dumps({"name": action.name, "arguments": action.arguments}, ensure_ascii=False)


def _is_final(action: Action) -> bool:
    return action.kind == "tool_call" and action.name == "submit"


def _parse_input(line: str, scenario: SWEScenario) -> Action:
    """What a person types in ``simgym play``: ``TOOL {json}``, ``TOOL key=value ...``,
    ``read_file PATH [START [END]]``, ``list_dir [PATH]``, ``run_tests [TARGET]``,
    ``submit``, a full JSON call, or any other line as a bash command."""
    stripped = line.strip()
    if stripped.startswith("{"):
        return Action.parse(stripped)
    name, _, rest = stripped.partition(" ")
    rest = rest.strip()
    if name not in _BY_NAME:
        return Action.tool_call("bash", {"command": stripped})
    if rest.startswith("{"):
        try:
            return Action.tool_call(name, loads_json(rest))
        except json.JSONDecodeError as exc:
            raise ActionError(f"arguments are not valid JSON: {exc}") from None
    if name == "bash":
        return Action.tool_call("bash", {"command": rest})
    try:
        words = shlex.split(rest)
    except ValueError as exc:  # an unclosed quote
        raise ActionError(f"cannot split the arguments: {exc}") from None
    if words and all("=" in w for w in words):
        return Action.tool_call(name, _key_values(words))
    return Action.tool_call(name, _positional(name, words, rest))


_TEXT_ARGS = ("path", "target", "command", "content", "old_str", "new_str")


def _key_values(words: list[str]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for word in words:
        key, _, value = word.partition("=")
        args[key] = value if key in _TEXT_ARGS else _number_or_text(value)
    return args


def _number_or_text(value: str) -> Any:
    try:
        return loads_json(value)  # start_line=7 is the number 7
    except json.JSONDecodeError:
        return value


def _positional(name: str, words: list[str], rest: str) -> dict[str, Any]:
    if name == "read_file" and words:
        if len(words) > 3 or not all(w.isdigit() for w in words[1:]):
            raise ActionError("usage: read_file PATH [START_LINE [END_LINE]]")
        lines = dict(zip(("start_line", "end_line"), map(int, words[1:]), strict=False))
        return {"path": words[0], **lines}
    if name == "list_dir":
        return {"path": rest} if rest else {}
    if name == "run_tests":
        return {"target": rest} if rest else {}
    if name == "submit" or not words:
        return {}
    raise ActionError(
        f'{name} needs key=value pairs or JSON arguments, e.g. {name} {{"path": ...}}'
    )


# -- observations -------------------------------------------------------------------------

_EXIT_LINE = re.compile(r"^\[exit code: (\d+)\]$")
_NUMBERED = re.compile(r"^ *(\d+)(?:[ \t]|$)")
_NOTE = re.compile(r"^\[.*\]$")
_STRAY = ("<predicted_observation", "</predicted_observation>", "<think>", "</think>")
_STRAY += ("**Environment Observation:**",)
# Closing summaries of common test runners: pytest, unittest, jest, vitest, mocha, go test,
# cargo test, RSpec, Maven/JUnit, node:test/TAP.
_TEST_SUMMARIES = tuple(
    re.compile(p, re.MULTILINE)
    for p in (
        r"\b\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?)\b.*"
        r" in \d+(?:\.\d+)?s\b",
        r"\bno tests ran\b",
        r"^Ran \d+ tests? in \d",
        r"^Tests:\s+.*\d+ total",
        r"^\s*Tests\s+.*\d+ (?:passed|failed)",
        r"^\s*\d+ passing\b",
        r"^(?:ok|FAIL)\s+\S+\s+(?:\d+(?:\.\d+)?s|\(cached\)|\[[^\]]+\])",
        r"^\?\s+\S+\s+\[no test files\]",
        r"^test result: (?:ok|FAILED)\.",
        r"\b\d+ examples?, \d+ failures?",
        r"Tests run: \d+, Failures: \d+",
        r"^# (?:pass|fail)\s+\d+",
    )
)
_TEST_FAILURE = re.compile(
    r"\b[1-9]\d* (?:failed|errors?)\b|^FAILED \(|^FAIL\b|test result: FAILED|"
    r"\b[1-9]\d* failures?\b|Failures: [1-9]",
    re.MULTILINE,
)
# The runner never started (missing tool or module, build failure, killed): no summary.
_RUNNER_DID_NOT_START = re.compile(
    r"command not found|No module named|No such file or directory|Cannot find module|"
    r"could not compile"
)
_NO_SUMMARY_EXITS = {124, 126, 127, 137}


def _check(text: str, action: Action, scenario: SWEScenario) -> list[str]:
    lines = [line.rstrip() for line in text.strip("\n").splitlines()]
    if not any(line.strip() for line in lines):
        return ["empty observation"]
    problems = [f"stray {tag!r} in the observation" for tag in _STRAY if tag in text]
    check = _CHECKS.get(action.name or "")
    if check is not None:
        problems += check(lines, action)
    return problems


def _check_bash(lines: list[str], action: Action) -> list[str]:
    if _exit_code(lines) is None:
        return ["the output does not end with an [exit code: N] line"]
    return []


def _check_tests(lines: list[str], action: Action) -> list[str]:
    code = _exit_code(lines)
    if code is None:
        return ["the test output does not end with an [exit code: N] line"]
    body = "\n".join(lines[:-1])
    if not any(p.search(body) for p in _TEST_SUMMARIES):
        if code in _NO_SUMMARY_EXITS or _RUNNER_DID_NOT_START.search(body):
            return []
        return ["the test output has no test runner summary line"]
    if code == 0 and _TEST_FAILURE.search(body):
        return ["the test summary reports failures but the exit code is 0"]
    return []


def _exit_code(lines: list[str]) -> int | None:
    content = [line for line in lines if line.strip()]
    match = _EXIT_LINE.match(content[-1].strip()) if content else None
    return int(match.group(1)) if match else None


def _check_read(lines: list[str], action: Action) -> list[str]:
    if _is_error(lines) or [line.strip() for line in lines if line.strip()] == ["(empty file)"]:
        return []
    start = action.arguments.get("start_line")
    return _numbered_problems(lines, first=start)


def _check_write(lines: list[str], action: Action) -> list[str]:
    if _is_error(lines) or re.match(r"^(Created|Overwrote) \S", _first(lines)):
        return []
    return ["write_file output should be 'Created PATH (N lines)', 'Overwrote ...' or 'Error: ...'"]


def _check_edit(lines: list[str], action: Action) -> list[str]:
    if _is_error(lines):
        return []
    if not _first(lines).startswith("Edited "):
        return ["edit_file output should start with 'Edited PATH' or 'Error: '"]
    body = [line for line in lines if line.strip()][1:]
    # A bare confirmation is fine (a deletion may leave nothing worth showing).
    return _numbered_problems(body, first=None) if body else []


def _check_list(lines: list[str], action: Action) -> list[str]:
    if any(_EXIT_LINE.match(line.strip()) for line in lines):
        return ["list_dir output has an [exit code] line; it lists entries only"]
    return []


def _check_submit(lines: list[str], action: Action) -> list[str]:
    content = [line for line in lines if line.strip()]
    if content[-1].strip() != "[submitted]":
        return ["submit output does not end with [submitted]"]
    body = "\n".join(content[:-1])
    if body and "diff --git" not in body and "no changes" not in body.lower():
        return ["submit output should show a git diff or 'No changes.'"]
    return []


def _is_error(lines: list[str]) -> bool:
    return _first(lines).startswith("Error: ")


def _first(lines: list[str]) -> str:
    return next((line for line in lines if line.strip()), "")


def _numbered_problems(lines: list[str], first: int | None) -> list[str]:
    """Lines must carry consecutive numbers (a trailing ``[...]`` note is allowed)."""
    body = [line for line in lines if line.strip()]
    while body and _NOTE.match(body[-1].strip()):
        body.pop()
    if not body:
        return ["no numbered lines"]
    previous: int | None = None
    for line in body:
        match = _NUMBERED.match(line)
        if match is None:
            return [f"line not numbered: {line[:60]!r}"]
        number = int(match.group(1))
        if previous is None and first is not None and number != first:
            return [f"numbering starts at {number}, not at start_line {first}"]
        if previous is not None and number != previous + 1:
            return [f"line numbers jump from {previous} to {number}"]
        previous = number
    return []


_CHECKS = {
    "bash": _check_bash,
    "run_tests": _check_tests,
    "read_file": _check_read,
    "write_file": _check_write,
    "edit_file": _check_edit,
    "list_dir": _check_list,
    "submit": _check_submit,
}


# -- prompt ---------------------------------------------------------------------------------


def _slots(scenario: SWEScenario) -> dict[str, str]:
    return {
        "repository": _describe(scenario),
        "root": scenario.root,
        "test_command": scenario.test_command,
        "demo_test_output": _demo_test_output(scenario.test_command),
    }


def _describe(scenario: SWEScenario) -> str:
    lines = [
        f"- `{scenario.repo}` ({scenario.language}) checked out at {scenario.root}, "
        f"branch `{scenario.branch}`"
    ]
    if scenario.commits:
        lines.append("- Commits, newest first: " + "; ".join(scenario.commits))
    toolchain = [scenario.runtime] if scenario.runtime else []
    toolchain += [f"{name} {version}" for name, version in scenario.packages.items()]
    if toolchain:
        lines.append("- Installed: " + ", ".join(toolchain))
    failing = ", ".join(scenario.failing_tests) or "none"
    lines.append(f"- Test command: `{scenario.test_command}`; failing at the start: {failing}")
    if scenario.issue:
        lines.append(f"- The issue: {scenario.issue.strip()}")
    if scenario.notes:
        lines.append(f"- Also true: {scenario.notes.strip()}")
    if scenario.files:
        lines.append("- Files:")
        for path, content in scenario.files.items():
            if path.endswith("/"):
                lines.append(f"  - directory {path}")
            else:
                body = content if content.endswith("\n") or not content else content + "\n"
                lines.append(f"  - {path}:\n```\n{body}```")
    return "\n".join(lines)


# One short sample per runner, so the worked example shows this repository's test output.
_DEMO_TESTS = {
    "pytest": "F.....                                                   [100%]\n"
    "FAILED tests/test_core.py::test_parse - KeyError: 'id'\n"
    "1 failed, 5 passed in 0.21s",
    "unittest": "F.....\n"
    "FAIL: test_parse_empty (tests.test_core.ParseTests.test_parse_empty)\n"
    "AssertionError: ValueError not raised\n\nRan 6 tests in 0.004s\n\nFAILED (failures=1)",
    "jest": "FAIL src/core.test.js\n  ● parse › rejects empty input\n"
    "Tests:       1 failed, 5 passed, 6 total",
    "go": "--- FAIL: TestParseEmpty (0.00s)\n    core_test.go:14: expected an error, got nil\n"
    "FAIL\nFAIL\texample.com/core\t0.004s",
    "cargo": "test tests::parse_empty ... FAILED\n\n"
    "test result: FAILED. 5 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; "
    "finished in 0.01s",
}
_RUNNER_WORDS = (
    ("cargo", "cargo"),
    ("go test", "go"),
    ("jest", "jest"),
    ("npm", "jest"),
    ("yarn", "jest"),
    ("vitest", "jest"),
    ("unittest", "unittest"),
    ("manage.py test", "unittest"),
)


def _demo_test_output(test_command: str) -> str:
    runner = next((r for word, r in _RUNNER_WORDS if word in test_command), "pytest")
    code = 101 if runner == "cargo" else 1
    return f"{_DEMO_TESTS[runner]}\n[exit code: {code}]"


def _initial(scenario: SWEScenario) -> str:
    head = f", HEAD {scenario.head()}" if scenario.head() else ""
    return (
        f"Repository {scenario.repo} at {scenario.root} (branch {scenario.branch}{head}).\n"
        f"Tools: {', '.join(_BY_NAME)}."
    )


def _default() -> dict[str, Any]:
    return {
        "repo": "acme/invoicing",
        "language": "python",
        "commits": ["3f2a1c9 Add percentage discounts"],
        "runtime": "Python 3.11.9",
        "packages": {"pytest": "8.2.0"},
        "failing_tests": ["tests/test_totals.py::test_percent_discount"],
        "issue": "The discount subtracts the percent as an amount.",
        "files": {
            "invoicing/totals.py": "def apply_discount(amount, percent):\n"
            "    return round(amount - percent, 2)\n",
            "tests/test_totals.py": "from invoicing.totals import apply_discount\n\n\n"
            "def test_percent_discount():\n    assert apply_discount(200, 10) == 180\n",
        },
    }


DEMONSTRATIONS = (
    Demonstration(
        action='{"name": "bash", "arguments": {"command": "cat setup.cfg"}}',
        observation="cat: setup.cfg: No such file or directory\n[exit code: 1]",
        note="an error",
    ),
    Demonstration(
        action='{"name": "read_file", "arguments": {"path": "lib/util.py", "start_line": 7}}',
        observation="     7  def slug(text):\n     8      return text.lower().replace(' ', '-')",
    ),
    Demonstration(
        action='{"name": "run_tests", "arguments": {}}',
        observation="$demo_test_output",
    ),
)

SWE = register_domain(
    Domain(
        name="swe",
        family="shell",
        description="A software repository: repository tool calls in, tool output out.",
        scenario_model=SWEScenario,
        prompt_file=Path(__file__).parent / "prompts" / "swe.md",
        validate_action=_validate,
        render_action=_render,
        initial_observation=_initial,
        check_observation=_check,
        parse_input=_parse_input,
        prompt_slots=_slots,
        is_final=_is_final,
        default_scenario=_default,
        demonstrations=DEMONSTRATIONS,
        action_hint='{"name": "read_file", "arguments": {"path": "src/app.py"}}, '
        "a plain command line, or submit",
        example_tasks=("Fix the failing test tests/test_totals.py::test_percent_discount",),
        agent_tools=lambda scenario: tools(),
        ground=swe_ground.ground,
        initial_state=lambda s: {
            "branch": s.branch,
            "files": dict(s.files),
            "failing_tests": list(s.failing_tests),
        },
        state_schema=object_schema(
            required=["files"], branch=STRING, files=STRING_MAP, failing_tests=STRING_LIST
        ),
    )
)
