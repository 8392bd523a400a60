"""``simgym view --export DIR``: the viewer's pages written as a static site (flat files,
relative links), to share or attach to a run. Filters and search need the server; the
static list is paged in file order."""

from __future__ import annotations

from pathlib import Path

from simgym.viewer.app import Viewer, asset
from simgym.viewer.blocks import e
from simgym.viewer.pages import (
    PER_PAGE,
    Links,
    compare_list_page,
    compare_page,
    episode_page,
    group_page,
    groups_page,
    layout,
    list_page,
    report_page,
    reports_page,
)
from simgym.viewer.store import Filters, UnreadableEpisode


def export_site(viewer: Viewer, out: str | Path) -> int:
    """Write every page under ``out``; the number of files written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    index = viewer.index
    index.refresh()
    links = Links(static=True)
    written = 0

    def write(name: str, text: str | bytes) -> None:
        nonlocal written
        path = out / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        written += 1

    for name in ("viewer.css", "viewer.js"):
        write(name, asset(name))
    everything = Filters()
    total = index.count()
    pages = max(1, -(-total // PER_PAGE))
    for page in range(1, pages + 1):
        html = list_page(index, everything, page, links, live=False)
        write(links.episodes(page=page), html)
        for row in index.page(everything, page, PER_PAGE):
            try:
                trajectory = index.trajectory(row["id"])
            except UnreadableEpisode as exc:  # listed from what it holds; its page says why
                body = f'<h1>Episode not shown</h1><p class="err">{e(str(exc))}</p>'
                write(links.episode(row["id"]), layout("not shown", body, links))
                continue
            if trajectory is not None:
                write(links.episode(row["id"]), episode_page(index, row["id"], trajectory, links))
    write(links.compare_list(), compare_list_page(index, links))
    for sim, real in index.pairs():
        for row in index.compared(sim, real, 1, 10**9):
            try:
                a, b = index.trajectory(row["sim"]), index.trajectory(row["real"])
            except UnreadableEpisode:  # the episode's own page says why
                continue
            if a is not None and b is not None:
                write(
                    links.compare(row["sim"], row["real"]),
                    compare_page(index, row["sim"], row["real"], a, b, links),
                )
    write(links.groups(), groups_page(index, links))
    for group in index.groups(1, 10**9):
        members = index.group_members(group["group_id"])
        write(links.group(group["group_id"]), group_page(index, group["group_id"], members, links))
    write(links.reports(), reports_page([p.name for p in viewer.reports], links))
    for number in range(len(viewer.reports)):
        write(links.report(number), report_page(*viewer.report(number, links), links))
    return written
