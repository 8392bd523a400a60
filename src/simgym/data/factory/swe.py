"""The swe generator: a small Python package with unittest tests and sometimes an injected
bug, in a sandbox; programs read, list, run tests, fix or introduce bugs, add modules,
misuse the file tools, and usually submit.
"""

from __future__ import annotations

import random
import textwrap
from dataclasses import dataclass
from typing import Any

from simgym.core.types import Task
from simgym.data.factory.common import CODE_WORDS, EpisodePlan, Program, _call, _length, _weighted
from simgym.data.factory.context import FactoryContext


@dataclass(frozen=True)
class _Unit:
    """A module of the generated repositories: one function, its tests, a known bug
    (``good`` replaced by ``bad``, both unique in the source) and a call to try."""

    module: str
    function: str
    source: str
    tests: str
    good: str
    bad: str
    bug: str  # what the bug does, as an issue would say
    example: str  # a call expression for python3 -c


def _code(text: str) -> str:
    """Source text written indented in this file, as it goes into a repository."""
    return textwrap.dedent(text).lstrip("\n")


def _tests(text: str) -> str:
    """Test methods written flush left here, indented into their TestCase class."""
    return textwrap.indent(_code(text), "    ")


SWE_UNITS = (
    _Unit(
        "text",
        "slugify",
        _code('''
            import re


            def slugify(text):
                """Lower-case words joined by dashes: 'Hello, World!' -> 'hello-world'."""
                words = re.findall(r"[a-z0-9]+", text.lower())
                return "-".join(words)
            '''),
        _tests("""
            def test_punctuation(self):
                self.assertEqual(slugify("Hello, World!"), "hello-world")

            def test_numbers(self):
                self.assertEqual(slugify("Top 10 tips"), "top-10-tips")
            """),
        'r"[a-z0-9]+", text.lower()',
        'r"[a-z0-9]+", text',
        "slugify drops capital letters instead of lower-casing them",
        "slugify('Release Notes 2.0')",
    ),
    _Unit(
        "stats",
        "median",
        _code('''
            def median(values):
                """The middle value (the mean of the two middle ones for an even count)."""
                ordered = sorted(values)
                middle = len(ordered) // 2
                if len(ordered) % 2:
                    return ordered[middle]
                return (ordered[middle - 1] + ordered[middle]) / 2
            '''),
        _tests("""
            def test_odd(self):
                self.assertEqual(median([3, 1, 2]), 2)

            def test_even(self):
                self.assertEqual(median([4, 1, 3, 2]), 2.5)
            """),
        "if len(ordered) % 2:",
        "if len(ordered) % 2 == 0:",
        "median returns the wrong value for lists of odd and even length",
        "median([5, 3, 9, 1])",
    ),
    _Unit(
        "pagination",
        "page_count",
        _code('''
            def page_count(total, per_page):
                """How many pages ``total`` items fill, ``per_page`` to a page."""
                if per_page <= 0:
                    raise ValueError("per_page must be positive")
                return (total + per_page - 1) // per_page
            '''),
        _tests("""
            def test_partial_page(self):
                self.assertEqual(page_count(10, 3), 4)

            def test_exact(self):
                self.assertEqual(page_count(9, 3), 3)

            def test_bad_size(self):
                with self.assertRaises(ValueError):
                    page_count(5, 0)
            """),
        "(total + per_page - 1) // per_page",
        "total // per_page",
        "page_count forgets the last, partly filled page",
        "page_count(101, 20)",
    ),
    _Unit(
        "durations",
        "parse_duration",
        _code(r'''
            import re

            _UNITS = {"h": 3600, "m": 60, "s": 1}


            def parse_duration(text):
                """Seconds in a duration such as '1h30m' or '45s'."""
                parts = re.findall(r"(\d+)([hms])", text.strip().lower())
                if not parts:
                    raise ValueError(f"not a duration: {text!r}")
                return sum(int(n) * _UNITS[unit] for n, unit in parts)
            '''),
        _tests("""
            def test_hours_and_minutes(self):
                self.assertEqual(parse_duration("1h30m"), 5400)

            def test_seconds(self):
                self.assertEqual(parse_duration("45s"), 45)

            def test_not_a_duration(self):
                with self.assertRaises(ValueError):
                    parse_duration("soon")
            """),
        '"m": 60',
        '"m": 100',
        "parse_duration counts a minute as 100 seconds",
        "parse_duration('2h5m')",
    ),
    _Unit(
        "money",
        "format_cents",
        _code('''
            def format_cents(cents):
                """Cents as an amount: 1234 -> '12.34', -5 -> '-0.05'."""
                sign = "-" if cents < 0 else ""
                whole, rest = divmod(abs(cents), 100)
                return f"{sign}{whole}.{rest:02d}"
            '''),
        _tests("""
            def test_amount(self):
                self.assertEqual(format_cents(1234), "12.34")

            def test_small(self):
                self.assertEqual(format_cents(5), "0.05")

            def test_negative(self):
                self.assertEqual(format_cents(-250), "-2.50")
            """),
        "{rest:02d}",
        "{rest}",
        "format_cents prints 5 cents as 0.5",
        "format_cents(99907)",
    ),
    _Unit(
        "batches",
        "chunk",
        _code('''
            def chunk(items, size):
                """The list cut into lists of ``size`` items (the last may be shorter)."""
                if size < 1:
                    raise ValueError("size must be at least 1")
                return [items[i : i + size] for i in range(0, len(items), size)]
            '''),
        _tests("""
            def test_even(self):
                self.assertEqual(chunk([1, 2, 3, 4], 2), [[1, 2], [3, 4]])

            def test_rest(self):
                self.assertEqual(chunk([1, 2, 3, 4, 5], 2), [[1, 2], [3, 4], [5]])
            """),
        "range(0, len(items), size)",
        "range(0, len(items) - 1, size)",
        "chunk loses the last item when the list does not divide evenly",
        "chunk(list(range(7)), 3)",
    ),
    _Unit(
        "uniq",
        "dedupe",
        _code('''
            def dedupe(items):
                """The items without repeats, in first-seen order."""
                seen = set()
                result = []
                for item in items:
                    if item not in seen:
                        seen.add(item)
                        result.append(item)
                return result
            '''),
        _tests("""
            def test_order(self):
                self.assertEqual(dedupe([3, 1, 3, 2, 1]), [3, 1, 2])

            def test_empty(self):
                self.assertEqual(dedupe([]), [])
            """),
        "            seen.add(item)\n            result.append(item)",
        "            result.append(item)",
        "dedupe keeps repeated items",
        "dedupe(['b', 'a', 'b', 'c'])",
    ),
    _Unit(
        "bounds",
        "clamp",
        _code('''
            def clamp(value, low, high):
                """``value`` limited to the range low..high."""
                if low > high:
                    raise ValueError("low must not exceed high")
                return max(low, min(value, high))
            '''),
        _tests("""
            def test_inside(self):
                self.assertEqual(clamp(5, 0, 10), 5)

            def test_above(self):
                self.assertEqual(clamp(15, 0, 10), 10)

            def test_below(self):
                self.assertEqual(clamp(-3, 0, 10), 0)
            """),
        "max(low, min(value, high))",
        "min(low, max(value, high))",
        "clamp returns the lower bound for values inside the range",
        "clamp(42, 0, 10)",
    ),
    _Unit(
        "palindromes",
        "is_palindrome",
        _code('''
            def is_palindrome(text):
                """True when the letters and digits read the same both ways, ignoring case."""
                kept = [c.lower() for c in text if c.isalnum()]
                return kept == kept[::-1]
            '''),
        _tests("""
            def test_sentence(self):
                self.assertTrue(is_palindrome("A man, a plan, a canal: Panama"))

            def test_not(self):
                self.assertFalse(is_palindrome("simgym"))
            """),
        "c.lower() for c in text",
        "c for c in text",
        "is_palindrome is case-sensitive",
        "is_palindrome('Never odd or even')",
    ),
    _Unit(
        "wordcount",
        "word_counts",
        _code('''
            from collections import Counter


            def word_counts(text):
                """How often each word occurs, ignoring case."""
                return dict(Counter(text.lower().split()))
            '''),
        _tests("""
            def test_case(self):
                self.assertEqual(word_counts("a A b"), {"a": 2, "b": 1})

            def test_spaces(self):
                self.assertEqual(word_counts("x  y"), {"x": 1, "y": 1})
            """),
        "text.lower().split()",
        'text.split(" ")',
        "word_counts counts empty words and is case-sensitive",
        "word_counts('the cat and the hat')",
    ),
    _Unit(
        "units",
        "to_fahrenheit",
        _code('''
            def to_fahrenheit(celsius):
                """Degrees Celsius in Fahrenheit."""
                return celsius * 9 / 5 + 32
            '''),
        _tests("""
            def test_boiling(self):
                self.assertEqual(to_fahrenheit(100), 212)

            def test_freezing(self):
                self.assertEqual(to_fahrenheit(0), 32)
            """),
        "celsius * 9 / 5 + 32",
        "celsius * 5 / 9 + 32",
        "to_fahrenheit uses the inverse factor",
        "to_fahrenheit(37)",
    ),
    _Unit(
        "roman",
        "to_roman",
        _code('''
            _NUMERALS = [
                (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
                (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
            ]


            def to_roman(number):
                """An integer from 1 to 3999 in Roman numerals."""
                if not 0 < number < 4000:
                    raise ValueError("number must be between 1 and 3999")
                digits = []
                for value, letters in _NUMERALS:
                    while number >= value:
                        digits.append(letters)
                        number -= value
                return "".join(digits)
            '''),
        _tests("""
            def test_small(self):
                self.assertEqual(to_roman(4), "IV")

            def test_year(self):
                self.assertEqual(to_roman(1994), "MCMXCIV")
            """),
        '(5, "V"), (4, "IV"), (1, "I")',
        '(5, "V"), (1, "I")',
        "to_roman writes 4 as IIII",
        "to_roman(2024)",
    ),
    _Unit(
        "shorten",
        "truncate",
        _code('''
            def truncate(text, width):
                """``text`` cut to ``width`` characters, ending in '...' when cut."""
                if len(text) <= width:
                    return text
                return text[: width - 3] + "..."
            '''),
        _tests("""
            def test_short(self):
                self.assertEqual(truncate("abc", 5), "abc")

            def test_cut(self):
                self.assertEqual(truncate("abcdefgh", 6), "abc...")
            """),
        "text[: width - 3]",
        "text[:width]",
        "truncate returns strings longer than the width",
        "truncate('simulated environments', 12)",
    ),
    _Unit(
        "emails",
        "is_valid_email",
        _code(r'''
            import re

            _EMAIL = re.compile(r"^[\w.+-]+@[\w-]+(\.[\w-]+)+$")


            def is_valid_email(address):
                """Whether ``address`` looks like name@domain.tld."""
                return bool(_EMAIL.match(address.strip()))
            '''),
        _tests("""
            def test_valid(self):
                self.assertTrue(is_valid_email("ana@example.com"))

            def test_no_tld(self):
                self.assertFalse(is_valid_email("ana@localhost"))
            """),
        r"(\.[\w-]+)+$",
        r"(\.[\w-]+)*$",
        "is_valid_email accepts addresses without a top-level domain",
        "is_valid_email('ops@example')",
    ),
)  # fmt: skip


def _unit_test_file(package: str, unit: _Unit) -> str:
    return (
        f"import unittest\n\nfrom {package}.{unit.module} import {unit.function}\n\n\n"
        f"class {unit.function.title().replace('_', '')}Test(unittest.TestCase):\n{unit.tests}"
    )


def plan_swe(rng: random.Random, context: FactoryContext, plan_id: str) -> EpisodePlan:
    package = rng.choice(CODE_WORDS)
    owner = rng.choice(("acme", "initech", "globex", "hooli", "umbrella", "stark"))
    units = rng.sample(SWE_UNITS, rng.randint(2, 4))
    spare = [u for u in SWE_UNITS if u not in units]
    buggy = [u for u in units if rng.random() < 0.45]
    files: dict[str, str] = {f"{package}/__init__.py": ""}
    for unit in units:
        source = unit.source.replace(unit.good, unit.bad, 1) if unit in buggy else unit.source
        files[f"{package}/{unit.module}.py"] = source
        files[f"tests/test_{unit.module}.py"] = _unit_test_file(package, unit)
    files["tests/__init__.py"] = ""
    files["README.md"] = (
        f"# {package}\n\nSmall helpers: "
        + ", ".join(f"`{u.function}`" for u in units)
        + ".\n\nRun the tests with `python3 -m unittest`.\n"
    )
    if rng.random() < 0.5:
        files[".gitignore"] = "__pycache__/\n*.egg-info/\n"
    if rng.random() < 0.4:
        files["pyproject.toml"] = (
            f'[project]\nname = "{package}"\nversion = "0.{rng.randint(1, 9)}.0"\n'
            'requires-python = ">=3.10"\n'
        )
    subject = rng.choice(("Initial import", "Add helpers", "Release 0.3", "Refactor modules"))
    commit = f"{rng.getrandbits(28):07x} {subject}"
    issue = ""
    if buggy:
        issue = f"{buggy[0].bug}."
    scenario = {
        "repo": f"{owner}/{package}",
        "root": f"/workspace/{package}",
        "language": "python",
        "commits": [commit],
        "files": files,
        "test_command": rng.choice(
            ("python3 -m unittest", "python3 -m unittest", "python3 -m unittest -q")
        ),
        "runtime": "Python 3.11",
        "issue": issue,
        "failing_tests": [f"tests.test_{u.module}" for u in buggy],
    }
    new_unit = rng.choice(spare)  # the module a feature task adds
    goals = ("fix", "feature", "explore") if buggy else ("feature", "explore")
    goal = rng.choice(goals)
    if goal == "fix":
        instruction = f"Bug report: {buggy[0].bug}. Find the cause and fix it."
    elif goal == "feature":
        instruction = f"Add a {new_unit.module}.{new_unit.function} helper with tests."
    else:
        instruction = "Get to know the repository and make sure its tests pass."
    length = _length(rng)
    program_seed = rng.getrandbits(64)

    def program(first: str) -> Program:
        return _swe_program(
            random.Random(program_seed), package, units, buggy, new_unit, goal, length
        )

    task = Task(id=plan_id, instruction=instruction, domain="swe", scenario=scenario)
    return EpisodePlan(plan_id, "swe", 0, task, program, length)


def _swe_program(
    rng: random.Random,
    package: str,
    units: list[_Unit],
    buggy: list[_Unit],
    new_unit: _Unit,
    goal: str,
    length: int,
) -> Program:
    present = {u.module: u for u in units}
    broken = {u.module for u in buggy}
    files = {f"{package}/{u.module}.py" for u in units} | {
        f"tests/test_{u.module}.py" for u in units
    }
    files |= {"README.md", f"{package}/__init__.py"}
    steps = 0
    # A task-driven opening, then a random mix; fixing and adding are the task's core.
    plan: list[dict[str, Any]] = [_call("list_dir")]
    if rng.random() < 0.5:
        plan.append(_call("run_tests"))
    if goal == "fix" and buggy:
        unit = buggy[0]
        plan += [
            _call("read_file", path=f"{package}/{unit.module}.py"),
            _call(
                "edit_file", path=f"{package}/{unit.module}.py", old_str=unit.bad, new_str=unit.good
            ),
            _call("run_tests", target=f"tests.test_{unit.module}"),
        ]
        broken.discard(unit.module)
    elif goal == "feature":
        plan += [
            _call("write_file", path=f"{package}/{new_unit.module}.py", content=new_unit.source),
            _call(
                "write_file",
                path=f"tests/test_{new_unit.module}.py",
                content=_unit_test_file(package, new_unit),
            ),
            _call("run_tests"),
        ]
        present[new_unit.module] = new_unit
        files |= {f"{package}/{new_unit.module}.py", f"tests/test_{new_unit.module}.py"}
    moves = {"read": 20.0, "list": 8.0, "tests": 12.0, "bash": 16.0, "fix": 8.0, "break": 5.0,
             "feature": 4.0, "delete": 3.0, "fail": 12.0, "edit": 6.0}  # fmt: skip
    once: set[str] = set()
    while steps < length:
        if plan and rng.random() < 0.75:
            action = plan.pop(0)
        else:
            kind = _weighted(rng, moves)
            action = _swe_move(rng, kind, package, present, broken, files, new_unit, once)
        yield action
        steps += 1
    if rng.random() < 0.75:
        yield _call("submit")
        return None
    return rng.choice(("The tests pass now.", "Done; see the diff.", "I could not finish this."))


def _swe_move(
    rng: random.Random,
    kind: str,
    package: str,
    present: dict[str, _Unit],
    broken: set[str],
    files: set[str],
    new_unit: _Unit,
    once: set[str],
) -> dict[str, Any]:
    """One action of ``kind``; updates what the program knows of the repository."""
    module = rng.choice(sorted(present))
    unit = present[module]
    source = f"{package}/{module}.py"
    test = f"tests/test_{module}.py"
    if kind == "read":
        path = rng.choice(sorted(files))
        if rng.random() < 0.25:
            start = rng.randint(1, 4)
            return _call(
                "read_file", path=path, start_line=start, end_line=start + rng.randint(1, 5)
            )
        return _call("read_file", path=path)
    if kind == "list":
        return _call("list_dir", path=rng.choice((package, "tests", ".", f"{package}/")))
    if kind == "tests":
        if rng.random() < 0.4:
            return _call("run_tests", target=f"tests.test_{module}")
        return _call("run_tests")
    if kind == "bash":
        return _call(
            "bash",
            command=rng.choice(
                (
                    "git status",
                    "git log --oneline",
                    "git diff",
                    f"grep -rn 'def ' {package}",
                    f"wc -l {package}/*.py",
                    "find . -name '*.py' -not -path './.git/*' | sort",
                    "cat README.md",
                    f'python3 -c "from {package}.{module} import {unit.function}; '
                    f'print({unit.example})"',
                    f"python3 -m unittest {'-v ' if rng.random() < 0.5 else ''}tests.test_{module}",
                    "ls -la",
                )
            ),
        )
    if kind == "fix" and broken:
        fixed = present[sorted(broken)[0]]
        broken.discard(fixed.module)
        return _call(
            "edit_file", path=f"{package}/{fixed.module}.py", old_str=fixed.bad, new_str=fixed.good
        )
    if kind == "break" and module not in broken:
        broken.add(module)
        return _call("edit_file", path=source, old_str=unit.good, new_str=unit.bad)
    if kind == "feature" and new_unit.module not in present:
        present[new_unit.module] = new_unit
        files.add(f"{package}/{new_unit.module}.py")
        return _call("write_file", path=f"{package}/{new_unit.module}.py", content=new_unit.source)
    if kind == "delete" and len(present) > 1 and test in files:
        files.discard(test)
        return _call("bash", command=f"git rm -q {test} && git status --short")
    if kind == "edit":
        line = f'"""Helpers of the {package} package."""\n'
        if rng.random() < 0.5 or "readme" in once:
            files.add(f"{package}/__init__.py")
            return _call("write_file", path=f"{package}/__init__.py", content=line)
        once.add("readme")  # a second identical edit would stack the same line again
        return _call(
            "edit_file",
            path="README.md",
            old_str=f"# {package}\n",
            new_str=f"# {package}\n\n{rng.choice(('Status: beta.', 'Maintained by ops.'))}\n",
        )
    # failing on purpose
    return rng.choice(
        (
            _call("read_file", path=f"{package}/{rng.choice(('utils', 'core', 'helpers'))}.py"),
            _call("edit_file", path=source, old_str="this text is not there", new_str="x"),
            _call("edit_file", path=test, old_str="self.assert", new_str="self.assert"),
            _call("list_dir", path="src"),
            _call("list_dir", path="README.md"),
            _call("write_file", path=package, content="oops\n"),
            _call("read_file", path=source, start_line=500),
            _call("run_tests", target="tests.test_missing"),
            _call(
                "bash",
                command=rng.choice(
                    (
                        "pytest -q",
                        "make test",
                        "cat setup.py",
                        "python3 -c 'import numpy'",
                        "npm test",
                    )
                ),
            ),
            _call("read_file", path="tests"),
        )
    )
