"""The ``bank`` theme: a regional bank (branches, customers, accounts, loans)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

from simgym.worlds.themes._base import Attr, Ctx, Entity, Names, Rule, Tables, Theme, slug
from simgym.worlds.themes._columns import (
    any_key,
    choice,
    count,
    date,
    from_iso,
    integer,
    key,
    name,
    real,
    ref,
    text,
    total,
    year_start,
)

_BANK_TODAY = dt.date(2028, 6, 30)
_BANK_FIRST = dt.date(1968, 1, 1)  # the oldest branch's earliest opening
_LOANS = {
    "Mortgage": ((80000, 900000), (180, 240, 300, 360)),
    "Auto": ((5000, 80000), (36, 48, 60, 72)),
    "Personal": ((1000, 50000), (12, 24, 36, 60)),
    "Business": ((20000, 2000000), (24, 36, 60, 84, 120)),
}
_SEGMENTS = ("Retail", "Premier", "Small business")
_ACCOUNTS = ("Checking", "Savings", "Term deposit")


def _bank_setup(names: Names) -> dict[str, Any]:
    return {"cities": [names.city() for _ in range(14)]}


def _branch_city(c: Ctx) -> str:
    return c.vocab["cities"][c.position]


def _joined(c: Ctx) -> str:
    branch = c.ref("branches", "branch_id")
    lo = max(year_start(branch["opened_year"]), year_start(c.row["birth_year"] + 18))
    return c.date_between(lo, _BANK_TODAY)


def _since_joined(c: Ctx) -> str:
    return c.date_between(from_iso(c.ref("customers", "customer_id")["joined_date"]), _BANK_TODAY)


def _balance(c: Ctx) -> int:
    low = 1000 if c.row["type"] == "Term deposit" else 0
    return max(low, round(50 * (5000 ** c.rng.random())))


def _loan_kind(c: Ctx) -> str:
    segment = c.ref("customers", "customer_id")["segment"]
    kinds = tuple(_LOANS) if segment == "Small business" else ("Mortgage", "Auto", "Personal")
    return c.rng.choice(kinds)


def _principal(c: Ctx) -> int:
    lo, hi = _LOANS[c.row["kind"]][0]
    return min(hi, max(lo, int(round(lo * (hi / lo) ** c.rng.random(), -2))))


def _term(c: Ctx) -> int:
    return c.rng.choice(_LOANS[c.row["kind"]][1])


def _deposits(tables: Tables, row: dict[str, Any]) -> int:
    return sum(
        account["balance_usd"]
        for customer in tables.children("customers", "branch_id", row["branch_id"])
        for account in tables.children("accounts", "customer_id", customer["customer_id"])
    )


def _bank_rules(tables: Tables) -> Iterator[str]:
    for customer in tables.rows("customers"):
        where = f"customers[{customer['customer_id']}]"
        joined = from_iso(customer["joined_date"])
        if joined.year - customer["birth_year"] < 18:
            yield f"{where}: joined before turning 18"
        branch = tables.get("branches", customer["branch_id"])
        if branch is not None and joined.year < branch["opened_year"]:
            yield f"{where}: joined before the branch opened"
    for account in tables.rows("accounts"):
        customer = tables.get("customers", account["customer_id"])
        if customer is not None and account["opened_date"] < customer["joined_date"]:
            yield f"accounts[{account['account_id']}]: opened before the customer joined"
        if account["type"] == "Term deposit" and account["balance_usd"] < 1000:
            yield f"accounts[{account['account_id']}]: a term deposit under 1000 USD"
    for loan in tables.rows("loans"):
        where = f"loans[{loan['loan_id']}]"
        customer = tables.get("customers", loan["customer_id"])
        if customer is not None:
            if loan["start_date"] < customer["joined_date"]:
                yield f"{where}: starts before the customer joined"
            if loan["kind"] == "Business" and customer["segment"] != "Small business":
                yield f"{where}: a business loan for a {customer['segment']} customer"
        (lo, hi), terms = _LOANS.get(loan["kind"], ((0, 0), ()))
        if not lo <= loan["principal_usd"] <= hi:
            yield f"{where}: principal outside the {loan['kind']} range"
        if loan["term_months"] not in terms:
            yield f"{where}: a {loan['term_months']}-month term is not offered for {loan['kind']}"


BANK = Theme(
    key="bank",
    title="regional bank",
    aliases=("regional bank", "bank", "banking"),
    today=_BANK_TODAY,
    setup=_bank_setup,
    world_name=lambda names: (
        f"{names.word(2)} {names.rng.choice(('Valley', 'County', 'Savings'))} Bank"
    ),
    site=lambda name: f"https://kb.{slug(name)}.com",
    description="the staff knowledge base of {name}, a (fictional) regional bank: its "
    "branches, customers, accounts and loans.",
    entities=(
        Entity(
            table="branches",
            singular="branch",
            plural="branches",
            count=(10, 14),
            summary="{name} serves customers in {city}; it opened in {opened_year}.",
            brief="city",
            attrs=(
                key("branch_id", "branch ID", "BR", 2),
                name("name", "name", lambda c: f"{_branch_city(c)} Branch"),
                text("city", "city", _branch_city, unique=True, mutable=False),
                integer("opened_year", "opening year", 1968, 2021, mutable=False),
                count("customer_count", "number of customers", "customers", "branch_id"),
                Attr("total_deposits_usd", "total deposits (USD)", "int", derive=_deposits, lo=0),
            ),
        ),
        Entity(
            table="customers",
            singular="customer",
            plural="customers",
            count=(100, 150),
            summary="{name} is a {segment} customer of {branch_id}, born in {birth_year}, "
            "a customer since {joined_date}.",
            brief="segment",
            attrs=(
                key("customer_id", "customer ID", "CU", 5),
                name("name", "name", lambda c: c.names.person()),
                ref("branch_id", "home branch", "branches"),
                choice("segment", "segment", _SEGMENTS, mutable=False),
                integer("birth_year", "birth year", 1938, 2008, mutable=False),
                date("joined_date", "date joined", _joined, _BANK_FIRST, _BANK_TODAY),
                count("account_count", "number of accounts", "accounts", "customer_id"),
                total(
                    "total_balance_usd",
                    "total balance (USD)",
                    "accounts",
                    "customer_id",
                    "balance_usd",
                ),
            ),
        ),
        Entity(
            table="accounts",
            singular="account",
            plural="accounts",
            count=(150, 220),  # at least one account per customer
            summary="Account {account_id} is a {type} account of {customer_id}, opened on "
            "{opened_date}, with a balance of {balance_usd} USD.",
            brief="type",
            attrs=(
                key("account_id", "account number", "AC", 6),
                ref("customer_id", "holder", "customers"),
                choice("type", "account type", _ACCOUNTS, mutable=False),
                date("opened_date", "opening date", _since_joined, _BANK_FIRST, _BANK_TODAY),
                # feeds the customer's and the branch's totals
                integer("balance_usd", "balance (USD)", 0, 250000, _balance, mutable=False),
            ),
        ),
        Entity(
            table="loans",
            singular="loan",
            plural="loans",
            count=(60, 100),
            summary="Loan {loan_id} is a {kind} loan of {principal_usd} USD to {customer_id} at "
            "{rate_pct}% over {term_months} months, starting {start_date}.",
            brief="kind",
            attrs=(
                key("loan_id", "loan ID", "LN", 5),
                ref("customer_id", "borrower", "customers", any_key("customers")),
                choice("kind", "loan type", tuple(_LOANS), _loan_kind, mutable=False),
                integer(
                    "principal_usd", "principal (USD)", 1000, 2000000, _principal, mutable=False
                ),
                real("rate_pct", "interest rate (%)", 2.5, 14.9, 2),
                integer("term_months", "term (months)", 12, 360, _term, mutable=False),
                date("start_date", "start date", _since_joined, _BANK_FIRST, _BANK_TODAY),
            ),
        ),
    ),
    rules=(
        Rule(
            "bank",
            "customers join at 18 or older and after their branch opened; accounts and loans "
            "start after the customer joined; term deposits hold at least 1000 USD; business "
            "loans only for small-business customers; principals and terms fit the loan type",
            _bank_rules,
        ),
    ),
)
