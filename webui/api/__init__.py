"""The JSON API under /api/v1, one blueprint per resource (the event streams: `webui.live`)."""

from __future__ import annotations

from flask import Blueprint

from webui.api import (
    agents,
    audit,
    batches,
    conversations,
    files,
    history,
    notifications,
    openapi,
    policy,
    prompts,
    schedules,
    tokens,
    triggers,
    usage,
    users,
    webhooks,
)
from webui.live import events

__all__ = ["blueprint"]


def blueprint() -> Blueprint:
    api = Blueprint("api", __name__, url_prefix=openapi.PREFIX)
    for resource in (
        conversations,
        prompts,
        history,
        files,
        events,
        notifications,
        usage,
        batches,
        audit,
        policy,
        agents,
        schedules,
        tokens,
        users,
        webhooks,
        triggers,
        openapi,
    ):
        api.register_blueprint(resource.blueprint())
    return api
