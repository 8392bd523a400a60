"""The web domain for real: a headless Chromium, driven by Playwright, on local sites.

:class:`RealWeb` is a world-model backend that does not predict: each episode opens a
fresh browser context on a small site served from this package (``sites/<name>/``, by
default ``shop``: home, product, cart with a checkout form, order page) by a stdlib
HTTP server on 127.0.0.1, runs each BrowserGym-style action in the page and returns the
page as the web domain writes it (see :mod:`simgym.domains._gui.uitree`)::

    URL: https://shop.example/cart
    Title: Cart and checkout - Lantern & Loom
    Error: element 99 not found
    [1] RootWebArea 'Cart and checkout - Lantern & Loom', focused
      [2] banner ''
        [3] link 'Lantern & Loom'
      ...

The scenario's ``start_url`` host is mapped onto the local server (requests to it are
answered from the site, so the agent sees the scenario's URLs); its path picks the
page (``/cart`` serves ``cart.html``). Nothing else is reachable: every other request
is blocked, and ``goto`` to any other host answers with an ``Error:`` line.

Element ids are numbers written into the page as ``data-simgym-id`` attributes the
first time an element is seen, so an element keeps its id while the page lives and a
new page numbers from 1 again. An action that cannot run (an unknown id, a hidden or
disabled element, an unsupported action) leaves the page as it was and adds an
``Error: ...`` header line before the unchanged tree.

Each environment needs its own ``RealWeb`` (it holds one page at a time); the browser
and the site server are reused across its episodes and stopped by :meth:`aclose`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import urllib.error
import urllib.request
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel

from simgym.core.domain import get_domain
from simgym.core.errors import ActionError, WorldModelError
from simgym.core.types import Action, Task
from simgym.domains._gui import calls
from simgym.domains._gui.ground import observe_web
from simgym.domains.web import TABLE
from simgym.real.base import RealExecutor

BACKEND_NAME = "real-web"
SITES_DIR = Path(__file__).parent / "sites"
CHROMIUM = "/usr/bin/chromium"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
# Flags that keep Chromium quiet on a closed network and workable as root in a container.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)
MAX_NODES = 1500
MAX_TEXT = 200


# -- the local site ------------------------------------------------------------------------


class _SiteHandler(SimpleHTTPRequestHandler):
    """Static files, where ``/cart`` also finds ``cart.html``; no request logging."""

    def translate_path(self, path: str) -> str:
        found = super().translate_path(path)
        if not Path(found).exists() and Path(found + ".html").is_file():
            return found + ".html"
        return found

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # the agent's clicks are not server news


class SiteServer:
    """A directory served over HTTP on 127.0.0.1 and a free port, in a daemon thread."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise WorldModelError(f"real web: no site at {self.directory}")
        handler = partial(_SiteHandler, directory=str(self.directory))
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def netloc(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _fetch_local(url: str, method: str, body: bytes | None) -> tuple[int, str, bytes]:
    """One request to the site server: (status, content type, body)."""
    request = urllib.request.Request(url, data=body, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (loopback)
            return response.status, response.headers.get("Content-Type", ""), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", "text/html"), exc.read()


# -- the page as a tree ---------------------------------------------------------------------

# Runs in the page: numbers the elements and returns the accessibility nodes in document
# order as {id, role, name, depth, props}; the Python side writes the lines.
_SNAPSHOT_JS = r"""
() => {
  const W = window;
  if (typeof W.__simgymNext !== "number") W.__simgymNext = 1;
  const seen = new Set();
  const nodes = [];
  const MAX = __MAX_NODES__;
  const norm = (s) => (s || "").replace(/\s+/g, " ").trim();
  const idOf = (el) => {
    let id = el.getAttribute("data-simgym-id");
    if (!id || seen.has(id)) {  // new, or a copy of a numbered element
      id = String(W.__simgymNext++);
      el.setAttribute("data-simgym-id", id);
    }
    seen.add(id);
    return id;
  };
  const INPUT_ROLES = {
    search: "searchbox", number: "spinbutton", checkbox: "checkbox", radio: "radio",
    range: "slider", submit: "button", button: "button", reset: "button", image: "button",
    file: "button", color: "button",
  };
  const TAG_ROLES = {
    BUTTON: "button", TEXTAREA: "textbox", OPTION: "option", UL: "list", OL: "list",
    LI: "listitem", NAV: "navigation", MAIN: "main", HEADER: "banner", FOOTER: "contentinfo",
    FORM: "form", IMG: "img", TABLE: "table", TR: "row", TD: "cell", TH: "columnheader",
    DIALOG: "dialog", FIELDSET: "group", ARTICLE: "article", ASIDE: "complementary",
    SUMMARY: "button", H1: "heading", H2: "heading", H3: "heading", H4: "heading",
    H5: "heading", H6: "heading",
  };
  const NAME_FROM_CONTENT = new Set([
    "link", "button", "heading", "option", "cell", "columnheader", "tab", "menuitem",
    "checkbox", "radio", "switch", "treeitem",
  ]);
  const INTERACTIVE = "a[href],button,input,select,textarea,[role],[tabindex],img," +
    "h1,h2,h3,h4,h5,h6,ul,ol,table,form,nav,header,footer,main";
  const roleOf = (el) => {
    const explicit = norm(el.getAttribute("role")).split(" ")[0];
    if (explicit && explicit !== "presentation" && explicit !== "none") return explicit;
    const tag = el.tagName;
    if (tag === "A") return el.hasAttribute("href") ? "link" : null;
    if (tag === "INPUT") {
      const type = (el.getAttribute("type") || "text").toLowerCase();
      if (type === "hidden") return null;
      return INPUT_ROLES[type] || "textbox";
    }
    if (tag === "SELECT") return el.multiple || el.size > 1 ? "listbox" : "combobox";
    if (tag === "SECTION") return el.hasAttribute("aria-label") ? "region" : null;
    return TAG_ROLES[tag] || null;
  };
  const hidden = (el) => {
    if (el.getAttribute("aria-hidden") === "true" || el.hidden) return true;
    if (el.tagName === "OPTION") return false;  // options of a closed select have no box
    return el.checkVisibility ? !el.checkVisibility({visibilityProperty: true}) : false;
  };
  const textOfIds = (ids) => norm(ids.split(/\s+/).map(
    (i) => (document.getElementById(i) || {}).textContent || "").join(" "));
  const nameOf = (el, role) => {
    const aria = el.getAttribute("aria-label");
    if (aria) return norm(aria);
    const by = el.getAttribute("aria-labelledby");
    if (by) return textOfIds(by);
    const tag = el.tagName;
    if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA") {
      const type = (el.getAttribute("type") || "").toLowerCase();
      if (["submit", "button", "reset"].includes(type))
        return el.value || (type === "reset" ? "Reset" : "Submit");
      if (el.labels && el.labels.length) return norm(el.labels[0].textContent);
      return norm(el.getAttribute("placeholder") || el.getAttribute("title") ||
        el.getAttribute("name"));
    }
    if (tag === "IMG") return norm(el.getAttribute("alt") || el.getAttribute("title"));
    if (NAME_FROM_CONTENT.has(role)) return norm(el.innerText || el.textContent);
    return norm(el.getAttribute("title"));
  };
  const propsOf = (el, role) => {
    const props = [];
    if (el === document.activeElement && el !== document.body) props.push(["focused", null]);
    const tag = el.tagName;
    if (tag === "INPUT" || tag === "TEXTAREA") {
      const type = (el.getAttribute("type") || "").toLowerCase();
      if (type === "checkbox" || type === "radio")
        props.push(["checked", el.checked ? "true" : "false"]);
      else if (!["submit", "button", "reset", "image", "file"].includes(type) && el.value)
        props.push(["value", type === "password" ? "•".repeat(el.value.length) : el.value]);
    }
    if (tag === "SELECT" && el.selectedOptions.length)
      props.push(["value", norm(el.selectedOptions[0].textContent)]);
    if (tag === "OPTION") props.push(["selected", el.selected ? "true" : "false"]);
    if (el.required) props.push(["required", null]);
    if (el.disabled) props.push(["disabled", null]);
    if (el.getAttribute("aria-invalid") === "true") props.push(["invalid", null]);
    const expanded = el.getAttribute("aria-expanded");
    if (expanded) props.push(["expanded", expanded]);
    if (role === "heading") props.push(["level", el.tagName.slice(1)]);
    return props;
  };
  const addText = (text, depth) => {
    const name = norm(text);
    if (name && nodes.length < MAX)
      nodes.push({id: null, role: "StaticText", name, depth, props: []});
  };
  const walk = (el, depth) => {
    for (const child of el.childNodes) {
      if (nodes.length >= MAX) return;
      if (child.nodeType === Node.TEXT_NODE) { addText(child.textContent, depth); continue; }
      if (child.nodeType !== Node.ELEMENT_NODE) continue;
      if (["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "HEAD"].includes(child.tagName)) continue;
      if (hidden(child)) continue;
      const role = roleOf(child);
      if (!role) {
        // A plain container: its text reads as one line when nothing inside is an element
        // of its own, otherwise its children sit at this level.
        if (!child.querySelector(INTERACTIVE)) addText(child.innerText || child.textContent, depth);
        else walk(child, depth);
        continue;
      }
      const name = nameOf(child, role);
      nodes.push({id: idOf(child), role, name, depth, props: propsOf(child, role)});
      if (["INPUT", "TEXTAREA", "IMG"].includes(child.tagName)) continue;
      if (NAME_FROM_CONTENT.has(role) && !child.querySelector(INTERACTIVE)) continue;
      walk(child, depth + 1);
    }
  };
  const root = document.documentElement;
  const bodyFocused = !document.activeElement || document.activeElement === document.body;
  const rootProps = document.hasFocus() && bodyFocused ? [["focused", null]] : [];
  const title = norm(document.title);
  nodes.push({id: idOf(root), role: "RootWebArea", name: title, depth: 0, props: rootProps});
  if (document.body) walk(document.body, 1);
  return {nodes, truncated: nodes.length >= MAX};
}
""".replace("__MAX_NODES__", str(MAX_NODES))


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def format_nodes(nodes: list[dict[str, Any]]) -> list[str]:
    """Tree lines from the page script's nodes: ``[id] role 'name', prop, key='value'``."""
    lines = []
    for node in nodes:
        indent = "  " * int(node["depth"])
        name = repr(_clip(str(node["name"])))
        if node["id"] is None:
            lines.append(f"{indent}{node['role']} {name}")
            continue
        parts = [f"{indent}[{node['id']}] {node['role']} {name}"]
        for key, value in node["props"]:
            parts.append(key if value is None else f"{key}={_prop_value(key, value)}")
        lines.append(", ".join(parts))
    return lines


def _prop_value(key: str, value: str) -> str:
    if key in ("checked", "selected", "expanded") and value in ("true", "false"):
        return value
    if key == "level" and value.isdigit():
        return value
    return repr(_clip(value))


# -- the executor ---------------------------------------------------------------------------


class RealWeb(RealExecutor):
    """A real browser behind the web domain's interface (see the module docstring).

    Args:
        site: the built-in site to serve (a folder of ``sites/``), or a path to a folder
            of static pages; a task may name another with ``metadata["real_site"]``.
        executable_path: the Chromium to drive.
        action_timeout_ms: how long an action waits for its element to be actionable.
        settle_ms: the pause after an action before the page is read (lets scripts and
            navigations it started begin).
        limits: accepted for the recording tools' common signature; not used.
    """

    name = BACKEND_NAME

    def __init__(
        self,
        *,
        site: str | Path = "shop",
        executable_path: str = CHROMIUM,
        action_timeout_ms: int = 3000,
        settle_ms: int = 150,
        width: int = 1280,
        height: int = 800,
        limits: Any = None,
    ) -> None:
        super().__init__()
        self.site = site
        self.executable_path = executable_path
        self.action_timeout_ms = action_timeout_ms
        self.settle_ms = settle_ms
        self.width = width
        self.height = height
        self._playwright: Any = None
        self._browser: Any = None
        self._context: Any = None
        self._page: Any = None
        self._servers: dict[Path, SiteServer] = {}
        self._server: SiteServer | None = None
        self._mapped_netloc: str | None = None
        self._mapped_scheme = "https"
        self._known_pages: set[int] = set()
        self._shown: str | None = None  # the last page this episode showed

    # -- episode -------------------------------------------------------------------------

    async def start_episode(self, scenario: BaseModel | dict[str, Any], task: Task) -> str:
        """Open a fresh context on the scenario's start page; return the first page."""
        await self.end_episode()
        world: Any = get_domain("web").scenario(scenario)
        site = world.real_site or task.metadata.get("real_site", self.site)
        self._server = self._site_server(site)
        start = urlsplit(world.start_url)
        if start.hostname in LOOPBACK_HOSTS or start.scheme not in ("http", "https"):
            self._mapped_netloc = None
            first = self._server.origin + (start.path or "/")
            first += f"?{start.query}" if start.query else ""
        else:
            self._mapped_netloc, self._mapped_scheme = start.netloc, start.scheme
            first = world.start_url
        browser = await self._ensure_browser()
        self._context = await browser.new_context(
            viewport={"width": self.width, "height": self.height}, service_workers="block"
        )
        self._context.set_default_timeout(self.action_timeout_ms)
        await self._context.route("**/*", self._route)
        self._page = await self._context.new_page()
        self._known_pages = {id(self._page)}
        self.forget_turns()
        error = None
        try:
            await self._page.goto(first, wait_until="load", timeout=15000)
        except Exception as exc:  # noqa: BLE001 - a page that fails to load is still a page
            error = _first_line(exc)
        return await self.observe(error)

    def live_state(self) -> dict[str, Any] | None:
        """The browser's state now, as the web domain's ledger holds it: the URL, title and
        tabs of the page shown last, and its tree; None before a page was shown."""
        if self._shown is None:
            return None
        patch = observe_web(self._shown, Action.say(""), {})
        return {key: value for key, value in patch.items() if value is not None}

    async def end_episode(self) -> None:
        """Close the episode's browser context (the browser itself stays for the next)."""
        self._shown = None
        context, self._context, self._page = self._context, None, None
        if context is not None:
            with contextlib.suppress(Exception):
                await context.close()

    async def aclose(self) -> None:
        """Close everything: the context, the browser, Playwright and the site servers."""
        await self.end_episode()
        browser, self._browser = self._browser, None
        if browser is not None:
            with contextlib.suppress(Exception):
                await browser.close()
        playwright, self._playwright = self._playwright, None
        if playwright is not None:
            with contextlib.suppress(Exception):
                await playwright.stop()
        for server in self._servers.values():
            server.close()
        self._servers.clear()
        self._server = None

    def describe(self) -> dict[str, Any]:
        return {
            "backend": BACKEND_NAME,
            "browser": "chromium (playwright)",
            "site": str(self.site),
            "viewport": [self.width, self.height],
        }

    def _site_server(self, site: str | Path) -> SiteServer:
        folder = Path(site) if Path(site).is_absolute() else SITES_DIR / str(site)
        folder = folder.resolve()
        if folder not in self._servers:
            self._servers[folder] = SiteServer(folder)
        return self._servers[folder]

    async def _ensure_browser(self) -> Any:
        if self._browser is not None and self._browser.is_connected():
            return self._browser
        try:
            from playwright.async_api import async_playwright
        except ImportError:
            raise WorldModelError(
                "real web needs Playwright: pip install 'simgym[web]' (and a system Chromium)"
            ) from None
        if not Path(self.executable_path).exists():
            raise WorldModelError(f"real web: no Chromium at {self.executable_path}")
        if self._playwright is None:
            self._playwright = await async_playwright().start()
        self._browser = await self._playwright.chromium.launch(
            executable_path=self.executable_path, headless=True, args=list(CHROMIUM_ARGS)
        )
        return self._browser

    # -- network -------------------------------------------------------------------------

    def allowed(self, url: str) -> bool:
        """Whether the browser may load ``url``: the site server or the mapped host."""
        parts = urlsplit(url)
        if parts.scheme in ("data", "blob", "about"):
            return True
        if self._server is not None and parts.netloc == self._server.netloc:
            return True
        return self._mapped_netloc is not None and parts.netloc == self._mapped_netloc

    async def _route(self, route: Any) -> None:
        request = route.request
        parts = urlsplit(request.url)
        if self._mapped_netloc is not None and parts.netloc == self._mapped_netloc:
            await self._serve_mapped(route, parts)
        elif self.allowed(request.url):
            await route.continue_()
        else:
            await route.abort("blockedbyclient")

    async def _serve_mapped(self, route: Any, parts: Any) -> None:
        """Answer a request to the scenario's host from the local site."""
        assert self._server is not None
        local = urlunsplit(("http", self._server.netloc, parts.path or "/", parts.query, ""))
        request = route.request
        status, kind, body = await asyncio.to_thread(
            _fetch_local, local, request.method, request.post_data_buffer
        )
        headers = {"Content-Type": kind} if kind else {}
        await route.fulfill(status=status, headers=headers, body=body)

    # -- turns ---------------------------------------------------------------------------

    async def run_action(self, action_text: str) -> str:
        """Run the action in the page; return the page after it."""
        if self._page is None:
            raise WorldModelError("the real browser has no page: start_episode first")
        return await self.observe(await self.act(action_text))

    async def act(self, action_text: str) -> str | None:
        """Run one action given in call syntax; the error line's text, or None."""
        try:
            call = calls.parse_calls(action_text, TABLE, max_calls=1)[0]
        except ActionError as exc:
            return f"invalid action: {exc}"
        spec = TABLE[call.name]
        args = {p.name: p.default for p in spec.all_params() if not p.required}
        args.update(call.args)
        try:
            error = await self._run(call.name, args)
        except _NotFound as exc:
            return f"element {exc} not found"
        except Exception as exc:  # noqa: BLE001 - Playwright's errors become the error line
            return f"{call.name} failed: {_first_line(exc)}"
        await self._settle()
        return error

    async def _run(self, name: str, args: dict[str, Any]) -> str | None:
        page = self._page
        if name in ("send_msg_to_user", "report_infeasible"):
            return None  # the agent's last word changes nothing in the browser
        if name == "noop":
            await asyncio.sleep(min(float(args.get("wait_ms") or 0), 10000) / 1000)
            return None
        if name == "scroll":
            await page.mouse.wheel(float(args["delta_x"]), float(args["delta_y"]))
            return None
        if name == "goto":
            return await self._goto(str(args["url"]))
        if name in ("go_back", "go_forward"):
            move = page.go_back if name == "go_back" else page.go_forward
            await move(wait_until="load")
            return None
        if name in ("new_tab", "tab_close", "tab_focus"):
            return await self._tabs(name, args)
        if name == "upload_file":
            return "upload_file is not available: the real browser has no files to upload"
        if name == "drag_and_drop":
            source = await self._element(args["from_bid"])
            await source.drag_to(await self._element(args["to_bid"]))
            return None
        element = await self._element(args["bid"])
        if name in ("click", "dblclick"):
            options = {"button": args.get("button", "left"), "modifiers": args.get("modifiers")}
            options = {k: v for k, v in options.items() if v}
            await (element.click if name == "click" else element.dblclick)(**options)
        elif name == "hover":
            await element.hover()
        elif name == "fill":
            await element.fill(str(args["value"]))
        elif name == "clear":
            await element.clear()
        elif name == "focus":
            await element.focus()
        elif name == "press":
            await element.press(str(args["key_comb"]))
        elif name == "select_option":
            options = args["options"]
            labels = options if isinstance(options, list) else [options]
            await element.select_option(label=[str(label) for label in labels])
        else:
            return f"{name} is not supported by the real browser"
        return None

    async def _element(self, bid: Any) -> Any:
        locator = self._page.locator(f'[data-simgym-id="{_css_string(str(bid))}"]')
        if await locator.count() == 0:
            raise _NotFound(str(bid))
        return locator.first

    async def _goto(self, url: str) -> str | None:
        target = self._local_url(url)
        if not self.allowed(target):
            # As the browser would report a blocked request; the page stays where it was.
            return f"net::ERR_BLOCKED_BY_CLIENT at {url} (only the local site can be reached)"
        await self._page.goto(target, wait_until="load")
        return None

    def _local_url(self, url: str) -> str:
        """Loopback URLs of the site as given; ``localhost`` spelled as the server is."""
        parts = urlsplit(url)
        if self._server is not None and parts.hostname in LOOPBACK_HOSTS:
            if parts.port == self._server.port:
                return urlunsplit(parts._replace(netloc=self._server.netloc))
        return url

    async def _tabs(self, name: str, args: dict[str, Any]) -> str | None:
        pages = self._context.pages
        if name == "new_tab":
            self._page = await self._context.new_page()
        elif name == "tab_close":
            await self._page.close()
            rest = self._context.pages
            self._page = rest[-1] if rest else await self._context.new_page()
        else:
            index = int(args["index"])
            if index >= len(pages):
                return f"no tab at index {index} ({len(pages)} open)"
            self._page = pages[index]
        await self._page.bring_to_front()
        return None

    async def _settle(self) -> None:
        """Wait for what the action started: a navigation, scripts, a new tab."""
        await asyncio.sleep(self.settle_ms / 1000)
        pages = self._context.pages
        fresh = [page for page in pages if id(page) not in self._known_pages]
        self._known_pages.update(id(page) for page in pages)
        if fresh:
            self._page = fresh[-1]  # a tab the action opened takes the focus, as in Chrome
        elif self._page not in pages:
            self._page = pages[-1] if pages else await self._context.new_page()
        with contextlib.suppress(Exception):
            await self._page.wait_for_load_state("load", timeout=10000)

    # -- observation ---------------------------------------------------------------------

    async def observe(self, error: str | None = None) -> str:
        """The current page as the web domain writes it, with an ``Error:`` line if any."""
        page = self._page
        snapshot: dict[str, Any] = {"nodes": [], "truncated": False}
        for _ in range(3):  # a navigation may replace the document while it is read
            try:
                snapshot = await page.evaluate(_SNAPSHOT_JS)
                break
            except Exception:  # noqa: BLE001
                with contextlib.suppress(Exception):
                    await page.wait_for_load_state("load", timeout=5000)
        title = ""
        with contextlib.suppress(Exception):
            title = await page.title()
        headers = [f"URL: {self._shown_url(page.url)}", f"Title: {_one_line(title)}"]
        pages = self._context.pages
        if len(pages) > 1:
            headers.append("Tabs: " + await self._tab_line(pages))
        if error:
            headers.append(f"Error: {_one_line(error)}")
        lines = format_nodes(snapshot["nodes"]) or ["[1] RootWebArea ''"]
        if snapshot.get("truncated"):
            lines.append("  StaticText '(page cut short)'")
        self._shown = "\n".join(headers + lines)
        return self._shown

    async def _tab_line(self, pages: list[Any]) -> str:
        labels = []
        for index, page in enumerate(pages):
            title = ""
            with contextlib.suppress(Exception):
                title = await page.title()
            active = " (active)" if page is self._page else ""
            labels.append(f"[{index}] {_one_line(title) or 'New Tab'}{active}")
        return " | ".join(labels)

    def _shown_url(self, url: str) -> str:
        # Chromium's "about:blank" and error pages are still absolute URLs for the check.
        return url if "://" in url or url.startswith(("about:", "data:")) else "about:blank"


class _NotFound(Exception):
    """An action named an element id the page does not have."""


def _css_string(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def _one_line(text: str) -> str:
    return " ".join(text.split())
