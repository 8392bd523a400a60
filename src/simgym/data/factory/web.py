"""The web generator: tasks on the generated sites (:mod:`.sites`) in headless Chromium;
programs follow a task (check out, comment, contact support, sign in) mixed with
wandering: links, forms, selects, checkboxes, history, tabs, bad ids, blocked hosts.
"""

from __future__ import annotations

import json
import random
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from simgym.core.types import Task
from simgym.data.factory.common import (
    FIRST_NAMES,
    EpisodePlan,
    FactoryError,
    Program,
    _email,
    _length,
    _person,
    _weighted,
)
from simgym.data.factory.context import FactoryContext
from simgym.data.factory.sites import SHIPPING, Site

FIELD_ROLES = ("textbox", "searchbox", "spinbutton")
PLACEHOLDER_PAGE = "[1] RootWebArea ''"


def plan_web(rng: random.Random, context: FactoryContext, plan_id: str) -> EpisodePlan:
    if not context.sites:
        raise FactoryError("the web generator needs generated sites (FactoryContext)")
    site = rng.choice(context.sites)
    path = rng.choice(site.entries)
    start_url = f"https://{site.host}{path}"
    intent, instruction = _web_intent(rng, site)
    scenario: dict[str, Any] = {
        "site": site.name,
        "start_url": start_url,
        "title": site.name,
        "page": PLACEHOLDER_PAGE,  # the real first page replaces it before the episode
    }
    if rng.random() < 0.5:
        scenario["pages"] = {f"https://{site.host}{p}": text for p, text in site.pages.items()}
    notes = {
        "shop": f"The next order number is {site.facts.get('order')}.",
        "portal": f"The account {site.facts.get('username')!r} signs in with password "
        f"{site.facts.get('password')!r}; anything else is refused.",
        "help": f"The next support request is #{site.facts.get('request')}.",
        "blog": f"The blog is written by {site.facts.get('author')}.",
    }
    scenario["notes"] = notes[site.kind]
    if site.kind == "shop":
        scenario["session"] = {"cart": [f"{q} × {p} ({c})" for p, c, q in site.facts["cart"]]}
    elif site.kind == "portal":
        scenario["session"] = {"logged_in": False}
    length = _length(rng)
    program_seed = rng.getrandbits(64)

    def program(first: str) -> Program:
        return _web_program(
            random.Random(program_seed), site, start_url, list(intent), length, first
        )

    task = Task(
        id=plan_id,
        instruction=instruction,
        domain="web",
        scenario=scenario,
        metadata={"real_site": str(context.sites_root / site.key)},
    )
    return EpisodePlan(plan_id, "web", 0, task, program, length, setup={"site": site.key})


def _web_intent(rng: random.Random, site: Site) -> tuple[list[tuple[Any, ...]], str]:
    """A task as steps on named elements (resolved against each page), and its wording."""
    builders = {"shop": _shop_intent, "blog": _blog_intent, "help": _help_intent}
    return builders.get(site.kind, _portal_intent)(rng, site.facts)


Intent = tuple[list[tuple[Any, ...]], str]


def _shop_intent(rng: random.Random, facts: dict[str, Any]) -> Intent:
    person = _person(rng)
    email = _email(rng, person)
    product, option, choices = rng.choice(facts["products"])
    roll = rng.random()
    if roll < 0.55:
        qty, choice, ship = rng.randint(1, 4), rng.choice(choices), rng.choice(SHIPPING)
        steps: list[tuple[Any, ...]] = [
            ("link", product),
            ("fill", "Quantity", str(qty)),
            ("select", option, choice),
            ("button", "Add to cart"),
            ("link", "Cart"),
            ("fill", "Full name", person),
            ("fill", "Email", email),
            ("select", "Shipping", ship),
        ]
        if rng.random() < 0.4:
            steps.append(("check", "newsletter"))
        steps.append(("button", "Place order"))
        speed = ship.split(" (")[0].lower()
        return (
            steps,
            f"Order {qty} × {product} ({choice}) for {person} ({email}), {speed} shipping.",
        )
    if roll < 0.8:
        word = product.split()[-1].lower()
        steps = [("fill", "Search", word), ("press", "Search", "Enter"), ("link", product)]
        return steps, f"Find the {word} in the shop."
    steps = [
        ("link", "Cart"),
        ("fill", "Full name", person),
        ("fill", "Email", email.replace("@", "")),  # a typo the form rejects
        ("button", "Place order"),
        ("fill", "Email", email),
        ("button", "Place order"),
    ]
    return steps, f"Check out the cart for {person}, email {email}."


def _blog_intent(rng: random.Random, facts: dict[str, Any]) -> Intent:
    title = rng.choice(facts["titles"])
    name = rng.choice(FIRST_NAMES)
    roll = rng.random()
    if roll < 0.5:
        comment = rng.choice(("Thanks, this was useful!", "Which tools do you use?", "Great."))
        steps = [
            ("link", title),
            ("scroll",),
            ("fill", "Name", name),
            ("fill", "Comment", comment),
            ("button", "Post comment"),
        ]
        return steps, f"Leave the comment {comment!r} on the post {title!r} as {name}."
    if roll < 0.7:
        return [("link", title), ("button", "Post comment")], f"Post a comment on {title!r}."
    return [("link", "Archive"), ("link", title), ("back",)], f"When was {title!r} published?"


def _help_intent(rng: random.Random, facts: dict[str, Any]) -> Intent:
    person = _person(rng)
    email = _email(rng, person)
    roll = rng.random()
    if roll < 0.45:
        urgency = rng.choice(("Low", "Normal", "Urgent"))
        topic = rng.choice(("Billing", "Sign-in problems", "Sync errors", "Something else"))
        steps: list[tuple[Any, ...]] = [
            ("link", "Contact support"),
            ("fill", "Your name", person),
            ("fill", "Email", email),
            ("select", "Topic", topic),
            ("check", urgency),
            ("fill", "Message", "The app stopped syncing yesterday."),
        ]
        if rng.random() < 0.7:  # otherwise the form refuses: consent is required
            steps.append(("check", "agree"))
        steps.append(("button", "Send request"))
        return steps, f"Ask support about {topic.lower()} ({urgency.lower()}) as {person}, {email}."
    if roll < 0.75:
        first, second = rng.sample(facts["faq"], 2)
        return [("button", first), ("button", second)], f"What does the help center say: {first}"
    article = rng.choice(facts["articles"])
    word = article.split()[-1].lower()
    steps = [
        ("fill", "Search", word),
        ("press", "Search", "Enter"),
        ("link", article),
        ("button", rng.choice(("Yes", "No"))),
    ]
    return steps, f"Find the help article about {word}."


def _portal_intent(rng: random.Random, facts: dict[str, Any]) -> Intent:
    user, password = facts["username"], facts["password"]
    roll = rng.random()
    if roll < 0.45:
        name = _person(rng)
        steps = [
            ("fill", "Username", user),
            ("fill", "Password", password),
            ("button", "Sign in"),
            ("link", "Settings"),
            ("fill", "Display name", name),
            ("check", "Text me"),
            ("button", "Save changes"),
        ]
        return steps, f"Sign in as {user} (password {password}); change the display name to {name}."
    if roll < 0.75:
        steps = [
            ("fill", "Username", user),
            ("fill", "Password", password[::-1]),  # wrong first, as people do
            ("button", "Sign in"),
            ("fill", "Password", password),
            ("button", "Sign in"),
            ("link", "Invoices"),
            ("select", "Status", rng.choice(("Paid", "Due", "Overdue"))),
        ]
        return steps, f"Sign in as {user} (password {password}) and list the unpaid invoices."
    steps = [("link", "Forgot"), ("fill", "Email", facts["email"]), ("button", "Send reset link")]
    return steps, "I forgot my password; reset it."


@dataclass
class _Page:
    """What a web program reads from an observation."""

    nodes: list[Any]
    max_id: int
    url: str
    tabs: int

    @classmethod
    def read(cls, text: str) -> _Page:
        from simgym.domains._gui import uitree

        headers, tree = uitree.parse_observation(text)
        ids = [int(n.id) for n in tree.nodes if n.id and n.id.isdigit()]
        tabs = headers.get("tabs", "").count("[")
        return cls(tree.nodes, max(ids, default=1), headers.get("url", ""), max(tabs, 1))

    def find(self, roles: tuple[str, ...], name: str = "") -> list[Any]:
        wanted = name.casefold()
        return [
            n
            for n in self.nodes
            if n.id
            and n.role in roles
            and wanted in n.name.casefold()
            and n.props.get("disabled") is not True
        ]

    def options(self, combo: Any) -> list[str]:
        index = self.nodes.index(combo)
        return [n.name for n in self.nodes if n.parent == index and n.role == "option" and n.name]


def _field_value(rng: random.Random, name: str) -> str:
    key = name.casefold()
    if "email" in key:
        return _email(rng) if rng.random() < 0.8 else rng.choice(("ana@", "not-an-email", "x@y"))
    if "quantity" in key or "qty" in key:
        return str(rng.choice((1, 2, 3, 5, 12, 0)))
    if "search" in key:
        return rng.choice(("lamp", "mug", "password", "sync", "candle", "invoice", "xyz"))
    if "password" in key:
        return rng.choice(("hunter2", "letmein", "Spring2025!"))
    if "user" in key:
        return rng.choice(FIRST_NAMES).lower()
    if "name" in key:
        return _person(rng)
    if "comment" in key or "message" in key:
        return rng.choice(
            ("Lovely, thank you.", "It does not work on my phone.", "Please call me back.")
        )
    return rng.choice(("hello", "test", "42", ""))


def _web_program(
    rng: random.Random,
    site: Site,
    start_url: str,
    intent: list[tuple[Any, ...]],
    length: int,
    first: str,
) -> Program:
    origin = "/".join(start_url.split("/", 3)[:3])
    yield from _web_steps(rng, origin, intent, length, first)
    return rng.choice(
        (
            "Done.",
            "The order is placed." if site.kind == "shop" else "All done.",
            "I could not complete the task.",
            "Here is what I found on the page.",
        )
    )


def _web_steps(
    rng: random.Random, origin: str, intent: list[tuple[Any, ...]], length: int, first: str
) -> Generator[str, str, None]:
    """Follow the task when its next step is on the page, wander otherwise; steps the
    wandering queued (a new tab's address) come first."""
    pending: list[str] = []
    page = _Page.read(first) if first else None
    for _ in range(length):
        action = None
        if pending:
            action = pending.pop(0)
        elif intent and page is not None and rng.random() < 0.8:
            action = _web_resolve(rng, intent.pop(0), page)
        if action is None:
            action = _web_wander(rng, page, origin, pending)
        observation = yield action
        page = _Page.read(observation)


def _web_resolve(rng: random.Random, step: tuple[Any, ...], page: _Page) -> str | None:
    kind = step[0]
    if kind == "scroll":
        return f"scroll(0, {rng.choice((300, 500, 800))})"
    if kind == "back":
        return "go_back()"
    roles = {
        "link": ("link",),
        "fill": FIELD_ROLES,
        "press": FIELD_ROLES,
        "select": ("combobox",),
        "check": ("checkbox", "radio"),
        "button": ("button",),
    }[kind]
    found = page.find(roles, step[1])
    if not found:
        return None
    target = found[0]
    if kind == "link" or kind == "button" or kind == "check":
        return f"click('{target.id}')"
    if kind == "fill":
        return f"fill('{target.id}', {json.dumps(step[2])})"
    if kind == "press":
        return f"press('{target.id}', '{step[2]}')"
    return f"select_option('{target.id}', {json.dumps(step[2])})"


def _web_wander(rng: random.Random, page: _Page | None, origin: str, pending: list[str]) -> str:
    if page is None:
        return rng.choice(("scroll(0, 400)", "noop(wait_ms=200)"))
    links = page.find(("link",))
    fields = page.find(FIELD_ROLES)
    combos = page.find(("combobox",))
    checks = page.find(("checkbox", "radio"))
    buttons = page.find(("button",))
    moves = {
        "link": 28.0 if links else 0.0,
        "fill": 14.0 if fields else 0.0,
        "select": 7.0 if combos else 0.0,
        "check": 5.0 if checks else 0.0,
        "button": 9.0 if buttons else 0.0,
        "press": 3.0 if fields else 0.0,
        "hover": 3.0 if links else 0.0,
        "focus": 2.0 if fields else 0.0,
        "scroll": 6.0,
        "back": 6.0,
        "forward": 2.0,
        "tab": 3.0,
        "fail": 7.0,
    }
    kind = _weighted(rng, moves)
    if kind == "link":
        return f"click('{rng.choice(links).id}')"
    if kind == "fill":
        target = rng.choice(fields)
        return f"fill('{target.id}', {json.dumps(_field_value(rng, target.name))})"
    if kind == "select":
        combo = rng.choice(combos)
        options = page.options(combo)
        if options:
            return f"select_option('{combo.id}', {json.dumps(rng.choice(options))})"
        return f"click('{combo.id}')"
    if kind == "check":
        return f"click('{rng.choice(checks).id}')"
    if kind == "button":
        return f"click('{rng.choice(buttons).id}')"
    if kind == "press":
        return f"press('{rng.choice(fields).id}', 'Enter')"
    if kind == "hover":
        return f"hover('{rng.choice(links).id}')"
    if kind == "focus":
        return f"focus('{rng.choice(fields).id}')"
    if kind == "scroll":
        return f"scroll(0, {rng.choice((-400, 250, 400, 700, 1200))})"
    if kind == "back":
        return "go_back()"
    if kind == "forward":
        return "go_forward()"
    if kind == "tab":
        if page.tabs > 1:
            return rng.choice(("tab_focus(0)", "tab_close()"))
        path = rng.choice(("/", "/cart", "/archive", "/contact", "/invoices", "/about"))
        pending += [f"goto('{origin}{path}')"]
        if rng.random() < 0.7:
            pending.append("tab_focus(0)")
        return "new_tab()"
    # failing on purpose: ids that do not exist, hosts that cannot be reached, wrong elements
    options = [
        f"click('{page.max_id + rng.randint(5, 80)}')",
        f"goto('https://{rng.choice(('www.google.com', 'example.org', 'api.github.com'))}/')",
        f"goto('{origin}/{rng.choice(('missing', 'old-page', 'admin'))}')",
        f"tab_focus({rng.randint(3, 6)})",
    ]
    if links:
        options.append(f"fill('{rng.choice(links).id}', 'x')")
        options.append(f"select_option('{rng.choice(links).id}', 'One')")
    return rng.choice(options)
