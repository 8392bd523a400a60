"""Write the heldout mcp episodes: the records server's scenario (tools + seed records, as the
devset declares it) plus hand-written actions."""
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

src = yaml.safe_load(open(ROOT / "devset/episodes/mcp/support_shift_long.yaml"))
scenario = src["scenario"]
assert "tool_map" not in scenario
# the server's clock, held for the episode (the real server runs under libfaketime), so a
# ticket's creation time is the same moment in the simulation and on the real server
scenario["clock"] = "2026-03-02T10:15:00Z"

def call(name, **arguments):
    return {"name": name, "arguments": arguments}

episodes = {
    "email_cleanup": (
        "A mixed-case email change, every way an update can be refused, and the changes read back.",
        {"id": "heldout-mcp-email-cleanup",
         "instruction": "Lena Novak moved to example.org and Dmitri Novak wants a new address; "
                        "update both and confirm what is stored."},
        [
            call("search_customers", query="novak"),
            call("get_customer", customer_id="C-1007"),
            call("update_email", customer_id="C-1007", email="Lena.Novak@Example.ORG"),
            call("get_customer", customer_id="C-1007"),
            call("search_customers", query="LENA.NOVAK@EXAMPLE.ORG"),
            call("update_email", customer_id="C-1004", email="dmitri.novak@"),
            call("update_email", customer_id="C-1004", email="lena.novak@example.org"),
            call("update_email", customer_id="C-1004", email="LENA.novak@example.org"),
            call("update_email", customer_id="C-1004", email="dmitri novak@example.org"),
            call("update_email", customer_id="C-1004", email="dmitri@localhost"),
            call("get_customer", customer_id="C-1099"),
            call("update_email", customer_id="C-1099", email="nobody@example.com"),
            call("update_email", customer_id="C-1004", email="Dmitri.N@example.org"),
            call("search_customers", query="example.org", limit=3),
            call("search_customers", query="lena.novak@mail.example.net"),
            call("get_customer", customer_id="C-1004"),
            call("get_customer", customer_id="C-1007"),
            call("search_customers", query="novak"),
        ],
    ),
    "ticket_desk": (
        "Tickets listed by status, created (one valid, several refused), and listed again.",
        {"id": "heldout-mcp-ticket-desk",
         "instruction": "Hana Tanaka needs a replacement card and Jonas Tanaka a statement copy; "
                        "open tickets for both and check their ticket lists."},
        [
            call("list_tickets", customer_id="C-1008"),
            call("list_tickets", customer_id="C-1008", status="pending"),
            call("list_tickets", customer_id="C-1008", status="closed"),
            call("create_ticket", customer_id="C-1008",
                 subject="Replace card after declined payments", priority="high"),
            call("list_tickets", customer_id="C-1002"),
            call("create_ticket", customer_id="C-1099", subject="Statement copy"),
            call("create_ticket", customer_id="C-0000", subject="Statement copy for March"),
            call("create_ticket", customer_id="C-1003", subject="Statement copy for March"),
            call("list_tickets", customer_id="C-1003"),
            call("list_tickets", customer_id="C-1008", status="open"),
            call("list_tickets", customer_id="C-1003", status="closed"),
            call("search_customers", query="Tanaka"),
            call("get_customer", customer_id="C-1003"),
            call("list_tickets", customer_id="C-1010", status="pending"),
            call("list_tickets", customer_id="C-1012"),
            call("list_tickets", customer_id="C-1008"),
            call("list_tickets", customer_id="C-1003", status="open"),
        ],
    ),
    "account_audit": (
        "Accounts of several customers, phone and limit searches, malformed arguments, an email change read back.",
        {"id": "heldout-mcp-account-audit",
         "instruction": "Audit the Haddad family's accounts and Kemi Silva's, find customers by "
                        "phone, and fix Nadia Haddad's email capitalisation."},
        [
            call("list_accounts", customer_id="C-1006"),
            call("list_accounts", customer_id="C-1012"),
            call("search_customers", query="+351 917"),
            call("search_customers", query="917 928"),
            call("search_customers", query="rossi", limit=1),
            call("search_customers", query="%"),
            call("search_customers", query="_", limit=2),
            call("search_customers", query="zzz"),
            call("list_accounts", customer_id="C-1002"),
            call("list_accounts", customer_id="C-0000"),
            call("get_customer", customer_id="C-1010"),
            call("update_email", customer_id="C-1010", email="Nadia.Haddad@Example.com"),
            call("search_customers", query="haddad"),
            call("list_tickets", customer_id="C-1010"),
            call("list_accounts", customer_id="C-9999"),
            call("search_customers", query="912", limit=2),
            call("list_accounts", customer_id="C-1010"),
            call("get_customer", customer_id="C-1010"),
        ],
    ),
}

for name, (comment, task, actions) in episodes.items():
    doc = {"domain": "mcp", "task": task, "scenario": scenario, "actions": actions}
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)
    header = (f"# {comment}\n# The scenario is the bundled customer-records server's tools and seed records,"
              " as the devset declares them (no tool_map).\n")
    with open(ROOT / f"heldout/episodes/mcp/{name}.yaml", "w") as f:
        f.write(header + text)
    print(name, len(actions))
