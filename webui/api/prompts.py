"""/conversations/<id>/prompts and /turns: sending prompts and reading their turns."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request, url_for

from shared.gate import check_conversation_owner
from shared.models.content import Content, ContentPart, Media, as_content
from shared.models.users import Role
from shared.store.keys import check_id
from webui.api.models import PromptAccepted, TurnView
from webui.api.prompt_body import PromptBody
from webui.api.replies import reply
from webui.auth import current_principal, requires
from webui.errors import HttpProblem
from webui.operations import operation
from webui.params import json_body
from webui.services import services

__all__ = ["blueprint"]


def _multipart_options() -> dict[str, Any]:
    """The form's `tool_selection` and `timeout_s` fields, checked by `prompt_options`."""
    options: dict[str, Any] = {}
    if selection := request.form.get("tool_selection"):
        options["tool_selection"] = selection
    if raw := request.form.get("timeout_s"):
        try:
            options["timeout_s"] = float(raw)
        except ValueError:
            raise HttpProblem(
                422, "invalid_input", f"timeout_s: {raw[:40]!r} is not a number"
            ) from None
    return options


def _multipart_prompt() -> Content:
    """A ``text`` field and any number of ``media`` file parts."""
    if "media" in request.form:  # a part without a filename: not a file
        raise HttpProblem(422, "invalid_input", "media: send each as a file part (with a filename)")
    text = request.form.get("text", "")
    parts: list[ContentPart] = list(as_content(text).parts) if text.strip() else []
    for upload in request.files.getlist("media"):
        parts.append(
            Media(
                data=upload.read(),
                mime_type=upload.mimetype or "application/octet-stream",
                description=upload.filename or None,
            )
        )
    return Content(parts=parts)


@requires(Role.SUBMITTER)
@operation(
    "Send a prompt; it is validated, queued and run by a worker",
    description="With an `Idempotency-Key` header (1-128 letters, digits, _ . -), the key is "
    "the turn's id and a retry is safe: the same prompt under it again answers 202 with "
    "`Idempotent-Replayed: true` and queues nothing; another prompt under it answers 409.",
    request=PromptBody,
    multipart=True,
    response=PromptAccepted,
    status=202,
    errors=(400, 403, 404, 409, 413, 422),
)
def send(cid: str) -> Response:
    svc = services()
    check_conversation_owner(current_principal(), svc.store.get(cid))
    if request.mimetype == "multipart/form-data":
        prompt: str | Content = _multipart_prompt()
        options = _multipart_options()
    else:
        body = json_body(PromptBody)
        prompt, options = body.prompt(), body.options()
    if key := request.headers.get("Idempotency-Key"):
        options["turn_id"] = check_id(key, "Idempotency-Key")  # the turn's id
    submission = svc.client.conversation(cid).submit(prompt, **options)
    location = url_for(".turn", cid=cid, turn_id=submission.turn_id)
    headers = {"Location": location}
    if submission.replayed:  # a retry of an accepted prompt: the same answer, nothing queued
        headers["Idempotent-Replayed"] = "true"
    return reply(
        PromptAccepted(conversation_id=cid, turn_id=submission.turn_id), 202, headers=headers
    )


def _optional_float(raw: str | None) -> float | None:
    return float(raw) if raw else None


@requires(Role.VIEWER)
@operation("A turn: its status and, once completed, its response", response=TurnView, errors=(404,))
def turn(cid: str, turn_id: str) -> Response:
    record = services().store.turn(cid, turn_id)
    fields = record.fields
    return reply(
        TurnView(
            conversation_id=cid,
            turn_id=turn_id,
            status=record.status,
            prompt=record.prompt,
            options=record.options,
            created_at=record.created_at,
            started_at=_optional_float(fields.get("started_at")),
            finished_at=_optional_float(fields.get("finished_at")),
            response=record.response(),
            error=fields.get("error") or None,
        )
    )


def blueprint() -> Blueprint:
    bp = Blueprint("prompts", __name__)
    bp.add_url_rule("/conversations/<id:cid>/prompts", view_func=send, methods=["POST"])
    bp.add_url_rule("/conversations/<id:cid>/turns/<id:turn_id>", view_func=turn, methods=["GET"])
    return bp
