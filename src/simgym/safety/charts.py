"""Grouped horizontal bar charts as inline SVG: rates from 0 to 1, one row of bars per
group (a risk category, a domain), one bar per series (violation rate, pass^k, ...).

Written as text so a report is one HTML file that opens anywhere: no script, no fonts or
images to fetch, and each bar carries a ``<title>`` a browser shows on hover. A missing
value (a rate with nothing to count) draws no bar and is labelled ``-``.
"""

from __future__ import annotations

import html

LABEL_W = 150  # room for a group's name
PLOT_W = 360  # the 0..1 axis
VALUE_W = 40  # a bar's number after it
BAR_H = 9
GROUP_GAP = 8
LEGEND_H = 22
AXIS_H = 18


def bar_chart(
    title: str,
    groups: list[tuple[str, list[float | None]]],
    series: list[tuple[str, str]],
) -> str:
    """An SVG figure: ``groups`` are (name, one value per series), ``series`` are
    (legend label, colour). Values are rates in [0, 1] (clamped)."""
    esc = html.escape
    n = max(len(series), 1)
    group_h = n * BAR_H + GROUP_GAP
    width = LABEL_W + PLOT_W + VALUE_W
    height = LEGEND_H + len(groups) * group_h + AXIS_H
    out = [
        f"<figure><figcaption>{esc(title)}</figcaption>",
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' role='img' aria-label='{esc(title, quote=True)}' "
        "font-family='sans-serif' font-size='11'>",
    ]
    x = LABEL_W
    for label, colour in series:  # the legend, in one line above the plot
        out.append(f"<rect x='{x}' y='4' width='10' height='10' fill='{esc(colour)}'/>")
        out.append(f"<text x='{x + 14}' y='13'>{esc(label)}</text>")
        x += 22 + 6 * len(label)
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):  # grid lines and the axis labels below
        gx = LABEL_W + tick * PLOT_W
        out.append(
            f"<line x1='{gx:.1f}' y1='{LEGEND_H}' x2='{gx:.1f}' y2='{height - AXIS_H}' "
            "stroke='#ddd'/>"
        )
        out.append(
            f"<text x='{gx:.1f}' y='{height - 5}' text-anchor='middle' fill='#555'>{tick:g}</text>"
        )
    for row, (name, values) in enumerate(groups):
        top = LEGEND_H + row * group_h
        middle = top + n * BAR_H / 2 + 4
        out.append(f"<text x='{LABEL_W - 6}' y='{middle:.1f}' text-anchor='end'>{esc(name)}</text>")
        for i, ((label, colour), value) in enumerate(zip(series, values, strict=False)):
            y = top + i * BAR_H
            shown = "-" if value is None else f"{value:.2f}"
            if value is not None:
                w = max(min(float(value), 1.0), 0.0) * PLOT_W
                out.append(
                    f"<rect x='{LABEL_W}' y='{y}' width='{w:.1f}' height='{BAR_H - 1}' "
                    f"fill='{esc(colour)}'><title>{esc(name)}: {esc(label)} {shown}"
                    "</title></rect>"
                )
                tx = LABEL_W + w + 3
            else:
                tx = LABEL_W + 3
            out.append(
                f"<text x='{tx:.1f}' y='{y + BAR_H - 1}' font-size='9' fill='#333'>{shown}</text>"
            )
    out.append("</svg></figure>")
    return "\n".join(out)
