"""Write heldout2's mcp episodes: the bundled customer-records server's scenario, taken whole
(tools, seed records and held clock) from heldout/episodes/mcp/ticket_desk.yaml, with new
actions written for this set."""
import sys
from pathlib import Path

import yaml

MAIN = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
OUT = Path(__file__).resolve().parent / "episodes" / "mcp"

scenario = yaml.safe_load(open(MAIN / "heldout/episodes/mcp/ticket_desk.yaml"))["scenario"]
assert scenario["clock"] == "2026-03-02T10:15:00Z"


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


episodes = {
    "email_migration": (
        "Customers on the retired mail.example.net domain moved to new addresses: searches, "
        "updates, every kind of refusal, and reads after each write.",
        {"id": "heldout2-mcp-email-migration",
         "instruction": "mail.example.net is shutting down. Move Gustavo Silva and Chloe Rossi "
                        "to their new addresses and check who is still on the old domain."},
        [
            call("search_customers", query="mail.example.net"),
            call("search_customers", query="mail.example.net", limit=2),
            call("get_customer", customer_id="C-1011"),
            call("update_email", customer_id="C-1011", email="gustavo.silva@example.com"),
            call("get_customer", customer_id="C-1011"),
            call("search_customers", query="gustavo"),
            call("update_email", customer_id="C-1005", email="ivan.rossi@example.com"),
            call("update_email", customer_id="C-1005", email="chloe.rossi@example.com"),
            call("update_email", customer_id="C-1005", email="not-an-email"),
            call("update_email", customer_id="C-1020", email="someone@example.com"),
            call("update_email", customer_id="C-1010", email="chloe.rossi@example.com"),
            call("search_customers", query="mail.example.net"),
            call("search_customers", query="rossi"),
            call("get_customer", customer_id="C-1005"),
            call("update_email", customer_id="C-1011", email="gustavo.silva@example.com"),
            call("get_customer", customer_id="C-1011"),
            call("search_customers", query="@example.com", limit=50),
        ],
    ),
    "frozen_accounts": (
        "Frozen accounts found with list_accounts, tickets opened for them (one refused for "
        "a customer that does not exist), and the ticket lists read back.",
        {"id": "heldout2-mcp-frozen-accounts",
         "instruction": "Find which of Hana Tanaka's, Kemi Silva's and Ivan Rossi's accounts are "
                        "frozen and open an unfreeze ticket for each customer affected."},
        [
            call("list_accounts", customer_id="C-1008"),
            call("list_accounts", customer_id="C-1012"),
            call("list_accounts", customer_id="C-1009"),
            call("get_customer", customer_id="C-1009"),
            call("list_tickets", customer_id="C-1009"),
            call("create_ticket", customer_id="C-1009",
                 subject="Unfreeze credit card A-50018", priority="high"),
            call("list_tickets", customer_id="C-1009"),
            call("create_ticket", customer_id="C-1099",
                 subject="Unfreeze checking account A-50023", priority="high"),
            call("create_ticket", customer_id="C-1012",
                 subject="Unfreeze checking account A-50023"),
            call("list_tickets", customer_id="C-1012"),
            call("list_tickets", customer_id="C-1012", status="open"),
            call("list_accounts", customer_id="C-9999"),
            call("list_tickets", customer_id="C-1012", status="closed"),
            call("create_ticket", customer_id="C-1008",
                 subject="Unfreeze savings account A-50016 (called twice this week, "
                         "asks for a call back before Friday)"),
            call("create_ticket", customer_id="C-1008",
                 subject="Unfreeze savings account A-50016", priority="normal"),
            call("list_tickets", customer_id="C-1008", status="open"),
            call("list_tickets", customer_id="C-1008"),
            call("search_customers", query="Tanaka"),
        ],
    ),
    "callback_queue": (
        "A support agent works a call-back queue: customers found by phone fragments, their "
        "accounts and tickets, new tickets, an empty search and an unchanged email.",
        {"id": "heldout2-mcp-callback-queue",
         "instruction": "Work the call-back queue: the caller from +351 917 737 072 needs her "
                        "frozen checking account looked at, and Ana Lima wants a travel notice."},
        [
            call("search_customers", query="+351 917"),
            call("search_customers", query="917 737"),
            call("get_customer", customer_id="C-1007"),
            call("list_accounts", customer_id="C-1007"),
            call("list_tickets", customer_id="C-1007"),
            call("create_ticket", customer_id="C-1007",
                 subject="Review frozen checking account A-50012"),
            call("list_tickets", customer_id="C-1007"),
            call("search_customers", query="Lena", limit=1),
            call("search_customers", query="+351 91", limit=5),
            call("search_customers", query="zzz"),
            call("get_customer", customer_id="C-1001"),
            call("list_tickets", customer_id="C-1001", status="open"),
            call("list_accounts", customer_id="C-1001"),
            call("create_ticket", customer_id="C-1001",
                 subject="Travel notice for Japan", priority="low"),
            call("list_tickets", customer_id="C-1001"),
            call("update_email", customer_id="C-1001", email="ana.lima@example.com"),
            call("get_customer", customer_id="C-1001"),
            call("search_customers", query="LIMA", limit=50),
            call("list_tickets", customer_id="C-1007", status="closed"),
        ],
    ),
}

OUT.mkdir(parents=True, exist_ok=True)
for name, (comment, task, actions) in episodes.items():
    doc = {"domain": "mcp", "task": task, "scenario": scenario, "actions": actions}
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)
    (OUT / f"{name}.yaml").write_text(f"# {comment}\n# Scenario: heldout/episodes/mcp/ticket_desk.yaml's, unchanged.\n" + text)
    print(name, len(actions))
