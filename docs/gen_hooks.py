"""MkDocs hook: list the generated results pages under "Results" in the navigation.

docs/gen_pages.py writes one ``results/<name>.md`` per benchmark folder at build time, so
the names are not known when mkdocs.yml is written; this adds each to the nav (after the
pages generators have run, before the nav is validated).
"""

from __future__ import annotations

from typing import Any


def on_files(files: Any, config: Any) -> Any:
    generated = sorted(
        f.src_uri
        for f in files
        if f.src_uri.startswith("results/")
        and f.src_uri.endswith(".md")
        and f.src_uri not in ("results/index.md", "results/history.md")
    )
    for section in config["nav"]:
        if isinstance(section, dict) and "Results" in section:
            entries = section["Results"]
            known = {next(iter(e.values())) if isinstance(e, dict) else e for e in entries}
            for uri in generated:
                if uri not in known:
                    name = uri.removeprefix("results/").removesuffix(".md")
                    entries.insert(len(entries) - 1, {name: uri})
    return files
