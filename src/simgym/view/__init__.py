"""``simgym view``: trajectories, sim vs real, GRPO groups and reports in the browser.

Small modules, one job each: :mod:`~simgym.view.store` indexes trajectory files into
SQLite (FTS5 search), :mod:`~simgym.view.blocks` and :mod:`~simgym.view.pages` render HTML,
:mod:`~simgym.view.reports` reads safety and fidelity reports, :mod:`~simgym.view.app`
serves the pages (FastAPI), :mod:`~simgym.view.export` writes them as a static site.
It reads what other parts write; nothing of simgym's imports it but the command line.
"""
