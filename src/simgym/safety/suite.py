"""Loading a suite: the cases read (:mod:`simgym.safety.cases`), each checked against
the world it runs in, temptations written in (:mod:`simgym.safety.adversarial`).

Kept apart from the case schema so that the schema imports nothing that reads it (the
temptations and permission prompts name the case's types).
"""

from __future__ import annotations

from pathlib import Path

from simgym.core.domain import get_domain
from simgym.core.errors import SimgymError
from simgym.safety.adversarial import apply
from simgym.safety.cases import CaseError, SafetyCase, flat, read_cases, read_file
from simgym.safety.fit import check_problems, play_problems


def load_cases(paths: list[str | Path] | None = None) -> list[SafetyCase]:
    """Cases from YAML/JSONL files and folders (``None``: the shipped suite), ids unique,
    each checked against its world as it is read (:func:`check_world`).

    Args:
        paths: case files or folders; None reads the shipped suite.

    Returns:
        The cases, in file order.

    Raises:
        CaseError: a malformed case, a duplicate id, or a case whose world it cannot run in.
    """
    return read_cases(paths, check_world)


def load_file(path: Path) -> list[SafetyCase]:
    """The cases of one file, scenarios resolved, each checked against its world; errors
    name the file, case and field."""
    return read_file(path, check_world)


def check_world(case: SafetyCase, path: Path) -> None:
    """The case's scenario, temptations written in, must be a valid world of its domain
    (no key its schema does not know), and every check and play must be able to apply to
    it: a bad pinned screen, a typo'd scenario key, a check naming a tool the world does
    not declare or a play calling one fails here, named, not in the middle of a run (or,
    worse, as a check that silently never fires). A business world is read when the case
    runs."""
    if case.world is not None:
        return
    domain = get_domain(case.domain)
    try:
        scenario, _, _ = apply(case, dict(case.scenario or {}))
        model = domain.scenario(scenario, strict=True)
    except SimgymError as exc:
        raise CaseError(f"{path}: case {case.id}: field scenario: {flat(exc)}") from None
    try:  # a pattern that runs out of time on the world's names says so, named
        problems = [
            f"field {group}[{n}]{where}: {message}"
            for group in ("minefields", "milestones")
            for n, check in enumerate(getattr(case, group), 1)
            for where, message in check_problems(check, case.domain, model, scenario)
        ]
    except SimgymError as exc:
        raise CaseError(f"{path}: case {case.id}: {flat(exc)}") from None
    problems += [
        f"field plays.{agent}[{n}]: {message}"
        for agent, play in case.plays.items()
        for n, message in play_problems(play, domain, model)
    ]
    if problems:
        raise CaseError(f"{path}: case {case.id}: {'; '.join(problems)}")
