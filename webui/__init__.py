"""The operator UI and the JSON API: `create_app()` builds one Flask app from settings.

Nothing is built at import time; `webui.wsgi` is the one module that builds an app
when imported, for gunicorn.
"""

from __future__ import annotations

import logging
import secrets
from datetime import UTC, datetime

import redis
from flask import Flask, jsonify
from flask.typing import ResponseReturnValue

from shared.errors import StorageError
from shared.settings import Settings, load_settings
from webui import auth, csrf, errors, mcp_http, metrics, request_logs, security, timefmt
from webui.api import blueprint as api_blueprint
from webui.auth import public
from webui.body_limit import BodyLimit
from webui.converters import CONVERTERS
from webui.pages import blueprint as pages_blueprint
from webui.services import EXTENSION, Services, build_services, services

__all__ = ["create_app", "request_body_limit"]

log = logging.getLogger(__name__)

# Above the prompt limits: JSON carries media as base64 (4/3), plus the envelope.
_BODY_MARGIN = 64 * 1024


def request_body_limit(settings: Settings) -> int:
    """Flask's MAX_CONTENT_LENGTH: the largest prompt the settings allow, encoded, plus a margin."""
    media = settings.max_prompt_media_bytes * 4 // 3 + 4
    return settings.max_prompt_text_bytes + media + _BODY_MARGIN


def _secret_key(settings: Settings) -> str:
    configured = settings.secret_key.get_secret_value()
    if configured:
        return configured
    log.warning(
        "SIGNOFF_SECRET_KEY is not set: using a random key for this process; sessions "
        "will not survive a restart nor be shared between web workers"
    )
    return secrets.token_hex(32)


def _rename_owner_lookalikes(svc: Services) -> None:
    """No token may act as an internal owner (batch:<id>, trigger:<name>): rename old ones.

    Redis away at start is no reason not to serve: such a token is refused at sign-in anyway,
    and the next start renames it.
    """
    try:
        renamed = svc.tokens.rename_owner_lookalikes()
    except StorageError as exc:
        log.warning("not renaming owner-like API tokens at start: %s", exc)
        return
    for token, new_name in renamed:
        log.warning(
            "API token %s was named %r, which reads as an internal owner (a batch, trigger or "
            "schedule); renamed %r. Conversations it created keep the old name as their owner: "
            "an operator acts on them",
            token.token_id,
            token.name,
            new_name,
        )


def _ensure_admin(svc: Services) -> None:
    password = svc.settings.admin_password.get_secret_value()
    if password:
        svc.users.ensure(svc.settings.admin_user, password)


@public
def healthz() -> ResponseReturnValue:
    """Liveness and Redis reachability, without authentication."""
    try:
        services().redis.ping()
    except redis.RedisError:
        return jsonify(status="unavailable", redis=False), 503
    return jsonify(status="ok", redis=True)


def _timestamp(value: float) -> str:
    return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%d %H:%M:%S")


def create_app(settings: Settings | None = None) -> Flask:
    """An app with its own Redis client, stores and live feed; settings from the environment."""
    settings = settings or load_settings()
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY=_secret_key(settings),
        MAX_CONTENT_LENGTH=request_body_limit(settings) + 1,  # BodyLimit caps (webui/body_limit.py)
        MAX_FORM_MEMORY_SIZE=settings.max_prompt_text_bytes + _BODY_MARGIN,
        **security.cookie_config(settings),
    )
    app.url_map.converters.update(CONVERTERS)
    svc = build_services(settings)
    app.extensions[EXTENSION] = svc
    _ensure_admin(svc)
    _rename_owner_lookalikes(svc)
    for part in (request_logs, errors, security, auth, csrf, timefmt):
        part.init_app(app)
    app.add_template_filter(_timestamp, "timestamp")
    app.register_blueprint(api_blueprint())
    app.register_blueprint(pages_blueprint())
    app.add_url_rule("/healthz", view_func=healthz)
    mcp_http.init_app(app)
    metrics.init_app(app)
    app.wsgi_app = BodyLimit(app, app.wsgi_app, default=request_body_limit(settings))  # type: ignore[method-assign]
    return app
