"""Theme vocabularies for fictional worlds: which entities a world holds and how to invent them.

A :class:`Theme` is a schema: entity types (tables), each with typed attributes that carry
their own value generator, relations (``ref`` attributes pointing at another table),
derived attributes (totals and counts computed from other rows after generation) and
cross-field rules (a launch after the maker was founded, a weight within the truck's
capacity). Generators see the rows made so far and build every row so that it obeys the
rules; :func:`simgym.worlds.generate.check_world` verifies that they did.

Every name is invented from syllables (:class:`Names`), so no fact can be looked up in
the real world: an agent must read the world's own pages or tools.

Three themes ship: ``smartphones`` ("2029 smartphone market"), ``logistics`` ("mid-size
logistics company") and ``bank`` ("regional bank").
"""

from __future__ import annotations

import datetime as dt
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from simgym.core.errors import SimgymError

AttrKind = Literal["key", "name", "text", "int", "float", "date", "choice", "ref"]

# -- invented names ---------------------------------------------------------------------

_ONSETS = ("b", "br", "c", "d", "dr", "f", "g", "gr", "h", "k", "kr", "l", "m", "n", "p")
_ONSETS += ("r", "s", "st", "t", "tr", "v", "z", "th", "sh", "")
_INNER = ("d", "k", "l", "m", "n", "r", "s", "t", "v", "z", "th", "b", "g")
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "ai", "ia", "ea")
_CODAS = ("", "", "", "n", "r", "l", "s", "x", "th", "nd", "rk", "m", "nt")
_CITY_ENDS = ("ford", "haven", "mere", "ton", "vik", "stad", "port", "field", "wick", "dale")
_COUNTRY_ENDS = ("ia", "land", "ora", "esh", "any", "ovia")


class Names:
    """Invents pronounceable names and keeps each kind unique within one world."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self._used: dict[str, set[str]] = {}

    def word(self, syllables: int = 2) -> str:
        # Later syllables start with one consonant, which keeps the words pronounceable.
        parts = [
            self.rng.choice(_ONSETS if i == 0 else _INNER) + self.rng.choice(_VOWELS)
            for i in range(syllables)
        ]
        parts[-1] += self.rng.choice(_CODAS)
        return "".join(parts).capitalize()

    def unique(self, kind: str, make: Callable[[], str]) -> str:
        """A fresh value from ``make`` never returned before for ``kind``."""
        used = self._used.setdefault(kind, set())
        for _ in range(2000):
            value = make()
            if value not in used:
                used.add(value)
                return value
        raise RuntimeError(f"ran out of unique {kind} names")  # a theme asking too much

    def person(self) -> str:
        return self.unique("person", lambda: f"{self.word(self.rng.randint(1, 2))} {self.word(2)}")

    def company(self, suffixes: tuple[str, ...]) -> str:
        return self.unique("company", lambda: f"{self.word(2)} {self.rng.choice(suffixes)}")

    def city(self) -> str:
        return self.unique(
            "place", lambda: self.word(self.rng.randint(1, 2)) + self.rng.choice(_CITY_ENDS)
        )

    def country(self) -> str:
        return self.unique("place", lambda: self.word(1) + self.rng.choice(_COUNTRY_ENDS))


def slug(text: str) -> str:
    """Lower-case words joined by hyphens, for URLs."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


# -- the schema -------------------------------------------------------------------------


class Tables:
    """The rows of a world by table, with lazily built indexes (key lookup, children)."""

    def __init__(self, theme: Theme, data: dict[str, list[dict[str, Any]]]) -> None:
        self.theme = theme
        self.data = data
        self._by_key: dict[str, dict[str, dict[str, Any]]] = {}
        self._children: dict[tuple[str, str], dict[Any, list[dict[str, Any]]]] = {}

    def rows(self, table: str) -> list[dict[str, Any]]:
        return self.data.get(table, [])

    def get(self, table: str, key: Any) -> dict[str, Any] | None:
        if table not in self._by_key:
            key_name = self.theme.entity(table).key.name
            self._by_key[table] = {row.get(key_name): row for row in self.rows(table)}
        return self._by_key[table].get(key)

    def children(self, table: str, attr: str, key: Any) -> list[dict[str, Any]]:
        """Rows of ``table`` whose ``attr`` (a ref) is ``key``, in table order."""
        if (table, attr) not in self._children:
            groups: dict[Any, list[dict[str, Any]]] = {}
            for row in self.rows(table):
                groups.setdefault(row.get(attr), []).append(row)
            self._children[(table, attr)] = groups
        return self._children[(table, attr)].get(key, [])

    def add(self, table: str, rows: list[dict[str, Any]]) -> None:
        self.data[table] = rows
        self._by_key.pop(table, None)
        for pair in [p for p in self._children if p[0] == table]:
            del self._children[pair]


@dataclass
class Ctx:
    """What a value generator sees: the world's random source and vocabulary, the tables
    finished so far, this table's rows so far and the row being built."""

    rng: random.Random
    names: Names
    tables: Tables
    vocab: dict[str, Any]
    today: dt.date
    position: int = 0  # index of the row being built within its table
    done: list[dict[str, Any]] = field(default_factory=list)
    row: dict[str, Any] = field(default_factory=dict)

    def ref(self, table: str, attr: str) -> dict[str, Any]:
        """The row of ``table`` that this row's ``attr`` points at."""
        found = self.tables.get(table, self.row[attr])
        assert found is not None, f"{attr} points at a missing {table} row"
        return found

    def cover(self, table: str) -> Any:
        """A key of ``table``: each row once for the first positions, then at random, so
        every parent gets at least one child."""
        rows = self.tables.rows(table)
        key = self.tables.theme.entity(table).key.name
        if self.position < len(rows):
            return rows[self.position][key]
        return self.rng.choice(rows)[key]

    def date_between(self, lo: dt.date, hi: dt.date) -> str:
        return (lo + dt.timedelta(days=self.rng.randint(0, (hi - lo).days))).isoformat()


Gen = Callable[[Ctx], Any]
Derive = Callable[[Tables, dict[str, Any]], Any]


@dataclass(frozen=True)
class Attr:
    """One column. ``label`` is how pages and questions name it ("launch price (USD)");
    ``lo``/``hi`` bound numbers and dates (dates as ISO strings); a ``ref`` holds a key of
    table ``ref``; a ``derive`` attribute is computed from other rows once all exist."""

    name: str
    label: str
    kind: AttrKind
    gen: Gen | None = None
    lo: Any = None
    hi: Any = None
    choices: tuple[Any, ...] = ()
    ref: str | None = None
    derive: Derive | None = None
    decimals: int = 0
    unique: bool = False
    mutable: bool = True  # may an MCP update tool change it (and a task ask to)?

    @property
    def numeric(self) -> bool:
        return self.kind in ("int", "float") or (
            self.kind == "choice" and all(isinstance(c, int) for c in self.choices)
        )


@dataclass(frozen=True)
class Entity:
    """A table: one kind of thing in the world. ``summary`` is a ``str.format`` template
    over the row's formatted values (a ref shows the target's name) that opens its page;
    ``brief`` names the attribute shown next to it in lists on other pages."""

    table: str
    singular: str
    plural: str
    count: tuple[int, int]
    attrs: tuple[Attr, ...]
    summary: str
    brief: str | None = None

    @property
    def key(self) -> Attr:
        return next(a for a in self.attrs if a.kind == "key")

    @property
    def name(self) -> Attr:
        """The attribute that names a row in text (the key when rows have no name)."""
        return next((a for a in self.attrs if a.kind == "name"), self.key)

    def attr(self, name: str) -> Attr:
        found = next((a for a in self.attrs if a.name == name), None)
        if found is None:
            raise KeyError(f"{self.table} has no attribute {name!r}")
        return found

    def refs(self) -> list[Attr]:
        return [a for a in self.attrs if a.kind == "ref"]


@dataclass(frozen=True)
class Rule:
    """A cross-field constraint; ``check`` yields one line per violation."""

    name: str
    description: str
    check: Callable[[Tables], Iterator[str]]


@dataclass(frozen=True)
class Theme:
    """A world's vocabulary: entities (in generation order: a table only refers to the
    ones before it), rules, and how to name the world and its web site."""

    key: str
    title: str
    aliases: tuple[str, ...]
    today: dt.date
    entities: tuple[Entity, ...]
    rules: tuple[Rule, ...]
    world_name: Callable[[Names], str]
    site: Callable[[str], str]  # world name -> base URL of the site holding its pages
    description: str  # str.format template with {name}
    setup: Callable[[Names], dict[str, Any]] = lambda names: {}

    def entity(self, table: str) -> Entity:
        found = next((e for e in self.entities if e.table == table), None)
        if found is None:
            raise KeyError(f"theme {self.key!r} has no table {table!r}")
        return found

    def relations(self) -> list[tuple[Entity, Attr, Entity]]:
        """(child table, its ref attribute, parent table) for every relation."""
        return [
            (child, attr, self.entity(attr.ref or ""))
            for child in self.entities
            for attr in child.refs()
        ]


# -- small helpers for generators and rules --------------------------------------------


def _count(child: str, attr: str) -> Derive:
    def derive(tables: Tables, row: dict[str, Any]) -> int:
        parent = tables.theme.entity(tables.theme.entity(child).attr(attr).ref or "")
        return len(tables.children(child, attr, row[parent.key.name]))

    return derive


def _total(child: str, attr: str, value: str) -> Derive:
    def derive(tables: Tables, row: dict[str, Any]) -> int:
        parent = tables.theme.entity(tables.theme.entity(child).attr(attr).ref or "")
        return sum(r[value] for r in tables.children(child, attr, row[parent.key.name]))

    return derive


def _key(prefix: str, width: int) -> Gen:
    return lambda c: f"{prefix}-{c.position + 1:0{width}d}"


def _int(lo: int, hi: int, step: int = 1) -> Gen:
    return lambda c: c.rng.randrange(lo, hi + 1, step)


def _log_int(lo: int, hi: int) -> Gen:
    """Spread over orders of magnitude, as company sizes and sales are."""
    return lambda c: min(hi, max(lo, round(lo * (hi / lo) ** c.rng.random())))


def _float(lo: float, hi: float, decimals: int) -> Gen:
    return lambda c: round(c.rng.uniform(lo, hi), decimals)


def _choice(choices: tuple[Any, ...]) -> Gen:
    return lambda c: c.rng.choice(choices)


def _pick(vocab: str) -> Gen:
    """One entry of a world-level vocabulary list (cities, chip designers)."""
    return lambda c: c.rng.choice(c.vocab[vocab])


def _any(table: str) -> Gen:
    """A key of any row of ``table`` (no coverage)."""
    return lambda c: c.rng.choice(c.tables.rows(table))[c.tables.theme.entity(table).key.name]


def _year_start(year: int) -> dt.date:
    return dt.date(year, 1, 1)


def _fd(value: str) -> dt.date:
    return dt.date.fromisoformat(value)


# -- column constructors (each states its range once: the generator's and the check's) --


def key(column: str, label: str, prefix: str, width: int) -> Attr:
    """Sequential keys: ``PH-0001``, ``PH-0002``, ..."""
    return Attr(column, label, "key", _key(prefix, width), mutable=False)


def name(column: str, label: str, gen: Gen) -> Attr:
    return Attr(column, label, "name", gen, unique=True, mutable=False)


def text(column: str, label: str, gen: Gen, *, unique: bool = False, mutable: bool = True) -> Attr:
    return Attr(column, label, "text", gen, unique=unique, mutable=mutable)


def integer(
    column: str,
    label: str,
    lo: int,
    hi: int,
    gen: Gen | None = None,
    *,
    step: int = 1,
    log: bool = False,
    mutable: bool = True,
) -> Attr:
    """Uniform in [lo, hi] by ``step`` (``log``: spread over orders of magnitude), unless
    ``gen`` narrows it further for the row."""
    if gen is None:
        gen = _log_int(lo, hi) if log else _int(lo, hi, step)
    return Attr(column, label, "int", gen, lo, hi, mutable=mutable)


def real(column: str, label: str, lo: float, hi: float, decimals: int) -> Attr:
    return Attr(column, label, "float", _float(lo, hi, decimals), lo, hi, decimals=decimals)


def choice(
    column: str,
    label: str,
    choices: tuple[Any, ...],
    gen: Gen | None = None,
    *,
    mutable: bool = True,
) -> Attr:
    return Attr(column, label, "choice", gen or _choice(choices), choices=choices, mutable=mutable)


def date(column: str, label: str, gen: Gen, lo: dt.date, hi: dt.date) -> Attr:
    """A date drawn by ``gen`` (which keeps the row's own rules); rules depend on dates,
    so updates never change them."""
    return Attr(column, label, "date", gen, lo.isoformat(), hi.isoformat(), mutable=False)


def ref(column: str, label: str, table: str, gen: Gen | None = None) -> Attr:
    """A key of ``table``; by default every row of it gets at least one pointer."""
    return Attr(column, label, "ref", gen or (lambda c: c.cover(table)), ref=table, mutable=False)


def count(column: str, label: str, child: str, attr: str) -> Attr:
    """How many ``child`` rows point here through ``attr`` (at least one, by coverage)."""
    return Attr(column, label, "int", derive=_count(child, attr), lo=1, mutable=False)


def total(column: str, label: str, child: str, attr: str, value: str, lo: int = 0) -> Attr:
    """The sum of ``value`` over the ``child`` rows pointing here through ``attr``."""
    return Attr(column, label, "int", derive=_total(child, attr, value), lo=lo, mutable=False)


def _one_value_per(table: str, by: str, then: str) -> Rule:
    def check(tables: Tables) -> Iterator[str]:
        seen: dict[Any, Any] = {}
        for row in tables.rows(table):
            first = seen.setdefault(row[by], row[then])
            if first != row[then]:
                yield f"{table}: {by} {row[by]!r} has {then} {first!r} and {row[then]!r}"

    return Rule(f"{table}_{by}_{then}", f"in {table}, one {by} always has the same {then}", check)


# -- theme: 2029 smartphone market -----------------------------------------------------

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
        _year_start(maker["founded_year"] + 1),
        _year_start(chipset["release_year"]),
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
        year = _fd(phone["launch_date"]).year
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
                text("hq_city", "headquarters city", _pick("cities"), mutable=False),
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
                text("designer", "designer", _pick("designers")),
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
                ref("chipset_id", "chipset", "chipsets", _any("chipsets")),
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
        _one_value_per("makers", "hq_city", "country"),
    ),
)


# -- theme: mid-size logistics company --------------------------------------------------

_LOGI_TODAY = dt.date(2027, 3, 31)
_FIRST_SHIPMENT = dt.date(2025, 1, 1)
_ROLES = ("Driver", "Warehouse associate", "Dispatcher", "Mechanic")
_MANAGER = "Depot manager"
_SALARY = {
    _MANAGER: (72000, 140000),
    "Dispatcher": (41000, 68000),
    "Driver": (36000, 62000),
    "Mechanic": (39000, 66000),
    "Warehouse associate": (28000, 45000),
}
_VEHICLES = {"Van": (800, 1500), "Rigid truck": (5000, 12000), "Articulated truck": (18000, 26000)}
_INDUSTRIES = (
    "Retail",
    "Pharmaceuticals",
    "Food and beverage",
    "Automotive parts",
    "Electronics",
    "Furniture",
    "Textiles",
)


def _logi_setup(names: Names) -> dict[str, Any]:
    return {"cities": [names.city() for _ in range(30)]}


def _depot_city(c: Ctx) -> str:
    # The first cities host depots, one each; customers and destinations use them all.
    return c.vocab["cities"][c.position]


def _employee_role(c: Ctx) -> str:
    # The first employee of each depot (by position) is its one manager.
    return _MANAGER if c.position < len(c.tables.rows("depots")) else c.rng.choice(_ROLES)


def _hire_date(c: Ctx) -> str:
    depot = c.ref("depots", "depot_id")
    return c.date_between(_year_start(depot["opened_year"]), _LOGI_TODAY)


def _salary(c: Ctx) -> int:
    lo, hi = _SALARY[c.row["role"]]
    return c.rng.randrange(lo, hi + 1, 500)


def _capacity(c: Ctx) -> int:
    lo, hi = _VEHICLES[c.row["type"]]
    return c.rng.randrange(lo, hi + 1, 50)


def _plate(c: Ctx) -> str:
    letters = "ABCDEFGHJKLMNPRSTUVWXYZ"
    return c.names.unique(
        "plate",
        lambda: f"{c.rng.choice(letters)}{c.rng.choice(letters)}-{c.rng.randint(1000, 9999)}",
    )


def _shipment_vehicle(c: Ctx) -> str:
    fleet = c.tables.children("vehicles", "depot_id", c.row["origin_depot_id"])
    return c.rng.choice(fleet)["vehicle_id"]


def _destination(c: Ctx) -> str:
    origin = c.ref("depots", "origin_depot_id")["city"]
    return c.rng.choice([city for city in c.vocab["cities"] if city != origin])


def _ship_date(c: Ctx) -> str:
    customer = c.ref("customers", "customer_id")
    depot = c.ref("depots", "origin_depot_id")
    vehicle = c.ref("vehicles", "vehicle_id")
    lo = max(
        _FIRST_SHIPMENT,
        _year_start(customer["customer_since"]),
        _year_start(depot["opened_year"]),
        _year_start(vehicle["model_year"]),
    )
    return c.date_between(lo, _LOGI_TODAY - dt.timedelta(days=10))


def _delivery(c: Ctx) -> str:
    return (_fd(c.row["ship_date"]) + dt.timedelta(days=c.rng.randint(1, 9))).isoformat()


def _weight(c: Ctx) -> int:
    capacity = c.ref("vehicles", "vehicle_id")["capacity_kg"]
    return c.rng.randint(20, capacity)


def _logistics_rules(tables: Tables) -> Iterator[str]:
    managers: dict[str, int] = {}
    for person in tables.rows("employees"):
        depot = tables.get("depots", person["depot_id"])
        if person["role"] == _MANAGER:
            managers[person["depot_id"]] = managers.get(person["depot_id"], 0) + 1
        lo, hi = _SALARY.get(person["role"], (0, 0))
        if not lo <= person["annual_salary_usd"] <= hi:
            yield f"employees[{person['employee_id']}]: salary outside the {person['role']} band"
        if depot is not None and _fd(person["hire_date"]).year < depot["opened_year"]:
            yield f"employees[{person['employee_id']}]: hired before the depot opened"
    for depot in tables.rows("depots"):
        if managers.get(depot["depot_id"], 0) != 1:
            yield (
                f"depots[{depot['depot_id']}]: {managers.get(depot['depot_id'], 0)} "
                "managers, expected exactly one"
            )
    for vehicle in tables.rows("vehicles"):
        lo, hi = _VEHICLES.get(vehicle["type"], (0, 0))
        if not lo <= vehicle["capacity_kg"] <= hi:
            yield f"vehicles[{vehicle['vehicle_id']}]: capacity outside the {vehicle['type']} range"
    for ship in tables.rows("shipments"):
        where = f"shipments[{ship['shipment_id']}]"
        vehicle = tables.get("vehicles", ship["vehicle_id"])
        depot = tables.get("depots", ship["origin_depot_id"])
        customer = tables.get("customers", ship["customer_id"])
        if ship["delivery_date"] < ship["ship_date"]:
            yield f"{where}: delivered before it was shipped"
        if vehicle is not None:
            if ship["weight_kg"] > vehicle["capacity_kg"]:
                yield f"{where}: {ship['weight_kg']} kg exceeds the vehicle's capacity"
            if vehicle["depot_id"] != ship["origin_depot_id"]:
                yield f"{where}: the vehicle belongs to another depot"
            if _fd(ship["ship_date"]).year < vehicle["model_year"]:
                yield f"{where}: shipped before the vehicle's model year"
        if depot is not None:
            if depot["city"] == ship["destination_city"]:
                yield f"{where}: destination is the origin depot's own city"
            if _fd(ship["ship_date"]).year < depot["opened_year"]:
                yield f"{where}: shipped before the origin depot opened"
        if customer is not None and _fd(ship["ship_date"]).year < customer["customer_since"]:
            yield f"{where}: shipped before the customer signed up"


LOGISTICS = Theme(
    key="logistics",
    title="mid-size logistics company",
    aliases=("mid-size logistics company", "logistics company", "logistics", "freight"),
    today=_LOGI_TODAY,
    setup=_logi_setup,
    world_name=lambda names: names.company(("Freight", "Logistics", "Haulage", "Cargo")),
    site=lambda name: f"https://intranet.{slug(name)}.com",
    description="the internal wiki of {name}, a (fictional) mid-size logistics company: "
    "its depots, staff, fleet, customers and shipments.",
    entities=(
        Entity(
            table="depots",
            singular="depot",
            plural="depots",
            count=(10, 16),
            summary="{name} is a depot in {city} ({region} region), opened in {opened_year}, "
            "with room for {capacity_pallets} pallets.",
            brief="city",
            attrs=(
                key("depot_id", "depot ID", "DP", 2),
                name("name", "name", lambda c: f"{_depot_city(c)} Depot"),
                text("city", "city", _depot_city, unique=True, mutable=False),
                choice("region", "region", ("North", "South", "East", "West", "Central")),
                integer("opened_year", "opening year", 1990, 2022, mutable=False),
                integer("capacity_pallets", "capacity (pallets)", 1500, 30000, step=100),
                count("staff_count", "number of staff", "employees", "depot_id"),
                count("vehicle_count", "number of vehicles", "vehicles", "depot_id"),
            ),
        ),
        Entity(
            table="employees",
            singular="employee",
            plural="employees",
            count=(75, 120),
            summary="{name} works as {role} at {depot_id}, hired on {hire_date}.",
            brief="role",
            attrs=(
                key("employee_id", "employee ID", "EM", 4),
                name("name", "name", lambda c: c.names.person()),
                ref("depot_id", "depot", "depots"),
                choice("role", "role", (_MANAGER, *_ROLES), _employee_role, mutable=False),
                date("hire_date", "hire date", _hire_date, dt.date(1990, 1, 1), _LOGI_TODAY),
                integer(
                    "annual_salary_usd",
                    "annual salary (USD)",
                    28000,
                    140000,
                    _salary,
                    mutable=False,
                ),
            ),
        ),
        Entity(
            table="vehicles",
            singular="vehicle",
            plural="vehicles",
            count=(40, 70),
            summary="Vehicle {plate} is a {type} based at {depot_id}, model year {model_year}, "
            "carrying up to {capacity_kg} kg.",
            brief="type",
            attrs=(
                key("vehicle_id", "vehicle ID", "VH", 3),
                name("plate", "licence plate", _plate),
                choice("type", "type", tuple(_VEHICLES), mutable=False),
                ref("depot_id", "home depot", "depots"),
                integer(
                    "capacity_kg", "payload capacity (kg)", 800, 26000, _capacity, mutable=False
                ),
                integer("model_year", "model year", 2012, 2026, mutable=False),
            ),
        ),
        Entity(
            table="customers",
            singular="customer",
            plural="customers",
            count=(35, 60),
            summary="{name} is a {industry} customer based in {city}, a client since "
            "{customer_since}.",
            brief="industry",
            attrs=(
                key("customer_id", "customer ID", "CS", 3),
                name(
                    "name", "name", lambda c: c.names.company(("Ltd", "Group", "Trading", "Works"))
                ),
                choice("industry", "industry", _INDUSTRIES),
                text("city", "city", _pick("cities")),
                integer("customer_since", "first year as a customer", 2005, 2026, mutable=False),
                count("shipment_count", "number of shipments", "shipments", "customer_id"),
                total(
                    "total_weight_kg",
                    "total weight shipped (kg)",
                    "shipments",
                    "customer_id",
                    "weight_kg",
                    lo=1,
                ),
            ),
        ),
        Entity(
            table="shipments",
            singular="shipment",
            plural="shipments",
            count=(140, 220),
            summary="Shipment {shipment_id} for {customer_id} left {origin_depot_id} on "
            "{ship_date} and was delivered to {destination_city} on {delivery_date}.",
            brief="ship_date",
            attrs=(
                key("shipment_id", "shipment ID", "SH", 5),
                ref("customer_id", "customer", "customers"),
                ref("origin_depot_id", "origin depot", "depots"),
                ref("vehicle_id", "vehicle", "vehicles", _shipment_vehicle),
                text("destination_city", "destination city", _destination, mutable=False),
                integer("weight_kg", "weight (kg)", 20, 26000, _weight, mutable=False),
                date("ship_date", "ship date", _ship_date, _FIRST_SHIPMENT, _LOGI_TODAY),
                date("delivery_date", "delivery date", _delivery, _FIRST_SHIPMENT, _LOGI_TODAY),
            ),
        ),
    ),
    rules=(
        Rule(
            "logistics",
            "one manager per depot; salaries within role bands; hires after the depot opened; "
            "capacities within the vehicle type's range; a shipment fits its vehicle, which "
            "belongs to the origin depot, goes to another city and is delivered after it ships",
            _logistics_rules,
        ),
    ),
)


# -- theme: regional bank ---------------------------------------------------------------

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
    lo = max(_year_start(branch["opened_year"]), _year_start(c.row["birth_year"] + 18))
    return c.date_between(lo, _BANK_TODAY)


def _since_joined(c: Ctx) -> str:
    return c.date_between(_fd(c.ref("customers", "customer_id")["joined_date"]), _BANK_TODAY)


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
        joined = _fd(customer["joined_date"])
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
                ref("customer_id", "borrower", "customers", _any("customers")),
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


class UnknownThemeError(SimgymError, KeyError):
    """A theme name that no vocabulary answers to."""

    def __str__(self) -> str:  # KeyError would wrap the message in quotes
        return str(self.args[0]) if self.args else "unknown theme"


THEMES: dict[str, Theme] = {t.key: t for t in (SMARTPHONES, LOGISTICS, BANK)}


def get_theme(name: str | Theme) -> Theme:
    """A theme by key ("bank"), title or alias ("regional bank"), case-insensitively."""
    if isinstance(name, Theme):
        return name
    wanted = " ".join(name.lower().replace("-", " ").split())
    for theme in THEMES.values():
        names = (theme.key, theme.title, *theme.aliases)
        if wanted in (" ".join(n.lower().replace("-", " ").split()) for n in names):
            return theme
    known = ", ".join(f"{t.key} ({t.title!r})" for t in THEMES.values())
    raise UnknownThemeError(f"unknown world theme {name!r}; known: {known}")
