"""Rule metrics: how close a predicted observation is to the real one, without a judge.

Every metric compares the parsed prediction with the real observation (both without the
``**Environment Observation:**`` header). A metric that does not apply to a row is
``None`` and is left out of averages, never counted as a pass:

* ``exact_match``: 1.0 when the texts are equal up to trailing spaces and blank edges.
* ``edit_similarity``: 1 - indel distance / (len(a) + len(b)) = 2 LCS / (len(a) +
  len(b)), in [0, 1]: the edit distance that counts insertions and deletions, normalized.
  Exact, by a bit-parallel LCS (rapidfuzz computes the same number faster when it is
  installed). Texts are cut at 20,000 characters.
* ``line_f1``: F1 of the multisets of non-blank lines (trailing spaces ignored).
* ``json_valid`` / ``json_key_overlap``: only when the real observation is a JSON object
  or array: whether the prediction parses, and the Jaccard overlap of key paths.
* ``format_ok``: the simgym domain's own format check (``check_observation``), when the
  row's domain is registered, an action can be read from the prompt, and the real
  observation passes the check itself (otherwise the check does not fit the row).
* ``length_ratio``: predicted length / real length (None when the real one is empty).
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from typing import Any

from simgym.core import contract

try:  # optional: the same number, computed in C
    from rapidfuzz.distance import Indel as _Indel
except ImportError:  # pragma: no cover - depends on the environment
    _Indel = None

EDIT_METHOD = "indel-rapidfuzz" if _Indel is not None else "indel-bitparallel"
MAX_EDIT_CHARS = 20_000
METRIC_NAMES = (
    "exact_match",
    "edit_similarity",
    "line_f1",
    "json_valid",
    "json_key_overlap",
    "format_ok",
    "length_ratio",
)
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\n(.*)\n```$", re.DOTALL)


def normalize(text: str) -> str:
    """Unify line ends, drop trailing spaces on each line and blank lines at the edges."""
    lines = (text or "").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).strip("\n")


def exact_match(prediction: str, reference: str) -> float:
    return float(normalize(prediction) == normalize(reference))


def edit_similarity(prediction: str, reference: str) -> float:
    a = normalize(prediction)[:MAX_EDIT_CHARS]
    b = normalize(reference)[:MAX_EDIT_CHARS]
    if not a and not b:
        return 1.0
    if _Indel is not None:
        return float(_Indel.normalized_similarity(a, b))
    return 2 * lcs_length(a, b) / (len(a) + len(b))


def lcs_length(a: str, b: str) -> int:
    """Length of the longest common subsequence, bit-parallel (Allison-Dix / Hyyro):
    one pass over the shorter text, each step a few operations on integers as wide as
    the longer one, which Python runs in C. 20,000 x 20,000 characters take ~50 ms, where
    the textbook table would take minutes."""
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return 0
    masks: dict[str, int] = {}
    for i, ch in enumerate(a):
        masks[ch] = masks.get(ch, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for ch in b:
        u = v & masks.get(ch, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def line_f1(prediction: str, reference: str) -> float:
    pred = Counter(line for line in normalize(prediction).split("\n") if line.strip())
    ref = Counter(line for line in normalize(reference).split("\n") if line.strip())
    if not pred and not ref:
        return 1.0
    common = sum((pred & ref).values())
    if common == 0:
        return 0.0
    precision = common / sum(pred.values())
    recall = common / sum(ref.values())
    return 2 * precision * recall / (precision + recall)


_NOT_JSON = object()


def parse_json(text: str) -> Any:
    """The JSON value of ``text`` (a surrounding code fence is allowed), or ``_NOT_JSON``."""
    body = normalize(text)
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    try:
        return json.loads(body)
    except (json.JSONDecodeError, ValueError):
        return _NOT_JSON


def key_paths(value: Any, prefix: str = "") -> set[str]:
    """Every key path in a JSON value: ``a``, ``a.b``, ``items[].id``."""
    paths: set[str] = set()
    if isinstance(value, dict):
        for key, child in value.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            paths.add(path)
            paths |= key_paths(child, path)
    elif isinstance(value, list):
        for child in value:
            paths |= key_paths(child, f"{prefix}[]")
    return paths


def json_metrics(prediction: str, reference: str) -> tuple[float | None, float | None]:
    """``(json_valid, json_key_overlap)``; both None unless the reference is an object or
    array (a bare number or string parses as JSON too, but is not a JSON observation)."""
    ref = parse_json(reference)
    if not isinstance(ref, dict | list):
        return None, None
    pred = parse_json(prediction)
    valid = float(pred is not _NOT_JSON)
    ref_paths = key_paths(ref)
    if not ref_paths:
        return valid, None
    pred_paths = key_paths(pred) if isinstance(pred, dict | list) else set()
    return valid, len(ref_paths & pred_paths) / len(ref_paths | pred_paths)


def length_ratio(prediction: str, reference: str) -> float | None:
    ref = len(normalize(reference))
    if ref == 0:
        return 1.0 if not normalize(prediction) else None
    return len(normalize(prediction)) / ref


def format_check(
    prediction: str, reference: str, domain: str, current_prompt: str
) -> tuple[float | None, list[str], str | None]:
    """``(format_ok, problems, why_skipped)`` from the simgym domain's format check."""
    from simgym.core.domain import get_domain
    from simgym.core.errors import SimgymError
    from simgym.core.types import Action

    try:
        spec = get_domain(domain)
    except SimgymError:
        return None, [], f"no simgym domain named {domain!r}"
    action_text = contract.action_text_of(current_prompt or "").strip()
    fenced = _FENCE.match(action_text)
    if fenced:
        action_text = fenced.group(1).strip()
    try:
        scenario = _default_scenario(domain)
        action = Action.parse(action_text)
    except Exception as exc:  # any unreadable action: the check cannot run
        return None, [], f"no action could be read from the prompt ({exc})"
    try:
        action = spec.validate_action(action, scenario)
    except Exception:
        pass  # the benchmark's world is not our default scenario; check the raw action
    try:
        if spec.check_observation(reference, action, scenario):
            return None, [], "the real observation fails the check too"
        problems = list(spec.check_observation(prediction, action, scenario))
    except Exception as exc:  # a checker that cannot handle this action
        return None, [], f"the check does not apply ({type(exc).__name__})"
    return float(not problems), problems, None


@functools.lru_cache(maxsize=64)
def _default_scenario(domain: str) -> Any:
    """The domain's default world, built once: some validate JSON schemas (~10 ms)."""
    from simgym.core.domain import get_domain

    return get_domain(domain).scenario(None)


def rule_metrics(
    prediction: str,
    reference: str,
    *,
    domain: str | None = None,
    current_prompt: str = "",
) -> dict[str, Any]:
    """All rule metrics for one row (see the module docstring)."""
    valid, overlap = json_metrics(prediction, reference)
    if domain:
        ok, problems, skipped = format_check(prediction, reference, domain, current_prompt)
    else:
        ok, problems, skipped = None, [], "no domain"
    return {
        "exact_match": exact_match(prediction, reference),
        "edit_similarity": round(edit_similarity(prediction, reference), 6),
        "line_f1": round(line_f1(prediction, reference), 6),
        "json_valid": valid,
        "json_key_overlap": None if overlap is None else round(overlap, 6),
        "format_ok": ok,
        "format_problems": problems,
        "format_skipped": skipped,
        "length_ratio": None if (r := length_ratio(prediction, reference)) is None else round(r, 6),
    }
