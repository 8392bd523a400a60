"""The plugin's own tests: run them where simgym-sql is installed (``pip install .``)."""

import shutil
import subprocess

import pytest
from simgym_sql import SQL, console
from simgym_sql.domain import PROMPT

import simgym

LINES = [
    "SELECT name, city FROM customers ORDER BY id;",
    ".headers on",
    "SELECT item, quantity * price AS total FROM orders WHERE customer_id = 1;",
    "INSERT INTO customers VALUES (4, 'Tim Berners-Lee', 'Geneva', NULL);",
    "INSERT INTO customers VALUES (4, 'again', NULL, NULL);",
    ".mode column",
    "SELECT id, name FROM customers WHERE city LIKE '%n%';",
    "SELECT * FROM nowhere;",
]


def test_the_domain_is_found_by_its_entry_point_and_conforms():
    assert "sql" in simgym.domain_names()
    domain = simgym.check_domain("sql", actions=LINES)
    assert domain is SQL and domain.family == ""


def test_the_real_console_conforms_as_a_backend():
    description = simgym.check_backend("real-sql", domain="sql", actions=LINES)
    assert description["name"] == "real-sql"


def test_each_line_is_decided_by_the_state_and_changes_it():
    sim = simgym.SimEnv(
        "sql",
        simgym.FunctionWorldModel(lambda messages: "wrong\n" + PROMPT),
        grounding="strict",
        render_known=False,
    ).sync()
    sim.reset("look around")
    first = sim.step(SQL.parse_input(LINES[3], None))
    assert first.observation.text == PROMPT
    assert sim.env.trajectory.turns[-1].grounding["effects"]["script"] == [LINES[3]]
    again = sim.step(SQL.parse_input(LINES[4], None))
    assert again.observation.text == (
        f"Runtime error: UNIQUE constraint failed: customers.id (19)\n{PROMPT}"
    )
    count = sim.step(SQL.parse_input("SELECT count(*) FROM customers;", None))
    assert count.observation.text == f"4\n{PROMPT}"
    # a syntax error's caret is not decided: the model renders it and strict mode
    # holds it to the first line, which the state does decide
    syntax = sim.step(SQL.parse_input("SELEC 1;", None))
    turn = sim.env.trajectory.turns[-1]
    assert "exact" not in turn.grounding and syntax.observation.text.startswith("wrong")
    assert turn.grounding["strict"]["contradiction"] is True
    sim.close()


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="no sqlite3 shell here")
def test_the_console_prints_what_the_sqlite3_shell_prints():
    lines = [
        "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT NOT NULL, note TEXT UNIQUE, x REAL);",
        "INSERT INTO t VALUES (1, 'a b', 'q\"q', 2.0), (2, 'é', NULL, 1e20),"
        " (3, '', 'it''s', 1.0/3);",
        "SELECT * FROM t;",
        ".headers on",
        "SELECT id, x FROM t WHERE id > 1;",
        ".mode csv",
        "SELECT * FROM t;",
        ".mode line",
        "SELECT * FROM t WHERE id < 3;",
        ".mode column",
        "SELECT * FROM t;",
        "CREATE INDEX t_name ON t(name); CREATE TABLE u(a);",
        ".tables",
        ".schema t",
        "SELECT 1; SELECT 2;",
    ]
    real = subprocess.run(
        ["sqlite3", "-interactive", ":memory:"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    chunks = [c.split("\n", 1)[1] if "\n" in c else "" for c in real.stdout.split("sqlite> ")[1:]]
    if not real.stdout.startswith("SQLite version 3.40"):
        pytest.skip("the console prints as sqlite3 3.40 does")
    conn, settings = console.connect(), console.Settings()
    for line, printed in zip(lines, chunks, strict=False):
        outcome = console.run_line(conn, line, settings)
        assert outcome.exact and outcome.error is None, line
        assert outcome.text == printed.replace("\r", "").rstrip("\n"), line


def test_what_the_console_does_not_reproduce_is_left_to_the_world_model():
    conn, settings = console.connect(), console.Settings()
    console.run_line(conn, "CREATE TABLE t(a); INSERT INTO t VALUES (1);", settings)
    assert not console.run_line(conn, ".mode box", settings).exact
    assert not console.run_line(conn, "SELECT a FROM t;", settings).exact  # box not drawn here
    assert console.run_line(conn, ".mode list", settings).exact
    assert console.run_line(conn, "SELECT a FROM t;", settings).text == "a\n1"
    assert not console.run_line(conn, ".tab", settings).exact  # a prefix of .tables
    assert not console.run_line(conn, ".mode", settings).exact  # prints the current mode
    assert not console.run_line(conn, "SELEC 1;", settings).exact  # the caret's place
    assert not console.run_line(conn, "SELECT random();", settings).exact
    unknown = console.run_line(conn, ".frobnicate", settings)
    assert unknown.exact and unknown.text.startswith("Error: unknown command")
    assert console.run_line(conn, ".q", settings).final


def test_a_statement_without_its_semicolon_waits_for_the_next_line():
    sim = simgym.SimEnv("sql", simgym.world_model("real-sql")).sync()
    sim.reset("count")
    assert sim.step(SQL.parse_input("SELECT count(*)", None)).observation.text == "   ...> "
    done = sim.step(SQL.parse_input("FROM orders;", None))
    assert done.observation.text == f"4\n{PROMPT}"
    sim.close()
    # the state decides the same, line by line
    conn, settings = console.connect(), console.Settings()
    console.run_line(conn, "CREATE TABLE t(a);", settings)
    assert console.run_line(conn, "INSERT INTO t", settings).changed == []
    assert settings.pending == "INSERT INTO t"
    second = console.run_line(conn, "VALUES (7);", settings)
    assert second.changed == ["INSERT INTO t\nVALUES (7);"] and settings.pending == ""
