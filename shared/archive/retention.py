"""How long a finished conversation stays in Redis: the operator's rules, most specific first.

A rule is global, or for one agent, batch or label; a conversation takes its batch's rule,
else its agent's, else the shortest of its labels', else the global one. No rule: it stays
(as before retention existed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

import redis

from shared.errors import InvalidInput, NotFound
from shared.models.config import ConversationConfig
from shared.store.connection import storage_errors
from shared.store.keys import ID_PATTERN, KeySpace

__all__ = ["RetentionRule", "RetentionScope", "RetentionStore", "parse_retention"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
MAX_RETENTION_S = 100 * 365 * 86_400.0
_NAME = re.compile(ID_PATTERN)


class RetentionScope(str, Enum):
    GLOBAL = "global"
    AGENT = "agent"
    BATCH = "batch"
    LABEL = "label"


@dataclass(frozen=True)
class RetentionRule:
    scope: RetentionScope
    name: str  # '' for the global rule
    seconds: float

    @property
    def field(self) -> str:
        return rule_field(self.scope, self.name)


def rule_field(scope: RetentionScope, name: str) -> str:
    """The rule's field in the retention hash; names are checked so none can pose as another."""
    if scope is RetentionScope.GLOBAL:
        if name:
            raise InvalidInput("the global retention rule takes no name")
        return "global"
    if not _NAME.fullmatch(name or ""):
        raise InvalidInput(
            f"{scope.value} name {name!r} must be 1-128 characters of letters, digits, _ . -"
        )
    return f"{scope.value}:{name}"


def parse_retention(text: str) -> float:
    """Seconds in `30d`, `12h`, `90m`, `3600s`, `1d12h` or a bare number of seconds."""
    value = str(text).strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        seconds = float(value)
    else:
        parts = _DURATION.findall(value)
        if not parts or "".join(n + u for n, u in parts) != value:
            raise InvalidInput(f"retention {text!r} is not a duration like 30d, 12h, 90m or 3600s")
        seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if not 0 <= seconds <= MAX_RETENTION_S:
        raise InvalidInput(f"retention {text!r} must be between 0 s and 100 years")
    return seconds


class RetentionStore:
    """The rules, one hash; the archiver reads them all once per pass."""

    def __init__(self, client: redis.Redis, keys: KeySpace) -> None:
        self.client = client
        self.keys = keys

    def set(self, rule: RetentionRule) -> None:
        with storage_errors("setting a retention rule"):
            self.client.hset(self.keys.retention(), rule.field, repr(float(rule.seconds)))

    def unset(self, scope: RetentionScope, name: str = "") -> None:
        field = rule_field(scope, name)
        with storage_errors("removing a retention rule"):
            removed = self.client.hdel(self.keys.retention(), field)
        if not removed:
            raise NotFound(f"no retention rule for {field}")

    def rules(self) -> list[RetentionRule]:
        with storage_errors("reading retention rules"):
            raw: dict[str, str] = self.client.hgetall(self.keys.retention())  # type: ignore[assignment]
        found = []
        for field, seconds in sorted(raw.items()):
            scope, _, name = field.partition(":")
            try:
                found.append(RetentionRule(RetentionScope(scope), name, float(seconds)))
            except ValueError:
                continue  # a field this version does not know: ignored, never guessed at
        return found


def retention_of(rules: list[RetentionRule], config: ConversationConfig) -> float | None:
    """Seconds this conversation stays after it finished, or None: it stays."""
    by_field = {rule.field: rule.seconds for rule in rules}
    if config.batch_id and f"batch:{config.batch_id}" in by_field:
        return by_field[f"batch:{config.batch_id}"]
    if config.agent and f"agent:{config.agent}" in by_field:
        return by_field[f"agent:{config.agent}"]
    labelled = [
        by_field[f"label:{label}"] for label in config.labels if f"label:{label}" in by_field
    ]
    if labelled:
        return min(labelled)
    return by_field.get("global")
