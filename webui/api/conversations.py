"""/conversations: create, list, read, fork, abort, close."""

from __future__ import annotations

from flask import Blueprint, Response, url_for
from pydantic import ValidationError

from shared.gate import check_chosen_id, check_conversation_owner, check_tool_options, is_operator
from shared.models.users import Role
from shared.store.agents import resolve_options
from shared.store.forks import fork_config, fork_conversation
from shared.store.policy import policy_table
from webui.api.models import (
    ConversationDetail,
    ConversationList,
    ConversationSummary,
    ForkBody,
    NewConversation,
    Usage,
    conversation_detail,
)
from webui.api.replies import reply
from webui.auth import current_principal, requires
from webui.errors import invalid_body
from webui.listing import list_conversations
from webui.operations import operation
from webui.params import json_body
from webui.queries import ConversationsQuery
from webui.services import Services, services

__all__ = ["blueprint", "detail"]


def detail(svc: Services, cid: str) -> ConversationDetail:
    record = svc.store.get(cid)
    usage = svc.history(cid).usage_summary()
    policies = svc.policies
    table = policy_table(policies.catalog(), policies.load(), record.config)
    return conversation_detail(
        record, Usage(total=usage.total, last_turn=usage.last_turn), usage.turn_count, table
    )


@requires(Role.SUBMITTER)
@operation(
    "Create a conversation",
    request=NewConversation,
    response=ConversationDetail,
    status=201,
    errors=(400, 403, 409, 422),
)
def create() -> Response:
    body = json_body(NewConversation)
    svc = services()
    caller = current_principal()
    check_chosen_id(caller, body.conversation_id, "conversation_id")
    check_tool_options(
        caller, svc.policies, tools=body.tools, allow_all=body.allow_all, labels=body.labels
    )
    try:
        config = resolve_options(
            body, svc.settings, policy_may_loosen=is_operator(caller), agents=svc.stores.agents
        )
    except ValidationError as exc:
        raise invalid_body(exc) from None
    conversation = svc.client.create(
        config, conversation_id=body.conversation_id, owner=caller.name
    )
    cid = conversation.conversation_id
    return reply(detail(svc, cid), 201, headers={"Location": url_for(".get", cid=cid)})


@requires(Role.SUBMITTER)
@operation(
    "Fork: a new conversation with the first at_step steps of this one's history",
    request=ForkBody,
    response=ConversationDetail,
    status=201,
    errors=(400, 403, 404, 409, 422),
)
def fork(cid: str) -> Response:
    body = json_body(ForkBody)
    svc = services()
    caller = current_principal()
    original = svc.store.get(cid)
    check_conversation_owner(caller, original, action="fork it")
    check_chosen_id(caller, body.conversation_id, "conversation_id")
    config = fork_config(
        svc.stores, original.config, agent=body.agent, agent_version=body.agent_version
    )
    new = fork_conversation(
        svc.stores,
        cid,
        at_step=body.at_step,
        config=config,
        owner=caller.name,
        conversation_id=body.conversation_id,
    )
    return reply(detail(svc, new), 201, headers={"Location": url_for(".get", cid=new)})


@requires(Role.VIEWER)
@operation(
    "List conversations, newest first",
    response=ConversationList,
    query=ConversationsQuery,
    errors=(400,),
)
def list_() -> Response:
    query = ConversationsQuery.read()
    page = list_conversations(
        services().store, offset=query.offset, limit=query.limit, where=query.where()
    )
    return reply(
        ConversationList(
            items=[ConversationSummary.of(record) for record in page.records],
            offset=page.offset,
            limit=page.limit,
            total=page.total,
            next_offset=page.next_offset,
        )
    )


@requires(Role.VIEWER)
@operation(
    "A conversation: status, config, queue and usage", response=ConversationDetail, errors=(404,)
)
def get(cid: str) -> Response:
    return reply(detail(services(), cid))


@requires(Role.SUBMITTER)
@operation(
    "Abort the running turn and every queued one",
    response=ConversationSummary,
    status=202,
    errors=(403, 404),
)
def abort(cid: str) -> Response:
    svc = services()
    check_conversation_owner(current_principal(), svc.store.get(cid))
    svc.client.conversation(cid).abort()
    return reply(ConversationSummary.of(svc.store.get(cid)), 202)


@requires(Role.SUBMITTER)
@operation(
    "Abort, then refuse new prompts for good (history stays readable)",
    response=ConversationSummary,
    status=202,
    errors=(403, 404),
)
def close(cid: str) -> Response:
    svc = services()
    check_conversation_owner(current_principal(), svc.store.get(cid))
    svc.client.conversation(cid).close(timeout=0)  # 202: the turn settles in the background
    return reply(ConversationSummary.of(svc.store.get(cid)), 202)


def blueprint() -> Blueprint:
    bp = Blueprint("conversations", __name__)
    bp.add_url_rule("/conversations", view_func=create, methods=["POST"])
    bp.add_url_rule("/conversations", endpoint="list", view_func=list_, methods=["GET"])
    bp.add_url_rule("/conversations/<id:cid>", view_func=get, methods=["GET"])
    bp.add_url_rule("/conversations/<id:cid>/fork", view_func=fork, methods=["POST"])
    bp.add_url_rule("/conversations/<id:cid>/abort", view_func=abort, methods=["POST"])
    bp.add_url_rule("/conversations/<id:cid>/close", view_func=close, methods=["POST"])
    return bp
