"""``simgym view``: trajectories, sim vs real, GRPO groups and reports in the browser.

Small modules, one job each: :mod:`~simgym.viewer.store` indexes trajectory files into
SQLite (FTS5 search), :mod:`~simgym.viewer.blocks` and :mod:`~simgym.viewer.pages` render HTML,
:mod:`~simgym.viewer.reports` reads safety and fidelity reports, :mod:`~simgym.viewer.app`
serves the pages (FastAPI), :mod:`~simgym.viewer.export` writes them as a static site.
It reads what other parts write; nothing of simgym's imports it but the command line.
"""
