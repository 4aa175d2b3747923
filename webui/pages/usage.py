"""Tokens by model and day, as an inline SVG chart rendered on the server."""

from __future__ import annotations

from flask import Blueprint, render_template
from flask.typing import ResponseReturnValue

from shared.store.users import Role
from webui.auth import requires
from webui.chart import usage_chart
from webui.queries import UsageQuery
from webui.services import services
from webui.usage_report import read_usage_report

__all__ = ["blueprint"]


@requires(Role.VIEWER)
def index() -> ResponseReturnValue:
    svc = services()
    start, end = UsageQuery.read().days()
    report = read_usage_report(svc.redis, svc.keys, start=start, end=end)
    return render_template("usage.html", report=report, chart=usage_chart(report))


def blueprint() -> Blueprint:
    bp = Blueprint("usage", __name__)
    bp.add_url_rule("/usage", view_func=index)
    return bp
