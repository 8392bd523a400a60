"""Intervals for success rates: Wilson's score interval for one rate, Newcombe's hybrid
score interval for the difference of two (the simulator-overfitting gap), and a paired,
task-level bootstrap of that difference.

Both stay inside [0, 1] (or [-1, 1]) and behave at 0 and n successes, where the normal
approximation gives a zero-width interval; that matters here, where a small policy often
solves nothing.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

Z95 = 1.959963984540054  # the two-sided 95% normal quantile


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for ``successes`` out of ``n`` (``(0, 1)`` when ``n`` is 0)."""
    if n <= 0:
        return (0.0, 1.0)
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be between 0 and n={n}, not {successes}")
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # clamp rounding noise: at 0 or n successes one end is exactly 0 or 1
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return (low, high)


def newcombe_difference(
    s1: int, n1: int, s2: int, n2: int, z: float = Z95
) -> tuple[float, float, float]:
    """``(p1 - p2, low, high)``: Newcombe's method 10 (each rate's Wilson interval,
    combined). It treats the samples as independent; for the same tasks on both sides it
    is on the wide (cautious) side when outcomes agree across sides."""
    p1 = s1 / n1 if n1 else 0.0
    p2 = s2 / n2 if n2 else 0.0
    l1, u1 = wilson(s1, n1, z)
    l2, u2 = wilson(s2, n2, z)
    diff = p1 - p2
    low = diff - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = diff + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return (diff, max(-1.0, low), min(1.0, high))


def paired_task_bootstrap(
    sim: Mapping[str, Sequence[int]],
    real: Mapping[str, Sequence[int]],
    *,
    resamples: int = 10_000,
    seed: int = 0,
) -> tuple[float, float, float, int]:
    """``(gap, low, high, tasks)``: sim minus real success over the tasks both sides ran,
    with a 95% percentile bootstrap that resamples whole tasks.

    The same tasks run on both sides, and a task's k samples are not independent of each
    other, so the task, not the episode, is the unit: each task contributes its own sim
    rate minus its real rate. When every task's difference is the same (a policy that
    solves nothing anywhere) the interval has no width; Newcombe's is the cautious one
    to read then.
    """
    shared = sorted(set(sim) & set(real))
    if not shared:
        return (0.0, -1.0, 1.0, 0)
    diffs = [
        sum(sim[t]) / len(sim[t]) - sum(real[t]) / len(real[t])
        for t in shared
        if len(sim[t]) and len(real[t])
    ]
    if not diffs:
        return (0.0, -1.0, 1.0, 0)
    n = len(diffs)
    draw = random.Random(seed)
    means = sorted(sum(draw.choices(diffs, k=n)) / n for _ in range(resamples))
    low = means[int(0.025 * (resamples - 1))]
    high = means[int(math.ceil(0.975 * (resamples - 1)))]
    return (sum(diffs) / n, low, high, n)
