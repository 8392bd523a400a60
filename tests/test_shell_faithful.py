"""The shell over the ledger says only what bash would certainly print: checked against
the dev set's real recordings and on the cases that used to go wrong."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

import pytest

from simgym.core.domain import get_domain
from simgym.core.state import merge_patch
from simgym.core.trajectories import read_trajectories
from simgym.core.types import Action
from simgym.domains.shell import UNAME_DECLARED, OpenQuote, reads_on, run_line
from simgym.domains.shell.exec_ground import initial_modes
from simgym.domains.shell.parse import split_commands

DEVSET = Path(__file__).resolve().parent.parent / "devset" / "trajectories.jsonl"
HOME = "/home/u"
CLOCK = datetime(2025, 3, 14, 9, 26)
# `ls -l` times: the real recording shows when it ran, the simulated machine its clock.
_TIME = re.compile(r"\b[A-Z][a-z]{2} [ \d]\d \d\d:\d\d\b")


def run(line, files=None, env=None):
    entries = files if files is not None else {f"{HOME}/a.txt": "hi\n", f"{HOME}/d/": ""}
    return run_line(line, entries, cwd=HOME, home=HOME, env=env or {}, user="u", clock=CLOCK)


@pytest.mark.parametrize("domain", ["terminal", "swe"])
def test_recorded_shell_answers_agree_with_the_real_machine(domain):
    spec = get_domain(domain)
    exact = 0
    for trajectory in read_trajectories(DEVSET):
        if trajectory.domain != domain:
            continue
        scenario = spec.scenario_model.model_validate(trajectory.scenario)
        ledger = spec.initial_state(scenario)
        for turn in trajectory.turns:
            if turn.action.kind == "text":
                continue
            grounding = spec.ground(turn.action, ledger, scenario)
            if grounding is not None and grounding.effects:
                ledger = merge_patch(ledger, grounding.effects)
            if grounding is None or grounding.observation is None:
                continue
            exact += 1
            ours, real = grounding.observation.strip(), turn.observation.text.strip()
            assert _TIME.sub("TIME", ours) == _TIME.sub("TIME", real), turn.action
    assert exact >= {"terminal": 60, "swe": 47}[domain]


def test_each_command_is_expanded_when_it_runs():
    assert run('X=5; echo "$X"').output == "5\n"
    assert run('unset X; echo "${X:-gone}"', env={"X": "1"}).output == "gone\n"
    assert run("echo ${X:-d} ${Y-e} ${Z:+alt} end", env={"Y": "", "Z": "1"}).output == (
        "d alt end\n"
    )
    assert run("echo a && false || echo c; echo d # echo e").output == "a\nc\nd\n"
    assert run("echo $#").output is None  # positional parameters: the model's
    assert run("cat a.txt | wc -l").output == "1\n"  # a pipe
    assert run("sleep 1 &").output is None  # a background job


def test_the_machines_own_directories_exist_and_are_not_listed():
    assert run("touch /etc/app.conf").output is None  # exists? writable? not certain
    assert run("ls /usr/bin").output is None
    assert run("ls /").output is None
    assert run("cd /tmp && pwd").output == "/tmp\n"
    assert run("ls /nowhere").output == "ls: cannot access '/nowhere': No such file or directory\n"


def test_the_working_directory_exists_with_no_file_in_it():
    # a scenario with no files: the shell still stands in an (empty) home directory
    assert run("ls", files={}).output == ""
    assert run("cd .. && pwd", files={}).output == "/home\n"
    assert run("ls /home/u/missing", files={}).output.startswith("ls: cannot access")


def test_ls_lists_directory_operands_in_order():
    files = {f"{HOME}/b/": "", f"{HOME}/b/x": "", f"{HOME}/a/": "", f"{HOME}/a/y": ""}
    assert run("ls b a", files).output == "a:\ny\n\nb:\nx\n"


def test_a_programs_output_file_exists_with_unknown_content():
    result = run("awk '{print $1}' a.txt > d/sorted.txt")
    assert result.output is None
    assert result.changes == {f"{HOME}/d/sorted.txt": ""}
    assert f"{HOME}/d/sorted.txt" in result.unknown
    entries = {f"{HOME}/a.txt": "hi\n", f"{HOME}/d/": "", f"{HOME}/d/sorted.txt": ""}
    after = run_line("ls d; cat d/sorted.txt", entries, cwd=HOME, home=HOME, unknown=result.unknown)
    assert after.output is None  # the listing is known, the content is not
    assert run_line("ls d", entries, cwd=HOME, home=HOME, unknown=result.unknown).output == (
        "sorted.txt\n"
    )


def test_modes_scripts_are_executable_and_chmod_is_not_guessed():
    files = {f"{HOME}/run.sh": "#!/bin/sh\necho hi\n"}
    listed = run_line(
        "ls -l run.sh",
        files,
        cwd=HOME,
        home=HOME,
        user="u",
        clock=CLOCK,
        modes=initial_modes(files),
    )
    assert listed.output.startswith("-rwxr-xr-x 1 u u 18 Mar 14 09:26")
    # the mode is the state's: a script a command wrote is not executable until chmod
    assert run("ls -l run.sh", files).output.startswith("-rw-r--r-- 1 u u 18 Mar 14 09:26")
    changed = run("chmod 600 run.sh", files)
    assert f"{HOME}/run.sh" in changed.unknown


def test_swe_root_listing_shows_the_repositorys_git_directory():
    spec = get_domain("swe")
    scenario = spec.scenario_model.model_validate(spec.default_scenario())
    ledger = spec.initial_state(scenario)
    grounding = spec.ground(Action.tool_call("list_dir", {}), ledger, scenario)
    assert grounding.observation.split("\n")[0] == ".git/"


@pytest.mark.parametrize("command", ["git status", "git branch --show-current"])
def test_swe_git_in_the_repository_is_never_refused(command):
    """The swe repository is a git checkout though its ledger lists no .git: git there is
    the model's to answer, never the outside-a-repository refusal."""
    spec = get_domain("swe")
    scenario = spec.scenario_model.model_validate(spec.default_scenario())
    ledger = spec.initial_state(scenario)
    grounding = spec.ground(Action.tool_call("bash", {"command": command}), ledger, scenario)
    assert grounding.observation is None


LOG = """\
2024-05-01 ERROR upstream timeout calling payments
2024-05-01 WARN slow query
2024-05-02 ERROR invalid token for user 5512
2024-05-02 ERROR upstream timeout calling payments
"""


def logs(line):
    return run(line, {f"{HOME}/api.log": LOG, f"{HOME}/b.txt": "milk\nbread\n", f"{HOME}/d/": ""})


def test_pipes_and_text_tools():
    assert logs("grep -c ERROR api.log").output == "3\n"
    assert logs("grep ERROR api.log | cut -d' ' -f3- | sort | uniq -c | sort -rn").output == (
        "      2 upstream timeout calling payments\n      1 invalid token for user 5512\n"
    )
    assert logs("grep -n WARN api.log").output == "2:2024-05-01 WARN slow query\n"
    assert logs("grep -o ERROR api.log | wc -l").output == "3\n"
    assert logs("grep milk *.txt").output == "milk\n"  # one file: no name
    assert logs("grep -l milk api.log b.txt").output == "b.txt\n"
    assert logs("grep nothing api.log").status == 1
    assert logs("grep x nope.txt").output == "grep: nope.txt: No such file or directory\n"
    assert logs("tr ' ' '\\n' < b.txt | sort").output == "bread\nmilk\n"
    assert logs("sed -n '2p' b.txt").output == "bread\n"
    edited = logs("sed -i 's/milk/oat milk/' b.txt")
    assert edited.output == "" and edited.changes == {f"{HOME}/b.txt": "oat milk\nbread\n"}
    assert logs("sed -i 's/a/b' b.txt").output == (
        "sed: -e expression #1, char 5: unterminated `s' command\n"
    )


def test_a_pipe_gets_one_name_a_line_and_quotes_stop_globs():
    assert logs("ls | wc -l").output == "3\n"
    assert logs("ls > list.txt").changes == {f"{HOME}/list.txt": "api.log\nb.txt\nd\n"}
    assert logs("grep 'b*' b.txt").output == "milk\nbread\n"  # not b.txt, the glob


def test_what_the_file_system_orders_is_certain_only_once_sorted():
    files = {f"{HOME}/p/": "", f"{HOME}/p/a.py": "x = 1\n", f"{HOME}/p/b.py": "x = 2\n"}
    assert run("grep -rn x p", files).output is None  # two files, in readdir order
    assert run("grep -rn 'x = 2' p", files).output == "p/b.py:1:x = 2\n"
    assert run("find p -name '*.py'", files).output is None
    assert run("find p -name '*.py' | sort", files).output == "p/a.py\np/b.py\n"
    assert run("find p -type f | wc -l", files).output == "2\n"


needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="no bash to compare with")


def _bash(script: str, cwd: Path, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``script`` run by the real bash, as a tool call runs it (``bash -c``); with ``home``,
    the programs read their settings there (git's config) rather than the real user's."""
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"} | ({"HOME": str(home)} if home else {})
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=10
    )


@pytest.mark.parametrize(
    ("line", "more"),
    [
        ("echo 'abc", True),  # a single quote left open
        ('echo "x', True),
        ('echo "x\\', True),  # a double quote left open, with a backslash at its end
        ("echo 'x\\", True),  # a single quote left open: the backslash in it is plain
        ("echo abc\\", True),  # a backslash at the end: the line goes on
        ('echo "a\\"b', True),  # an escaped double quote does not close it
        ("echo 'a\\'", False),  # nothing escapes inside single quotes
        ("echo # it's", False),  # a comment: its quote does not count
        ("echo a # b\\", False),  # nor its final backslash
        ("(echo a)#b'", False),  # after ")" (a metacharacter) "#" starts a comment
        ("echo a;(#b'\necho c)", False),  # and after "("
        ("echo a\\ #b'", True),  # an escaped blank ends no word: "#b'" is in it
        ("echo a#b 'c", True),  # "#" inside a word is no comment
        ("echo 'a' \"b'\"", False),
        ("ls -la", False),
    ],
)
def test_a_line_with_a_quote_left_open_reads_on(line, more, tmp_path):
    assert reads_on(line) is more
    if shutil.which("bash"):
        # bash reads the next line into this command when it reads on: MARK is no command
        ran = _bash(f"{line}\necho MARK\n", tmp_path)
        assert (ran.stdout.splitlines()[-1:] != ["MARK"]) is more, ran


@needs_bash
@pytest.mark.parametrize(
    "line",
    [
        "echo abc\\",  # a final backslash is plain when the line is all there is (bash -c)
        "echo ab\\\ncd",  # a backslash-newline is dropped
        'echo "ab\\\ncd"',  # inside double quotes too
        "echo 'ab\\\ncd'",  # not inside single quotes
        "echo a\\;#b",  # an escaped ";" ends no word: "#b" is no comment
        "echo a;#b 'c",  # a comment's open quote does not count
        "echo a\\\n#b",  # after a joined line "#" is inside the word
    ],
)
def test_backslashes_and_comments_read_as_bash_reads_them(line, tmp_path):
    assert run(line).output == _bash(line, tmp_path).stdout


@needs_bash
def test_a_comment_starts_after_a_parenthesis(tmp_path):
    assert split_commands("(echo a)#b 'c") == [(";", ["(echo a)"])]
    assert _bash("(echo a)#b 'c", tmp_path).stdout == "a\n"


@needs_bash
@pytest.mark.parametrize(
    ("line", "quote", "at"),
    [("echo 'abc", "'", 5), ('echo "x', '"', 5), ('echo a "b\\"c', '"', 7), ("echo a#'", "'", 7)],
)
def test_a_quote_left_open_is_named_where_it_opens(line, quote, at, tmp_path):
    with pytest.raises(OpenQuote, match=f"quote \\({quote}\\) at column {at + 1}") as raised:
        split_commands(line)
    assert isinstance(raised.value, ValueError)  # run_line leaves such a line to the model
    assert (raised.value.quote, raised.value.at) == (quote, at)
    assert run(line).output is None
    assert f"looking for matching `{quote}'" in _bash(line, tmp_path).stderr


def test_a_command_reading_the_keyboard_waits_only_at_a_terminal():
    files = {f"{HOME}/a.txt": "hi\n"}
    waiting = run_line("echo x; grep hi", files, cwd=HOME, home=HOME, keyboard=True)
    assert (waiting.output, waiting.foreground) == ("x\n", "grep")
    fed = run_line("grep hi < a.txt", files, cwd=HOME, home=HOME, keyboard=True)
    assert (fed.output, fed.foreground) == ("hi\n", None)
    # without a keyboard (swe's tool calls) what it reads is not known: the model's
    assert run_line("grep hi", files, cwd=HOME, home=HOME).output is None


@pytest.mark.parametrize("line", ["uname", "uname -s", "uname -n", "uname -sno", "uname -o"])
def test_uname_prints_what_the_scenario_decides_as_uname_does(line):
    host = subprocess.run(["uname", "-n"], capture_output=True, text=True).stdout.strip()
    result = run_line(line, {}, cwd="/home/dev", home="/home/dev", host=host)
    real = subprocess.run(["bash", "-c", line], capture_output=True, text=True, check=True)
    assert result.output == real.stdout


def _real_uname() -> dict[str, str]:
    """This machine's uname fields, by long option, as the scenario would declare them."""
    options = UNAME_DECLARED
    return {
        name: subprocess.run(["uname", f"--{name}"], capture_output=True, text=True).stdout.strip()
        for name in options
    }


@pytest.mark.parametrize(
    "line",
    ["uname -a", "uname --all", "uname -r", "uname -v", "uname -m", "uname -srm", "uname -p"],
)
def test_uname_prints_the_declared_kernel_as_uname_does(line):
    """With the scenario declaring this machine's kernel, every field is exact, -a's
    omission of an unknown processor included."""
    host = subprocess.run(["uname", "-n"], capture_output=True, text=True).stdout.strip()
    result = run_line(line, {}, cwd="/home/dev", home="/home/dev", host=host, uname=_real_uname())
    real = subprocess.run(["bash", "-c", line], capture_output=True, text=True, check=True)
    assert result.output == real.stdout


@pytest.mark.parametrize(
    "line",
    ["date", "date -u", "date -I", "date +%Y-%m-%d", "date '+%a %e %b %H:%M:%S %Z'", "date +%F_%T"],
)
def test_date_prints_the_machines_clock_as_gnu_date_does(line):
    """The simulated clock (the one `ls -l` shows) in GNU date's formats, checked against
    the real date given the same instant."""
    clock = datetime(2025, 3, 5, 9, 26)
    result = run_line(line, {}, cwd="/home/dev", home="/home/dev", clock=clock)
    real = subprocess.run(
        ["bash", "-c", line.replace("date", "date -d '2025-03-05 09:26:00'", 1)],
        env={"TZ": "UTC", "LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.output == real.stdout


@pytest.mark.parametrize(
    "line, clock",
    [("uname -a", CLOCK), ("uname -r", CLOCK), ("uname -m", CLOCK), ("date", None)],
)
def test_what_the_scenario_does_not_decide_is_left_to_the_model(line, clock):
    """A kernel the scenario does not declare; a clock it does not know (a real machine
    recorded beside the simulation runs at the real time, not the scenario's)."""
    result = run_line(line, {}, cwd="/home/dev", home="/home/dev", clock=clock)
    assert result.output is None


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.parametrize(
    "line",
    [
        "git status",
        "git log --oneline",
        "git add a.txt && echo added",
        "git status || echo refused",
    ],
)
def test_git_outside_a_repository_refuses_as_git_does(tmp_path, line):
    """Outside any repository the screen is git's one-line refusal, with its status."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("hi\n")
    real = _bash(line, work, home=tmp_path)
    files = {f"{HOME}/work/a.txt": "hi\n"}
    result = run_line(line, files, cwd=f"{HOME}/work", home=HOME)
    assert (result.output, result.status) == (real.stderr + real.stdout, real.returncode)


def test_git_inside_or_maybe_inside_a_repository_is_left_to_the_model():
    files = {f"{HOME}/repo/.git/": "", f"{HOME}/repo/src/a.py": "x = 1\n", f"{HOME}/b/": ""}
    assert run_line("git status", files, cwd=f"{HOME}/repo/src", home=HOME).output is None
    # a program simgym does not run wrote in b/: a .git may be there now
    unknown = [f"{HOME}/b"]
    assert run_line("git status", files, cwd=f"{HOME}/b", home=HOME, unknown=unknown).output is None
    assert run_line("git init", files, cwd=f"{HOME}/b", home=HOME).output is None


PRINTING_PROGRAMS = {
    "hello.py": 'print("hello from main")\n',
    "plain.py": '#!/usr/bin/env python3\n"""Doc."""\nprint("a", 1, 2.5, None, [1, "x"])\n'
    'print("b", end="")\nprint("c", sep="-")\nprint()\nif "__main__" == __name__:\n'
    '    print({"k": (1,)}, sep="", end="!\\n")\nelse:\n    print("never")\n',
}


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="needs /usr/bin/python3")
@pytest.mark.parametrize(
    "line",
    [
        "python3 hello.py",
        "python3 plain.py",
        "python3 plain.py | wc -l",
        "python3 missing.py",
        "python3 missing.py || echo failed",
        "python3 -c 'print(\"inline\", 3)'",
        "python3 hello.py > out.txt && cat out.txt",
    ],
)
def test_a_program_that_prints_literals_prints_as_python_does(tmp_path, line):
    """What a program made only of prints of literals writes is certain: compared with the
    real interpreter, errors for a missing file included."""
    work = tmp_path / "work"
    work.mkdir()
    for name, source in PRINTING_PROGRAMS.items():
        (work / name).write_text(source)
    real = _bash(line, work, home=tmp_path)
    files = {f"{HOME}/work/{name}": source for name, source in PRINTING_PROGRAMS.items()}
    result = run_line(line, files, cwd=f"{HOME}/work", home=HOME)
    expected = (real.stderr + real.stdout).replace(str(work), f"{HOME}/work")
    assert (result.output, result.status) == (expected, real.returncode)


@pytest.mark.parametrize(
    "source",
    [
        "import os\nprint(os.getcwd())\n",
        "print(1 + 1)\n",
        "for i in range(2):\n    print(i)\n",
        "print('x', file=open('f', 'w'))\n",
        "print('x', sep=1)\n",
        "print('unclosed\n",
        "return 1\n",
        "def main():\n    print('hi')\n\nmain()\n",
    ],
)
def test_any_other_program_is_the_models_and_may_have_written_files(source):
    files = {f"{HOME}/p.py": source}
    result = run_line("python3 p.py", files, cwd=HOME, home=HOME)
    assert result.output is None
    assert HOME in result.unknown  # it ran in the home directory: it may have written there
    assert any("p.py" in fact for fact in result.facts)


def test_the_default_scenarios_program_prints_its_line():
    scenario = get_domain("terminal").default_scenario()
    result = run_line(
        "python3 project/main.py", scenario["files"], cwd="/home/dev", home="/home/dev"
    )
    assert result.output == "hello from main\n"
    interactive = run_line(
        "python3", scenario["files"], cwd="/home/dev", home="/home/dev", keyboard=True
    )
    assert interactive.output is None and interactive.foreground == "python3"


@pytest.mark.parametrize(
    ("programs", "answered"),
    [(None, True), (["python3", "git"], True), (["git", "vim"], False)],
)
def test_a_program_the_scenario_does_not_list_is_the_models(programs, answered):
    """A scenario that lists its programs without python3 may still have it (the list can be
    incomplete), so simgym neither runs it nor claims it is missing."""
    spec = get_domain("terminal")
    raw = spec.default_scenario() | ({"programs": programs} if programs is not None else {})
    scenario = spec.scenario_model.model_validate(raw)
    ledger = spec.initial_state(scenario)
    command = Action.keys("python3 project/main.py\n")
    grounding = spec.ground(command, ledger, scenario)
    observation = grounding.observation if grounding is not None else None
    if answered:
        assert observation is not None and "hello from main" in observation
    else:
        assert observation is None


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (scripts/setup.sh)")
def test_with_execution_the_dev_set_is_answered_exactly_and_truly():
    """Execution grounding on the dev set: most turns exact, every exact one equal to the
    real machine's recording (run times masked)."""
    import asyncio

    from simgym.bench.exact_replay import replay
    from simgym.real.execute import SandboxRunner

    runner = SandboxRunner()
    try:
        tallies = asyncio.run(replay(DEVSET, ["terminal", "swe"], runner, keep=3))
    finally:
        runner.close_all()
    for domain, floor in (("terminal", 110), ("swe", 85)):
        tally = tallies[domain]
        assert tally.exact >= floor, (domain, tally.exact)
        assert tally.equal == tally.exact, tally.mismatches
        assert tally.executed > 0
