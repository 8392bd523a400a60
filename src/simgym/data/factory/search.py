"""The search generator: the FTS5 index over Python's documentation plus a few generated
internal pages; programs search (one or several queries, typos, nonsense), open pages
found in earlier results, scenario pages and guessed URLs.
"""

from __future__ import annotations

import random
from datetime import date, timedelta
from typing import Any

from simgym.core.types import Task
from simgym.data.factory.common import (
    CODE_WORDS,
    EpisodePlan,
    FactoryError,
    Program,
    _call,
    _length,
    _weighted,
)
from simgym.data.factory.context import FactoryContext, SearchTopic

HOW_TO = (
    "parse command line arguments",
    "read a csv file",
    "pretty print json",
    "sort a list of dictionaries by key",
    "measure elapsed time",
    "create a temporary directory",
    "compress a file with gzip",
    "run a subprocess and capture output",
    "match a regular expression",
    "count items in a list",
    "insert into a sorted list",
    "copy a directory tree",
    "format a date as iso 8601",
    "generate a random password",
    "read a config ini file",
    "serialize objects to disk",
)


def _wiki_documents(rng: random.Random, today: date) -> tuple[list[dict[str, Any]], list[str]]:
    """A few internal pages of a made-up company (and words that find them)."""
    company = rng.choice(("acme", "initech", "globex", "hooli"))
    codename = rng.choice(CODE_WORDS).title()
    docs = []
    words = [codename]
    kinds = rng.sample(("release", "howto", "policy", "faq"), rng.randint(1, 3))
    for kind in kinds:
        day = today - timedelta(days=rng.randint(3, 400))
        if kind == "release":
            version = f"{rng.randint(1, 4)}.{rng.randint(0, 9)}"
            changes = rng.sample(
                ("faster start-up", "a new export to CSV", "single sign-on", "dark mode",
                 "fewer memory leaks", "a REST API for reports", "audit logging"),
                3,
            )  # fmt: skip
            docs.append(
                {
                    "url": f"https://wiki.{company}.example/{codename.lower()}/release-{version}",
                    "title": f"{codename} {version} release notes",
                    "date": day.isoformat(),
                    "content": f"# {codename} {version}\n\nReleased {day.isoformat()}.\n\n"
                    "## Changes\n\n"
                    + "".join(f"- {c}\n" for c in changes)
                    + f"\n## Upgrading\n\nRun `{codename.lower()} migrate` after installing.\n",
                }
            )
            words.append(f"{codename} {version}")
        elif kind == "howto":
            host = rng.choice(("prod-1", "eu-west", "staging"))
            docs.append(
                {
                    "url": f"https://wiki.{company}.example/{codename.lower()}/deploy",
                    "title": f"How to deploy {codename}",
                    "date": day.isoformat(),
                    "content": f"# Deploying {codename}\n\n1. Build the image with `make image`.\n"
                    "2. Push it to the registry.\n"
                    f"3. Run `deploy {codename.lower()} --target {host}`.\n"
                    "4. Watch the dashboard for five minutes.\n",
                }
            )
            words.append(f"deploy {codename}")
        elif kind == "policy":
            hours = rng.choice((24, 48, 72))
            docs.append(
                {
                    "url": f"https://wiki.{company}.example/policies/on-call",
                    "title": "On-call policy",
                    "date": day.isoformat(),
                    "content": "# On-call policy\n\n"
                    f"Every engineer is on call one week in {rng.randint(4, 8)}.\n"
                    f"Incidents must have a written review within {hours} hours.\n",
                }
            )
            words.append("on-call policy")
        else:
            docs.append(
                {
                    "url": f"https://wiki.{company}.example/{codename.lower()}/faq",
                    "title": f"{codename} FAQ",
                    "date": day.isoformat(),
                    "content": f"# {codename} FAQ\n\n## Who owns {codename}?\n\n"
                    f"The {rng.choice(('platform', 'data', 'payments'))} team.\n\n"
                    f"## Where are the logs?\n\nIn the `{codename.lower()}-logs` bucket.\n",
                }
            )
            words.append(f"{codename} faq")
    return docs, words


def plan_search(rng: random.Random, context: FactoryContext, plan_id: str) -> EpisodePlan:
    if not context.search_topics:
        raise FactoryError("the search generator needs the index's pages (FactoryContext)")
    today = date(2024, 1, 1) + timedelta(days=rng.randint(0, 700))
    docs, doc_words = _wiki_documents(rng, today) if rng.random() < 0.5 else ([], [])
    scenario = {
        "engine": rng.choice(("Python Docs Search", "Python Docs Search", "DocSearch", "Google")),
        "current_date": today.isoformat(),
        "results_per_query": rng.choice((3, 3, 4, 5)),
        "documents": docs,
    }
    libraries = [t for t in context.search_topics if t.module and t.names]
    # Mostly the modules people look up (top-level ones), sometimes a submodule.
    common = [t for t in libraries if "." not in t.module] or libraries
    focus = rng.choice(common if rng.random() < 0.85 else libraries)
    instruction = rng.choice(
        (
            f"How do I use {focus.module}.{rng.choice(focus.names)}?",
            f"How can I {rng.choice(HOW_TO)} in Python?",
            f"What does the Python documentation say about {focus.module}?",
            f"Find the internal notes about {doc_words[0]}."
            if doc_words
            else "Which module parses JSON?",
        )
    )
    length = _length(rng)
    program_seed = rng.getrandbits(64)
    topics = [t for t in context.search_topics if "." not in t.module] or context.search_topics

    def program(first: str) -> Program:
        return _search_program(random.Random(program_seed), topics, focus, docs, doc_words, length)

    task = Task(id=plan_id, instruction=instruction, domain="search", scenario=scenario)
    return EpisodePlan(plan_id, "search", 0, task, program, length)


def _query_for(rng: random.Random, topic: SearchTopic) -> str:
    if topic.module and topic.names:
        name = rng.choice(topic.names)
        return rng.choice(
            (f"{topic.module} {name}", f"python {topic.module} {name}", name, f"{name} example",
             f"{topic.module} module")
        )  # fmt: skip
    words = [w.strip("\"'`()") for w in topic.title.split()]
    return " ".join(w for w in words if w).lower() or topic.title


def _typo(rng: random.Random, text: str) -> str:
    if len(text) < 4:
        return text + text[-1:]
    at = rng.randrange(1, len(text) - 2)
    return text[:at] + text[at + 1] + text[at] + text[at + 2 :]


def _search_program(
    rng: random.Random,
    topics: list[SearchTopic],
    focus: SearchTopic,
    docs: list[dict[str, Any]],
    doc_words: list[str],
    length: int,
) -> Program:
    import re

    moves = {"search": 30.0, "multi": 10.0, "open": 28.0, "how": 8.0, "guess": 6.0,
             "typo": 5.0, "nonsense": 3.0, "doc_query": 6.0 if doc_words else 0.0,
             "doc_open": 4.0 if docs else 0.0}  # fmt: skip
    found: list[str] = []
    for step in range(length):
        kind = "search" if step == 0 else _weighted(rng, moves)
        if kind == "open" and not found:
            kind = "search"
        if kind == "search":
            topic = focus if rng.random() < 0.5 else rng.choice(topics)
            action = _call("web_search", queries=[_query_for(rng, topic)])
        elif kind == "multi":
            picked = [_query_for(rng, rng.choice(topics)) for _ in range(rng.randint(2, 3))]
            action = _call("web_search", queries=list(dict.fromkeys(picked)))
        elif kind == "how":
            action = _call("web_search", queries=[f"how to {rng.choice(HOW_TO)} python"])
        elif kind == "typo":
            action = _call("web_search", queries=[_typo(rng, _query_for(rng, focus))])
        elif kind == "nonsense":
            action = _call(
                "web_search",
                queries=[rng.choice(("qzxv frobnicate", "zzyzx quux", "flibbertigibbet api"))],
            )
        elif kind == "doc_query":
            action = _call("web_search", queries=[rng.choice(doc_words)])
        elif kind == "doc_open":
            action = _call("web_extractor", url=rng.choice(docs)["url"])
        elif kind == "guess":
            word = rng.choice(focus.names or ("tutorial",)).lower()
            url = rng.choice(
                (
                    f"https://docs.python.org/3/library/{word}.html",
                    f"https://docs.python.org/3/library/{focus.module or 'os'}-tutorial.html",
                    "https://docs.python.org/3/howto/index.html",
                    f"https://example.com/blog/{word}-tips",
                )
            )
            action = _call("web_extractor", url=url)
        else:
            recent = found[-5:] if rng.random() < 0.7 else found
            arguments: dict[str, Any] = {"url": rng.choice(recent)}
            if rng.random() < 0.4:
                arguments["goal"] = rng.choice(
                    ("an example", "the parameters", "what it returns", "whether it is deprecated")
                )
            action = _call("web_extractor", **arguments)
        observation = yield action
        found += [
            u for u in re.findall(r"^URL: (\S+)", observation, re.MULTILINE) if u not in found
        ]
    return rng.choice(
        (
            f"See the {focus.module or 'Python'} documentation.",
            "The docs above answer it.",
            "I could not find a definite answer.",
        )
    )
