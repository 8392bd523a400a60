"""Terminal: an agent types keystrokes into a shell; the world model shows the screen."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

from pydantic import Field, field_validator

from simgym.core.domain import Demonstration, Domain, ScenarioBase, dump_json, register_domain
from simgym.core.errors import ActionError
from simgym.core.grounding import Grounding
from simgym.core.state import STRING, STRING_LIST, STRING_MAP, object_schema
from simgym.core.types import Action, KeyPress, ToolSpec
from simgym.domains.shell import UNAME_DECLARED, reads_on, run_line
from simgym.domains.shell.exec_ground import initial_modes, with_run
from simgym.domains.shell.execution import chunks
from simgym.domains.shell.machine import Machine, default_profile, default_uname

TMUX_KEYS = frozenset(
    {
        "C-c",
        "C-d",
        "C-z",
        "C-l",
        "C-a",
        "C-e",
        "C-u",
        "C-r",
        "Escape",
        "Tab",
        "Enter",
        "Up",
        "Down",
        "Left",
        "Right",
        "BSpace",
        "Home",
        "End",
        "PageUp",
        "PageDown",
        "q",
    }
)
MAX_DURATION_S = 600.0
# Tool calls that tool-calling agents commonly use for a shell.
COMMAND_TOOLS = ("bash", "shell", "run", "run_command", "execute")

# What a tool-calling agent is offered: one tool that types into the terminal, as
# terminal agents (Terminus-style) drive tmux.
SEND_KEYS = ToolSpec(
    name="send_keys",
    description="Type keystrokes into the terminal (end a command with a newline; tmux key "
    "names such as C-c work alone), then wait `duration` seconds and see the screen.",
    parameters={
        "type": "object",
        "properties": {
            "keystrokes": {"type": "string", "description": "what to type, e.g. 'ls -la\\n'"},
            "duration": {
                "type": "number",
                "description": "seconds to wait before reading the screen",
                "default": 1,
            },
        },
        "required": ["keystrokes"],
    },
)


class TerminalScenario(ScenarioBase):
    """The machine behind the terminal: who is logged in where, and what is on it."""

    user: str = "user"
    hostname: str = "devbox"
    cwd: str | None = Field(None, description="working directory (default: the user's home)")
    os: str = "Ubuntu 22.04.4 LTS"
    shell: str = "bash"
    files: dict[str, str] = Field(
        default_factory=dict,
        description="path -> content; a path ending in '/' is a directory",
    )
    programs: list[str] = Field(default_factory=list, description="installed programs")
    services: list[str] = Field(default_factory=list, description="running services")
    env: dict[str, str] = Field(default_factory=dict, description="environment variables")
    clock: datetime | None = Field(
        datetime(2025, 3, 14, 9, 26),
        description="the machine's time when the episode starts (UTC); `ls -l` shows it as "
        "every file's time and `date` prints it. None: the time is not known (a real machine "
        "recorded beside the simulation), so both are left to the world model",
    )
    uname: dict[str, str] = Field(
        default_factory=dict,
        description="what `uname` prints beyond the kernel name, host name and OS, by long "
        "option: kernel-release, kernel-version, machine, processor, hardware-platform; "
        "a field left out is the world model's to render",
    )
    machine: Machine | None = Field(
        None,
        description="the machine's processes, disks, memory and packages, which ps, df, "
        "free, which and dpkg -l print (simgym.domains.shell.machine); None: the world model's",
    )

    @field_validator("uname")
    @classmethod
    def _uname_fields(cls, value: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(value) - set(UNAME_DECLARED))
        if unknown:
            raise ValueError(
                f"unknown uname field(s) {unknown}; known: {', '.join(UNAME_DECLARED)}"
            )
        return value

    @field_validator("user", "hostname")
    @classmethod
    def _no_spaces(cls, value: str) -> str:
        if not value or any(c.isspace() for c in value):
            raise ValueError("must be a non-empty word")
        return value

    @property
    def home(self) -> str:
        return "/root" if self.user == "root" else f"/home/{self.user}"

    @property
    def working_dir(self) -> str:
        return self.cwd or self.home

    @property
    def locale(self) -> str:
        """How the machine collates and formats: its declared locale, else C.UTF-8."""
        return self.machine.locale if self.machine else "C.UTF-8"

    def prompt(self) -> str:
        cwd = self.working_dir
        if cwd == self.home or cwd.startswith(self.home + "/"):
            cwd = "~" + cwd[len(self.home) :]
        sign = "#" if self.user == "root" else "$"
        return f"{self.user}@{self.hostname}:{cwd}{sign} "


def _validate(action: Action, scenario: TerminalScenario) -> Action:
    if action.kind == "text":
        text = action.text or ""
        return Action.keys(text if text.endswith("\n") or text in TMUX_KEYS else text + "\n")
    if action.kind == "tool_call":
        return _from_tool_call(action)
    if not action.keystrokes:
        raise ActionError("a keystrokes action needs at least one batch")
    for press in action.keystrokes:
        if not press.keystrokes:
            raise ActionError("empty keystrokes batch")
        if not 0 <= press.duration <= MAX_DURATION_S:
            raise ActionError(f"duration must be between 0 and {MAX_DURATION_S:g} seconds")
    return action


def _from_tool_call(action: Action) -> Action:
    args = action.arguments
    if action.name in ("send_keys", "keystrokes") and isinstance(args.get("keystrokes"), str):
        return _validate(
            Action.keys(
                KeyPress(keystrokes=args["keystrokes"], duration=float(args.get("duration", 1.0)))
            ),
            None,
        )
    if action.name in COMMAND_TOOLS and isinstance(args.get("command"), str):
        return _validate(Action.say(args["command"]), None)
    raise ActionError(
        f"the terminal takes keystrokes, not the tool call {action.name!r}; send "
        '[{"keystrokes": "ls\\n", "duration": 1}] or call bash with {"command": "..."}'
    )


def _render(action: Action, scenario: TerminalScenario) -> str:
    batches = [
        {
            "keystrokes": k.keystrokes,
            "duration": int(k.duration) if k.duration.is_integer() else k.duration,
        }
        for k in action.keystrokes
    ]
    return json.dumps(batches, ensure_ascii=False)


_PROMPT_END = re.compile(r"([$#>%:?\]]|\(END\)|--More--|\[y/N\]|\[Y/n\])\s*$", re.IGNORECASE)


def _check(text: str, action: Action, scenario: TerminalScenario) -> list[str]:
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return ["empty screen"]
    problems = []
    last = lines[-1]
    # C-z hands the screen back to the shell; exit/logout leave no prompt at all.
    waiting = any(k.keystrokes in ("C-z",) for k in action.keystrokes) or _is_final(action)
    if not (_PROMPT_END.search(last) or "password" in last.lower() or waiting):
        # A long-running program may legitimately hold the screen: only flag short waits.
        if max(k.duration for k in action.keystrokes) < 5:
            problems.append("the screen does not end with a shell or program prompt")
    if "<predicted_observation>" in text or "</think>" in text:
        problems.append("stray tags in the screen")
    return problems


def _parse_input(line: str, scenario: TerminalScenario) -> Action:
    stripped = line.strip()
    if stripped in TMUX_KEYS and stripped != "q":
        return Action.keys(stripped)
    if stripped.startswith("[{"):
        return Action.parse(stripped)
    return Action.keys(line.rstrip("\n") + "\n")


def _echo(action: Action, scenario: TerminalScenario, last_observation: str) -> str:
    """A shell echoes a typed command line after the prompt the screen last showed."""
    if len(action.keystrokes) != 1:
        return ""
    typed = action.keystrokes[0].keystrokes
    if not typed.endswith("\n") or "\n" in typed[:-1]:
        return ""
    lines = last_observation.rstrip("\n").splitlines()
    prompt = lines[-1] if lines else scenario.prompt()
    if not re.search(r"[$#]\s*$", prompt):
        return ""  # inside a program; its screen is not predictable from here
    return f"{prompt.rstrip()} {typed}"


def _is_final(action: Action) -> bool:
    if action.kind != "keystrokes" or not action.keystrokes:
        return False
    last = action.keystrokes[-1].keystrokes.strip()
    return last in ("exit", "logout")


# Keys that leave an interactive program and give the screen back to the shell.
_LEAVE_KEYS = ("C-c", "C-d", "q")
_LEAVE_LINES = ("exit", "exit()", "quit", "quit()", ":q", ":q!", ":wq", "\\q", ".exit")


def _ground(action: Action, state: dict, scenario: TerminalScenario) -> Grounding | None:
    """Facts and certain effects of one command line typed at the shell prompt (see
    :mod:`simgym.domains.shell`); keystrokes into a running program are left to the model."""
    if action.kind != "keystrokes" or len(action.keystrokes) != 1:
        return None
    typed = action.keystrokes[0].keystrokes
    cwd = state.get("cwd") or scenario.working_dir
    running = state.get("foreground")
    prompt = scenario.model_copy(update={"cwd": cwd}).prompt().rstrip()
    if running and state.get("keyboard") is not None and typed == "C-c":
        # a command reading the keyboard (grep with no file): C-c ends it, the prompt is
        # back; the screen goes on from the line the command left the cursor under
        return Grounding(
            facts=[f"C-c stops {running}; the prompt comes back"],
            effects={"foreground": None, "keyboard": None, "status": 130},
            observation=f"{state['keyboard']}\n^C\n{prompt}",
        )
    if running:
        done = typed in _LEAVE_KEYS or typed.strip() in _LEAVE_LINES
        return Grounding(
            facts=[f"{running} is running in the foreground; the keys go to it, not to the shell"],
            effects={"foreground": None, "keyboard": None, "status": None} if done else None,
        )
    # a line the shell is still reading (a quote left open, a final backslash): bash shows
    # ">" and reads on
    continued = state.get("continued")
    if continued is not None and typed == "C-c":
        return Grounding(
            facts=["C-c drops the unfinished command line; the prompt comes back"],
            effects={"continued": None},
            observation=f"> ^C\n{prompt}",
        )
    if not typed.endswith("\n"):
        return None
    if "\n" in typed[:-1] and continued is None:
        return _pasted(typed[:-1], state, scenario, cwd, prompt)
    if "\n" in typed[:-1]:
        return None
    line = typed[:-1]
    before = prompt if continued is None else ">"
    whole = line if continued is None else f"{continued}\n{line}"
    if reads_on(whole):
        return Grounding(
            facts=[
                "the command line is unfinished (a quote left open or a final backslash): "
                "bash shows `>` and reads another line"
            ],
            effects={"continued": whole},
            observation=f"{before} {line}".rstrip() + "\n>",
        )
    if continued is None and _is_final(action):
        # bash says which way it leaves; the session (and the screen) ends there
        word = line.strip()
        return Grounding(
            facts=[f"the shell exits and prints `{word}`; the session ends"],
            observation=f"{before} {line}\n{word}\n",
        )
    files = state.get("files") or {}
    result = _shell(whole, state, scenario, cwd, keyboard=True)
    after = scenario.model_copy(update={"cwd": result.cwd or cwd}).prompt().rstrip()
    effects = result.patch_for(files) | ({"continued": None} if continued is not None else {})
    facts = [f"working directory: {cwd}"] if not result.facts else list(result.facts)
    if result.output is None:
        # what it leaves in `$?` is known only if it runs (with_run sets it then)
        grounding = Grounding(
            facts=facts, effects={**effects, "status": None}, expect=result.expect
        )
        return with_run(
            grounding,
            lines=[whole],
            shown=[line],
            before=before,
            state=state,
            scenario=scenario,
            cwd=cwd,
            extra_effects={"continued": None} if continued is not None else None,
        )
    shown = (
        result.output if result.output.endswith("\n") or not result.output else result.output + "\n"
    )
    # a success's 0 is certain; which error status a failure leaves (1, 2, 127) is bash's
    effects["status"] = 0 if result.status == 0 else None
    screen = f"{before} {line}\n{shown}{after}"
    if result.foreground:  # it reads the keyboard: no prompt until keys end it
        screen = f"{before} {line}\n{shown}".rstrip()
        facts.append(f"{result.foreground} waits for input from the keyboard; no prompt yet")
        effects["keyboard"] = screen.rsplit("\n", 1)[-1]  # the screen's last line
    if result.output.strip():
        facts.append(f"`{line}` prints exactly:\n```\n{shown}```")
    else:
        facts.append(f"`{line}` prints nothing")
    if result.cwd:
        facts.append(f"the working directory becomes {result.cwd}")
    if not result.foreground:
        facts.append(f"the next prompt is `{after}`")
    return Grounding(facts=facts, effects=effects or None, observation=screen)


def _shell(line: str, state: dict, scenario: TerminalScenario, cwd: str, **options: bool):
    """The shell over the ledger (:func:`run_line`) on this scenario's machine and state."""
    return run_line(
        line,
        state.get("files") or {},
        cwd=cwd,
        home=scenario.home,
        env=state.get("env") or {},
        user=scenario.user,
        host=scenario.hostname,
        unknown=state.get("unknown") or (),
        clock=scenario.clock,
        uname=scenario.uname,
        programs=scenario.programs or None,
        modes=state.get("modes"),
        local_vars=state.get("local_vars") or (),
        machine=scenario.machine,
        locale=scenario.locale,
        **options,
    )


def _pasted(text: str, state: dict, scenario: TerminalScenario, cwd: str, prompt: str) -> Grounding:
    """Several lines typed at once (a here-document, a pasted script): bash reads them as
    command lines one after another; each shows after its prompt, its continuation lines
    after ``>``. Nothing of it is certain unless it runs for real: until then, whatever it
    may have written is unknown."""
    lines = chunks(text)
    shown = [chunk.replace("\n", "\n> ") for chunk in lines]
    files = state.get("files") or {}
    result = _shell(text, state, scenario, cwd, certain=False)
    facts = list(result.facts) or [f"working directory: {cwd}"]
    grounding = Grounding(facts=facts, effects={**result.patch_for(files), "status": None})
    return with_run(
        grounding, lines=lines, shown=shown, before=prompt, state=state, scenario=scenario, cwd=cwd
    )


def _slots(scenario: TerminalScenario) -> dict[str, str]:
    lines = [
        f"- Operating system: {scenario.os}, shell: {scenario.shell}",
        f"- Logged in as `{scenario.user}` on host `{scenario.hostname}`, home {scenario.home}, "
        f"current directory {scenario.working_dir}",
    ]
    if scenario.programs:
        lines.append("- Installed programs: " + ", ".join(scenario.programs))
    if scenario.services:
        lines.append("- Running services: " + ", ".join(scenario.services))
    if scenario.env:
        lines.append("- Environment variables: " + dump_json(scenario.env))
    if scenario.files:
        lines.append("- Files (path, then content):")
        for path, content in scenario.files.items():
            if path.endswith("/"):
                lines.append(f"  - directory {path}")
            else:
                body = content if content.endswith("\n") or not content else content + "\n"
                lines.append(f"  - file {path}:\n```\n{body}```")
    if scenario.notes:
        lines.append(f"- Also true: {scenario.notes}")
    return {
        "environment": "\n".join(lines),
        "initial_screen": "```\n" + _initial(scenario) + "\n```",
        "prompt_example": scenario.prompt().rstrip(),
        "prompt_cd_tmp": scenario.model_copy(
            update={"cwd": scenario.working_dir.rstrip("/") + "/tmp"}
        )
        .prompt()
        .rstrip(),
    }


def _initial(scenario: TerminalScenario) -> str:
    # as a real terminal's capture shows it: trailing blanks stripped from every line
    return scenario.prompt().rstrip()


def _default() -> dict:
    machine = default_profile()
    return {
        "user": "dev",
        "hostname": "devbox",
        "files": {
            "/home/dev/notes.txt": "buy milk\ncall the bank\n",
            "/home/dev/project/": "",
            "/home/dev/project/main.py": 'print("hello from main")\n',
            "/home/dev/project/README.md": "# project\nA small demo project.\n",
        },
        "programs": ["python3", "git", "vim", "curl"],
        # a small Debian 12 server recorded on a real machine (its kernel, os-release,
        # disks, memory and packages; see the profile's notes for what was chosen)
        "os": machine.os_name,
        "uname": default_uname(),
        "machine": machine.model_dump(mode="json"),
    }


DEMONSTRATIONS = (
    Demonstration(
        action='[{"keystrokes": "ls\\n", "duration": 1}]',
        observation="$prompt_example ls\nbackup.sh  logs  report.csv\n$prompt_example",
    ),
    Demonstration(
        action='[{"keystrokes": "cat missing.txt\\n", "duration": 1}]',
        observation="$prompt_example cat missing.txt\ncat: missing.txt: No such file or directory\n"
        "$prompt_example",
        note="an error",
    ),
    Demonstration(
        action='[{"keystrokes": "mkdir tmp && cd tmp\\n", "duration": 1}]',
        observation="$prompt_example mkdir tmp && cd tmp\n$prompt_cd_tmp",
        note="no output; the directory changed",
    ),
)

TERMINAL = register_domain(
    Domain(
        name="terminal",
        family="shell",
        description="A Linux shell: keystrokes in, terminal screen out.",
        scenario_model=TerminalScenario,
        prompt_file=Path(__file__).parent / "prompts" / "terminal.md",
        validate_action=_validate,
        render_action=_render,
        initial_observation=_initial,
        check_observation=_check,
        parse_input=_parse_input,
        prompt_slots=_slots,
        is_final=_is_final,
        observation_prefix=_echo,
        default_scenario=_default,
        demonstrations=DEMONSTRATIONS,
        action_hint='[{"keystrokes": "ls -la\\n", "duration": 1}] or a plain command line',
        agent_tools=lambda scenario: [SEND_KEYS],
        ground=_ground,
        initial_state=lambda s: {
            "cwd": s.working_dir,
            # the files the declared machine fixes (/etc/os-release), then the scenario's
            "files": {**(s.machine.files() if s.machine else {}), **s.files},
            "env": dict(s.env),
            "services": list(s.services),
            "modes": initial_modes(s.files),
        },
        state_schema=object_schema(
            required=["cwd", "files"],
            cwd=STRING,
            files=STRING_MAP,
            env=STRING_MAP,
            services=STRING_LIST,
            # the exit status the last command line left (`$?`), where it is certain
            status={"type": "integer"},
        ),
    )
)
