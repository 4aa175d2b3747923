"""The approvals inbox: pending notifications to triage, one in detail, and resolving them.

The inbox's filters travel with every action (hidden fields), so resolving one, a selection
or "resolve and next" lands back on the same filtered view.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from werkzeug.datastructures import MultiDict

from shared.errors import Conflict, Forbidden, InvalidInput, NotFound, SignoffError
from shared.models.notifications import Notification, ResolutionKind
from shared.models.users import Role
from webui.approvals.access import claim as claim_as_caller
from webui.approvals.access import release as release_as_caller
from webui.approvals.access import resolve as resolve_as_caller
from webui.approvals.access import resolve_check
from webui.approvals.inbox import AGE_CHOICES, MINE_SCAN, InboxFilter
from webui.approvals.rows import inbox_rows
from webui.approvals.schema_form import form_fields, read_fields, read_json_field
from webui.approvals.titles import decided, selection_decided
from webui.auth import current_principal, requires
from webui.queries import InboxPageQuery
from webui.services import services

__all__ = ["blueprint"]

PAGE_SIZE = 50
CONTEXT_STEPS = 12
MAX_SELECTED = 200
STICKY_SCOPES = ("conversation", "batch")


@requires(Role.VIEWER)
def inbox() -> ResponseReturnValue:
    svc, check = services(), resolve_check()
    query = InboxPageQuery.read().of_caller(check)
    listing = query.listing(svc.notifications, offset=query.offset, limit=PAGE_SIZE)
    return render_template(
        "approvals.html",
        rows=inbox_rows(svc.store, listing.notes),
        count=listing.count,
        partial=listing.partial,
        scan_limit=MINE_SCAN,
        filters=query,
        ages=AGE_CHOICES,
        can_resolve=current_principal().role.allows(Role.APPROVER),
        offset=query.offset,
        page_size=PAGE_SIZE,
    )


def _next(filters: InboxFilter, nid: str) -> Notification | None:
    """The oldest other request the filtered inbox shows: where "next" goes."""
    following = filters.page(services().notifications, offset=0, limit=2)
    return next((n for n in following if n.id != nid), None)


@requires(Role.VIEWER)
def detail(nid: str) -> ResponseReturnValue:
    svc = services()
    note = svc.notifications.get(nid)
    filters = InboxFilter.of(request.args).of_caller(resolve_check())
    try:
        context = svc.history(note.conversation_id).page(None, CONTEXT_STEPS).steps
    except NotFound:
        context = []
    return render_template(
        "approval.html",
        note=note,
        row=inbox_rows(svc.store, [note])[0],
        context=context,
        fields=form_fields(note.submit_schema),
        kinds=ResolutionKind,
        filters=filters,
        next_note=_next(filters, nid),
        can_resolve=resolve_check().allows(note),
        me=current_principal().name,
        may_release_any=current_principal().role is Role.OPERATOR,
    )


def _sticky(form: Any) -> str | None:
    scope = form.get("sticky", "")
    if scope and scope not in STICKY_SCOPES:
        raise InvalidInput(f"sticky must be one of {', '.join(STICKY_SCOPES)}, not {scope[:20]!r}")
    return scope or None


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
        allow: dict[str, Any] = {"kind": "allow", "sticky": _sticky(form)}
        if form.get("arguments", "").strip():
            arguments = read_json_field(form, "arguments", "the edited arguments")
            if note.tool_call is None or arguments != note.tool_call.args:
                allow["arguments"] = arguments
        return allow
    raise InvalidInput(f"unknown decision {decision[:20]!r}")


def _filters(form: MultiDict[str, str]) -> InboxFilter:
    """The inbox filters an action carried; bad ones are dropped rather than fail the action."""
    try:
        found = InboxFilter.of(form, where="form field")
    except SignoffError:
        found = InboxFilter()
    return found.of_caller(resolve_check())


def _filtered(endpoint: str, filters: InboxFilter, **values: str) -> str:
    """The URL of an inbox view that keeps `filters`."""
    params: dict[str, Any] = {**filters.query(), **values}
    return url_for(endpoint, **params)


def _after(note: Notification, filters: InboxFilter, then: str) -> ResponseReturnValue:
    """Back to the filtered inbox, to the conversation, or ("next") to the oldest other
    request the filtered inbox still shows."""
    if then == "conversation":
        return redirect(url_for("pages.conversations.view", cid=note.conversation_id))
    if then == "next":
        following = _next(filters, note.id)
        if following is not None:
            return redirect(_filtered(".detail", filters, nid=following.id))
    return redirect(_filtered(".inbox", filters))


@requires(Role.APPROVER)
def resolve(nid: str) -> ResponseReturnValue:
    store, form = services().notifications, request.form
    note = store.get(nid)
    filters = _filters(form)
    decision, row = form.get("decision", ""), inbox_rows(services().store, [note])[0]
    try:
        settled = resolve_as_caller(nid, _resolution(note, form))
    except Forbidden:
        raise  # not the caller's to resolve: a 403 page, nothing changes
    except SignoffError as exc:  # a conflict or an invalid answer: shown, nothing changes
        what = f"{row.title} ({row.place})"
        flash(f"Could not {decision or 'resolve'} {what}: {exc.message}", "error")
        if form.get("then") in ("inbox", "conversation"):
            return _after(note, filters, form.get("then", ""))
        return redirect(_filtered(".detail", filters, nid=nid))
    flash(decided(decision, settled, row.item_id), "info")
    return _after(note, filters, form.get("then", ""))


@requires(Role.APPROVER)
def resolve_selected() -> ResponseReturnValue:
    """Allows or denies the checked rows one by one; one already resolved is counted, not fatal."""
    store, form = services().notifications, request.form
    filters = _filters(form)
    nids = list(dict.fromkeys(form.getlist("nid")))
    if not nids:
        flash("Select at least one request first.", "error")
        return redirect(_filtered(".inbox", filters))
    if len(nids) > MAX_SELECTED:
        raise InvalidInput(f"at most {MAX_SELECTED} requests at once, not {len(nids)}")
    decision = form.get("decision", "")
    if decision not in (ResolutionKind.ALLOW.value, ResolutionKind.DENY.value):
        raise InvalidInput(f"decision must be allow or deny, not {decision[:20]!r}")
    if decision == ResolutionKind.DENY.value and not form.get("reason", "").strip():
        flash("A denial needs a reason: the model is told it.", "error")
        return redirect(_filtered(".inbox", filters))
    resolution: dict[str, Any] = (
        {"kind": "allow", "sticky": _sticky(form)}
        if decision == ResolutionKind.ALLOW.value
        else {"kind": "deny", "reason": form.get("reason", "")}
    )
    check = resolve_check()
    for note in store.records(nids).notes:
        check(note)  # one not the caller's refuses the selection (403) before any is resolved
    done: list[Notification] = []
    gone = 0
    for nid in nids:
        try:
            done.append(resolve_as_caller(nid, resolution))
        except (Conflict, NotFound):
            gone += 1
    rows = inbox_rows(services().store, done)
    flash(selection_decided(decision, rows, gone=gone), "info")
    return redirect(_filtered(".inbox", filters))


def _claiming(nid: str, act: Any, done: str) -> ResponseReturnValue:
    """Claims or releases as the caller; back to the request page with what happened."""
    filters = _filters(request.form)
    note = services().notifications.get(nid)
    row = inbox_rows(services().store, [note])[0]
    try:
        act(nid)
    except Forbidden:
        raise  # not the caller's to claim: a 403 page, nothing changes
    except SignoffError as exc:
        flash(f"{row.title} ({row.place}): {exc.message}", "error")
    else:
        flash(f"{done} {row.title} ({row.place}).", "info")
    return redirect(_filtered(".detail", filters, nid=nid))


@requires(Role.APPROVER)
def claim(nid: str) -> ResponseReturnValue:
    return _claiming(nid, claim_as_caller, "Claimed")


@requires(Role.APPROVER)
def release(nid: str) -> ResponseReturnValue:
    return _claiming(nid, release_as_caller, "Released")


def blueprint() -> Blueprint:
    bp = Blueprint("approvals", __name__)
    bp.add_url_rule("/approvals", view_func=inbox)
    bp.add_url_rule("/approvals/selected", view_func=resolve_selected, methods=["POST"])
    bp.add_url_rule("/approvals/<nid:nid>", view_func=detail)
    bp.add_url_rule("/approvals/<nid:nid>/resolve", view_func=resolve, methods=["POST"])
    bp.add_url_rule("/approvals/<nid:nid>/claim", view_func=claim, methods=["POST"])
    bp.add_url_rule("/approvals/<nid:nid>/release", view_func=release, methods=["POST"])
    return bp
