"""Intervals for success rates: Wilson's score interval for one rate, and Newcombe's
hybrid score interval for the difference of two (the simulator-overfitting gap).

Both stay inside [0, 1] (or [-1, 1]) and behave at 0 and n successes, where the normal
approximation gives a zero-width interval; that matters here, where a small policy often
solves nothing.
"""

from __future__ import annotations

import math

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
