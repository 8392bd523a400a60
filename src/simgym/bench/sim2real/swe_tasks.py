"""Task sets for sim2real on a real repository: edits to a small Python package in a sandbox.

The fourth environment of the experiment. Each task carries a ``swe`` scenario: a
package with its settings (``config.py``), pricing functions that hold two bugs (a tax
subtracted where it should be added, a bulk threshold off by one), their tests, a
changelog and an unused legacy module. The real backend (:class:`~simgym.real.swe.RealSWE`)
checks the files out in a fresh bubblewrap sandbox and runs the agent's tool calls there
(``bash``, ``read_file``, ``edit_file``, ``write_file``, ``run_tests``, ``submit``); the
twin is the ``swe`` domain on a world model with grounding, whose hidden state holds the
same files. Both report the files at the end, so one set of ``state`` checks scores an
episode on either; an episode ends when the agent calls ``submit``.

Every task is a change. The plans read what they replace from the file they opened (a
setting's old value, a function's operands), so the
:class:`~simgym.bench.sim2real.ReaderAgent` edits what the world showed it, never what
the task knows. Held-out repositories (:func:`swe_heldout_tasks`) and training ones
(:func:`swe_training_tasks`) draw package, function and parameter names, settings and
changelog lines from disjoint pools.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from simgym.bench.sim2real.plans import (
    Generated,
    Maker,
    file_absent,
    file_is,
)
from simgym.bench.sim2real.tasks import checked_change

SWE_DOMAIN = "swe"
ROOT = "/workspace/repo"
HELDOUT_SEED = 9090  # the held-out repositories; fixed forever
HELDOUT_PREFIX = "sw-heldout-"
TRAIN_PREFIX = "sw-train-"


@dataclass(frozen=True)
class Pools:
    """What a set's repositories are made of; the held-out and training pools share no
    name, so no held-out instruction is a training one."""

    packages: tuple[str, ...]
    settings: tuple[str, ...]  # integer settings in config.py
    totals: tuple[str, ...]  # the function that should add a tax
    bulks: tuple[str, ...]  # the function with the bulk threshold
    amounts: tuple[str, ...]  # parameter names: the price
    quantities: tuple[str, ...]  # parameter names: the quantity
    lines: tuple[str, ...]  # changelog lines


HELDOUT_POOLS = Pools(
    packages=("ledgerly", "parcelkit", "tallyhq"),
    settings=("RETRIES", "TIMEOUT_S", "BATCH_SIZE"),
    totals=("total", "gross"),
    bulks=("bulk", "wholesale"),
    amounts=("price", "amount"),
    quantities=("quantity", "count"),
    lines=("- fixed the tax on invoices", "- faster exports", "- new currency list"),
)
TRAIN_POOLS = Pools(
    packages=(
        "cartwheel",
        "fernbill",
        "quotely",
        "stockroom",
        "tilly",
        "orderbook",
        "pennywise",
        "rebate",
        "vatcheck",
        "shipfast",
    ),
    settings=("MAX_WORKERS", "CACHE_TTL", "PAGE_SIZE", "POOL_SIZE"),
    totals=("with_tax", "checkout_total", "final_price"),
    bulks=("is_bulk", "big_order", "volume_rate"),
    amounts=("cost", "net", "value"),
    quantities=("units", "qty", "items"),
    lines=(
        "- added refunds",
        "- dropped Python 3.8",
        "- clearer errors",
        "- retries on timeouts",
        "- new CSV export",
    ),
)


def swe_world(seed: int, pools: Pools = TRAIN_POOLS) -> dict[str, Any]:
    """One repository, a pure function of ``seed`` and ``pools``: the ``swe`` scenario
    (its files) and the facts its tasks ask about."""
    rng = random.Random(f"sim2real-swe-{seed}")
    pkg = pools.packages[seed % len(pools.packages)]
    settings = {key: rng.randrange(2, 90) for key in pools.settings}
    total, bulk = rng.choice(pools.totals), rng.choice(pools.bulks)
    amount, quantity = rng.choice(pools.amounts), rng.choice(pools.quantities)
    threshold = rng.randrange(5, 50)
    entry = rng.choice(pools.lines)
    config = f'"""Settings of {pkg}."""\n\n' + "".join(f"{k} = {v}\n" for k, v in settings.items())
    pricing = (
        '"""Prices: tax and bulk rates."""\n\n\n'
        f"def {total}({amount}, tax):\n"
        f'    """The {amount} with its tax added."""\n'
        f"    return {amount} - tax\n\n\n"
        f"def {bulk}({quantity}):\n"
        f'    """Whether an order of {threshold} or more gets the bulk rate."""\n'
        f"    return {quantity} > {threshold}\n"
    )
    tests = (
        f"from {pkg}.pricing import {bulk}, {total}\n\n\n"
        f"def test_{total}():\n    assert {total}(100, 20) == 120\n\n\n"
        f"def test_{bulk}():\n    assert {bulk}({threshold})\n"
        f"    assert not {bulk}({threshold - 1})\n"
    )
    files = {
        f"{pkg}/__init__.py": f'"""{pkg}: prices and orders."""\n',
        f"{pkg}/config.py": config,
        f"{pkg}/pricing.py": pricing,
        f"{pkg}/legacy.py": "# The old pricing rules, no longer imported.\nRATES = {}\n",
        "tests/test_pricing.py": tests,
        "CHANGELOG.md": f"# Changelog\n\n## Unreleased\n\n{entry}\n",
    }
    scenario = {
        "repo": f"acme/{pkg}",
        "root": ROOT,
        "files": files,
        "test_command": "python -m pytest -q",
        "failing_tests": [
            f"tests/test_pricing.py::test_{total}",
            f"tests/test_pricing.py::test_{bulk}",
        ],
    }
    facts = {
        "pools": pools,
        "pkg": pkg,
        "files": files,
        "settings": settings,
        "total": total,
        "bulk": bulk,
        "amount": amount,
        "quantity": quantity,
        "threshold": threshold,
    }
    return {"scenario": scenario, "facts": facts}


def _call(name: str, read: dict[str, str] | None = None, **arguments: Any) -> dict[str, Any]:
    step: dict[str, Any] = {"name": name, "arguments": arguments}
    if read:
        step["read"] = read
    return step


SUBMIT = _call("submit")


def _set_setting(rng: random.Random, facts: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    key = rng.choice(facts["pools"].settings)
    old = facts["settings"][key]
    value = rng.choice([v for v in range(2, 120) if v != old])
    path = f"{facts['pkg']}/config.py"
    solution = [
        _call("read_file", {"old": rf"{key} = (\d+)"}, path=path),
        _call("edit_file", path=path, old_str=f"{key} = {{old}}", new_str=f"{key} = {value}"),
        SUBMIT,
    ]
    content = facts["files"][path].replace(f"{key} = {old}\n", f"{key} = {value}\n")
    text = f"In {path}, set {key} to {value}."
    metadata = checked_change([file_is(path, content)], solution)
    metadata["values"] = {"old": str(old)}
    return text, metadata


def _fix_tax(rng: random.Random, facts: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    path, total, amount = f"{facts['pkg']}/pricing.py", facts["total"], facts["amount"]
    solution = [
        _call("read_file", {"a": r"return (\w+) - \w+", "b": r"return \w+ - (\w+)"}, path=path),
        _call("edit_file", path=path, old_str="return {a} - {b}", new_str="return {a} + {b}"),
        SUBMIT,
    ]
    fixed = facts["files"][path].replace(f"return {amount} - tax", f"return {amount} + tax")
    text = f"{total}() in {path} subtracts the tax where it should add it. Fix it."
    metadata = checked_change([file_is(path, fixed)], solution)
    metadata["values"] = {"a": amount, "b": "tax"}
    return text, metadata


def _fix_threshold(rng: random.Random, facts: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    path, bulk, n = f"{facts['pkg']}/pricing.py", facts["bulk"], facts["threshold"]
    quantity = facts["quantity"]
    solution = [
        _call("read_file", {"q": rf"return (\w+) > {n}"}, path=path),
        _call(
            "edit_file", path=path, old_str=f"return {{q}} > {n}", new_str=f"return {{q}} >= {n}"
        ),
        SUBMIT,
    ]
    fixed = facts["files"][path].replace(f"return {quantity} > {n}", f"return {quantity} >= {n}")
    text = f"{bulk}() in {path} should accept orders of {n} or more, but it wants more. Fix it."
    metadata = checked_change([file_is(path, fixed)], solution)
    metadata["values"] = {"q": quantity}
    return text, metadata


def _changelog(rng: random.Random, facts: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    line = rng.choice([x for x in facts["pools"].lines if x not in facts["files"]["CHANGELOG.md"]])
    solution = [_call("bash", command=f"echo '{line}' >> CHANGELOG.md"), SUBMIT]
    text = f"Add the line '{line}' to the end of CHANGELOG.md."
    check = file_is("CHANGELOG.md", facts["files"]["CHANGELOG.md"] + line + "\n")
    return text, checked_change([check], solution)


def _version_module(rng: random.Random, facts: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    version = f"{rng.randrange(0, 4)}.{rng.randrange(0, 20)}.{rng.randrange(0, 10)}"
    path, line = f"{facts['pkg']}/version.py", f'__version__ = "{version}"\n'
    solution = [_call("write_file", path=path, content=line), SUBMIT]
    text = f'Create {path} holding the single line: __version__ = "{version}"'
    return text, checked_change([file_is(path, line)], solution)


def _remove_legacy(rng: random.Random, facts: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    path = f"{facts['pkg']}/legacy.py"
    solution = [_call("bash", command=f"rm {path}"), SUBMIT]
    checks = [
        file_absent(path),
        file_is(f"{facts['pkg']}/config.py", facts["files"][f"{facts['pkg']}/config.py"]),
    ]
    return f"Delete {path}: nothing imports it any more.", checked_change(checks, solution)


# In this order a set's first tasks cover every kind.
SWE_KINDS: dict[str, Maker] = {
    "set_setting": _set_setting,
    "fix_tax": _fix_tax,
    "changelog": _changelog,
    "fix_threshold": _fix_threshold,
    "version_module": _version_module,
    "remove_legacy": _remove_legacy,
}


SWE = Generated(
    swe_world,
    SWE_KINDS,
    SWE_DOMAIN,
    "swe",
    HELDOUT_SEED,
    (HELDOUT_PREFIX, TRAIN_PREFIX),
    (HELDOUT_POOLS, TRAIN_POOLS),
)
swe_heldout_tasks = SWE.heldout  # the two task sets, as the suites take them
swe_training_tasks = SWE.training
