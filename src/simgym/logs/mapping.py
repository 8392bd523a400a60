"""A mapping file: which of a log's attributes hold what the standards would name.

Logs written by someone else name their fields their own way. A mapping file
(``simgym logs import --map map.yaml``, YAML or JSON) tells the readers where to look
first; the standard names still apply where the mapped ones are absent::

    body: app.request.payload        # the request's body (JSON text or a value)
    response: app.response.payload   # the answer's body
    actor: app.user                  # who called
    role: [app.roles, app.role]      # a list: the first attribute present wins
    session: app.journey
    status: app.result_code          # an HTTP-like status code
    error: app.failed                # true/false: the call failed
    objects:                         # object type -> the attribute holding its id
      order: app.order_ref
      invoice: inv_no

Every key is optional; an unknown key is an error that names it, never ignored.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from simgym.core.errors import SimgymError
from simgym.logs.model import JSON

Names = list[str]


def _names(value: object) -> object:
    # one attribute name is the common case; a list says where else to look
    return [value] if isinstance(value, str) else value


class FieldMap(BaseModel):
    """Where a log keeps each field, by attribute name (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    body: Names = []
    response: Names = []
    actor: Names = []
    role: Names = []
    session: Names = []
    status: Names = []
    error: Names = []
    objects: dict[str, str] = {}

    @field_validator(
        "body", "response", "actor", "role", "session", "status", "error", mode="before"
    )
    @classmethod
    def _as_list(cls, value: object) -> object:
        return _names(value)

    @field_validator("objects")
    @classmethod
    def _no_empty_names(cls, value: dict[str, str]) -> dict[str, str]:
        for otype, attr in value.items():
            if not otype.strip() or not attr.strip():
                raise ValueError(f"objects: an empty name in {otype!r}: {attr!r}")
        return value

    def first(self, field: str, attrs: dict[str, JSON]) -> tuple[str, JSON] | None:
        """The first mapped attribute for ``field`` that ``attrs`` holds (name, value)."""
        for name in getattr(self, field):
            if attrs.get(name) not in (None, ""):
                return name, attrs[name]
        return None

    def failed(self, attrs: dict[str, JSON]) -> bool | None:
        """Whether the mapped ``error`` attribute marks the call failed (None: unmapped
        or absent)."""
        found = self.first("error", attrs)
        if found is None:
            return None
        return str(found[1]).strip().lower() in ("true", "1", "yes", "error", "failed")

    def mapped(self) -> set[str]:
        """Every attribute name the map names (readers keep them out of arguments)."""
        fields = ("body", "response", "actor", "role", "session", "status", "error")
        names = {n for f in fields for n in getattr(self, f)}
        return names | set(self.objects.values())


def load_map(path: str | os.PathLike[str]) -> FieldMap:
    """Read and check a mapping file (YAML, or JSON, which YAML reads too)."""
    import yaml

    from simgym.core.safeload import load_yaml

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SimgymError(f"cannot read the mapping file {path}: {exc}") from None
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else load_yaml(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise SimgymError(f"{path}: not YAML or JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise SimgymError(f"{path}: a mapping file is a mapping of keys, not {type(data).__name__}")
    try:
        return FieldMap.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"])
            if err["type"] == "extra_forbidden":
                known = ", ".join(FieldMap.model_fields)
                problems.append(f"unknown key {where!r} (known: {known})")
            else:
                problems.append(f"{where}: {err['msg']}")
        raise SimgymError(f"{path}: " + "; ".join(problems)) from None
