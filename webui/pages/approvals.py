"""The approvals inbox: pending notifications, one in detail, and resolving it."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from shared.errors import InvalidInput, NotFound, SignoffError
from shared.models.notifications import Notification, ResolutionKind
from shared.store.users import Role
from webui.auth import current_principal, requires
from webui.inbox import AGE_CHOICES
from webui.queries import InboxPageQuery
from webui.schema_form import form_fields, read_fields, read_json_field
from webui.services import services

__all__ = ["blueprint"]

PAGE_SIZE = 25
CONTEXT_STEPS = 12


@requires(Role.VIEWER)
def inbox() -> ResponseReturnValue:
    store, query = services().notifications, InboxPageQuery.read()
    return render_template(
        "approvals.html",
        notes=query.page(store, offset=query.offset, limit=PAGE_SIZE),
        count=query.count(store),
        filters=query,
        ages=AGE_CHOICES,
        can_resolve=current_principal().role.allows(Role.OPERATOR),
        offset=query.offset,
        page_size=PAGE_SIZE,
    )


@requires(Role.VIEWER)
def detail(nid: str) -> ResponseReturnValue:
    svc = services()
    note = svc.notifications.get(nid)
    try:
        context = svc.history(note.conversation_id).page(None, CONTEXT_STEPS).steps
    except NotFound:
        context = []
    return render_template(
        "approval.html",
        note=note,
        context=context,
        fields=form_fields(note.submit_schema),
        kinds=ResolutionKind,
    )


def _resolution(note: Notification, form: Any) -> dict[str, Any]:
    """The decision a form posted; edited arguments only when they changed."""
    decision = form.get("decision", "")
    if decision == ResolutionKind.DENY.value:
        return {"kind": "deny", "reason": form.get("reason", "")}
    if decision == ResolutionKind.SUBMIT.value:
        fields = form_fields(note.submit_schema)
        content = (
            read_fields(fields, form)
            if fields is not None
            else read_json_field(form, "content", "the answer")
        )
        return {"kind": "submit", "content": content}
    if decision == ResolutionKind.ALLOW.value:
        allow: dict[str, Any] = {"kind": "allow"}
        if form.get("arguments", "").strip():
            arguments = read_json_field(form, "arguments", "the edited arguments")
            if note.tool_call is None or arguments != note.tool_call.args:
                allow["arguments"] = arguments
        return allow
    raise InvalidInput(f"unknown decision {decision[:20]!r}")


@requires(Role.OPERATOR)
def resolve(nid: str) -> ResponseReturnValue:
    store = services().notifications
    note = store.get(nid)
    try:
        store.resolve(nid, _resolution(note, request.form), actor=current_principal().name)
    except SignoffError as exc:  # a conflict or an invalid answer: shown, nothing changes
        flash(exc.message, "error")
        return redirect(url_for(".detail", nid=nid))
    flash(f"Resolved: {note.title}", "info")
    return redirect(url_for(".inbox"))


def blueprint() -> Blueprint:
    bp = Blueprint("approvals", __name__)
    bp.add_url_rule("/approvals", view_func=inbox)
    bp.add_url_rule("/approvals/<nid:nid>", view_func=detail)
    bp.add_url_rule("/approvals/<nid:nid>/resolve", view_func=resolve, methods=["POST"])
    return bp
