"""Tokens and cost by day, model, agent, batch and owner: an inline SVG chart rendered on the
server, and the same figures as CSV for a spreadsheet."""

from __future__ import annotations

from flask import Blueprint, Response, render_template
from flask.typing import ResponseReturnValue

from shared.models.users import Role
from shared.usage_report import UsageKind, read_usage_report, usage_csv
from webui.auth import requires
from webui.chart import usage_chart
from webui.queries import UsageQuery
from webui.services import services

__all__ = ["blueprint"]


@requires(Role.VIEWER)
def index() -> ResponseReturnValue:
    svc = services()
    start, end = UsageQuery.read().days()
    report = read_usage_report(svc.redis, svc.keys, start=start, end=end)
    prices = svc.stores.prices.list()
    return render_template(
        "usage.html", report=report, chart=usage_chart(report), prices=prices, kinds=UsageKind
    )


@requires(Role.VIEWER)
def export() -> ResponseReturnValue:
    """One row per day and model, agent, batch or owner, and the day's total; cost in the
    prices' unit, blank if unpriced."""
    svc = services()
    start, end = UsageQuery.read().days()
    report = read_usage_report(svc.redis, svc.keys, start=start, end=end)
    name = f"signoff-usage-{start.isoformat()}-{end.isoformat()}.csv"
    return Response(
        usage_csv(report),
        mimetype="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


def blueprint() -> Blueprint:
    bp = Blueprint("usage", __name__)
    bp.add_url_rule("/usage", view_func=index)
    bp.add_url_rule("/usage.csv", view_func=export)
    return bp
