"""Operator pages: server-rendered, autoescaped (model output is untrusted), a little JS."""

from __future__ import annotations

import json
from typing import Any

from flask import Blueprint

from shared.errors import StorageError
from shared.models.prices import format_cost
from webui.approvals.titles import call_title, title
from webui.batches.bar import bar_segments
from webui.pages import (
    agents,
    approval_links,
    approvals,
    audit,
    batches,
    bulk,
    comparisons,
    conversations,
    home,
    mcp,
    policy,
    routes,
    session,
    triggers,
    usage,
    webhooks,
)
from webui.services import services

__all__ = ["blueprint", "pending_approvals", "pretty_json"]


def pretty_json(value: Any) -> str:
    """JSON for people, as a plain string: the template escapes it like any other text."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def pending_approvals() -> str:
    """The inbox count for the navigation; "?" rather than an error page when Redis fails."""
    try:
        return str(services().notifications.count_pending())
    except StorageError:
        return "?"


def _globals() -> dict[str, Any]:
    return {"pending_approvals": pending_approvals}


def blueprint() -> Blueprint:
    pages = Blueprint("pages", __name__)
    pages.app_context_processor(_globals)
    sections = (session, home, conversations, bulk, approvals, batches, policy, audit, usage)
    for section in (
        *sections,
        comparisons,
        approval_links,
        agents,
        mcp,
        webhooks,
        triggers,
        routes,
    ):
        pages.register_blueprint(section.blueprint())
    pages.add_app_template_filter(pretty_json, "pretty_json")
    pages.add_app_template_filter(title, "request_title")  # what a request would do
    pages.add_app_template_global(call_title, "call_title")  # the same from an audit entry
    pages.add_app_template_global(bar_segments, "bar_segments")  # macros see globals only
    pages.add_app_template_global(format_cost, "format_cost")
    return pages
