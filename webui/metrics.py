"""`/metrics` for Prometheus, and the count of requests the web answers.

Never public: the scraper sends `SIGNOFF_METRICS_TOKEN` as a bearer token, or the caller
is an operator (a session or an operator's API token). The page holds every web
worker's counts (`shared/metrics/runs.py`) and the gauges read from Redis at each
scrape (`shared/metrics/state.py`).
"""

from __future__ import annotations

import hmac

from flask import Flask, Response, g, request
from flask.typing import ResponseReturnValue

from shared.metrics.runs import render
from shared.metrics.series import HTTP_REQUESTS, ROUTE
from shared.metrics.state import StateCollector
from shared.models.users import Role
from webui.auth import public
from webui.errors import HttpProblem
from webui.services import services

__all__ = ["init_app"]

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


@public  # its own check: the metrics token, or an operator
def metrics() -> ResponseReturnValue:
    """The Prometheus text exposition."""
    svc = services()
    if not _token_matches(svc.settings.metrics_token.get_secret_value()):
        _operator_only()
    body, content_type = render(StateCollector(svc.redis, svc.keys, svc.settings))
    return Response(body, content_type=content_type)


def _token_matches(expected: str) -> bool:
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if not expected or scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), expected.encode())


def _operator_only() -> None:
    principal = g.get("principal")
    if principal is None:
        raise HttpProblem(
            401,
            "unauthorized",
            "send the metrics token (SIGNOFF_METRICS_TOKEN) as a bearer token, or sign in",
            headers={"WWW-Authenticate": 'Bearer realm="signoff metrics"'},
        )
    if not principal.role.allows(Role.OPERATOR):
        raise HttpProblem(403, "forbidden", "metrics need the operator role or the metrics token")


def _count(response: Response) -> Response:
    """Counts each answered request by its route's pattern (`/api/v1/conversations/<cid>`),
    never its path, so no id becomes a label."""
    rule = request.url_rule.rule if request.url_rule is not None else "unmatched"
    method = request.method if request.method in _METHODS else "other"
    HTTP_REQUESTS.labels(ROUTE(rule), method, str(response.status_code)).inc()
    return response


def init_app(app: Flask) -> None:
    app.add_url_rule("/metrics", view_func=metrics)
    app.after_request(_count)
