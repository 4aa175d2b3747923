"""What one web app holds: settings, one Redis client, the stores and the live feed.

Built by `create_app` and kept on ``app.extensions["signoff"]``; views reach it
through `services()`. Nothing here is created at import time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import redis
from flask import current_app

from shared.client import Client
from shared.conversations import ConversationStore
from shared.event_log import EventLog
from shared.keys import KeySpace
from shared.notifications import NotificationStore
from shared.redis_client import connect
from shared.settings import Settings
from shared.users import LoginThrottle, TokenStore, UserStore
from webui.broadcast import Broadcaster

__all__ = ["EXTENSION", "Services", "build_services", "services"]

EXTENSION = "signoff"


@dataclass
class Services:
    settings: Settings
    redis: redis.Redis
    keys: KeySpace
    client: Client
    users: UserStore
    tokens: TokenStore
    throttle: LoginThrottle
    notifications: NotificationStore
    broadcaster: Broadcaster

    @property
    def store(self) -> ConversationStore:
        return self.client.store

    @property
    def events(self) -> EventLog:
        return self.client.events

    def close(self) -> None:
        """Stops the live feed and closes connections (tests; gunicorn just exits)."""
        self.broadcaster.close()
        self.client.close()


def build_services(settings: Settings) -> Services:
    client = connect(settings)
    keys = KeySpace(settings.key_prefix)
    signoff = Client(settings, redis_client=client)
    return Services(
        settings=settings,
        redis=client,
        keys=keys,
        client=signoff,
        users=UserStore(client, keys),
        tokens=TokenStore(client, keys),
        throttle=LoginThrottle(client, keys, per_minute=settings.login_attempts_per_minute),
        notifications=NotificationStore(client, keys, settings, tasks=signoff.tasks),
        broadcaster=Broadcaster(client, keys.live_all(), ready_timeout_s=settings.redis_timeout_s),
    )


def services() -> Services:
    """The services of the current app."""
    return cast(Services, current_app.extensions[EXTENSION])
