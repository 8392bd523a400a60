"""One short markdown line per missed turn of a `--compare real` file: the action, and the first
line where the real and the simulated text part (the simulated line first seen, else the end)."""
import json
import re
import sys

DURATION = re.compile(r"in \d+\.\d+s")


def body(text, domain):
    if domain == "mcp":
        try:
            item = json.loads(text)
            return [c.get("text", "") for c in item.get("content", [])] + [f"isError={item.get('isError')}"]
        except (ValueError, AttributeError):
            return [text]
    return [DURATION.sub("in <T>s", line).rstrip() for line in (text or "").rstrip().splitlines()]


def short(s, n=90):
    s = s.replace("`", "'")
    return s if len(s) <= n else s[: n - 1] + "…"


def action_text(row):
    action = row["action"]
    try:
        value = json.loads(action)
    except ValueError:
        return action
    if isinstance(value, list) and value and "keystrokes" in value[0]:
        return value[0]["keystrokes"].splitlines()[0] + (" …" if value[0]["keystrokes"].count("\n") > 1 else "")
    if isinstance(value, dict) and "name" in value:
        args = value.get("arguments", {})
        if value["name"] == "bash":
            return "bash: " + args.get("command", "")
        return value["name"] + " " + json.dumps(args)[:80]
    return action


want = set(sys.argv[2].split()) if len(sys.argv) > 2 else None
for line in open(sys.argv[1]):
    row = json.loads(line)
    key = f"{row['task_id'].removeprefix('heldout2-')}#{row['turn']}"
    if want is not None and f"{row['task_id']}#{row['turn']}" not in want:
        continue
    real, sim = body(row["real"], row["domain"]), body(row["simulated"], row["domain"])
    i = 0
    while i < min(len(real), len(sim)) and real[i] == sim[i]:
        i += 1
    r = real[i] if i < len(real) else "(end)"
    s = sim[i] if i < len(sim) else "(end)"
    print(f"- `{key}` `{short(action_text(row), 70)}`: real `{short(r)}`, simulated `{short(s)}`"
          f" (line {i + 1}; {len(real)} real lines, {len(sim)} simulated)")
