"""What the stores whose changes can ask for a conversation's next leg hold."""

from __future__ import annotations

import redis

from shared.client.tasks import Advancer
from shared.settings import Settings
from shared.store.keys import KeySpace

__all__ = ["AdvancingStore"]


class AdvancingStore:
    """A store on one Redis client; `tasks` sends `advance` after a change (None: never)."""

    def __init__(
        self,
        client: redis.Redis,
        keys: KeySpace,
        settings: Settings,
        tasks: Advancer | None = None,
    ) -> None:
        self.client = client
        self.keys = keys
        self.settings = settings
        self.tasks = tasks
