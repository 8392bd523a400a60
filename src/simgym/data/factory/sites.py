"""Generated static sites for the web generator (shop, blog, help center, account
portal): the page templates, content drawn from a seed, and the files written to disk.
"""

from __future__ import annotations

import json
import random
import textwrap
from dataclasses import dataclass
from datetime import date, timedelta
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


def _html(title: str, body: str, script: str = "") -> str:
    tail = f"<script>\n{script.strip()}\n</script>\n" if script else ""
    return (
        _fill(
            """
        <!doctype html>
        <html lang="en">
        <head><meta charset="utf-8"><title>{{title}}</title></head>
        <body>
        {{body}}
        {{tail}}</body>
        </html>
        """,
            title=_esc(title),
            body=body.strip(),
            tail=tail,
        )
        + "\n"
    )


def make_site(rng: random.Random, kind: str, key: str) -> Site:
    """One site of ``kind`` with content drawn from ``rng``."""
    builders = {"shop": _shop_site, "blog": _blog_site, "help": _help_site, "portal": _portal_site}
    return builders[kind](rng, key)


# An address check shared by the generated forms (as loose as most sites' own).
_EMAIL_JS = r"/^[^@\s]+@[^@\s]+\.[^@\s]+$/"

_SHOP_HEADER = """
    <header>
      <a href="/">{{name}}</a>
      <form action="/search" role="search">
        <input type="search" name="q" aria-label="Search the shop">
      </form>
      <a href="/cart">Cart ({{count}})</a>
    </header>
    """
_PRODUCT_PAGE = """
    {{header}}
    <main>
      <h1>{{product}}</h1>
      <img src="data:," alt="Photo of the {{lower}}">
      <p>Price: <strong>${{price}}.00</strong></p>
      <p>{{blurb}}</p>
      <label for="qty">Quantity</label>
      <input id="qty" type="number" min="1" max="9" value="1">
      <label for="opt">{{option}}</label>
      <select id="opt">{{options}}</select>
      <button id="add" type="button">Add to cart</button>
      <p id="added" role="status"></p>
      <h2>You may also like</h2>
      <ul>
    {{related}}
      </ul>
    </main>
    """
_PRODUCT_JS = """
    document.getElementById("add").addEventListener("click", () => {
      const qty = Number(document.getElementById("qty").value);
      const status = document.getElementById("added");
      if (!qty || qty < 1 || qty > 9) {
        status.textContent = "Choose a quantity from 1 to 9.";
        return;
      }
      const choice = document.getElementById("opt").value;
      status.textContent = `Added ${qty} × {{product}} (${choice}) to your cart.`;
    });
    """
_CART_PAGE = """
    <header>
      <a href="/">{{name}}</a>
    </header>
    <main>
      <h1>Your cart ({{count}} items)</h1>
      <ul>
    {{lines}}
      </ul>
      <p>Subtotal: <strong>${{subtotal}}.00</strong></p>
      <h2>Checkout</h2>
      <form id="checkout" action="/order" novalidate>
        <label for="name">Full name</label>
        <input id="name" name="name" autocomplete="off">
        <label for="email">Email</label>
        <input id="email" name="email" type="email" required autocomplete="off">
        <p id="email-error" role="alert" hidden></p>
        <label for="shipping">Shipping</label>
        <select id="shipping" name="shipping">{{shipping}}</select>
        <label><input type="checkbox" name="news"> Send me the monthly newsletter</label>
        <button type="submit">Place order</button>
      </form>
    </main>
    """
_CHECKOUT_JS = """
    document.getElementById("checkout").addEventListener("submit", (event) => {
      const email = document.getElementById("email");
      const error = document.getElementById("email-error");
      const value = email.value.trim();
      let message = "";
      if (!document.getElementById("name").value.trim()) message = "Please enter your name.";
      else if (!value) message = "Please enter your email address.";
      else if (!{{email_re}}.test(value)) message = "That email address does not look right.";
      if (message) {
        event.preventDefault();
        error.textContent = message;
        error.hidden = false;
        email.setAttribute("aria-invalid", "true");
      }
    });
    """
_ORDER_PAGE = """
    <header>
      <a href="/">{{name}}</a>
    </header>
    <main>
      <h1>Thank you for your order</h1>
      <p>Order {{order}} is confirmed.</p>
      <p id="receipt"></p>
      <a href="/">Continue shopping</a>
    </main>
    """
_ORDER_JS = """
    const params = new URLSearchParams(location.search);
    const email = params.get("email");
    const shipping = params.get("shipping") || "standard";
    if (email) {
      document.getElementById("receipt").textContent =
        `A receipt was sent to ${email} (${shipping} shipping).`;
    }
    """
# A results page for a site's search box: the catalog is in the page, filtered by ?q=.
_SEARCH_PAGE = """
    {{header}}
    <main>
      <h1>Search results</h1>
      <p id="summary"></p>
      <ul id="results"></ul>
      <a href="/">{{back}}</a>
    </main>
    """
_SEARCH_JS = """
    const items = {{items}};
    const q = (new URLSearchParams(location.search).get("q") || "").trim().toLowerCase();
    const hits = items.filter((item) => q && item[0].toLowerCase().includes(q));
    document.getElementById("summary").textContent = hits.length
      ? `${hits.length} {{noun}} for "${q}"`
      : `Nothing matches "${q}".`;
    for (const [title, url, note] of hits) {
      const li = document.createElement("li");
      const a = document.createElement("a");
      a.href = url;
      a.textContent = title;
      li.append(a);
      if (note) li.append(` ${note}`);
      document.getElementById("results").append(li);
    }
    """


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
    header = _fill(_SHOP_HEADER, name=_esc(name), count=count)
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
        """
        {{header}}
        <main>
          <h1>{{headline}}</h1>
          <ul>
        {{items}}
          </ul>
          <p>Free standard shipping on orders over ${{threshold}}.</p>
        </main>
        <footer><p>{{name}}, a demo shop served on this machine.</p></footer>
        """,
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
            _PRODUCT_PAGE,
            header=header,
            product=_esc(product),
            lower=_esc(product.lower()),
            price=prices[product],
            blurb=rng.choice(blurbs),
            option=_esc(option),
            options="".join(f"<option>{_esc(c)}</option>" for c in choices),
            related="\n".join(related),
        )
        script = _fill(_PRODUCT_JS, product=product)
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
        _CART_PAGE,
        name=_esc(name),
        count=count,
        lines=lines,
        subtotal=subtotal,
        shipping=shipping,
    )
    files["cart.html"] = _html(
        f"Cart and checkout - {name}", cart_page, _fill(_CHECKOUT_JS, email_re=_EMAIL_JS)
    )
    files["order.html"] = _html(
        f"Order confirmed - {name}", _fill(_ORDER_PAGE, name=_esc(name), order=order), _ORDER_JS
    )
    catalog = [[p[0], f"/product-{number[p[0]]}", f"${prices[p[0]]}.00"] for p in available]
    files["search.html"] = _html(
        f"Search - {name}",
        _fill(_SEARCH_PAGE, header=header, back="Back to the shop"),
        _fill(_SEARCH_JS, items=json.dumps(catalog), noun="result(s)"),
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


_BLOG_NAV = """
    <header><nav aria-label="Main">
      <a href="/">Home</a> <a href="/archive">Archive</a> <a href="/about">About</a>
    </nav></header>
    """
_TEASER = """
      <article>
        <h2><a href="/post-{{n}}">{{title}}</a></h2>
        <p>{{day}} · {{minutes}} min read</p>
      </article>
    """
_POST_PAGE = """
    {{nav}}
    <main>
      <article>
        <h1>{{title}}</h1>
        <p>By {{author}} on {{day}}</p>
        <p>{{opening}}</p>
        <p>{{advice}}</p>
        <p>Tags: <a href="/archive">{{topic}}</a> <a href="/archive">how-to</a></p>
      </article>
      <section aria-label="Comments">
        <h2 id="comment-count">Comments ({{count}})</h2>
        <ul id="comments">
    {{comments}}
        </ul>
        <form id="comment-form">
          <label for="cname">Name</label>
          <input id="cname" autocomplete="off">
          <label for="ctext">Comment</label>
          <textarea id="ctext"></textarea>
          <p id="cerror" role="alert" hidden></p>
          <button type="submit">Post comment</button>
        </form>
      </section>
    {{next}}
    </main>
    """
_COMMENT_JS = """
    document.getElementById("comment-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const who = document.getElementById("cname");
      const text = document.getElementById("ctext");
      const error = document.getElementById("cerror");
      if (!who.value.trim() || !text.value.trim()) {
        error.textContent = "Please write a name and a comment.";
        error.hidden = false;
        return;
      }
      error.hidden = true;
      const li = document.createElement("li");
      li.textContent = `${who.value.trim()}: ${text.value.trim()}`;
      const list = document.getElementById("comments");
      list.append(li);
      document.getElementById("comment-count").textContent = `Comments (${list.children.length})`;
      who.value = "";
      text.value = "";
    });
    """
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
    nav = _fill(_BLOG_NAV)

    def teaser(n: int) -> str:
        return _fill(
            _TEASER,
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
            _POST_PAGE,
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
        files[f"post-{n}.html"] = _html(f"{title} - {name}", page, _COMMENT_JS)
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


_HELP_HEADER = """
    <header>
      <a href="/">{{name}}</a>
      <a href="/contact">Contact support</a>
    </header>
    """
_HELP_HOME = """
    {{header}}
    <main>
      <h1>How can we help?</h1>
      <form action="/search" role="search">
        <input type="search" name="q" aria-label="Search help articles">
      </form>
      <h2>Popular articles</h2>
      <ul>
    {{links}}
      </ul>
      <h2>Frequently asked questions</h2>
    {{details}}
    </main>
    """
_ARTICLE_PAGE = """
    {{header}}
    <main>
      <h1>{{title}}</h1>
      <ol>{{steps}}</ol>
      <p>Was this article helpful?</p>
      <button class="vote" type="button">Yes</button>
      <button class="vote" type="button">No</button>
      <p id="vote-status" role="status"></p>
      <a href="/">All articles</a>
    </main>
    """
_VOTE_JS = """
    for (const button of document.querySelectorAll(".vote")) {
      button.addEventListener("click", () => {
        document.getElementById("vote-status").textContent = button.textContent === "Yes"
          ? "Thanks for your feedback!"
          : "Sorry to hear that. Contact support and we will help.";
      });
    }
    """
_CONTACT_PAGE = """
    {{header}}
    <main>
      <h1>Contact support</h1>
      <form id="contact" action="/thanks" novalidate>
        <label for="cname">Your name</label>
        <input id="cname" name="name" autocomplete="off">
        <label for="cemail">Email</label>
        <input id="cemail" name="email" type="email" autocomplete="off">
        <label for="topic">Topic</label>
        <select id="topic" name="topic">
          <option>Billing</option><option>Sign-in problems</option>
          <option>Sync errors</option><option>Something else</option>
        </select>
        <fieldset><legend>Urgency</legend>
          <label><input type="radio" name="urgency" value="low" checked> Low</label>
          <label><input type="radio" name="urgency" value="normal"> Normal</label>
          <label><input type="radio" name="urgency" value="urgent"> Urgent</label>
        </fieldset>
        <label for="msg">Message</label>
        <textarea id="msg" name="message"></textarea>
        <label><input type="checkbox" id="agree" name="agree">
          I agree to be contacted by email</label>
        <p id="form-error" role="alert" hidden></p>
        <button type="submit">Send request</button>
      </form>
    </main>
    """
_CONTACT_JS = """
    document.getElementById("contact").addEventListener("submit", (event) => {
      const email = document.getElementById("cemail").value.trim();
      const error = document.getElementById("form-error");
      let message = "";
      if (!{{email_re}}.test(email)) message = "Enter a valid email address.";
      else if (!document.getElementById("msg").value.trim()) message = "Tell us what happened.";
      else if (!document.getElementById("agree").checked) message = "Please agree to be contacted.";
      if (message) {
        event.preventDefault();
        error.textContent = message;
        error.hidden = false;
      }
    });
    """
_THANKS_PAGE = """
    {{header}}
    <main>
      <h1>We received your request</h1>
      <p>Request #{{request}} is in the queue.</p>
      <p id="summary"></p>
      <a href="/">Back to the help center</a>
    </main>
    """
_THANKS_JS = """
    const p = new URLSearchParams(location.search);
    document.getElementById("summary").textContent =
      `Topic: ${p.get("topic") || "none"}, urgency: ${p.get("urgency") || "low"}.`;
    """


def _help_site(rng: random.Random, key: str) -> Site:
    suffix = rng.choice(("Sync", " Cloud", " Notes", "Desk"))
    app = f"{rng.choice(CODE_WORDS).title()}{suffix}"
    name = f"{app} Help Center"
    host = f"help.{app.lower().replace(' ', '')}.example"
    articles = rng.sample(HELP_ARTICLES, 4)
    faq = rng.sample(HELP_FAQ, 3)
    request = rng.randint(4000, 9000)
    header = _fill(_HELP_HEADER, name=_esc(name))
    links = "\n".join(
        f'    <li><a href="/article-{n}">{_esc(t)}</a></li>' for n, (t, _) in enumerate(articles, 1)
    )
    details = "\n".join(
        f"  <details><summary>{_esc(q)}</summary><p>{_esc(a)}</p></details>" for q, a in faq
    )
    files = {
        "index.html": _html(name, _fill(_HELP_HOME, header=header, links=links, details=details))
    }
    for n, (title, steps) in enumerate(articles, 1):
        page = _fill(
            _ARTICLE_PAGE,
            header=header,
            title=_esc(title),
            steps="".join(f"<li>{_esc(s)}</li>" for s in steps),
        )
        files[f"article-{n}.html"] = _html(f"{title} - {name}", page, _VOTE_JS)
    files["contact.html"] = _html(
        f"Contact support - {name}",
        _fill(_CONTACT_PAGE, header=header),
        _fill(_CONTACT_JS, email_re=_EMAIL_JS),
    )
    files["thanks.html"] = _html(
        f"Request received - {name}",
        _fill(_THANKS_PAGE, header=header, request=request),
        _THANKS_JS,
    )
    catalog = [[t, f"/article-{n}", ""] for n, (t, _) in enumerate(articles, 1)]
    files["search.html"] = _html(
        f"Search - {name}",
        _fill(_SEARCH_PAGE, header=header, back="Back to the help center"),
        _fill(_SEARCH_JS, items=json.dumps(catalog), noun="article(s)"),
    )
    form = "name, email, topic, urgency (Low/Normal/Urgent), message, consent, Send request"
    pages = {"/contact": f"support form: {form}"}
    facts = {"articles": [t for t, _ in articles], "faq": [q for q, _ in faq], "request": request}
    return Site(key, "help", name, host, files, ("/", "/", "/contact"), facts, pages)


_PORTAL_NAV = """
    <header><nav aria-label="Account">
      <a href="/dashboard">Dashboard</a> <a href="/invoices">Invoices</a>
      <a href="/settings">Settings</a> <a href="/">Sign out</a>
    </nav></header>
    """
_LOGIN_PAGE = """
    <main>
      <h1>Sign in to {{app}}</h1>
      <form id="login" novalidate>
        <label for="user">Username</label>
        <input id="user" autocomplete="off">
        <label for="pass">Password</label>
        <input id="pass" type="password">
        <label><input type="checkbox" id="remember"> Remember me</label>
        <p id="login-error" role="alert" hidden></p>
        <button type="submit">Sign in</button>
      </form>
      <a href="/reset">Forgot your password?</a>
    </main>
    """
_LOGIN_JS = """
    document.getElementById("login").addEventListener("submit", (event) => {
      event.preventDefault();
      const user = document.getElementById("user").value.trim();
      const pass = document.getElementById("pass").value;
      if (user === {{user}} && pass === {{password}}) {
        location.href = "/dashboard";
        return;
      }
      const error = document.getElementById("login-error");
      error.textContent = user ? "Incorrect username or password." : "Enter your username.";
      error.hidden = false;
    });
    """
_RESET_PAGE = """
    <main>
      <h1>Reset your password</h1>
      <label for="remail">Email</label>
      <input id="remail" type="email">
      <button id="send" type="button">Send reset link</button>
      <p id="reset-status" role="status"></p>
      <a href="/">Back to sign in</a>
    </main>
    """
_RESET_JS = """
    document.getElementById("send").addEventListener("click", () => {
      const value = document.getElementById("remail").value.trim();
      document.getElementById("reset-status").textContent = {{email_re}}.test(value)
        ? `If ${value} has an account, a reset link is on its way.`
        : "Enter the email address of your account.";
    });
    """
_DASHBOARD_PAGE = """
    {{nav}}
    <main>
      <h1>Welcome back, {{first}}</h1>
      <p>Plan: {{plan}}, renews on {{renews}}.</p>
      <h2>Recent activity</h2>
      <table>
        <tr><th>Date</th><th>Event</th></tr>
    {{rows}}
      </table>
    </main>
    """
_INVOICES_PAGE = """
    {{nav}}
    <main>
      <h1>Invoices</h1>
      <label for="status">Status</label>
      <select id="status">
        <option>All</option><option>Paid</option><option>Due</option><option>Overdue</option>
      </select>
      <table>
        <tr><th>Invoice</th><th>Date</th><th>Amount</th><th>Status</th></tr>
    {{rows}}
      </table>
      <p id="shown" role="status"></p>
    </main>
    """
_INVOICES_JS = """
    const select = document.getElementById("status");
    select.addEventListener("change", () => {
      let shown = 0;
      for (const row of document.querySelectorAll("tr[data-status]")) {
        const keep = select.value === "All" || row.dataset.status === select.value;
        row.hidden = !keep;
        if (keep) shown += 1;
      }
      document.getElementById("shown").textContent = `${shown} invoice(s) shown.`;
    });
    """
_SETTINGS_PAGE = """
    {{nav}}
    <main>
      <h1>Settings</h1>
      <form id="settings" novalidate>
        <label for="display">Display name</label>
        <input id="display" value="{{person}}">
        <label for="semail">Email</label>
        <input id="semail" type="email" value="{{email}}">
        <label for="lang">Language</label>
        <select id="lang">
          <option>English</option><option>Deutsch</option>
          <option>Português</option><option>Français</option>
        </select>
        <label><input type="checkbox" id="mail-invoices" checked> Email me about invoices</label>
        <label><input type="checkbox" id="sms"> Text me security alerts</label>
        <p id="settings-status" role="status"></p>
        <button type="submit">Save changes</button>
      </form>
    </main>
    """
_SETTINGS_JS = """
    document.getElementById("settings").addEventListener("submit", (event) => {
      event.preventDefault();
      const value = document.getElementById("semail").value.trim();
      const status = document.getElementById("settings-status");
      if (!document.getElementById("display").value.trim()) {
        status.textContent = "The display name cannot be empty.";
      } else if (!{{email_re}}.test(value)) {
        status.textContent = "That email address does not look right.";
      } else {
        status.textContent = "Settings saved.";
      }
    });
    """


def _portal_site(rng: random.Random, key: str) -> Site:
    app = f"{rng.choice(CODE_WORDS).title()} {rng.choice(('Billing', 'Portal', 'Account'))}"
    host = f"account.{app.split()[0].lower()}.example"
    person = _person(rng)
    username = person.split()[0].lower()
    password = f"{rng.choice(CODE_WORDS)}{rng.randint(10, 99)}"
    email = _email(rng, person)
    nav = _fill(_PORTAL_NAV)
    files = {
        "index.html": _html(
            f"Sign in - {app}",
            _fill(_LOGIN_PAGE, app=_esc(app)),
            _fill(_LOGIN_JS, user=json.dumps(username), password=json.dumps(password)),
        ),
        "reset.html": _html(
            f"Reset password - {app}", _fill(_RESET_PAGE), _fill(_RESET_JS, email_re=_EMAIL_JS)
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
        _DASHBOARD_PAGE,
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
        f"Invoices - {app}", _fill(_INVOICES_PAGE, nav=nav, rows=rows), _INVOICES_JS
    )
    files["settings.html"] = _html(
        f"Settings - {app}",
        _fill(_SETTINGS_PAGE, nav=nav, person=_esc(person), email=_esc(email)),
        _fill(_SETTINGS_JS, email_re=_EMAIL_JS),
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
