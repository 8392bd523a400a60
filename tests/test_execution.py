"""Execution grounding: what the state knows enough to run, runs for real; an unknown never
poisons what is known; nothing uncertain is served as exact.

The world model here answers every turn with noise, so an observation that comes out right
came from the state or from a real run. Expected outputs are bash's own, run here in a
plain temporary directory (the oracle), not strings typed into the test.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile

import pytest

import simgym
from simgym.core.execution import Run
from simgym.domains.shell.execution import chunks, why_not
from simgym.worldmodels.function import FunctionWorldModel

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="execution needs bubblewrap (scripts/setup.sh)"
)

NOISE = "Dev-120.9 3/4  2018-Nov 7"


def noise(messages):
    return f"<predicted_observation>\n{NOISE}\n</predicted_observation>"


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


async def play(env, actions):
    await env.reset()
    out = [await env.step(a) for a in actions]
    await env.close(None)
    return out


def bash_oracle(lines: list[str], files: dict[str, str]) -> list[str]:
    """Each line's output from a real bash in a scratch directory holding ``files``."""
    with tempfile.TemporaryDirectory() as scratch:
        for name, content in files.items():
            path = os.path.join(scratch, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as handle:
                handle.write(content)
        outputs = []
        for line in lines:
            done = subprocess.run(
                ["bash", "-c", line],
                cwd=scratch,
                capture_output=True,
                text=True,
                env={"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "HOME": scratch},
            )
            outputs.append(done.stdout + done.stderr.replace("bash: line 1: ", "bash: "))
        return outputs


def body(screen: str) -> str:
    """A terminal screen without its first line (the typed command) and last (prompt)."""
    return "\n".join(screen.splitlines()[1:-1])


def test_programs_the_agent_writes_run_for_real():
    lines = [
        "printf '#!/bin/sh\\necho hello $1\\n' > greet.sh",
        "./greet.sh world",
        "chmod +x greet.sh",
        "./greet.sh world",
        "python3 -c 'print(2**10)'",
        "for n in $(cat notes.txt | cut -c1-3); do echo item $n; done",
        "grep -o '[a-z]*' notes.txt | sort | uniq -c | sort -k1,1nr -k2 | head -3 > top.txt",
        "cat top.txt",
        "tar czf n.tgz notes.txt && mkdir -p x && tar xzf n.tgz -C x && sha256sum x/notes.txt",
    ]
    env = simgym.make("terminal", world_model=FunctionWorldModel(noise), grounding="strict")
    results = asyncio.run(play(env, lines))
    files = {"notes.txt": "buy milk\ncall the bank\n"}
    oracle = bash_oracle(lines, files)
    for line, result, real in zip(lines, results, oracle, strict=True):
        assert body(result.observation.text) == real.rstrip("\n"), line
    turns = env.trajectory.turns
    assert turns[1].grounding["execution"]["ran"] and "Permission denied" in oracle[1]
    assert env.trajectory.metrics["executed"] >= 6
    assert NOISE not in "".join(r.observation.text for r in results)


def test_a_heredoc_writes_a_program_that_later_lines_run_and_read():
    script = "cat > grade.py <<'EOF'\nimport sys\nprint(sum(map(int, sys.argv[1:])))\nEOF"
    env = simgym.make("terminal", world_model=FunctionWorldModel(noise), grounding="strict")
    results = asyncio.run(play(env, [script, "python3 grade.py 1 2 3", "cat grade.py"]))
    first = results[0].observation.text.splitlines()
    assert first[0].endswith("$ cat > grade.py <<'EOF'") and first[1:4] == [
        "> import sys",
        "> print(sum(map(int, sys.argv[1:])))",
        "> EOF",
    ]
    assert body(results[1].observation.text) == "6"
    assert body(results[2].observation.text) == "import sys\nprint(sum(map(int, sys.argv[1:])))"


def test_without_execution_a_heredoc_never_leaves_false_certainty():
    """A line the shell cannot read must not leave the state sure the file is absent."""
    script = "cat > grade.py <<'EOF'\nprint(1)\nEOF"
    env = simgym.make(
        "terminal", world_model=FunctionWorldModel(noise), grounding="strict", execution="off"
    )
    results = asyncio.run(play(env, [script, "cat grade.py", "python3 grade.py"]))
    for result in results[1:]:
        assert "No such file or directory" not in result.observation.text
    assert env.trajectory.turns[1].grounding["strict"]["action"] != "state"


def test_a_certain_write_makes_an_unknown_file_known_again():
    env = simgym.make(
        "terminal", world_model=FunctionWorldModel(noise), grounding="strict", execution="off"
    )
    lines = ["some-tool --out report.txt", "cat report.txt", "echo fresh > report.txt"]
    results = asyncio.run(play(env, [*lines, "cat report.txt"]))
    assert results[1].observation.text.startswith(NOISE)  # unknown: the model's
    assert body(results[3].observation.text) == "fresh"  # written whole: exact again


def test_pasted_lines_each_get_their_prompt():
    env = simgym.make("terminal", world_model=FunctionWorldModel(noise), grounding="strict")
    results = asyncio.run(play(env, ["cd project\nls | wc -l"]))
    assert results[0].observation.text.splitlines() == [
        "dev@devbox:~$ cd project",
        "dev@devbox:~/project$ ls | wc -l",
        "2",
        "dev@devbox:~/project$",
    ]
    assert env.state["cwd"] == "/home/dev/project"


def test_swe_runs_tests_and_git_for_real():
    scenario = {
        "repo": "acme/calc",
        "root": "/workspace/calc",
        "test_command": "python3 -m unittest -q",
        "files": {
            "calc.py": "def add(a, b):\n    return a - b\n",
            "test_calc.py": "import unittest\nfrom calc import add\n\n\n"
            "class T(unittest.TestCase):\n    def test_add(self):\n"
            "        self.assertEqual(add(2, 3), 5)\n",
        },
    }
    env = simgym.make(
        "swe", world_model=FunctionWorldModel(noise), grounding="strict", scenario=scenario
    )
    actions = [
        call("run_tests"),
        call("edit_file", path="calc.py", old_str="a - b", new_str="a + b"),
        call("bash", command="git status --short"),
        call("run_tests"),
        call("bash", command="python3 -c 'from calc import add; print(add(20, 22))'"),
        call("write_file", path="notes/todo.txt", content="ship it\n"),
        call("bash", command="git status --short && cat notes/todo.txt"),
        call("submit"),
    ]
    results = asyncio.run(play(env, actions))
    texts = [r.observation.text for r in results]
    assert "FAILED (failures=1)" in texts[0] and texts[0].endswith("[exit code: 1]")
    assert texts[2] == " M calc.py\n[exit code: 0]"
    assert "OK" in texts[3] and texts[3].endswith("[exit code: 0]")
    assert texts[4] == "42\n[exit code: 0]"
    assert texts[6] == " M calc.py\n?? notes/\nship it\n[exit code: 0]"
    assert "-    return a - b\n+    return a + b" in texts[7] and texts[7].endswith("[submitted]")
    assert "notes/todo.txt" in texts[7]
    assert all(NOISE not in t for t in texts)


def test_what_may_not_run_stays_the_models():
    files = {"/home/dev/notes.txt": "x\n", "/home/dev/project/": ""}
    known = dict(cwd="/home/dev", home="/home/dev", files=files)
    assert why_not("wc -l notes.txt | sort", **known) is None
    assert "network" in why_not("curl https://example.com", **known) or "other machines" in (
        why_not("curl https://example.com", **known)
    )
    assert why_not("ps aux", **known)  # the machine itself
    assert why_not("cat /etc/shadow", **known)  # a part of the machine the state lacks
    assert why_not("vim notes.txt", **known)  # takes over the screen
    assert why_not("ls project", **known, unknown=["/home/dev/project"])  # touched by a model
    assert why_not("node app.js", **known, programs=["git"])  # not the scenario's
    assert chunks("cat > a <<EOF\nx\nEOF\necho 'a\nb'\nls") == [
        "cat > a <<EOF\nx\nEOF",
        "echo 'a\nb'",
        "ls",
    ]


def test_a_program_that_waits_or_runs_long_is_left_to_the_model():
    from simgym.real.execute import SandboxRunner

    runner = SandboxRunner()
    try:
        request = Run(chunks=("sleep 30",), files={}, cwd="/home/u", home="/home/u", timeout_s=1.0)
        result = asyncio.run(runner.run(request))
    finally:
        runner.close_all()
    assert result.problem and "ran past" in result.problem


def test_an_unresolved_contradiction_is_marked_and_counted():
    env = simgym.make(
        "swe", world_model=FunctionWorldModel(noise), grounding="strict", execution="off"
    )
    actions = [
        call("bash", command="some-generator"),  # unknown: the repository may have changed
        call("write_file", path="x.txt", content="a\nb\n"),  # certain, but its verb is not
    ]
    asyncio.run(play(env, actions))
    turn = env.trajectory.turns[1]
    assert turn.grounding["strict"]["action"] == "unresolved"
    assert turn.grounding["strict"]["contradiction"] is True
    assert env.trajectory.metrics["contradictions"] == 1
    assert env.state["files"]["x.txt"] == "a\nb\n"  # the write itself is certain


def test_a_heredoc_typed_line_by_line_waits_then_runs():
    env = simgym.make("terminal", world_model=FunctionWorldModel(noise), grounding="strict")
    lines = ["cat > note.py <<'EOF'", "print('don''t panic')", "EOF", "python3 note.py"]
    results = asyncio.run(play(env, lines))
    screens = [r.observation.text for r in results]
    assert screens[0].endswith("$ cat > note.py <<'EOF'\n>")
    assert screens[1] == "> print('don''t panic')\n>"
    assert screens[2].splitlines() == ["> EOF", "dev@devbox:~$"]
    assert body(screens[3]) == "dont panic"


def test_the_readme_main_job_prints_what_the_debian_machine_prints():
    """`simgym play terminal` on the embedded default (offline): the declared Debian 12
    machine answers ps and df, the agent's script and python3 run for real."""
    import sys

    from simgym.domains.shell.machine import answer, default_profile

    lines = [
        "ps aux",
        "df -h",
        "printf '#!/bin/sh\\necho hello from s\\n' > s.sh; chmod +x s.sh; ./s.sh",
        "python3 -c 'print(2**10)'",
        "id",
        "exit",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "simgym", "play", "terminal"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    screen = done.stdout
    machine = default_profile()
    clock = simgym.get_domain("terminal").scenario(None).clock
    for argv in (["ps", "aux"], ["df", "-h"]):
        printed, _, _ = answer(
            argv, machine, user="dev", cwd="/home/dev", now=clock, width=160, height=48
        )
        assert printed.splitlines()[0] in screen  # the header, as procps / coreutils print it
        assert printed.splitlines()[-1] in screen
    assert "ps aux" in screen.split("$ df -h")[0].splitlines()[-2]  # ps lists itself, last
    real = bash_oracle([lines[2], lines[3]], {})
    assert f"./s.sh\n{real[0]}" in screen and real[0] == "hello from s\n"
    assert f"print(2**10)'\n{real[1]}" in screen and real[1] == "1024\n"
    assert "uid=1000(dev) gid=1000(dev) groups=1000(dev)" in screen


def test_swe_after_an_unknown_program_what_is_written_is_read_back_exactly():
    """The poisoning path seen on unseen episodes: after a program no code ran, every later
    write_file/read_file/list_dir went to the model. A write is certain; reading it back is
    exact; only what the program may have touched stays the model's."""
    env = simgym.make(
        "swe", world_model=FunctionWorldModel(noise), grounding="strict", execution="off"
    )
    actions = [
        call("bash", command="some-generator --all"),
        call("write_file", path="tests/test_merge.py", content="def test_ok():\n    pass\n"),
        call("read_file", path="tests/test_merge.py"),
    ]
    results = asyncio.run(play(env, actions))
    assert results[2].observation.text == "     1  def test_ok():\n     2      pass"
    assert env.trajectory.turns[2].grounding["strict"]["action"] in ("state", "corrected")
    assert env.state["files"]["tests/test_merge.py"] == "def test_ok():\n    pass\n"


def test_ls_and_sort_follow_the_scenarios_locale():
    """C.UTF-8 collates in byte order, as the real sandboxes; a locale this host lacks is
    neither guessed by the shell nor run (glibc would fall back to C silently)."""
    from simgym.domains.shell.machine import default_profile

    files = {"/home/dev/inventory.csv": "b\n", "/home/dev/README": "a\n"}
    env = simgym.make(
        "terminal",
        world_model=FunctionWorldModel(noise),
        grounding="strict",
        scenario={"user": "dev", "files": files},
    )
    results = asyncio.run(play(env, ["ls", "printf 'b\\nB\\na\\n' | sort"]))
    assert body(results[0].observation.text) == "README  inventory.csv"
    assert body(results[1].observation.text) == "B\na\nb"
    machine = default_profile().model_copy(update={"locale": "en_US.UTF-8"})
    env = simgym.make(
        "terminal",
        world_model=FunctionWorldModel(noise),
        grounding="strict",
        scenario={"user": "dev", "files": files, "machine": machine.model_dump()},
    )
    results = asyncio.run(play(env, ["ls"]))
    assert results[0].observation.text.startswith(NOISE)


def test_without_execution_a_listing_below_an_unrun_program_is_not_certain():
    """Found on the held-out set with execution off: after `mv lib/money.py
    lib/currency.py && python3 app.py` (a program no code ran, in the parent directory)
    `ls lib` was answered from the state, without the rename and Python's __pycache__."""
    files = {"/home/dev/app.py": "import lib\n", "/home/dev/lib/__init__.py": ""}
    env = simgym.make(
        "terminal",
        world_model=FunctionWorldModel(noise),
        grounding="strict",
        execution="off",
        scenario={"user": "dev", "files": files},
    )
    results = asyncio.run(play(env, ["ls lib", "some-program", "ls lib"]))
    assert body(results[0].observation.text) == "__init__.py"
    assert results[2].observation.text.startswith(NOISE)


def test_the_exit_status_carries_to_the_next_line_and_one_found_file_is_exact():
    """`echo $?` on the line after a failure prints what bash left (126 for a script not
    yet executable, a program's own status), from a real run; after a line the state
    answered with an error, whose status bash decides, it is the model's; a `find` that
    prints one line has no file-system order to doubt."""
    lines = [
        "printf 'echo hi\\n' > s.sh",
        "./s.sh",
        "echo $?",
        "python3 -c 'import sys; sys.exit(3)'",
        "echo $?",
        "chmod +x s.sh",
        "./s.sh; echo $?",
        "find . -name s.sh -exec wc -l {} \\;",
        "ls nothere",
        "echo $?",
    ]
    env = simgym.make("terminal", world_model=FunctionWorldModel(noise), grounding="strict")
    results = asyncio.run(play(env, lines))
    shown = [body(r.observation.text) for r in results]
    assert shown[1] == "bash: ./s.sh: Permission denied" and shown[2] == "126"
    assert shown[4] == "3" and shown[6] == "hi\n0"
    assert shown[7] == "1 ./s.sh"
    assert NOISE in results[9].observation.text  # `ls`'s status (2) is bash's, not the state's
    assert all(NOISE not in r.observation.text for r in results[:9])


def test_a_command_substitution_in_double_quotes_is_read_word_by_word():
    """`sed -i "1a ## $(cat VERSION)" f` runs: the substitution's words are a command and
    its file, not one program named "cat VERSION)"."""
    files = ["/home/dev/VERSION", "/home/dev/CHANGELOG.md"]
    line = 'sed -i "1a ## $(cat VERSION)" CHANGELOG.md && head -n 3 CHANGELOG.md'
    assert why_not(line, cwd="/home/dev", home="/home/dev", files=files) is None
    network = why_not('echo "$(curl example.com)"', cwd="/home/dev", home="/home/dev", files=files)
    assert network is not None and "curl" in network
