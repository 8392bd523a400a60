"""Generated static sites for the web generator (shop, blog, help center, account
portal): content drawn from a seed, filled into the page templates of ``site_templates/``,
and the files written to disk.
"""

from __future__ import annotations

import json
import random
import textwrap
from dataclasses import dataclass
from datetime import date, timedelta
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from simgym.data.factory.common import CODE_WORDS, FIRST_NAMES, _email, _person

SITE_KINDS = ("shop", "blog", "help", "portal")
PRODUCTS = (
    ("Brass desk lamp", "Finish", ("Polished brass", "Matte black")),
    ("Linen tea towel", "Colour", ("Natural", "Indigo", "Rust")),
    ("Stoneware mug", "Glaze", ("Speckled white", "Forest green")),
    ("Wool throw", "Colour", ("Slate blue", "Oat", "Charcoal")),
    ("Walnut cutting board", "Size", ("Small", "Large")),
    ("Cotton tote bag", "Print", ("Stripes", "Plain")),
    ("Beeswax candle", "Scent", ("Unscented", "Pine", "Lavender")),
    ("Ceramic planter", "Size", ("10 cm", "15 cm", "20 cm")),
    ("Copper kettle", "Finish", ("Copper", "Brushed steel")),
    ("Oak bookends", "Finish", ("Natural oak", "Smoked oak")),
    ("Glass carafe", "Size", ("0.5 l", "1 l")),
    ("Rattan basket", "Size", ("Medium", "Large")),
)
SHIPPING = ("Standard (3-5 days) $4.00", "Express (next day) $9.00", "Pick up in store (free)")
BLOG_TOPICS = {
    "gardening": ("Ten tomatoes worth growing", "Pruning roses in late winter",
                  "Composting for small gardens", "Why my basil keeps dying",
                  "A year with a rain barrel", "Seeds to sow in March"),
    "cycling": ("Fixing a flat by the roadside", "My first century ride",
                "Choosing tyre pressure", "Commuting through the winter",
                "Cleaning a chain properly", "A weekend on gravel roads"),
    "baking": ("Sourdough without the fuss", "The case for weighing flour",
               "Three cakes for beginners", "Why bread needs steam",
               "Laminated dough at home", "Fixing dense muffins"),
    "astronomy": ("Seeing Saturn's rings", "Choosing a first telescope",
                  "Dark sky sites near the city", "Photographing the moon",
                  "What a meteor shower really is", "Finding the Andromeda galaxy"),
}  # fmt: skip
HELP_ARTICLES = (
    ("Reset your password", ("Open the sign-in page.", "Choose Forgot your password.",
                             "Follow the link in the email.")),
    ("Set up two-step sign-in", ("Open Settings.", "Choose Security.",
                                 "Scan the code with an authenticator app.")),
    ("Change your plan", ("Open Billing.", "Choose Change plan.", "Confirm the new price.")),
    ("Export your data", ("Open Settings.", "Choose Export.",
                          "Wait for the email with the download link.")),
    ("Fix sync conflicts", ("Close the app on every device.", "Open it on one device first.",
                            "Keep the newer copy.")),
    ("Invite a teammate", ("Open Team.", "Enter their email.", "They accept from the invitation.")),
)  # fmt: skip
HELP_FAQ = (
    ("Is there a free plan?", "Yes: one user and 2 GB of storage."),
    ("Can I pay yearly?", "Yes, and yearly plans cost two months less."),
    ("Where is my data stored?", "In data centres in Frankfurt and Dublin."),
    (
        "How do I cancel?",
        "Open Billing and choose Cancel plan; you keep access until the period ends.",
    ),
    ("Do you offer refunds?", "Within 14 days of a payment, on request."),
)


@dataclass(frozen=True)
class Site:
    """A generated static site: its files, where episodes may start, and what is true."""

    key: str
    kind: str
    name: str
    host: str
    files: dict[str, str]
    entries: tuple[str, ...]
    facts: dict[str, Any]
    pages: dict[str, str]


def _esc(text: str) -> str:
    import html

    return html.escape(text, quote=True)


def _fill(template: str, **values: Any) -> str:
    """``{{name}}`` slots of a page template filled (HTML and JS keep their own braces)."""
    text = textwrap.dedent(template).strip("\n")
    for name, value in values.items():
        text = text.replace("{{" + name + "}}", str(value))
    return text


@cache
def _template(name: str) -> str:
    """A page or script template from ``site_templates/`` (package data, so HTML stays HTML)."""
    return (files(__package__) / "site_templates" / name).read_text(encoding="utf-8")


def _raw_script(name: str) -> str:
    """A script put in a page unfilled. Such scripts always kept their source indentation
    after the first line; keeping it keeps generated sites byte-identical to earlier runs."""
    return textwrap.indent(_template(name), "    ")


@cache
def _order_page() -> str:
    """The shop's order page: the real shop's markup (``simgym/real/sites/shop``), its
    shop name and order number made slots, so the page is written down once."""
    text = (files("simgym.real") / "sites" / "shop" / "order.html").read_text(encoding="utf-8")
    body = text.split("<body>\n", 1)[1].split("<script>", 1)[0].rstrip("\n")
    for literal, slot in (("Lantern &amp; Loom", "{{name}}"), ("LL-1042", "{{order}}")):
        if body.count(literal) != 1:
            raise RuntimeError(f"real/sites/shop/order.html no longer shows {literal!r} once")
        body = body.replace(literal, slot)
    return body


def _html(title: str, body: str, script: str = "") -> str:
    tail = f"<script>\n{script.strip()}\n</script>\n" if script else ""
    page = _fill(_template("page.html"), title=_esc(title), body=body.strip(), tail=tail)
    return page + "\n"


def make_site(rng: random.Random, kind: str, key: str) -> Site:
    """One site of ``kind`` with content drawn from ``rng``."""
    builders = {"shop": _shop_site, "blog": _blog_site, "help": _help_site, "portal": _portal_site}
    return builders[kind](rng, key)


# An address check shared by the generated forms (as loose as most sites' own).
_EMAIL_JS = r"/^[^@\s]+@[^@\s]+\.[^@\s]+$/"


def _shop_site(rng: random.Random, key: str) -> Site:
    first = rng.choice(("Lantern", "Harbor", "Willow", "Copper", "Meadow", "Juniper"))
    name = f"{first} & {rng.choice(('Loom', 'Hearth', 'Goods', 'Supply', 'Home'))}"
    host = name.lower().replace(" & ", "-and-") + ".example"
    chosen = rng.sample(PRODUCTS, rng.randint(4, 6))
    prices = {p[0]: rng.choice((12, 18, 22, 35, 48, 65, 89)) for p in chosen}
    sold_out = {p[0] for p in chosen[1:] if rng.random() < 0.3}
    available = [p for p in chosen if p[0] not in sold_out]
    cart = rng.sample(available, min(len(available), rng.randint(1, 2)))
    cart_lines = [(p, rng.choice(p[2]), rng.randint(1, 3)) for p in cart]
    count = sum(q for _, _, q in cart_lines)
    order = f"{''.join(w[0] for w in name.split(' & '))}-{rng.randint(1000, 9999)}"
    header = _fill(_template("shop_header.html"), name=_esc(name), count=count)
    number = {p[0]: i for i, p in enumerate(chosen, 1)}
    items = []
    for product, _, _ in chosen:
        price = prices[product]
        if product in sold_out:
            items.append(f"    <li>{_esc(product)} - ${price}.00 (sold out)</li>")
        else:
            link = f'<a href="/product-{number[product]}">{_esc(product)}</a>'
            items.append(f"    <li>{link} <span>${price}.00</span></li>")
    headline = rng.choice(("New this week", "Our favourites", "Just in"))
    threshold = rng.choice((50, 60, 75))
    home = _fill(
        _template("shop_home.html"),
        header=header,
        headline=headline,
        items="\n".join(items),
        threshold=threshold,
        name=_esc(name),
    )
    files = {"index.html": _html(f"{name} - Home goods", home)}
    blurbs = ("Made in small batches.", "Ships in recycled packaging.", "A favourite since 2019.")
    for product, option, choices in available:
        related = [
            f'    <li><a href="/product-{number[other[0]]}">{_esc(other[0])}</a></li>'
            for other in available
            if other[0] != product
        ][:2]
        page = _fill(
            _template("shop_product.html"),
            header=header,
            product=_esc(product),
            lower=_esc(product.lower()),
            price=prices[product],
            blurb=rng.choice(blurbs),
            option=_esc(option),
            options="".join(f"<option>{_esc(c)}</option>" for c in choices),
            related="\n".join(related),
        )
        script = _fill(_template("shop_product.js"), product=product)
        files[f"product-{number[product]}.html"] = _html(f"{product} - {name}", page, script)
    lines = "\n".join(
        f"    <li>{_esc(p[0])} ({_esc(choice)}) × {q} - ${prices[p[0]] * q}.00</li>"
        for p, choice, q in cart_lines
    )
    subtotal = sum(prices[p[0]] * q for p, _, q in cart_lines)
    shipping = "".join(
        f'<option value="{value}">{_esc(label)}</option>'
        for value, label in zip(("standard", "express", "pickup"), SHIPPING, strict=True)
    )
    cart_page = _fill(
        _template("shop_cart.html"),
        name=_esc(name),
        count=count,
        lines=lines,
        subtotal=subtotal,
        shipping=shipping,
    )
    files["cart.html"] = _html(
        f"Cart and checkout - {name}",
        cart_page,
        _fill(_template("shop_checkout.js"), email_re=_EMAIL_JS),
    )
    files["order.html"] = _html(
        f"Order confirmed - {name}",
        _fill(_order_page(), name=_esc(name), order=order),
        _raw_script("shop_order.js"),
    )
    catalog = [[p[0], f"/product-{number[p[0]]}", f"${prices[p[0]]}.00"] for p in available]
    files["search.html"] = _html(
        f"Search - {name}",
        _fill(_template("search.html"), header=header, back="Back to the shop"),
        _fill(_template("search.js"), items=json.dumps(catalog), noun="result(s)"),
    )
    entries = ("/", "/", "/", "/cart", f"/product-{number[available[0][0]]}")
    checkout = f"name, email, shipping ({', '.join(SHIPPING)}), newsletter checkbox, Place order"
    pages = {
        "/cart": f"cart with {count} item(s), subtotal ${subtotal}.00; checkout form: {checkout}",
        "/order": f"order confirmation: order {order}",
    }
    facts = {
        "products": [(p[0], p[1], list(p[2])) for p in available],
        "sold_out": sorted(sold_out),
        "cart": [[p[0], c, q] for p, c, q in cart_lines],
        "order": order,
    }
    return Site(key, "shop", name, host, files, entries, facts, pages)


COMMENTS = ("Great post!", "This helped, thanks.", "I tried this last week.", "What about winter?")


def _blog_site(rng: random.Random, key: str) -> Site:
    topic = rng.choice(sorted(BLOG_TOPICS))
    author = _person(rng)
    word = rng.choice(CODE_WORDS).title()
    name = rng.choice((f"{author.split()[0]}'s {topic} notes", f"The {word} {topic} journal"))
    host = f"{topic}-{rng.choice(CODE_WORDS)}.example"
    titles = list(BLOG_TOPICS[topic])
    rng.shuffle(titles)
    start = date(2025, 1, 1)
    days = sorted((start + timedelta(days=rng.randint(0, 150)) for _ in titles), reverse=True)
    nav = _fill(_template("blog_nav.html"))

    def teaser(n: int) -> str:
        return _fill(
            _template("blog_teaser.html"),
            n=n,
            title=_esc(titles[n - 1]),
            day=days[n - 1].isoformat(),
            minutes=rng.randint(3, 12),
        )

    home = [nav, "<main>", f"  <h1>{_esc(name)}</h1>", *(teaser(n) for n in (1, 2, 3))]
    home += ['  <a href="/page-2">Older posts</a>', "</main>"]
    home.append(f"<footer><p>Written by {_esc(author)}.</p></footer>")
    older = [nav, "<main>", "  <h1>Older posts</h1>"]
    older += [teaser(n) for n in range(4, len(titles) + 1)]
    older += ['  <a href="/">Newer posts</a>', "</main>"]
    files = {
        "index.html": _html(name, "\n".join(home)),
        "page-2.html": _html(f"{name} - page 2", "\n".join(older)),
    }
    openings = ("It started as an experiment.", "People ask about this.", "It took me years.")
    advice = ("Start small and keep notes.", "Details beat gear.", "Patience beats cleverness.")
    for n, title in enumerate(titles, 1):
        comments = [
            f"      <li>{_esc(rng.choice(FIRST_NAMES))}: {_esc(rng.choice(COMMENTS))}</li>"
            for _ in range(rng.randint(0, 2))
        ]
        following = f'  <a href="/post-{n + 1}">Next post</a>' if n < len(titles) else ""
        page = _fill(
            _template("blog_post.html"),
            nav=nav,
            title=_esc(title),
            author=_esc(author),
            day=days[n - 1].isoformat(),
            opening=rng.choice(openings),
            advice=rng.choice(advice),
            topic=topic,
            count=len(comments),
            comments="\n".join(comments),
            next=following,
        )
        files[f"post-{n}.html"] = _html(f"{title} - {name}", page, _raw_script("blog_comment.js"))
    rows = "\n".join(
        f'    <tr><td><a href="/post-{n}">{_esc(t)}</a></td><td>{days[n - 1].isoformat()}</td></tr>'
        for n, t in enumerate(titles, 1)
    )
    archive = [nav, "<main>", "  <h1>Archive</h1>", "  <table>"]
    archive += ["    <tr><th>Post</th><th>Date</th></tr>", rows, "  </table>", "</main>"]
    files["archive.html"] = _html(f"Archive - {name}", "\n".join(archive))
    since = rng.randint(2012, 2022)
    about = [nav, "<main>", "  <h1>About</h1>"]
    about += [f"  <p>{_esc(author)} writes about {topic} since {since}.</p>"]
    about += ['  <a href="/">Back home</a>', "</main>"]
    files["about.html"] = _html(f"About - {name}", "\n".join(about))
    pages = {
        "/archive": f"table of all {len(titles)} posts with dates",
        "/about": f"about {author}",
    }
    facts = {"titles": titles, "author": author}
    entries = ("/", "/", "/archive", f"/post-{rng.randint(1, len(titles))}")
    return Site(key, "blog", name, host, files, entries, facts, pages)


def _help_site(rng: random.Random, key: str) -> Site:
    suffix = rng.choice(("Sync", " Cloud", " Notes", "Desk"))
    app = f"{rng.choice(CODE_WORDS).title()}{suffix}"
    name = f"{app} Help Center"
    host = f"help.{app.lower().replace(' ', '')}.example"
    articles = rng.sample(HELP_ARTICLES, 4)
    faq = rng.sample(HELP_FAQ, 3)
    request = rng.randint(4000, 9000)
    header = _fill(_template("help_header.html"), name=_esc(name))
    links = "\n".join(
        f'    <li><a href="/article-{n}">{_esc(t)}</a></li>' for n, (t, _) in enumerate(articles, 1)
    )
    details = "\n".join(
        f"  <details><summary>{_esc(q)}</summary><p>{_esc(a)}</p></details>" for q, a in faq
    )
    files = {
        "index.html": _html(
            name, _fill(_template("help_home.html"), header=header, links=links, details=details)
        )
    }
    for n, (title, steps) in enumerate(articles, 1):
        page = _fill(
            _template("help_article.html"),
            header=header,
            title=_esc(title),
            steps="".join(f"<li>{_esc(s)}</li>" for s in steps),
        )
        files[f"article-{n}.html"] = _html(f"{title} - {name}", page, _raw_script("help_vote.js"))
    files["contact.html"] = _html(
        f"Contact support - {name}",
        _fill(_template("help_contact.html"), header=header),
        _fill(_template("help_contact.js"), email_re=_EMAIL_JS),
    )
    files["thanks.html"] = _html(
        f"Request received - {name}",
        _fill(_template("help_thanks.html"), header=header, request=request),
        _raw_script("help_thanks.js"),
    )
    catalog = [[t, f"/article-{n}", ""] for n, (t, _) in enumerate(articles, 1)]
    files["search.html"] = _html(
        f"Search - {name}",
        _fill(_template("search.html"), header=header, back="Back to the help center"),
        _fill(_template("search.js"), items=json.dumps(catalog), noun="article(s)"),
    )
    form = "name, email, topic, urgency (Low/Normal/Urgent), message, consent, Send request"
    pages = {"/contact": f"support form: {form}"}
    facts = {"articles": [t for t, _ in articles], "faq": [q for q, _ in faq], "request": request}
    return Site(key, "help", name, host, files, ("/", "/", "/contact"), facts, pages)


def _portal_site(rng: random.Random, key: str) -> Site:
    app = f"{rng.choice(CODE_WORDS).title()} {rng.choice(('Billing', 'Portal', 'Account'))}"
    host = f"account.{app.split()[0].lower()}.example"
    person = _person(rng)
    username = person.split()[0].lower()
    password = f"{rng.choice(CODE_WORDS)}{rng.randint(10, 99)}"
    email = _email(rng, person)
    nav = _fill(_template("portal_nav.html"))
    files = {
        "index.html": _html(
            f"Sign in - {app}",
            _fill(_template("portal_login.html"), app=_esc(app)),
            _fill(
                _template("portal_login.js"),
                user=json.dumps(username),
                password=json.dumps(password),
            ),
        ),
        "reset.html": _html(
            f"Reset password - {app}",
            _fill(_template("portal_reset.html")),
            _fill(_template("portal_reset.js"), email_re=_EMAIL_JS),
        ),
    }
    invoices = []
    for k in range(rng.randint(3, 6)):
        day = date(2025, 1, 1) + timedelta(days=30 * k + rng.randint(0, 5))
        status = rng.choice(("Paid", "Paid", "Due", "Overdue"))
        number = f"INV-{rng.randint(100, 999)}{k}"
        invoices.append((number, day.isoformat(), f"{rng.randint(9, 240)}.00", status))
    activity = "\n".join(
        f"    <tr><td>{d}</td><td>Invoice {i} ({s.lower()})</td></tr>"
        for i, d, _, s in invoices[-3:]
    )
    dashboard = _fill(
        _template("portal_dashboard.html"),
        nav=nav,
        first=_esc(person.split()[0]),
        plan=rng.choice(("Starter", "Team", "Business")),
        renews=date(2025, rng.randint(7, 12), 1).isoformat(),
        rows=activity,
    )
    files["dashboard.html"] = _html(f"Dashboard - {app}", dashboard)
    rows = "\n".join(
        f'    <tr data-status="{s}"><td>{i}</td><td>{d}</td><td>${a}</td><td>{s}</td></tr>'
        for i, d, a, s in invoices
    )
    files["invoices.html"] = _html(
        f"Invoices - {app}",
        _fill(_template("portal_invoices.html"), nav=nav, rows=rows),
        _raw_script("portal_invoices.js"),
    )
    files["settings.html"] = _html(
        f"Settings - {app}",
        _fill(_template("portal_settings.html"), nav=nav, person=_esc(person), email=_esc(email)),
        _fill(_template("portal_settings.js"), email_re=_EMAIL_JS),
    )
    pages = {
        "/dashboard": "account overview after sign-in",
        "/invoices": f"{len(invoices)} invoices with a status filter",
        "/settings": "display name, email, language, two notification checkboxes, Save changes",
    }
    facts = {"username": username, "password": password, "person": person, "email": email}
    return Site(key, "portal", app, host, files, ("/", "/", "/", "/reset"), facts, pages)


def write_sites(root: Path, seed: int, count: int) -> list[Site]:
    """Generate ``count`` sites (kinds in turn) under ``root``, one folder each."""
    sites = []
    for n in range(count):
        kind = SITE_KINDS[n % len(SITE_KINDS)]
        key = f"site-{n:03d}-{kind}"
        site = make_site(random.Random(f"{seed}:site:{n}"), kind, key)
        folder = root / key
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in site.files.items():
            path = folder / name
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
        sites.append(site)
    return sites
