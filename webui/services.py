"""What one web app holds: settings, one Redis client, the stores and the live feed.

Built by `create_app` and kept on ``app.extensions["signoff"]``; views reach it
through `services()`. Nothing here is created at import time.

The Redis client has a small blocking pool: a web worker serves thousands of
connections as greenlets (`webui/serving.py`), and a request holds a connection
for one round trip at a time, so greenlets wait their turn for one instead of
opening one each (redis-py's default pool fails at 100 with "Too many
connections"). One connection of the pool is the live feed's subscription.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import redis
from flask import current_app

from shared.approval_links import ApprovalLinks
from shared.client import Client
from shared.settings import Settings
from shared.store.batches import BatchStore
from shared.store.bundle import Stores
from shared.store.connection import PoolBound, connect
from shared.store.conversations import ConversationStore
from shared.store.event_log import EventLog
from shared.store.history import HistoryStore
from shared.store.keys import KeySpace
from shared.store.login_throttle import LoginThrottle
from shared.store.notifications import NotificationStore
from shared.store.policy import PolicyStore
from shared.store.users import TokenStore, UserStore
from webui.live import Broadcaster

__all__ = [
    "EXTENSION",
    "WEB_POOL",
    "Services",
    "build_services",
    "connect_pool",
    "services",
]

EXTENSION = "signoff"
WEB_POOL = PoolBound("web", "web_redis_connections")


@dataclass
class Services:
    """The client (whose `stores` the views use), the web's own stores and the live feed."""

    settings: Settings
    client: Client
    users: UserStore
    tokens: TokenStore
    throttle: LoginThrottle
    broadcaster: Broadcaster

    @property
    def stores(self) -> Stores:
        return self.client.stores

    @property
    def redis(self) -> redis.Redis:
        return self.client.redis

    @property
    def keys(self) -> KeySpace:
        return self.client.keys

    @property
    def store(self) -> ConversationStore:
        return self.stores.conversations

    @property
    def events(self) -> EventLog:
        return self.stores.events

    @property
    def notifications(self) -> NotificationStore:
        return self.stores.notifications

    @property
    def batches(self) -> BatchStore:
        return self.stores.batches

    @property
    def policies(self) -> PolicyStore:
        """The operator's tool policy and the tool catalog workers publish."""
        return self.stores.policies

    @property
    def links(self) -> ApprovalLinks:
        """Signed single-use approval links."""
        return ApprovalLinks(self.redis, self.keys, self.settings)

    def history(self, cid: str) -> HistoryStore:
        """The history and usage of one conversation (reads only: no bound applies)."""
        return self.stores.history(cid)

    def close(self) -> None:
        """Stops the live feed and closes connections (tests; gunicorn just exits)."""
        self.broadcaster.close()
        self.client.close()


def connect_pool(settings: Settings) -> redis.Redis:
    """A client whose pool holds at most `web_redis_connections`, opened on demand.

    A thread waits up to `redis_pool_wait_s` for a free connection, then gets a
    StorageError naming the setting, which the API answers with 503 and Retry-After.
    """
    return connect(settings, pool=WEB_POOL)


def build_services(settings: Settings) -> Services:
    client = connect_pool(settings)
    signoff = Client(settings, redis_client=client)
    keys = signoff.keys
    return Services(
        settings=settings,
        client=signoff,
        users=UserStore(client, keys),
        tokens=TokenStore(client, keys),
        throttle=LoginThrottle(
            client,
            keys,
            per_minute=settings.login_attempts_per_minute,
            per_user_per_minute=settings.login_attempts_per_user_per_minute,
        ),
        broadcaster=Broadcaster(
            client,
            keys.live_all(),
            ready_timeout_s=settings.redis_timeout_s,
            max_lifetime_s=settings.sse_max_lifetime_s,
        ),
    )


def services() -> Services:
    """The services of the current app."""
    return cast(Services, current_app.extensions[EXTENSION])
