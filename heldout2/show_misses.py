"""Print each missed turn of a `--compare real` file: the action, the real text and the simulated text."""
import json
import sys

want = set(sys.argv[2].split()) if len(sys.argv) > 2 else None
for line in open(sys.argv[1]):
    row = json.loads(line)
    key = f"{row['task_id']}#{row['turn']}"
    if want is not None and key not in want:
        continue
    print("=" * 20, key)
    print("action:", row["action"][:300])
    print("--- real:")
    print(row["real"])
    print("--- simulated:")
    print(row["simulated"])
