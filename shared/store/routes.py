"""The routes operators define (`shared.models.routes`), one JSON document per name."""

from __future__ import annotations

import logging

import redis
from pydantic import ValidationError

from shared.errors import Conflict, NotFound
from shared.models.routes import Route
from shared.store.connection import storage_errors
from shared.store.keys import KeySpace

__all__ = ["RouteStore"]

log = logging.getLogger(__name__)


class RouteStore:
    """Adds, lists and removes routes."""

    def __init__(self, client: redis.Redis, keys: KeySpace) -> None:
        self.client = client
        self.keys = keys

    def add(self, route: Route) -> None:
        """Stores a new route; Conflict when the name is taken."""
        with storage_errors(f"adding route {route.name}"):
            created = self.client.hsetnx(self.keys.routes(), route.name, route.model_dump_json())
        if not created:
            raise Conflict(f"route {route.name!r} exists: remove it first, or pick a name")

    def all(self) -> list[Route]:
        """Every route, by name; one that does not parse is skipped (and logged)."""
        with storage_errors("reading routes"):
            raw: dict[str, str] = self.client.hgetall(self.keys.routes())  # type: ignore[assignment]
        found = []
        for name in sorted(raw):
            try:
                found.append(Route.model_validate_json(raw[name]))
            except ValidationError:
                log.warning("skipping route %s: it does not parse", name)
        return found

    def remove(self, name: str) -> None:
        with storage_errors(f"removing route {name}"):
            removed = self.client.hdel(self.keys.routes(), name)
        if not removed:
            raise NotFound(f"route {name!r} does not exist")
