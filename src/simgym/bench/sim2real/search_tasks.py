"""Task sets for sim2real on a real search engine: a company wiki inside an offline index.

The third environment of the experiment (beside the records MCP server and the shell).
Each task carries a ``search`` scenario whose ``documents`` are one fictional company's
internal wiki: a page per team (lead, on-call extension, room), a page per project (owner
team, deadline) and a travel policy. The real backend
(:class:`~simgym.real.search.RealSearch`) adds those pages to its SQLite FTS5 index of the
Python documentation for the episode, so a query meets real BM25 ranking, real FTS5
snippets and thousands of pages that are not the company's; the twin is the ``search``
domain on a world model with grounding, which ranks the scenario's pages itself and lets
the model render the results.

Every task is a lookup scored on the answer: a name, a room, a date or a number that only
that company's wiki holds (``regex`` on the value as a whole token; a number passes only
as the answer's one number). Most need two calls, a search and a page read (the value sits
on the page, not always in a snippet); ``oncall_of_project`` needs two hops, the project's
owner team and then that team's extension. Each plan step may ``read`` a value from what
the engine showed (a URL, a team name), which later steps use as ``{name}``: the
:class:`~simgym.bench.sim2real.ReaderAgent` follows the plan that way.

Held-out companies (:func:`search_heldout_tasks`, one seed, disjoint pools of company,
team and people names) are never trained on; training companies
(:func:`search_training_tasks`) come from other seeds and pools.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from simgym.bench.sim2real.plans import Generated, Maker, number_answer, token_answer

SEARCH_DOMAIN = "search"
HELDOUT_SEED = 7070  # the held-out companies; fixed forever
HELDOUT_PREFIX = "se-heldout-"
TRAIN_PREFIX = "se-train-"
TODAY = "2025-06-02"

PROJECT_WORDS = (
    "ledger rewrite",
    "mobile checkout",
    "data lake",
    "search revamp",
    "billing export",
    "partner portal",
    "log pipeline",
    "access review",
)


@dataclass(frozen=True)
class Pools:
    """The names a set's companies are made of: the held-out and training sets draw from
    disjoint pools, so no held-out instruction names a training company, team or person."""

    companies: tuple[str, ...]
    teams: tuple[str, ...]
    people: tuple[str, ...]


HELDOUT_POOLS = Pools(
    companies=("Quillmere", "Brantwood", "Oskarvik"),
    teams=("heron", "lynx", "otter", "kestrel", "marten", "ibis"),
    people=(
        "Ana Lopes",
        "Bruno Keller",
        "Chiara Neri",
        "Dmitri Volkov",
        "Elif Aydin",
        "Farah Haddad",
        "Goran Petrovic",
        "Hana Sato",
    ),
)
TRAIN_POOLS = Pools(
    companies=(
        "Veltrano",
        "Corrowick",
        "Isenmark",
        "Pellucid",
        "Thornvale",
        "Ardentix",
        "Lumbrook",
        "Saffrey",
        "Kelderwyn",
        "Morrowgate",
        "Dunharrow",
        "Ebbridge",
    ),
    teams=("falcon", "badger", "puffin", "walrus", "gecko", "bison", "raven", "tapir"),
    people=(
        "Iris Moreau",
        "Jonas Berg",
        "Kofi Mensah",
        "Lena Novak",
        "Mateo Ruiz",
        "Nadia Rahman",
        "Oscar Lindqvist",
        "Priya Nair",
        "Quentin Roy",
        "Rosa Ferreira",
    ),
)


def _doc(url: str, title: str, lines: list[str]) -> dict[str, Any]:
    return {"url": url, "title": title, "content": "\n".join(lines) + "\n"}


def search_world(seed: int, pools: Pools = TRAIN_POOLS) -> dict[str, Any]:
    """One company's wiki, a pure function of ``seed`` and ``pools``: the ``search``
    scenario (its pages as documents) and the facts its tasks ask about."""
    rng = random.Random(f"sim2real-search-{seed}")
    company = pools.companies[seed % len(pools.companies)]
    base = f"https://wiki.{company.lower()}.example"
    teams: dict[str, dict[str, Any]] = {}
    for name, lead in zip(rng.sample(pools.teams, 3), rng.sample(pools.people, 3), strict=True):
        teams[name] = {
            "lead": lead,
            "extension": str(rng.randrange(2000, 9999)),
            "room": f"{rng.choice('ABCD')}-{rng.randrange(100, 499)}",
            "url": f"{base}/teams/{name}",
        }
    projects: dict[str, dict[str, Any]] = {}
    for words in rng.sample(PROJECT_WORDS, 3):
        code = f"PRJ-{rng.randrange(1000, 9999)}"
        projects[code] = {
            "name": words,
            "owner": rng.choice(sorted(teams)),
            "deadline": f"2025-{rng.randrange(7, 13):02d}-{rng.randrange(1, 29):02d}",
            "url": f"{base}/projects/{code.lower()}",
        }
    notice = rng.randrange(5, 30)
    documents = []
    for name, team in teams.items():
        owned = [f"{code} ({p['name']})" for code, p in projects.items() if p["owner"] == name]
        lines = [
            f"## {name.title()} team",
            f"The {name.title()} team at {company}.",
            f"Lead: {team['lead']}",
            f"On-call extension: {team['extension']}",
            f"Room: {team['room']}",
            f"Projects: {', '.join(owned) or 'none'}",
        ]
        documents.append(_doc(team["url"], f"{name.title()} team | {company} wiki", lines))
    for code, project in projects.items():
        lines = [
            f"## {code}: {project['name']}",
            f"Project {code} ({project['name']}) at {company}.",
            f"Owner team: {project['owner'].title()}",
            f"Deadline: {project['deadline']}",
        ]
        title = f"{code} {project['name']} | {company} wiki"
        documents.append(_doc(project["url"], title, lines))
    policy = [
        "## Travel policy",
        f"Trips for {company} must be booked at least {notice} days ahead.",
        "Receipts go to the finance team within a month.",
    ]
    documents.append(_doc(f"{base}/policies/travel", f"Travel policy | {company} wiki", policy))
    scenario = {"current_date": TODAY, "documents": documents}
    facts = {"company": company, "teams": teams, "projects": projects, "notice": notice}
    return {"scenario": scenario, "facts": facts}


def _search(query: str, **read: str) -> dict[str, Any]:
    return {"name": "web_search", "arguments": {"queries": [query]}, "read": read}


def _open(url: str, **read: str) -> dict[str, Any]:
    return {"name": "web_extractor", "arguments": {"url": url}, "read": read}


def _url_of(kind: str) -> str:
    """Reads the first result URL of a ``kind`` page (``teams``, ``projects``)."""
    return rf"URL: (https?://\S+/{kind}/\S+)"


def _page_fact(section: str, label: str, value: str, question: str) -> Maker:
    """A lookup of one line on a team's or a project's page (``section`` ``teams`` or
    ``projects``): search for it, open the page, read ``label: VALUE`` there; ``value``
    is the fact's key, ``owner`` answered as the team's name."""
    pattern = rf"{label}: (\S+)" if value != "lead" else rf"{label}: (.+)"

    def make(rng: random.Random, facts: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        company, name = facts["company"], rng.choice(sorted(facts[section]))
        page = facts[section][name]
        query = f"{company} {name} team" if section == "teams" else f"{company} {name}"
        solution = [
            _search(query, url=_url_of(section)),
            _open("{url}", value=pattern),
            {"answer": "{value}"},
        ]
        shown = name.title() if section == "teams" else name
        text = question.format(name=shown, company=company)
        answer = page[value].title() if value == "owner" else page[value]
        metadata = token_answer(answer, solution)
        metadata["values"] = {"url": page["url"]}
        return text, metadata

    return make


def _oncall_of_project(rng: random.Random, facts: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    company, code = facts["company"], rng.choice(sorted(facts["projects"]))
    owner = facts["projects"][code]["owner"]
    team = facts["teams"][owner]
    solution = [
        _search(f"{company} {code}", url=_url_of("projects")),
        _open("{url}", team=r"Owner team: (\w+)"),
        _search(f"{company} {{team}} team", team_url=_url_of("teams")),
        _open("{team_url}", value=r"On-call extension: (\d+)"),
        {"answer": "{value}"},
    ]
    text = (
        f"Which on-call extension should I call about project {code} at {company}? "
        "It is the extension of the team that owns the project."
    )
    metadata = number_answer(int(team["extension"]), solution)
    metadata["values"] = {
        "url": facts["projects"][code]["url"],
        "team": owner.title(),
        "team_url": team["url"],
    }
    return text, metadata


def _travel_notice(rng: random.Random, facts: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    company = facts["company"]
    solution = [
        _search(f"{company} travel policy", url=r"URL: (https?://\S+/policies/travel)"),
        _open("{url}", value=r"at least (\d+) days"),
        {"answer": "{value}"},
    ]
    text = f"How many days ahead must trips be booked under {company}'s travel policy?"
    metadata = number_answer(facts["notice"], solution)
    metadata["values"] = {"url": f"https://wiki.{company.lower()}.example/policies/travel"}
    return text, metadata


# In this order a set's first tasks cover every kind.
SEARCH_KINDS: dict[str, Maker] = {
    "team_lead": _page_fact("teams", "Lead", "lead", "Who leads the {name} team at {company}?"),
    "deadline": _page_fact(
        "projects",
        "Deadline",
        "deadline",
        "What is the deadline of project {name} at {company}? Answer as YYYY-MM-DD.",
    ),
    "team_room": _page_fact(
        "teams", "Room", "room", "In which room does {company}'s {name} team sit?"
    ),
    "oncall_of_project": _oncall_of_project,
    "travel_notice": _travel_notice,
    "team_extension": _page_fact(
        "teams",
        "On-call extension",
        "extension",
        "What is the on-call extension of the {name} team at {company}?",
    ),
    "project_owner": _page_fact(
        "projects",
        "Owner team",
        "owner",
        "Which team owns project {name} at {company}? Give the team's name.",
    ),
}


SEARCH = Generated(
    search_world,
    SEARCH_KINDS,
    SEARCH_DOMAIN,
    "search",
    HELDOUT_SEED,
    (HELDOUT_PREFIX, TRAIN_PREFIX),
    (HELDOUT_POOLS, TRAIN_POOLS),
)
search_heldout_tasks = SEARCH.heldout  # the two task sets, as the suites take them
search_training_tasks = SEARCH.training
