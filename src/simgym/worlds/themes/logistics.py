"""The ``logistics`` theme: a mid-size logistics company (depots, staff, vehicles,
customers, shipments)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

from simgym.worlds.themes._base import Ctx, Entity, Names, Rule, Tables, Theme, slug
from simgym.worlds.themes._columns import (
    choice,
    count,
    date,
    from_iso,
    integer,
    key,
    name,
    pick,
    ref,
    text,
    total,
    year_start,
)

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
    return c.date_between(year_start(depot["opened_year"]), _LOGI_TODAY)


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
        year_start(customer["customer_since"]),
        year_start(depot["opened_year"]),
        year_start(vehicle["model_year"]),
    )
    return c.date_between(lo, _LOGI_TODAY - dt.timedelta(days=10))


def _delivery(c: Ctx) -> str:
    return (from_iso(c.row["ship_date"]) + dt.timedelta(days=c.rng.randint(1, 9))).isoformat()


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
        if depot is not None and from_iso(person["hire_date"]).year < depot["opened_year"]:
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
            if from_iso(ship["ship_date"]).year < vehicle["model_year"]:
                yield f"{where}: shipped before the vehicle's model year"
        if depot is not None:
            if depot["city"] == ship["destination_city"]:
                yield f"{where}: destination is the origin depot's own city"
            if from_iso(ship["ship_date"]).year < depot["opened_year"]:
                yield f"{where}: shipped before the origin depot opened"
        if customer is not None and from_iso(ship["ship_date"]).year < customer["customer_since"]:
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
                text("city", "city", pick("cities")),
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
