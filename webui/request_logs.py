"""Log lines written while a request about a conversation is answered carry its id."""

from __future__ import annotations

from flask import Flask, g, request

from shared.logs.context import bind, unbind

__all__ = ["init_app"]

_BOUND = "log_context"


def _bind() -> None:
    args = request.view_args or {}
    fields = {"conversation_id": str(args["cid"])} if args.get("cid") else {}
    if args.get("turn_id"):
        fields["turn_id"] = str(args["turn_id"])
    if fields:
        g.setdefault(_BOUND, bind(**fields))


def _unbind(_: BaseException | None) -> None:
    bound = g.pop(_BOUND, None)
    if bound is not None:
        unbind(bound)


def init_app(app: Flask) -> None:
    app.before_request(_bind)
    app.teardown_request(_unbind)
