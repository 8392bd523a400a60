"""The shell family as a package: the lazy ``simgym.domains``, the Command table that the
classification sets come from, and the one option parser the shell and the declared
machine share."""

from __future__ import annotations

import subprocess
import sys

import pytest

from simgym.domains.shell import TABLE, run_line
from simgym.domains.shell.machine import answer, default_profile
from simgym.domains.shell.options import options, parse_options
from simgym.domains.shell.table import (
    ALWAYS_RUN,
    EDITORS,
    MACHINE,
    NETWORK,
    READ_ONLY,
    RUNNERS,
)
from simgym.domains.shell.view import Unknown


def _loaded(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys\nprint(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return {m for m in done.stdout.split() if m.startswith("simgym.domains.")}


def test_importing_one_domains_module_loads_no_domain():
    loaded = _loaded("import simgym.domains._gui.uitree")
    domains = {"android", "mcp", "os", "search", "swe", "terminal", "web", "shell"}
    assert not {m for m in loaded if m.split(".")[2] in domains}, sorted(loaded)
    assert "simgym.domains._gui.uitree" in loaded


def test_the_scenario_classes_still_come_from_the_package():
    loaded = _loaded("from simgym.domains import TerminalScenario, SWEScenario")
    assert {"simgym.domains.terminal", "simgym.domains.swe"} <= loaded
    assert "simgym.domains.web" not in loaded  # only what was named
    import simgym.domains

    with pytest.raises(AttributeError, match="NoSuchScenario"):
        simgym.domains.NoSuchScenario  # noqa: B018


def test_the_classification_sets_are_the_table_s_records():
    assert READ_ONLY == {c.name for c in TABLE.values() if c.reads_only}
    assert set(RUNNERS) == {c.name for c in TABLE.values() if c.run is not None}
    # a program with a body that only sometimes decides is no ALWAYS_RUN member
    assert "python3" in RUNNERS and "python3" not in ALWAYS_RUN
    assert {"ls", "cat", "grep"} <= ALWAYS_RUN
    assert "sed" in EDITORS and "sed" in RUNNERS
    assert {"ps", "df"} <= MACHINE & READ_ONLY
    assert "curl" in NETWORK and "curl" not in RUNNERS
    # a record's flags change what a program the shell does not run leaves unknown
    files = {"/home/user/": "", "/home/user/a.txt": "x\n"}
    reader = run_line("jq . a.txt", files, cwd="/home/user", home="/home/user")
    writer = run_line("make", files, cwd="/home/user", home="/home/user")
    assert reader.unknown is None  # jq only reads: the directory stays known
    assert writer.unknown == ["/home/user"]


def test_one_option_parser_keeps_the_order_and_refuses_what_it_does_not_know():
    parsed = parse_options(
        ["-hk", "/", "--type=ext4", "--total", "-t", "tmpfs", "--", "-x"],
        "hk",
        "t",
        long_flags=("total",),
        long_valued=("type",),
    )
    assert parsed is not None
    assert parsed.options == [
        ("h", None),
        ("k", None),
        ("type", "ext4"),
        ("total", None),
        ("t", "tmpfs"),
    ]
    assert parsed.operands == ["/", "-x"]
    assert parse_options(["--total=1"], "", long_flags=("total",)) is None
    assert parse_options(["-t"], "", "t") is None  # a value missing
    assert parse_options(["-q"], "h") is None
    with pytest.raises(Unknown):
        options(["--color"], "l", "")
    assert options(["-n", "2", "-n3", "f"], "", "n") == (set(), {"n": "3"}, ["f"])


def test_df_reads_its_options_in_order_through_the_shared_parser():
    machine = default_profile()
    human = answer(["df", "-k", "-h"], machine, user="user", cwd="/")
    kib = answer(["df", "-h", "-k"], machine, user="user", cwd="/")
    assert human is not None and kib is not None
    assert "Size" in human[0] and "1K-blocks" in kib[0]
    assert answer(["df", "--human-readable=1"], machine, user="user", cwd="/") is None
    assert answer(["df", "-t"], machine, user="user", cwd="/") is None
