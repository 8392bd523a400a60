"""The ``smartphones`` theme: a 2029 smartphone market of makers, chipsets and phones."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

from simgym.worlds.themes._base import Ctx, Entity, Names, Rule, Tables, Theme, slug
from simgym.worlds.themes._columns import (
    any_key,
    choice,
    count,
    date,
    from_iso,
    integer,
    key,
    name,
    one_value_per,
    pick,
    real,
    ref,
    text,
    total,
    year_start,
)

_PHONE_TODAY = dt.date(2030, 1, 15)
_FIRST_LAUNCH = dt.date(2025, 1, 1)
_LAST_LAUNCH = dt.date(2029, 12, 31)


def _phone_setup(names: Names) -> dict[str, Any]:
    countries = [names.country() for _ in range(7)]
    cities = [(names.city(), countries[i % len(countries)]) for i in range(16)]
    designers = [names.company(("Semiconductor", "Silicon", "Micro")) for _ in range(5)]
    return {
        "cities": [city for city, _ in cities],
        "country_of": dict(cities),
        "designers": designers,
    }


def _phone_launch(c: Ctx) -> str:
    maker = c.ref("makers", "maker_id")
    chipset = c.ref("chipsets", "chipset_id")
    lo = max(
        _FIRST_LAUNCH,
        year_start(maker["founded_year"] + 1),
        year_start(chipset["release_year"]),
    )
    return c.date_between(lo, _LAST_LAUNCH)


def _country(c: Ctx) -> str:
    return c.vocab["country_of"][c.row["hq_city"]]


def _chipset_name(c: Ctx) -> str:
    return c.names.unique(
        "chipset", lambda: f"{c.names.word(2)} {c.rng.choice('ZKQVRX')}{c.rng.randint(1, 12)}"
    )


def _phone_name(c: Ctx) -> str:
    tier = c.rng.choice(("", "", "Pro ", "Lite ", "Max ", "X", "Note "))
    return c.names.unique("product", lambda: f"{c.names.word(2)} {tier}{c.rng.randint(1, 30)}")


def _launch_rules(tables: Tables) -> Iterator[str]:
    for phone in tables.rows("phones"):
        maker = tables.get("makers", phone["maker_id"])
        chipset = tables.get("chipsets", phone["chipset_id"])
        year = from_iso(phone["launch_date"]).year
        if maker is not None and year <= maker["founded_year"]:
            yield (
                f"phones[{phone['phone_id']}]: launched {phone['launch_date']}, not after "
                f"its maker was founded ({maker['founded_year']})"
            )
        if chipset is not None and year < chipset["release_year"]:
            yield (
                f"phones[{phone['phone_id']}]: launched {phone['launch_date']}, before its "
                f"chipset's release year {chipset['release_year']}"
            )


SMARTPHONES = Theme(
    key="smartphones",
    title="2029 smartphone market",
    aliases=("2029 smartphone market", "smartphone market", "smartphone", "phones"),
    today=_PHONE_TODAY,
    setup=_phone_setup,
    world_name=lambda names: f"{names.word(2)} Handset Atlas",
    site=lambda name: f"https://www.{slug(name)}.net",
    description="{name}, a catalogue of the (fictional) smartphone market up to the end "
    "of 2029: makers, chipsets and every phone they launched.",
    entities=(
        Entity(
            table="makers",
            singular="maker",
            plural="makers",
            count=(28, 40),
            summary="{name} is a smartphone maker headquartered in {hq_city}, {country}. "
            "It was founded in {founded_year} and is led by {ceo}.",
            brief="country",
            attrs=(
                key("maker_id", "maker ID", "MK", 3),
                name("name", "name", lambda c: c.names.company(("Mobile", "Devices", "Labs"))),
                # a city lies in one country: neither may change alone
                text("hq_city", "headquarters city", pick("cities"), mutable=False),
                text("country", "country", _country, mutable=False),
                integer("founded_year", "founding year", 1975, 2028, mutable=False),
                integer("employees", "number of employees", 150, 240000, log=True),
                text("ceo", "chief executive", lambda c: c.names.person(), unique=True),
                count("phone_count", "number of phone models", "phones", "maker_id"),
                total(
                    "total_units_sold_k",
                    "total units sold (thousands)",
                    "phones",
                    "maker_id",
                    "units_sold_k",
                    lo=1,
                ),
            ),
        ),
        Entity(
            table="chipsets",
            singular="chipset",
            plural="chipsets",
            count=(14, 24),
            summary="{name} is a {cpu_cores}-core smartphone chipset designed by {designer}, "
            "built on a {process_nm} nm process and released in {release_year}.",
            brief="release_year",
            attrs=(
                key("chipset_id", "chipset ID", "CH", 2),
                name("name", "name", _chipset_name),
                text("designer", "designer", pick("designers")),
                integer("release_year", "release year", 2023, 2029, mutable=False),
                choice("process_nm", "process node (nm)", (2, 3, 4, 5, 7)),
                choice("cpu_cores", "number of CPU cores", (6, 8, 10, 12)),
            ),
        ),
        Entity(
            table="phones",
            singular="phone",
            plural="phones",
            count=(260, 400),
            summary="The {name} is a smartphone made by {maker_id}, launched on {launch_date} "
            "at {price_usd} USD. It runs on the {chipset_id} chipset.",
            brief="launch_date",
            attrs=(
                key("phone_id", "phone ID", "PH", 4),
                name("name", "model name", _phone_name),
                ref("maker_id", "maker", "makers"),
                ref("chipset_id", "chipset", "chipsets", any_key("chipsets")),
                date("launch_date", "launch date", _phone_launch, _FIRST_LAUNCH, _LAST_LAUNCH),
                integer("price_usd", "launch price (USD)", 79, 2199),
                real("screen_in", "screen size (inches)", 5.2, 7.9, 1),
                integer("battery_mah", "battery capacity (mAh)", 2800, 7200, step=10),
                choice("storage_gb", "base storage (GB)", (64, 128, 256, 512, 1024)),
                # feeds the maker's total, so it never changes alone
                integer(
                    "units_sold_k", "units sold (thousands)", 1, 25000, log=True, mutable=False
                ),
            ),
        ),
    ),
    rules=(
        Rule(
            "launch_after_founding",
            "a phone launches after its maker's founding year and not before its chipset's "
            "release year",
            _launch_rules,
        ),
        one_value_per("makers", "hq_city", "country"),
    ),
)
