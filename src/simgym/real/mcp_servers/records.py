"""A real MCP server: the customer records of a small bank's support desk, kept in SQLite.

It is the ground truth that the simulated ``mcp`` domain imitates: the same tools, answered
by a real database. A missing database file is created and filled from a fixed seed, so two
fresh servers always start with the same customers, accounts and tickets.

    python -m simgym.real.mcp_servers.records --db records.db                 # stdio
    python -m simgym.real.mcp_servers.records --db records.db --http --port 8765
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

SERVER_NAME = "customer-records"
SERVER_VERSION = "1.0.0"
DEFAULT_SEED = 1234
CURRENCY = "EUR"
SERVER_DESCRIPTION = (
    "Customer records of a small bank's support desk: customers, accounts, tickets."
)
INSTRUCTIONS = (
    "Find a customer with search_customers, then pass their id (C-1001 style) to the other "
    "tools. Balances are in EUR. Changes (update_email, create_ticket) are saved at once."
)

SCHEMA = """
CREATE TABLE customers (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    phone TEXT NOT NULL,
    city TEXT NOT NULL,
    tier TEXT NOT NULL CHECK (tier IN ('basic', 'silver', 'gold')),
    joined TEXT NOT NULL
);
CREATE TABLE accounts (
    id TEXT PRIMARY KEY,
    customer_id TEXT NOT NULL REFERENCES customers(id),
    kind TEXT NOT NULL CHECK (kind IN ('checking', 'savings', 'credit_card')),
    balance_cents INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'frozen', 'closed')),
    opened TEXT NOT NULL
);
CREATE TABLE tickets (
    id TEXT PRIMARY KEY,
    customer_id TEXT NOT NULL REFERENCES customers(id),
    subject TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('open', 'pending', 'closed')),
    priority TEXT NOT NULL CHECK (priority IN ('low', 'normal', 'high')),
    created TEXT NOT NULL
);
"""

# The first two customers match the mcp domain's default scenario, so a simulated episode
# and a real one can be compared on the same records.
FIXED_CUSTOMERS = (
    ("Ana Lima", "ana.lima@example.com", "gold"),
    ("Ben Okafor", "ben@example.org", "basic"),
)
FIRST_NAMES = (
    "Chloe",
    "Dmitri",
    "Elif",
    "Farah",
    "Gustavo",
    "Hana",
    "Ivan",
    "Jonas",
    "Kemi",
    "Lena",
    "Marco",
    "Nadia",
)
LAST_NAMES = ("Novak", "Haddad", "Moreau", "Tanaka", "Silva", "Berg", "Mensah", "Rossi", "Quinn")
CITIES = ("Lisbon", "Porto", "Braga", "Coimbra", "Faro")
DOMAINS = ("example.com", "example.org", "mail.example.net")
TICKET_SUBJECTS = (
    "Card declined abroad",
    "Dispute a duplicate charge",
    "Update mailing address",
    "Online banking locked after failed logins",
    "Question about savings interest",
    "Request a new debit card",
)
EMAIL_RE = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$")

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
CustomerId = Annotated[str, Field(description="Customer id, e.g. C-1001.", pattern=r"^C-\d{4}$")]


class RecordError(ValueError):
    """A request the records cannot satisfy (unknown id, invalid value, conflict)."""


# --- data the tools return (the SDK turns these into output schemas) ---------------------


class CustomerSummary(BaseModel):
    id: str
    name: str
    email: str
    tier: str


class Customer(CustomerSummary):
    phone: str
    city: str
    joined: str


class SearchResult(BaseModel):
    customers: list[CustomerSummary]
    total: int


class Account(BaseModel):
    id: str
    kind: str
    balance: float
    currency: str = CURRENCY
    status: str
    opened: str


class AccountList(BaseModel):
    customer_id: str
    accounts: list[Account]


class Ticket(BaseModel):
    id: str
    customer_id: str
    subject: str
    status: str
    priority: str
    created: str


class TicketList(BaseModel):
    customer_id: str
    tickets: list[Ticket]


# --- the database -------------------------------------------------------------------------


def seed_rows(seed: int = DEFAULT_SEED) -> dict[str, list[tuple[Any, ...]]]:
    """The initial rows of every table, a pure function of ``seed``."""
    rng = random.Random(seed)
    people = list(FIXED_CUSTOMERS)
    for first in rng.sample(FIRST_NAMES, 10):
        name = f"{first} {rng.choice(LAST_NAMES)}"
        email = f"{name.lower().replace(' ', '.')}@{rng.choice(DOMAINS)}"
        people.append((name, email, rng.choices(("basic", "silver", "gold"), (6, 3, 1))[0]))
    start = date(2019, 1, 1)
    customers, accounts, tickets = [], [], []
    for n, (name, email, tier) in enumerate(people):
        cid = f"C-{1001 + n}"
        joined = start + timedelta(days=rng.randrange(1800))
        phone = f"+351 91{rng.randrange(10)} {rng.randrange(1000):03d} {rng.randrange(1000):03d}"
        customers.append((cid, name, email, phone, rng.choice(CITIES), tier, joined.isoformat()))
        for kind in ["checking", *rng.sample(("savings", "credit_card"), rng.randrange(3))]:
            cents = (
                rng.randrange(-150_000, 0) if kind == "credit_card" else rng.randrange(2_000_000)
            )
            status = rng.choices(("active", "frozen", "closed"), (12, 1, 1))[0]
            opened = joined + timedelta(days=rng.randrange(400))
            accounts.append(
                (f"A-{50001 + len(accounts)}", cid, kind, cents, status, opened.isoformat())
            )
        for _ in range(rng.choices((0, 1, 2), (4, 4, 2))[0]):
            created = datetime(2025, 1, 1, 9, tzinfo=UTC) + timedelta(
                minutes=rng.randrange(500_000)
            )
            tickets.append(
                (
                    f"T-{9001 + len(tickets)}",
                    cid,
                    rng.choice(TICKET_SUBJECTS),
                    rng.choice(("open", "pending", "closed")),
                    rng.choice(("low", "normal", "high")),
                    _timestamp(created),
                )
            )
    return {"customers": customers, "accounts": accounts, "tickets": tickets}


TABLES = ("customers", "accounts", "tickets")


def _insert_rows(conn: sqlite3.Connection, rows: dict[str, list[dict[str, Any]]]) -> None:
    """Fill the tables from rows given as column -> value (a scenario's state, so that a
    simulated world and this server start from the same records)."""
    unknown = sorted(set(rows) - set(TABLES))
    if unknown:
        raise RecordError(f"the records server has no table(s) {unknown}; it has {list(TABLES)}")
    for table in TABLES:  # parents first: accounts and tickets point to customers
        columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        for row in rows.get(table) or []:
            extra = sorted(set(row) - set(columns))
            if extra:
                raise RecordError(f"{table} row {row.get('id')!r}: no column(s) {extra}")
            names = list(row)
            try:
                conn.execute(
                    f"INSERT INTO {table} ({', '.join(names)}) "
                    f"VALUES ({', '.join('?' * len(names))})",
                    [row[n] for n in names],
                )
            except sqlite3.Error as exc:
                raise RecordError(f"{table} row {row.get('id')!r}: {exc}") from None


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class RecordsStore:
    """The bank's records in one SQLite file; each call opens its own short connection,
    so the store is safe to use from the worker threads the SDK runs tools in."""

    def __init__(
        self,
        path: str | Path,
        *,
        seed: int = DEFAULT_SEED,
        rows: dict[str, list[dict[str, Any]]] | None = None,
    ) -> None:
        self.path = Path(path)
        if not self.path.exists():
            self._create(seed, rows)

    def _create(self, seed: int, rows: dict[str, list[dict[str, Any]]] | None = None) -> None:
        # Build the file under a temporary name and move it into place, so a reader never
        # sees a half-seeded database.
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}.partial")
        partial.unlink(missing_ok=True)
        try:
            with closing(sqlite3.connect(partial)) as conn, conn:
                conn.executescript(SCHEMA)
                if rows is None:
                    for table, seeded in seed_rows(seed).items():
                        marks = ", ".join("?" * len(seeded[0]))
                        conn.executemany(f"INSERT INTO {table} VALUES ({marks})", seeded)
                else:
                    _insert_rows(conn, rows)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        os.replace(partial, self.path)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        with closing(sqlite3.connect(self.path, timeout=10)) as conn:
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA foreign_keys = ON")
            with conn:  # one transaction: commit on success, roll back on error
                yield conn

    def _customer_row(self, conn: sqlite3.Connection, customer_id: str) -> sqlite3.Row:
        row = conn.execute("SELECT * FROM customers WHERE id = ?", (customer_id,)).fetchone()
        if row is None:
            raise RecordError(f"customer {customer_id} not found")
        return row

    def search_customers(self, query: str, limit: int = 10) -> SearchResult:
        # "contains", as the tool says: the query's own % and _ are characters, not LIKE's
        # wildcards (a search for "_" used to find every customer)
        text = query.strip().lower()
        needle = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT * FROM customers WHERE lower(name) LIKE ? ESCAPE '\\' "
                "OR lower(email) LIKE ? ESCAPE '\\' "
                "OR replace(phone, ' ', '') LIKE replace(?, ' ', '') ESCAPE '\\' ORDER BY id",
                (needle, needle, needle),
            ).fetchall()
        found = [
            CustomerSummary(**{k: row[k] for k in CustomerSummary.model_fields}) for row in rows
        ]
        return SearchResult(customers=found[:limit], total=len(found))

    def get_customer(self, customer_id: str) -> Customer:
        with self._connect() as conn:
            return Customer(**dict(self._customer_row(conn, customer_id)))

    def update_email(self, customer_id: str, email: str) -> Customer:
        email = email.strip().lower()
        if not EMAIL_RE.match(email):
            raise RecordError(f"invalid email address {email!r}: expected name@domain.tld")
        with self._connect() as conn:
            self._customer_row(conn, customer_id)
            owner = conn.execute("SELECT id FROM customers WHERE email = ?", (email,)).fetchone()
            if owner is not None and owner["id"] != customer_id:
                raise RecordError(f"email {email} is already used by customer {owner['id']}")
            conn.execute("UPDATE customers SET email = ? WHERE id = ?", (email, customer_id))
            return Customer(**dict(self._customer_row(conn, customer_id)))

    def list_accounts(self, customer_id: str) -> AccountList:
        with self._connect() as conn:
            self._customer_row(conn, customer_id)
            rows = conn.execute(
                "SELECT * FROM accounts WHERE customer_id = ? ORDER BY id", (customer_id,)
            ).fetchall()
        accounts = [
            Account(
                id=r["id"],
                kind=r["kind"],
                balance=r["balance_cents"] / 100,
                status=r["status"],
                opened=r["opened"],
            )
            for r in rows
        ]
        return AccountList(customer_id=customer_id, accounts=accounts)

    def list_tickets(self, customer_id: str, status: str | None = None) -> TicketList:
        with self._connect() as conn:
            self._customer_row(conn, customer_id)
            rows = conn.execute(
                "SELECT * FROM tickets WHERE customer_id = ? AND (? IS NULL OR status = ?) "
                "ORDER BY created, id",
                (customer_id, status, status),
            ).fetchall()
        return TicketList(customer_id=customer_id, tickets=[Ticket(**dict(r)) for r in rows])

    def create_ticket(self, customer_id: str, subject: str, priority: str = "normal") -> Ticket:
        subject = " ".join(subject.split())
        if len(subject) < 3:
            raise RecordError("subject must have at least 3 characters")
        with self._connect() as conn:
            self._customer_row(conn, customer_id)
            # Ids are never reused, so number after the highest one ever given.
            last = conn.execute(
                "SELECT max(CAST(substr(id, 3) AS INTEGER)) FROM tickets"
            ).fetchone()[0]
            ticket = Ticket(
                id=f"T-{(last or 9000) + 1}",
                customer_id=customer_id,
                subject=subject,
                status="open",
                priority=priority,
                created=_timestamp(datetime.now(UTC)),
            )
            conn.execute(
                "INSERT INTO tickets VALUES (?, ?, ?, ?, ?, ?)",
                tuple(ticket.model_dump().values()),
            )
        return ticket

    def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        """Every table as a list of rows: the hidden state a simulated scenario would hold."""
        with self._connect() as conn:
            return {
                table: [dict(r) for r in conn.execute(f"SELECT * FROM {table} ORDER BY id")]
                for table in ("customers", "accounts", "tickets")
            }


# --- the MCP server -----------------------------------------------------------------------


@contextmanager
def _as_tool_error() -> Iterator[None]:
    # A ToolError becomes a CallToolResult with isError=true and this message, which is how
    # MCP servers tell the calling model that a request failed.
    try:
        yield
    except RecordError as exc:
        raise ToolError(str(exc)) from None


READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


def build_server(
    db: str | Path, *, seed: int = DEFAULT_SEED, log_level: LogLevel = "WARNING"
) -> MCPServer:
    """The records MCP server over the database at ``db`` (created from ``seed`` if missing)."""
    store = RecordsStore(db, seed=seed)
    server = MCPServer(
        SERVER_NAME,
        description=SERVER_DESCRIPTION,
        instructions=INSTRUCTIONS,
        version=SERVER_VERSION,
        log_level=log_level,
    )

    @server.tool(annotations=READ_ONLY)
    def search_customers(
        query: Annotated[
            str, Field(description="Part of a name, email or phone number.", min_length=1)
        ],
        limit: Annotated[int, Field(description="Most results to return.", ge=1, le=50)] = 10,
    ) -> SearchResult:
        """Find customers whose name, email or phone contains the query (case-insensitive)."""
        return store.search_customers(query, limit)

    @server.tool(annotations=READ_ONLY)
    def get_customer(customer_id: CustomerId) -> Customer:
        """Fetch one customer's full record."""
        with _as_tool_error():
            return store.get_customer(customer_id)

    @server.tool(annotations=WRITES)
    def update_email(
        customer_id: CustomerId,
        email: Annotated[str, Field(description="The new email address.", max_length=254)],
    ) -> Customer:
        """Change a customer's email address; it must be valid and not used by another customer."""
        with _as_tool_error():
            return store.update_email(customer_id, email)

    @server.tool(annotations=READ_ONLY)
    def list_accounts(customer_id: CustomerId) -> AccountList:
        """List a customer's accounts and balances in EUR (a credit card owes when negative)."""
        with _as_tool_error():
            return store.list_accounts(customer_id)

    @server.tool(annotations=READ_ONLY)
    def list_tickets(
        customer_id: CustomerId,
        status: Annotated[
            Literal["open", "pending", "closed"] | None,
            Field(description="Only tickets in this status; all when omitted."),
        ] = None,
    ) -> TicketList:
        """List a customer's support tickets, oldest first."""
        with _as_tool_error():
            return store.list_tickets(customer_id, status)

    @server.tool(annotations=WRITES)
    def create_ticket(
        customer_id: CustomerId,
        subject: Annotated[
            str, Field(description="One line saying what the customer needs.", max_length=120)
        ],
        priority: Literal["low", "normal", "high"] = "normal",
    ) -> Ticket:
        """Open a new support ticket for a customer."""
        with _as_tool_error():
            return store.create_ticket(customer_id, subject, priority)

    return server


def main(argv: list[str] | None = None) -> None:
    """Command line: serve over stdio (default) or streamable HTTP (``--http``)."""
    parser = argparse.ArgumentParser(
        prog="python -m simgym.real.mcp_servers.records", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--db", required=True, help="SQLite file (created and seeded if missing)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed for a new database")
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP, not stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--path", default="/mcp", help="HTTP endpoint path")
    parser.add_argument(
        "--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )
    args = parser.parse_args(argv)
    server = build_server(args.db, seed=args.seed, log_level=args.log_level)
    if args.http:
        server.run(
            "streamable-http", host=args.host, port=args.port, streamable_http_path=args.path
        )
    else:
        server.run("stdio")


# -- the server as a twin's grounding sees it ----------------------------------------------

# How the server's tools touch its tables, for the twin's grounding (the binding the safety
# suite's records scenario declares, and search_customers): the server fills in a ticket's
# status and time. search_customers is declared whole, so the twin answers a search from
# its records: ``search`` is the server's SQL (lower(name) LIKE and lower(email) LIKE
# '%query%', the query stripped and lowered; replace(phone, ' ', '') LIKE the query without
# spaces), whose matches it lists ORDER BY id, as the twin lists its ledger (the records
# arrive in id order and new ids only grow); ``answer`` is its SearchResult: customers
# (each a CustomerSummary: id, name, email, tier, in that order) cut at ``limit``, and the
# total of all matches.
# What still differs: with output_format "json" the real backend writes the structured
# result as compact json.dumps, as the twin does, so the texts are equal; in the "mcp"
# format the server's text is FastMCP's JSON indented by 2, which the twin writes compact
# until an answer in the episode showed it an indent. SQLite's lower() folds only ASCII
# case, where the twin folds every letter.
TOOL_MAP: dict[str, Any] = {
    "search_customers": {
        "op": "list",
        "collection": "customers",
        "search": {"name": "contains", "email": "contains", "phone": "contains_ignoring_spaces"},
        "answer": {
            "shape": {"customers": "{items}", "total": "{count}"},
            "fields": ["id", "name", "email", "tier"],
        },
    },
    "update_email": {"op": "update", "collection": "customers", "id_arg": "customer_id"},
    "list_accounts": {"op": "list", "collection": "accounts"},
    "list_tickets": {"op": "list", "collection": "tickets"},
    "create_ticket": {
        "op": "create",
        "collection": "tickets",
        "rules": {
            "defaults": {"priority": "normal"},
            "sets": {"status": "open"},
            "stamps": {"created": "iso-z"},
            # the server's Ticket model: with every field known the answer is exact
            "shape": ["id", "customer_id", "subject", "status", "priority", "created"],
        },
    },
}


def answer_order(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` with each record's fields in the order the server's answers show them
    (its answer models' field order; the tables' own order differs). The twin shows a
    record in its ledger order until an answer of the episode has shown the server's, and
    a policy trained on the one order is thrown by the other: a lookup the twin answered
    as ``id, name, email, phone, ...`` read on the real server as ``id, name, email,
    tier, ...`` cost the first sim-trained policy a third of its id lookups."""
    models = {"customers": list(Customer.model_fields), "tickets": list(Ticket.model_fields)}
    out = dict(state)
    for name, order in models.items():
        out[name] = [
            {**{k: r[k] for k in order if k in r}, **{k: v for k, v in r.items() if k not in order}}
            for r in state.get(name, [])
        ]
    return out


if __name__ == "__main__":
    main()
