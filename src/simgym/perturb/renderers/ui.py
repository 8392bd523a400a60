"""Accessibility-tree fault templates (web, os, android): the screen before the action,
since the action did not get through, with the fault on it (a dialog, a notice, an
error page)."""

from __future__ import annotations

from typing import Any

from simgym.domains._gui import uitree
from simgym.perturb.renderers._base import REASONS, Blank, Context, Renderer

_ROLES = {
    "web": {"text": "StaticText", "button": "button", "dialog": "dialog", "busy": "progressbar"},
    "os": {"text": "label", "button": "push-button", "dialog": "dialog", "busy": "progress-bar"},
    "android": {
        "text": "android.widget.TextView",
        "button": "android.widget.Button",
        "dialog": "android.widget.FrameLayout",
        "busy": "android.widget.ProgressBar",
    },
}
_UI_ERRORS = {
    "auth_failure": ("Signed out", "Your session has expired. Sign in again to continue."),
    "permission_denied": ("Permission denied", "You do not have permission to do this."),
    "timeout": ("Not responding", "The operation timed out after {seconds} seconds."),
    "rate_limit": ("Too many requests", "Please try again in {retry_after} seconds."),
    "server_error": ("Something went wrong", "Server error {status}. Try again later."),
    "flaky_network": ("No connection", "{network_error}. Check your connection and retry."),
}
_WEB_PAGES = {
    "auth_failure": ("401 Unauthorized", "Sign in is required to view this page."),
    "permission_denied": ("403 Forbidden", "You don't have permission to access this page."),
    "timeout": ("This site can't be reached", "ERR_TIMED_OUT"),
    "rate_limit": ("429 Too Many Requests", "Retry after {retry_after} seconds."),
    "server_error": ("{status} {reason}", "The server encountered an error."),
    "flaky_network": ("This site can't be reached", "ERR_CONNECTION_RESET"),
}
_NOTICES = {
    "pagination": ("Page 1 of {pages}", "Next page"),
    "truncated": ("{omitted} more results are hidden", "Show more"),
    "empty_results": ("No results found.", None),
    "stale_data": ("Last updated {age_days} days ago. This may be out of date.", "Refresh"),
    "partial_batch": ("Some changes could not be saved.", "Retry"),
}


class _Tree:
    """The screen before the action: header lines and tree lines, with room to add nodes."""

    def __init__(self, text: str) -> None:
        lines = text.strip("\n").splitlines()
        _, start = uitree.split_headers(text.strip("\n"))
        self.headers = [line for line in lines[:start] if line.strip()]
        self.lines = [line for line in lines[start:] if line.strip()]
        self.unit = "\t" if any(line.startswith("\t") for line in self.lines) else "  "
        numbers = [int(i) for i in uitree.parse_tree("\n".join(self.lines)).ids if i.isdigit()]
        self._next = max(numbers, default=0) + 1000  # far above the screen's own ids

    def new_id(self) -> str:
        self._next += 1
        return str(self._next)

    def header(self, key: str) -> str | None:
        for line in self.headers:
            name, sep, value = line.partition(":")
            if sep and name.strip().lower() == key.lower():
                return value.strip()
        return None

    def add(self, depth: int, role: str, name: str, flags: str = "", with_id: bool = True):
        node = f"[{self.new_id()}] {role} {name!r}" if with_id else f"{role} {name!r}"
        self.lines.append(self.unit * depth + node + (f" {flags}" if flags else ""))


def ui_renderer(domain: str) -> Renderer:
    roles = _ROLES[domain]

    def render(kind: str, ctx: Context) -> str:
        tree = _Tree(ctx.last_observation)
        values = {**ctx.params, "reason": REASONS.get(ctx.get("status"), "Error")}
        if domain == "web" and (kind in _WEB_PAGES or kind == "slow_load"):
            return _web_page(kind, ctx, tree, values)
        depth = 0 if domain == "os" or not tree.lines else 1
        if kind in _NOTICES:
            text, button = _NOTICES[kind]
            tree.add(depth, roles["text"], text.format_map(Blank(values)), with_id=False)
            if button:
                tree.add(depth, roles["button"], button, "clickable" if domain == "android" else "")
        elif kind == "slow_load":
            tree.add(depth, roles["busy"], "Loading", "busy")
        else:
            if kind == "ui_dialog":
                title, text = str(ctx.get("title")), str(ctx.get("text"))
                buttons = list(ctx.get("buttons") or ["OK"])
            else:
                title, text = _UI_ERRORS[kind]
                text = ctx.get("message") or text.format_map(Blank(values))
                buttons = ["Cancel", "Retry"] if kind != "permission_denied" else ["OK"]
            tree.add(depth, roles["dialog"], title, "modal focused")
            tree.add(depth + 1, roles["text"], text, with_id=False)
            for label in buttons:
                tree.add(depth + 1, roles["button"], label)
            if domain == "os":  # a dialog takes the keyboard focus
                kept = [h for h in tree.headers if not h.lower().startswith("focused window")]
                tree.headers = [f"Focused window: {title}", *kept]
        headers = tree.headers or [_default_header(domain, ctx.scenario)]
        return "\n".join([*headers, *tree.lines])

    return render


def _default_header(domain: str, scenario: Any) -> str:
    if domain == "web":
        return f"URL: {scenario.start_url}"
    if domain == "os":
        return f"Focused window: {scenario.focused}"
    return f"App: {scenario.app}"


def _web_page(kind: str, ctx: Context, tree: _Tree, values: dict[str, Any]) -> str:
    url = tree.header("URL") or ctx.scenario.start_url
    target = ctx.action.arguments.get("url") if ctx.action.name == "goto" else None
    url = target or url
    if kind == "slow_load":
        title, lines = "Loading...", ["  [2] progressbar 'Loading' busy"]
    else:
        title, text = (s.format_map(Blank(values)) for s in _WEB_PAGES[kind])
        text = ctx.get("message") or text
        lines = [f"  [2] heading {title!r}", f"  StaticText {text!r}"]
    return "\n".join(
        [f"URL: {url}", f"Title: {title}", f"[1] RootWebArea {title!r}, focused", *lines]
    )
