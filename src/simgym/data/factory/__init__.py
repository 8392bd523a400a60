"""The trajectory factory: real transitions at volume, for training world models.

``simgym record`` runs hand-written episodes; the factory writes its own. For each domain
it draws a randomized, realistic scenario and a randomized but sensible action program,
runs the program against the domain's real backend, and keeps the trajectory:

* **terminal**: a home directory with data exports, logs, a small Python project,
  configs, notes and scripts, in a bubblewrap sandbox with a tmux shell; programs
  explore, query, create, edit, delete, use git and interactive programs, and fail on
  purpose (typos, missing files, permission errors).
* **swe**: a small Python package with unittest tests and sometimes an injected bug, in a
  sandbox; programs read, list, run tests, fix or introduce bugs, add modules, misuse the
  file tools, and usually submit.
* **mcp**: the bundled customer-records MCP server on a database seeded afresh for each
  episode; programs search, read, update emails (valid, invalid, taken), open tickets and
  ask about customers that do not exist.
* **search**: the FTS5 index over Python's documentation plus a few generated internal
  pages; programs search (one or several queries, typos, nonsense), open pages found in
  earlier results, scenario pages and guessed URLs.
* **web**: generated static sites (shop, blog, help center, account portal) in headless
  Chromium; programs follow a task (check out, comment, contact support, sign in) mixed
  with wandering: links, forms, selects, checkboxes, history, tabs, bad ids, blocked hosts.

Programs are generators: they get each observation and yield the next action, so they
can act on what the world showed (open a URL from the results, click the id the page
gave the button). Everything is drawn from ``random.Random`` seeded by the run's seed,
the domain and the episode's number, so a plan is a pure function of those.

:func:`arun_factory` runs episodes on the real backends with bounded concurrency (one
backend per in-flight episode, reused across its episodes), appends every episode to
``OUT/raw.jsonl`` as it ends (a rerun skips the episode ids already there), and stops
when every domain has its share of transitions. :func:`finalize` then drops duplicate
episodes (same scenario, same actions), splits by a hash of the episode id (never by
turn) into ``train.jsonl``/``val.jsonl``/``test.jsonl`` and writes ``manifest.json``.
"""

from simgym.data.factory.backends import backend_problems, factory_limits
from simgym.data.factory.common import (
    DEFAULT_SPLIT,
    DOMAINS,
    FORMAT,
    MANIFEST_FILE,
    RAW_FILE,
    SPLITS,
    EpisodePlan,
    FactoryError,
    Program,
    ProgramFactory,
)
from simgym.data.factory.config import FactoryConfig
from simgym.data.factory.context import FactoryContext, SearchTopic, search_topics
from simgym.data.factory.dataset import finalize, read_split
from simgym.data.factory.mcp import plan_mcp, records_state
from simgym.data.factory.plans import PLANNERS, episode_id, plan_episode
from simgym.data.factory.records import (
    EpisodeRecord,
    RawScan,
    Tally,
    episode_hash,
    scan_raw,
    split_of,
)
from simgym.data.factory.schedule import EpisodeTimeout, arun_factory, quotas_for, run_factory
from simgym.data.factory.schedule import _stamp as _stamp
from simgym.data.factory.search import plan_search
from simgym.data.factory.sites import Site, make_site, write_sites
from simgym.data.factory.swe import SWE_UNITS, plan_swe
from simgym.data.factory.swe import _Unit as _Unit
from simgym.data.factory.swe import _unit_test_file as _unit_test_file
from simgym.data.factory.terminal import plan_terminal
from simgym.data.factory.web import plan_web

__all__ = [
    "DEFAULT_SPLIT",
    "DOMAINS",
    "EpisodePlan",
    "EpisodeRecord",
    "EpisodeTimeout",
    "FORMAT",
    "FactoryConfig",
    "FactoryContext",
    "FactoryError",
    "MANIFEST_FILE",
    "PLANNERS",
    "Program",
    "ProgramFactory",
    "RAW_FILE",
    "RawScan",
    "SPLITS",
    "SWE_UNITS",
    "SearchTopic",
    "Site",
    "Tally",
    "arun_factory",
    "backend_problems",
    "episode_hash",
    "episode_id",
    "factory_limits",
    "finalize",
    "make_site",
    "plan_episode",
    "plan_mcp",
    "plan_search",
    "plan_swe",
    "plan_terminal",
    "plan_web",
    "quotas_for",
    "read_split",
    "records_state",
    "run_factory",
    "scan_raw",
    "search_topics",
    "split_of",
    "write_sites",
]
