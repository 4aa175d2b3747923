"""Model prices, set by operators and read by every worker at each model call."""

from __future__ import annotations

import time

import redis
from pydantic import ValidationError

from shared.errors import CorruptRecord, NotFound
from shared.models.prices import Price, PriceSpec
from shared.store.connection import storage_errors
from shared.store.copies import copy_hash
from shared.store.keys import KeySpace

__all__ = ["PriceStore", "price_field"]


def price_field(provider: str, model: str) -> str:
    """The hash field of a model's price (a model name may hold colons, never a provider)."""
    return f"{provider}/{model}"


class PriceStore:
    """Sets, reads and removes prices; a change applies from the next model call."""

    def __init__(self, client: redis.Redis, keys: KeySpace) -> None:
        self.client = client
        self.keys = keys

    def set(self, provider: str, model: str, spec: PriceSpec, *, actor: str) -> Price:
        price = Price(
            provider=provider, model=model, set_at=time.time(), set_by=actor, **spec.model_dump()
        )
        with storage_errors(f"setting the price of {provider}/{model}"):
            self.client.hset(
                self.keys.prices(), price_field(provider, model), price.model_dump_json()
            )
            self._copy()
        return price

    def get(self, provider: str, model: str) -> Price | None:
        with storage_errors(f"reading the price of {provider}/{model}"):
            raw = self.client.hget(self.keys.prices(), price_field(provider, model))
        return None if raw is None else _parse(str(raw))

    def list(self) -> list[Price]:
        with storage_errors("reading prices"):
            raw = self.client.hgetall(self.keys.prices())
        return sorted((_parse(str(v)) for v in raw.values()), key=lambda p: (p.provider, p.model))

    def unset(self, provider: str, model: str) -> Price:
        """Removes the price; returns it (NotFound when none was set)."""
        key, name = self.keys.prices(), price_field(provider, model)
        with (
            storage_errors(f"removing the price of {provider}/{model}"),
            self.client.pipeline(transaction=True) as pipe,
        ):
            pipe.hget(key, name)
            pipe.hdel(key, name)
            raw, _ = pipe.execute()
            self._copy()
        if raw is None:
            raise NotFound(f"no price is set for {provider}/{model}")
        return _parse(str(raw))

    def _copy(self) -> None:
        copy_hash(self.client, self.keys.prices(), self.keys.every_shard(self.keys.prices_copy))


def _parse(raw: str) -> Price:
    try:
        return Price.model_validate_json(raw)
    except ValidationError as exc:
        raise CorruptRecord(f"a stored price does not parse: {exc}") from exc
