"""The JSON API under /api/v1, one blueprint per resource (the event streams: `webui.live`)."""

from __future__ import annotations

from flask import Blueprint

from webui.api import (
    agents,
    archive,
    audit,
    batches,
    budgets,
    comparisons,
    conversations,
    files,
    history,
    mcp,
    notifications,
    openapi,
    policy,
    prices,
    prompts,
    routes,
    schedules,
    slack,
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
        prices,
        budgets,
        batches,
        comparisons,
        audit,
        archive,
        policy,
        mcp,
        agents,
        schedules,
        tokens,
        users,
        webhooks,
        triggers,
        routes,
        slack,
        openapi,
    ):
        api.register_blueprint(resource.blueprint())
    return api
