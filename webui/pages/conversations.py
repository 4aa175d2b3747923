"""The conversations list and the live view of one conversation (abort, close, prompt, fork);
an archived one's read-only page (restore)."""

from __future__ import annotations

from collections.abc import Callable

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from shared.client import Conversation
from shared.errors import Forbidden, NotFound, SignoffError
from shared.gate import check_conversation_owner
from shared.models.users import Role
from shared.store.batches import batch_owner
from shared.store.conversations import ConversationRecord
from shared.store.policy import policy_table
from webui.api.archive import archiver
from webui.auth import current_principal, requires
from webui.listing import ListedStatus, list_conversations
from webui.queries import ConversationsPageQuery, HistoryPageQuery
from webui.services import services
from webui.unreadable import skip_unreadable

__all__ = ["blueprint"]

PAGE_SIZE = 25
HISTORY_PAGE = 200
PENDING_SHOWN = 5
BATCH_OWNER = batch_owner("")


@requires(Role.VIEWER)
def index() -> ResponseReturnValue:
    query = ConversationsPageQuery.read()
    page = list_conversations(
        services().store, offset=query.offset, limit=PAGE_SIZE, where=query.where()
    )
    return render_template(
        "conversations.html",
        page=page,
        status=query.status,
        q=query.q,
        statuses=list(ListedStatus),
    )


@requires(Role.VIEWER)
def view(cid: str) -> ResponseReturnValue:
    svc = services()
    try:
        record = svc.store.get(cid)
    except NotFound:
        if not archiver().is_archived(cid):
            raise
        return render_template(
            "archived_conversation.html",
            archived=archiver().view(cid),
            can_restore=current_principal().role.allows(Role.OPERATOR),
        )
    # The last event id is read before the history: the page's stream replays from it,
    # so nothing written in between is missed (steps seen twice are skipped by index).
    last_event_id = svc.events.last_id(cid)
    page = svc.history(cid).page(HistoryPageQuery.read().offset, HISTORY_PAGE)
    policies = svc.policies
    return render_template(
        "conversation.html",
        record=record,
        tool_policy=policy_table(policies.catalog(), policies.load(), record.config),
        page=page,
        usage=svc.history(cid).usage_summary(),
        last_event_id=last_event_id,
        history_page_size=HISTORY_PAGE,
        pending=svc.notifications.load(
            svc.notifications.pending_ids(conversation_id=cid, limit=PENDING_SHOWN),
            on_corrupt=skip_unreadable,
        ),
        batch_id=record.owner.removeprefix(BATCH_OWNER)
        if record.owner.startswith(BATCH_OWNER)
        else None,
        can_resolve=current_principal().role.allows(Role.APPROVER),
        can_fork=_may_act(record),
    )


def _may_act(record: ConversationRecord) -> bool:
    """Whether the caller may act on the conversation (its creator, or an operator)."""
    try:
        check_conversation_owner(current_principal(), record)
    except Forbidden:
        return False
    return current_principal().role.allows(Role.SUBMITTER)


def _act(cid: str, action: Callable[[Conversation], object], done: str) -> ResponseReturnValue:
    """Runs a form's action; a refusal (closed, empty prompt...) is shown, not an error page.

    Only the conversation's creator or an operator may act on it (403 otherwise), as in the API.
    """
    svc = services()
    check_conversation_owner(current_principal(), svc.store.get(cid))
    conversation = svc.client.conversation(cid)
    try:
        action(conversation)
        flash(done, "info")
    except SignoffError as exc:
        flash(exc.message, "error")
    return redirect(url_for(".view", cid=cid))


@requires(Role.SUBMITTER)
def abort(cid: str) -> ResponseReturnValue:
    return _act(cid, Conversation.abort, "Abort requested: the running turn and queued ones end.")


@requires(Role.SUBMITTER)
def close(cid: str) -> ResponseReturnValue:
    return _act(
        cid,
        lambda conversation: conversation.close(timeout=0),
        "Conversation closed: it takes no more prompts.",
    )


@requires(Role.SUBMITTER)
def prompt(cid: str) -> ResponseReturnValue:
    text = request.form.get("text", "")
    return _act(cid, lambda conversation: conversation.send(text), "Prompt queued.")


@requires(Role.SUBMITTER)
def fork(cid: str) -> ResponseReturnValue:
    """Forks at the form's `at_step` and opens the fork; a refusal is shown on the original."""
    svc = services()
    check_conversation_owner(current_principal(), svc.store.get(cid), action="fork it")
    try:
        at_step = int(request.form.get("at_step", ""))
        new = svc.client.conversation(cid).fork(at_step, owner=current_principal().name)
    except ValueError:
        flash("at_step: not a step position", "error")
    except SignoffError as exc:
        flash(exc.message, "error")
    else:
        flash(f"Forked from {cid} with its first {at_step} steps.", "info")
        return redirect(url_for(".view", cid=new.conversation_id))
    return redirect(url_for(".view", cid=cid))


@requires(Role.OPERATOR)
def restore(cid: str) -> ResponseReturnValue:
    """Brings an archived conversation back into Redis; its page is live again."""
    try:
        archiver().restore(cid)
        flash("Restored from the archive: the conversation is back in Redis.", "info")
    except SignoffError as exc:
        flash(exc.message, "error")
    return redirect(url_for(".view", cid=cid))


def blueprint() -> Blueprint:
    bp = Blueprint("conversations", __name__)
    bp.add_url_rule("/conversations", view_func=index)
    bp.add_url_rule("/conversations/<id:cid>", view_func=view)
    actions = (
        ("abort", abort),
        ("close", close),
        ("prompts", prompt),
        ("fork", fork),
        ("restore", restore),
    )
    for name, func in actions:
        bp.add_url_rule(f"/conversations/<id:cid>/{name}", view_func=func, methods=["POST"])
    return bp
