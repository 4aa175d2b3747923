"""/usage: tokens and cost by UTC day, model, agent, batch and owner."""

from __future__ import annotations

from datetime import date

from flask import Blueprint, Response

from shared.models.users import Role
from shared.usage_report import EARLIEST_DAY, MAX_DAYS, UsageKind, read_usage_report
from webui.api.models import UsageDayView, UsageResponse
from webui.api.replies import reply
from webui.auth import requires
from webui.operations import operation
from webui.queries import UsageQuery
from webui.services import services

__all__ = ["blueprint"]

RANGE = (
    f"Any two days are a range. The answer reads the days from start to end that can hold "
    f"usage, {EARLIEST_DAY} to today, and of those the last {MAX_DAYS}; `days` lists them. "
    "A range with none of them (end before start, say) has no days."
)


def _iso(day: date) -> str:
    return day.isoformat()


@requires(Role.VIEWER)
@operation(
    "Token usage and cost by UTC day, model, agent, batch and owner",
    description=RANGE,
    response=UsageResponse,
    query=UsageQuery,
    errors=(400,),
)
def usage() -> Response:
    svc = services()
    start, end = UsageQuery.read().days()
    report = read_usage_report(svc.redis, svc.keys, start=start, end=end)
    return reply(
        UsageResponse(
            start=_iso(report.start),
            end=_iso(report.end),
            days=[
                UsageDayView(day=_iso(d.day), models=d.models, scopes=d.scopes) for d in report.days
            ],
            totals=report.totals,
            scope_totals=report.scope_totals,
            day_totals=report.by(UsageKind.DAY),
        )
    )


def blueprint() -> Blueprint:
    bp = Blueprint("usage", __name__)
    bp.add_url_rule("/usage", view_func=usage, methods=["GET"])
    return bp
