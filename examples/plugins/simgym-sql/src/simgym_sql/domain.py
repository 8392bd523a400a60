"""The ``sql`` domain: the sqlite3 command-line shell over one SQLite database file.

An action is one line typed at the ``sqlite>`` prompt (SQL statements or a dot-command),
as the tool call ``{"name": "sql", "arguments": {"statement": ...}}``; a text action is
the agent's answer and ends the episode. The observation is what the shell prints for
the line, then its next prompt.

Grounding: the scenario's ``setup`` script is the database file as it was when the
episode began and the hidden state keeps every later statement that changed it, so the
state knows every input of a statement. Each line is run for real on a fresh in-memory
copy (:func:`simgym_sql.console.replay`); what the shell would print is then exact,
except where :mod:`simgym_sql.console` says it is not (a syntax error's caret, a
statement reading the clock or chance): there the world model renders it from the facts.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from pydantic import Field

from simgym import Action, ActionError, Demonstration, Domain, ScenarioBase, ToolSpec
from simgym.core.grounding import Grounding
from simgym_sql import console

PROMPT = "sqlite> "
CONTINUE = "   ...> "  # the prompt while a statement waits for its ';'
BANNER = 'SQLite version 3.40.1 2022-12-28 14:03:47\nEnter ".help" for usage hints.'

DEFAULT_SETUP = """\
CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT, email TEXT UNIQUE);
CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL, item TEXT NOT NULL,
  quantity INTEGER NOT NULL, price REAL NOT NULL);
INSERT INTO customers VALUES (1, 'Ada Lovelace', 'London', 'ada@example.org');
INSERT INTO customers VALUES (2, 'Grace Hopper', 'Arlington', 'grace@example.org');
INSERT INTO customers VALUES (3, 'Alan Turing', 'Manchester', NULL);
INSERT INTO orders VALUES (1, 1, 'notebook', 3, 4.5);
INSERT INTO orders VALUES (2, 2, 'compiler manual', 1, 39.0);
INSERT INTO orders VALUES (3, 1, 'pencil', 12, 0.25);
INSERT INTO orders VALUES (4, 3, 'teleprinter ribbon', 2, 7.8);
"""


class SQLScenario(ScenarioBase):
    """A database file and what it holds when the episode begins."""

    database: str = Field("shop.db", description="the database file's name")
    setup: str = Field(
        DEFAULT_SETUP,
        description="SQL script that builds the file's contents (hidden from the agent)",
    )


STATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "script": {"type": "array", "items": {"type": "string"}},
        "mode": {"type": "string"},
        "headers": {"type": "boolean"},
        "tainted": {"type": "boolean"},
        "pending": {"type": "string"},
    },
    "required": ["script", "mode", "headers"],
}

SQL_TOOL = ToolSpec(
    name="sql",
    description="Type one line at the sqlite3 prompt: SQL statements ending in ';', or a "
    "dot-command such as .tables, .schema TABLE, .headers on, .mode column.",
    parameters={
        "type": "object",
        "properties": {"statement": {"type": "string", "examples": ["SELECT * FROM orders;"]}},
        "required": ["statement"],
    },
)


def _statement(action: Action) -> str | None:
    if action.kind == "tool_call" and action.name == "sql":
        value = action.arguments.get("statement")
        return value if isinstance(value, str) else None
    return None


def validate_action(action: Action, scenario: Any) -> Action:
    if action.kind == "text":
        return action  # the agent's answer
    if action.kind != "tool_call" or action.name != "sql":
        raise ActionError(
            'a sql action is {"name": "sql", "arguments": {"statement": "..."}} '
            f"or a text answer, not a {action.kind} {action.name or ''}".rstrip()
        )
    statement = _statement(action)
    if statement is None or not statement.strip():
        raise ActionError("the sql tool needs a non-empty 'statement' string")
    if "\x00" in statement:
        raise ActionError("a statement cannot hold a NUL character")
    return Action.tool_call("sql", {"statement": statement.strip()})


def render_action(action: Action, scenario: Any) -> str:
    if action.kind == "text":
        return action.text or ""
    return _statement(action) or ""


def parse_input(line: str, scenario: Any) -> Action:
    """``answer TEXT`` ends the episode with an answer; any other line is typed at the prompt."""
    stripped = line.strip()
    if stripped.lower().startswith("answer "):
        return Action.say(stripped[len("answer ") :].strip())
    if not stripped:
        raise ActionError("type a SQL statement, a dot-command, or 'answer <text>'")
    return Action.tool_call("sql", {"statement": stripped})


def is_final(action: Action) -> bool:
    statement = _statement(action)
    if statement is not None:
        return statement.split()[0] in (".quit", ".exit", ".q") if statement.split() else False
    return action.kind == "text"


def initial_observation(scenario: Any) -> str:
    return f"{BANNER}\n{PROMPT}"


def initial_state(scenario: Any) -> dict[str, Any]:
    return {"script": [], "mode": "list", "headers": False, "tainted": False, "pending": ""}


def check_observation(text: str, action: Action, scenario: Any) -> list[str]:
    if is_final(action):
        return []
    if not text.rstrip().endswith((PROMPT.strip(), CONTINUE.strip())):
        return [f"the shell always ends with its prompt {PROMPT.strip()!r} on the last line"]
    return []


def repair(observation: str, action: Action, scenario: Any) -> str | None:
    """An answer that forgot the prompt gets it back (the shell always prints one)."""
    if is_final(action) or observation.rstrip().endswith((PROMPT.strip(), CONTINUE.strip())):
        return None
    return screen(observation.rstrip("\n"))


def screen(output: str, pending: str = "") -> str:
    """What the terminal shows after a line: its output, then the next prompt."""
    prompt = CONTINUE if pending else PROMPT
    return f"{output}\n{prompt}" if output else prompt


def schema_lines(setup: str, script: list[str] | None = None) -> list[str]:
    """The CREATE statements of the database ``setup`` and ``script`` build."""
    conn = console.replay(setup, script or [])
    try:
        rows = conn.execute(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid"
        ).fetchall()
    finally:
        conn.close()
    return [f"{sql};" for (sql,) in rows]


def ground(action: Action, state: dict[str, Any], scenario: Any) -> Grounding | None:
    """Run the line on a copy of the database the state describes (see the module)."""
    statement = _statement(action)
    if statement is None:
        return None
    script = list(state.get("script") or [])
    before = (state.get("mode", "list"), bool(state.get("headers")), state.get("pending", ""))
    settings = console.Settings(*before)
    try:
        conn = console.replay(scenario.setup, script)
    except sqlite3.Error as exc:  # a setup script that does not run: nothing is certain
        return Grounding(facts=[f"the database file cannot be read: {exc}"])
    try:
        outcome = console.run_line(conn, statement, settings)
        schema = [
            f"{sql};"
            for (sql,) in conn.execute(
                "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid"
            )
        ]
    finally:
        conn.close()
    effects: dict[str, Any] = {}
    if outcome.changed:
        effects["script"] = script + outcome.changed
        if not outcome.exact:
            effects["tainted"] = True  # a value from the clock or chance: replay differs
    if (settings.mode, settings.headers, settings.pending) != before:
        effects.update(mode=settings.mode, headers=settings.headers, pending=settings.pending)
    facts = [f"{scenario.database} schema after this line: " + " ".join(schema)]
    facts.append(f"output mode {settings.mode}, headers {'on' if settings.headers else 'off'}")
    exact = outcome.exact and not state.get("tainted")
    grounding = Grounding(facts=facts, effects=effects or None)
    if outcome.final:
        grounding.observation = ""
    elif exact:
        grounding.observation = screen(outcome.text, settings.pending)
    elif outcome.error:
        grounding.expect = [outcome.error]
        grounding.facts.append(f"the shell reports: {outcome.error}")
    return grounding


PROMPT_FILE = Path(__file__).parent / "prompts" / "sql.md"


def prompt_slots(scenario: Any) -> dict[str, str]:
    return {"database": scenario.database, "setup": scenario.setup.strip() or "(empty)"}


SQL = Domain(
    name="sql",
    description="The sqlite3 shell over an SQLite file: SQL lines in, what the shell prints out.",
    # No family: a SQL console is none of shell, tool, search or gui, and gets the
    # generic treatment everywhere (the viewer's plain text, the judge's generic rubric).
    family="",
    scenario_model=SQLScenario,
    prompt_file=PROMPT_FILE,
    validate_action=validate_action,
    render_action=render_action,
    initial_observation=initial_observation,
    check_observation=check_observation,
    parse_input=parse_input,
    prompt_slots=prompt_slots,
    is_final=is_final,
    default_scenario=lambda: SQLScenario().model_dump(),
    agent_tools=lambda scenario: [SQL_TOOL],
    initial_state=initial_state,
    state_schema=STATE_SCHEMA,
    ground=ground,
    repair=repair,
    demonstrations=(
        Demonstration(
            action="SELECT name, city FROM customers WHERE id = 2;",
            observation=f"Grace Hopper|Arlington\n{PROMPT}",
            note="list mode: columns joined by |, no header",
        ),
        Demonstration(
            action="SELEC count(*) FROM orders;",
            observation=(
                'Parse error: near "SELEC": syntax error\n'
                "  SELEC count(*) FROM orders;\n"
                "  ^--- error here\n"
                f"{PROMPT}"
            ),
            note="a syntax error points at the token",
        ),
        Demonstration(
            action="INSERT INTO customers VALUES (1, 'Tim Berners-Lee', 'Geneva', NULL);",
            observation=f"Runtime error: UNIQUE constraint failed: customers.id (19)\n{PROMPT}",
            note="a constraint error; nothing is inserted",
        ),
    ),
    action_hint='{"name": "sql", "arguments": {"statement": "SELECT * FROM orders;"}}',
    example_tasks=(
        "Which customer spent the most, and how much?",
        "Give Alan Turing the email alan@example.org.",
    ),
)
