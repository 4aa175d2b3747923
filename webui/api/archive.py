"""/retention and /archive: how long finished conversations stay in Redis, and the archived
ones (read, restored). Operators write; every role reads."""

from __future__ import annotations

import logging
from typing import Annotated, Literal

from flask import Blueprint, Response
from pydantic import BaseModel, ConfigDict, Field, RootModel

from shared.archive.archiver import Archiver
from shared.archive.retention import (
    MAX_RETENTION_S,
    RetentionRule,
    RetentionScope,
    RetentionStore,
)
from shared.errors import NotFound
from shared.models.steps import Step, UsageMetadata
from shared.models.users import Role
from shared.store.keys import ID_PATTERN
from webui.api.replies import reply
from webui.auth import current_principal, requires
from webui.operations import operation
from webui.params import json_body
from webui.services import services

__all__ = ["blueprint"]

log = logging.getLogger(__name__)


class _RuleBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    seconds: float = Field(ge=0, le=MAX_RETENTION_S)


class GlobalRuleBody(_RuleBody):
    """The global rule: every conversation no other rule covers."""

    scope: Literal[RetentionScope.GLOBAL]


class NamedRuleBody(_RuleBody):
    """One agent's, batch's or label's conversations."""

    scope: Literal[RetentionScope.AGENT, RetentionScope.BATCH, RetentionScope.LABEL]
    name: str = Field(pattern=f"^{ID_PATTERN}$")


class RetentionRuleBody(
    RootModel[Annotated[GlobalRuleBody | NamedRuleBody, Field(discriminator="scope")]]
):
    """A rule: `global`, or one agent's, batch's or label's (with its `name`)."""


class RetentionRuleOut(BaseModel):
    scope: RetentionScope
    name: str
    seconds: float


class RetentionList(BaseModel):
    items: list[RetentionRuleOut]


class ArchivedConversationOut(BaseModel):
    conversation_id: str
    archived_at: float
    title: str
    created_at: float
    updated_at: float
    turn_count: int
    usage: UsageMetadata
    steps: list[Step]


class Restored(BaseModel):
    conversation_id: str
    restored: bool = True


def _rules() -> RetentionStore:
    svc = services()
    return RetentionStore(svc.redis, svc.keys)


def archiver() -> Archiver:
    svc = services()
    return Archiver(svc.redis, svc.keys, svc.settings)


def _out(rule: RetentionRule) -> RetentionRuleOut:
    return RetentionRuleOut(scope=rule.scope, name=rule.name, seconds=rule.seconds)


def _rule_list() -> Response:
    return reply(RetentionList(items=[_out(rule) for rule in _rules().rules()]))


@requires(Role.VIEWER)
@operation("Every retention rule", response=RetentionList)
def list_rules() -> Response:
    return _rule_list()


@requires(Role.OPERATOR)
@operation(
    "Set a retention rule: finished conversations it covers are archived that long after "
    "they last changed (a batch's rule wins over an agent's, an agent's over a label's, "
    "any of them over the global one)",
    request=RetentionRuleBody,
    response=RetentionRuleOut,
    errors=(400, 422),
)
def set_rule() -> Response:
    body = json_body(RetentionRuleBody).root
    name = body.name if isinstance(body, NamedRuleBody) else ""
    rule = RetentionRule(body.scope, name, body.seconds)
    _rules().set(rule)
    log.info("%s set retention %s to %g s", current_principal().name, rule.field, rule.seconds)
    return reply(_out(rule))


@requires(Role.OPERATOR)
@operation("Remove the global retention rule", response=RetentionList, errors=(404,))
def unset_global() -> Response:
    _rules().unset(RetentionScope.GLOBAL)
    return _rule_list()


@requires(Role.OPERATOR)
@operation(
    "Remove one agent's, batch's or label's retention rule",
    response=RetentionList,
    errors=(404, 422),
)
def unset_rule(scope: str, name: str) -> Response:
    try:
        kind = RetentionScope(scope)
    except ValueError:
        raise NotFound(f"no retention scope {scope!r}: agent, batch or label") from None
    _rules().unset(kind, name)
    log.info("%s removed retention %s:%s", current_principal().name, scope, name)
    return _rule_list()


@requires(Role.VIEWER)
@operation(
    "An archived conversation, read from its archive",
    response=ArchivedConversationOut,
    errors=(404,),
)
def archived(cid: str) -> Response:
    found = archiver().view(cid)
    return reply(
        ArchivedConversationOut(
            conversation_id=found.conversation_id,
            archived_at=found.archived_at,
            title=found.title,
            created_at=found.created_at,
            updated_at=found.updated_at,
            turn_count=found.turn_count,
            usage=found.usage,
            steps=found.steps,
        )
    )


@requires(Role.OPERATOR)
@operation(
    "Bring an archived conversation back into Redis as it was (its file stays)",
    response=Restored,
    errors=(404, 409),
)
def restore(cid: str) -> Response:
    archiver().restore(cid)
    log.info("%s restored conversation %s from the archive", current_principal().name, cid)
    return reply(Restored(conversation_id=cid))


def blueprint() -> Blueprint:
    bp = Blueprint("archive", __name__)
    bp.add_url_rule("/retention", view_func=list_rules, methods=["GET"])
    bp.add_url_rule("/retention", view_func=set_rule, methods=["PUT"])
    bp.add_url_rule("/retention/global", view_func=unset_global, methods=["DELETE"])
    bp.add_url_rule("/retention/<id:scope>/<id:name>", view_func=unset_rule, methods=["DELETE"])
    bp.add_url_rule("/archive/<id:cid>", view_func=archived, methods=["GET"])
    bp.add_url_rule("/archive/<id:cid>/restore", view_func=restore, methods=["POST"])
    return bp
