"""Grounding for the search domain: the scenario's pages are the part of the web simgym
knows, so the world model is told which of them a query finds and what a page says.

* ``web_search``: per query, the scenario documents that match it (ranked BM25-style on
  title, snippet and text, title counting triple) become facts: URL, title, date,
  snippet. The prompt promises that these pages "rank first when they match", so when
  one page clearly wins a query, strict mode expects its URL in that query's results,
  and rewrites the model's answer with the known pages first, as the index holds them,
  then the open-web results it added. When the known pages fill every query's results
  (or the web is closed), the answer is decided and becomes the exact observation.
* ``web_extractor`` of a scenario document: facts are its title and text. Without a
  goal the page is fully determined (``# Title``, a blank line, the text, as the prompt
  and ``_check_page`` describe it) and becomes the exact observation; with a goal the
  tool shows "the parts that serve it", so only the title heading and the line that best
  answers the goal are expected.
* any other URL: the open web, which the model may invent; no facts, unless the results
  it showed earlier listed that URL (see :func:`observe_search`) or the scenario says
  its corpus is closed (a ``closed`` attribute; ``SearchScenario`` has none yet), when
  the page does not exist and the exact answer is a 404 line.

Nothing here changes the ledger: searching and reading change nothing in the world.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from simgym.core.grounding import Grounding
from simgym.core.types import Action

MATCH_COVER = 0.5  # a page matches a query when it holds at least half its terms
CLEAR_COVER = 0.6  # and clearly answers it when it holds most of them ...
CLEAR_MARGIN = 1.2  # ... and scores this much above the runner-up
TITLE_WEIGHT = 3
TITLE_BONUS = 2.0
K1, B = 1.2, 0.75
MAX_PAGE_CHARS = 4000  # of a page's text restated as a fact
MAX_SNIPPET = 200
MAX_SEEN = 100  # result URLs remembered by observe_search

_WORD = re.compile(r"\w+(?:[.'’-]\w+)*")
_SPLIT = re.compile(r"[.'’-]")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_SUFFIXES = ("ing", "ed", "es", "s", "e")
STOPWORDS = frozenset(
    """a about after all also an and any are as at be been before but by can did do does
    for from had has have how i if in into is it its me my no not of on or our so than
    that the their them then there these they this to up was we were what when where
    which who whom why will with you your""".split()
)


# -- terms ------------------------------------------------------------------------------


def stem(word: str) -> str:
    """A crude suffix strip, so "released" meets "release" and "phones" meets "phone"."""
    if not word.isalpha():
        return word
    for suffix in _SUFFIXES:
        rest = word[: -len(suffix)]
        if word.endswith(suffix) and len(rest) >= 3 and not (suffix == "s" and rest[-1] == "s"):
            return rest
    return word


def query_terms(text: str) -> list[str]:
    """The distinct content words of a query, in order."""
    seen: dict[str, None] = {}
    for token in _WORD.findall(text.casefold()):
        if token not in STOPWORDS:
            seen.setdefault(stem(token), None)
    return list(seen)


def page_terms(text: str) -> list[str]:
    """A page's words, with the parts and prefixes of compounds ("3.13.0" also counts as
    "3.13", "3", "13" and "0"), so a query may name less than the page does."""
    terms: list[str] = []
    for token in _WORD.findall(text.casefold()):
        terms.append(stem(token))
        parts = _SPLIT.split(token)
        if len(parts) > 1:
            terms.extend(stem(p) for p in parts if p)
            terms.extend(token[: m.start()] for m in _SPLIT.finditer(token))
    return terms


# -- ranking ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    """One scenario document as a query found it."""

    doc: Any  # a SearchDocument
    score: float
    cover: float  # share of the query's terms the page holds


def _bag(doc: Any) -> Counter[str]:
    bag = Counter(page_terms(doc.title))
    for term in bag:
        bag[term] *= TITLE_WEIGHT
    bag.update(page_terms(_visible(f"{doc.snippet}\n{doc.content}")))
    return bag


def _visible(markdown: str) -> str:
    """Markdown as a reader sees it: a link is its text, not its URL."""
    return _LINK.sub(r"\1", markdown)


class Index:
    """The scenario's pages, tokenized once for all the queries of a call."""

    def __init__(self, documents: Sequence[Any]) -> None:
        self.documents = list(documents)
        self.bags = [_bag(doc) for doc in self.documents]
        self.titles = [set(page_terms(doc.title)) for doc in self.documents]
        self.lengths = [sum(bag.values()) for bag in self.bags]
        self.average = sum(self.lengths) / len(self.lengths) if self.lengths else 1.0

    def idf(self, term: str) -> float:
        df = sum(1 for bag in self.bags if bag[term])
        return math.log(1 + (len(self.bags) - df + 0.5) / (df + 0.5))

    def rank(self, query: str) -> list[Hit]:
        """The documents that match ``query``, best first: those holding more of its
        terms, then by score (BM25, plus each term's weight again when the title holds
        it: engines rank a page about a name above pages that mention it); ties keep
        the scenario's order."""
        terms = query_terms(query)
        idf = {t: self.idf(t) for t in terms}
        hits = []
        for i, (doc, bag) in enumerate(zip(self.documents, self.bags, strict=True)):
            held = [t for t in terms if bag[t]]
            cover = len(held) / len(terms) if terms else 0.0
            if cover < MATCH_COVER:
                continue
            norm = K1 * (1 - B + B * self.lengths[i] / (self.average or 1.0))
            score = sum(idf[t] * bag[t] * (K1 + 1) / (bag[t] + norm) for t in held)
            score += TITLE_BONUS * sum(idf[t] for t in held if t in self.titles[i])
            hits.append(Hit(doc, score, cover))
        return sorted(hits, key=lambda h: (-h.cover, -h.score))


def rank(documents: Sequence[Any], query: str) -> list[Hit]:
    """:meth:`Index.rank` over ``documents``."""
    return Index(documents).rank(query)


def clear_winner(hits: Sequence[Hit]) -> Hit | None:
    """The page that certainly ranks first: most of the query's terms, and better than
    the runner-up by coverage or by a clear margin of score."""
    if not hits or hits[0].cover < CLEAR_COVER:
        return None
    if len(hits) == 1:
        return hits[0]
    top, second = hits[0], hits[1]
    if top.cover > second.cover or top.score >= CLEAR_MARGIN * second.score:
        return top
    return None


# -- grounding --------------------------------------------------------------------------


def ground_search(action: Action, state: dict[str, Any], scenario: Any) -> Grounding | None:
    """Facts for a search-domain tool call (see the module docstring)."""
    if action.kind != "tool_call":
        return None
    again = _given_before(action, state)
    if again is not None:
        fact = "this exact call was answered earlier in the episode; the answer is the same"
        return Grounding(facts=[fact], observation=again)
    if action.name == "web_search":
        return _ground_queries(action.arguments.get("queries", []), scenario)
    if action.name == "web_extractor":
        return _ground_page(
            action.arguments.get("url", ""), action.arguments.get("goal"), state, scenario
        )
    return None


def _ground_queries(queries: Sequence[str], scenario: Any) -> Grounding | None:
    facts: list[str] = []
    expect: list[str] = []
    shown: set[str] = set()
    limit = getattr(scenario, "results_per_query", 5)
    index = Index(scenario.documents)
    found: dict[str, list[Hit]] = {}
    for query in queries:
        hits = found[query] = index.rank(query)[:limit]
        if not hits:
            continue
        lines = [_result_line(h.doc, full=h.doc.url not in shown) for h in hits]
        shown.update(h.doc.url for h in hits)
        facts.append(f'pages of this web that match "{query}", best first:\n' + "\n".join(lines))
        winner = clear_winner(hits)
        if winner is not None:
            facts.append(f'{winner.doc.url} is result [1] for "{query}"')
            expect.append(winner.doc.url)
    closed = bool(getattr(scenario, "closed", False))
    if closed:
        facts.append("this web holds no other pages: a query that matches none finds nothing")
    if not facts:
        return None
    reshape = _results_reshaper(list(queries), found, limit, closed)
    # The known pages fill every query's page of results (or nothing else exists): the
    # answer is decided, and simgym writes it without the model.
    decided = closed or all(len(found.get(q, [])) >= limit for q in queries)
    return Grounding(
        facts=facts,
        expect=list(dict.fromkeys(expect)),
        reshape=reshape,
        observation=reshape("") if decided else None,
    )


@dataclass(frozen=True)
class Result:
    """One entry of a results section."""

    title: str
    url: str
    snippet: str = ""
    date: str = ""

    def lines(self, rank: int) -> list[str]:
        out = [f"[{rank}] {self.title}", f"URL: {self.url}"]
        if self.snippet:
            out.append(f"Snippet: {self.snippet}")
        if self.date:
            out.append(f"Date: {self.date}")
        return out


def results_section(query: str, results: Sequence[Result]) -> str:
    """One query's section in the engine's layout: its heading, then the ranked results
    a blank line apart, or the no-results line."""
    lines = [f'## Results for "{query}"']
    if not results:
        lines.append(f'No results found for "{query}".')
    for rank, result in enumerate(results, 1):
        lines += ([""] if rank > 1 else []) + result.lines(rank)
    return "\n".join(lines)


def _known(doc: Any) -> Result:
    return Result(doc.title, doc.url, snippet(doc), doc.date.isoformat() if doc.date else "")


def _url_core(url: str) -> str:
    return url.strip().rstrip("/").casefold()


def parse_results(lines: Sequence[str]) -> list[Result]:
    """The entries of a results section (or a whole page's lines), in order: ``[n] title``
    and the ``URL:``, ``Snippet:`` and ``Date:`` lines after it; an entry without a URL is
    not a result and is left out."""
    entries: list[Result] = []
    title: str | None = None
    fields: dict[str, str] = {}
    for raw in [*lines, "[0] end"]:
        line = raw.strip()
        entry, url = _ENTRY.match(line), _URL_LINE.match(line)
        if entry:
            if title is not None and fields.get("url"):
                entries.append(
                    Result(title, fields["url"], fields.get("snippet", ""), fields.get("date", ""))
                )
            title, fields = entry.group(1).strip(), {}
        elif title is not None and url:
            fields.setdefault("url", url.group(1))
        elif title is not None and line.partition(":")[0].strip().lower() in ("snippet", "date"):
            name, _, value = line.partition(":")
            fields.setdefault(name.strip().lower(), value.strip())
    return entries


def _results_reshaper(
    queries: list[str], found: dict[str, list[Hit]], limit: int, closed: bool
) -> Any:
    """Strict mode's rewrite of a ``web_search`` answer: per query, the scenario's
    matching pages first, in their ranked order and as the index holds them (the prompt
    promises they rank first), then the open-web results the model added (none in a
    closed web), at most ``limit``, in the engine's layout. A whole-call error line
    stays as the model wrote it."""

    def reshape(observation: str) -> str | None:
        if observation.lstrip().startswith("Error:"):
            return None
        _, sections = results_sections(observation.split("\n"))
        invented = {query: parse_results(lines[1:]) for query, lines in sections}
        out = []
        for query in queries:
            hits = [_known(h.doc) for h in found.get(query, [])]
            known = {_url_core(h.url) for h in hits}
            if not closed:
                hits += [r for r in invented.get(query, []) if _url_core(r.url) not in known]
            out.append(results_section(query, hits[:limit]))
        return "\n\n".join(out)

    return reshape


def _result_line(doc: Any, *, full: bool) -> str:
    parts = [f"  {doc.url}", doc.title]
    if doc.date:
        parts.append(f"Date: {doc.date.isoformat()}")
    if full:
        parts.append(f"Snippet: {snippet(doc)}")
    return " | ".join(parts)


def snippet(doc: Any) -> str:
    """The document's snippet, or the start of its text when it has none."""
    text = " ".join((doc.snippet or _plain(doc.content)).split())
    return text if len(text) <= MAX_SNIPPET else text[: MAX_SNIPPET - 3].rstrip() + "..."


def _plain(markdown: str) -> str:
    lines = [ln.strip().lstrip("#").strip() for ln in markdown.splitlines()]
    return " ".join(ln for ln in lines if ln and not set(ln) <= set("|-: "))


def _ground_page(
    url: str, goal: str | None, state: dict[str, Any], scenario: Any
) -> Grounding | None:
    doc = scenario.document(url)
    if doc is None:
        return _unknown_page(url, state, scenario)
    dated = f", dated {doc.date.isoformat()}" if doc.date else ""
    facts = [f'{url} is this web\'s page "{doc.title}"{dated}']
    heading = f"# {doc.title}"
    text = doc.content.strip()
    if not text:
        return Grounding(facts=facts, expect=[heading])
    facts.append("its text (markdown):\n" + _indent(_cap(text)))
    if not goal:
        return Grounding(facts=facts, observation=page_text(doc), expect=[heading])
    key = key_text(text, goal)
    return Grounding(facts=facts, expect=[heading] + ([key] if key else []))


def page_text(doc: Any) -> str:
    """The whole page as ``web_extractor`` shows it: the title heading, then the text (a
    text that starts with that heading already is the page)."""
    text = doc.content.strip()
    first = text.splitlines()[0].strip() if text else ""
    if first.lstrip("#").strip() == doc.title.strip() and first.startswith("#"):
        return text
    return f"# {doc.title}\n\n{text}"


def key_text(text: str, goal: str) -> str | None:
    """What of the page best serves ``goal``, as it must appear in any excerpt: a plain
    line, a list item's text, or a table row's value; None without a clear best."""
    terms = query_terms(goal)
    if not terms:
        return None
    best, best_cover = None, 0.0
    for line in text.splitlines():
        held = set(page_terms(line))
        cover = sum(1 for t in terms if t in held) / len(terms)
        if cover > best_cover:
            best, best_cover = line, cover
    if best is None or best_cover < MATCH_COVER:
        return None
    core = _line_core(best)
    return core if 2 <= len(core) <= 160 else None


def _line_core(line: str) -> str:
    text = line.strip()
    if text.startswith("|"):
        cells = [c.strip() for c in text.strip("|").split("|")]
        text = cells[-1] if cells else ""
    text = _visible(text)
    return text.lstrip("-*# ").strip()


def _unknown_page(url: str, state: dict[str, Any], scenario: Any) -> Grounding | None:
    if getattr(scenario, "closed", False):
        missing = f"Error: 404 Not Found for URL {url}"
        return Grounding(facts=[f"no page exists at {url}"], observation=missing)
    title = (state.get("seen") or {}).get(url)
    if title:
        return Grounding(facts=[f'earlier results listed {url} as "{title}"'])
    return None


def _cap(text: str) -> str:
    return text if len(text) <= MAX_PAGE_CHARS else text[:MAX_PAGE_CHARS].rstrip() + "\n..."


def _indent(text: str) -> str:
    return "\n".join(f"  {line}".rstrip() for line in text.splitlines())


# -- after the turn (for a core ``observe`` hook) -----------------------------------------

_ENTRY = re.compile(r"^\[\d+\]\s*(.+)$")
_URL_LINE = re.compile(r"^URL\s*:\s*(\S+)", re.IGNORECASE)


def observe_search(observation: str, action: Action, state: dict[str, Any]) -> dict[str, Any]:
    """The ledger patch after a search-domain call: what it answered (``_answers``: each
    query's results section, each page as read; the engine and the pages do not change
    during an episode, so the same call gets the same answer), and after a ``web_search``
    the result URLs it showed and their titles (``"seen"``), so a later ``web_extractor``
    of an invented page gets the title the results gave it. Keeps the newest
    :data:`MAX_SEEN` URLs and :data:`MAX_ANSWERS` answers."""
    if action.kind != "tool_call" or action.name not in ("web_search", "web_extractor"):
        return {}
    patch: dict[str, Any] = {}
    answers = _answers_given(observation, action)
    if answers:
        held = list((state.get(ANSWERS) or {}).keys())
        kept = [k for k in held if k not in answers] + list(answers)
        dropped = {k: None for k in kept[: max(0, len(kept) - MAX_ANSWERS)]}
        patch[ANSWERS] = {**answers, **dropped}
    found = results_shown(observation) if action.name == "web_search" else {}
    if found:
        seen = dict(state.get("seen") or {})
        urls: dict[str, Any] = dict(found)
        kept = [u for u in seen if u not in found] + list(found)
        for old in kept[: max(0, len(kept) - MAX_SEEN)]:
            urls[old] = None
        patch["seen"] = urls
    return patch


ANSWERS = "_answers"  # ledger key: {"q:<query>" or "p:<url> <goal>": the answer given}
MAX_ANSWERS = 30
MAX_ANSWER_CHARS = 6000


def _answer_key(action: Action, query: str | None = None) -> str:
    if query is not None:
        return "q:" + query
    goal = action.arguments.get("goal")
    return f"p:{action.arguments.get('url', '')} {goal or ''}".rstrip()


def _answers_given(observation: str, action: Action) -> dict[str, str]:
    """The answers in an observation, by call: one per query, or the page."""
    if observation.startswith("Error:") or len(observation) > MAX_ANSWER_CHARS:
        return {}
    if action.name == "web_extractor":
        return {_answer_key(action): observation}
    before, sections = results_sections(observation.split("\n"))
    queries = list(action.arguments.get("queries", []))
    if before or [q for q, _ in sections] != queries:
        return {}  # not one section a query, in order: not this engine's layout
    return {_answer_key(action, q): "\n".join(lines).rstrip("\n") for q, lines in sections}


# The engine's section heading, as the format check reads it (a trailing colon tolerated).
RESULTS_HEADING = re.compile(r'^##\s+Results for\s+"(.*)"\s*:?\s*$')


def results_sections(lines: Sequence[str]) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """A results page split at its ``## Results for "..."`` headings: the non-blank lines
    before the first, and each section's query with its lines (heading first)."""
    before: list[str] = []
    sections: list[tuple[str, list[str]]] = []
    for line in lines:
        heading = RESULTS_HEADING.match(line.strip())
        if heading:
            sections.append((heading.group(1), [line]))
        elif sections:
            sections[-1][1].append(line)
        elif line.strip():
            before.append(line)
    return before, sections


def _given_before(action: Action, state: dict[str, Any]) -> str | None:
    """The answer this same call got earlier in the episode, or None."""
    given = state.get(ANSWERS)
    if not isinstance(given, dict):
        return None
    if action.name == "web_extractor":
        answer = given.get(_answer_key(action))
        return answer if isinstance(answer, str) else None
    queries = list(action.arguments.get("queries", [])) if action.name == "web_search" else []
    parts = [given.get(_answer_key(action, q)) for q in queries]
    if not parts or not all(isinstance(p, str) for p in parts):
        return None
    return "\n\n".join(parts)


def results_shown(observation: str) -> dict[str, str]:
    """``{url: title}`` of the results in a ``web_search`` observation, in order."""
    found: dict[str, str] = {}
    for result in parse_results(observation.splitlines()):
        found[result.url] = result.title  # a URL listed twice keeps its later title
    return found
