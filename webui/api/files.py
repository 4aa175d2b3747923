"""/conversations/<id>/files?path=: one workspace file's exact bytes, confined as read_file is.

The web process reads the workspace roots itself (`shared.workspace`), so it must see
the same filesystem as the workers. The roots are the server's, not the conversation's:
the conversation scopes who may read (its creator or an operator), not what.
"""

from __future__ import annotations

from flask import Blueprint, Response

from shared.gate import check_conversation_owner
from shared.models.users import Role
from shared.workspace import MAX_READ_BYTES, FileRead, read_file
from webui.api.replies import reply
from webui.auth import current_principal, requires
from webui.operations import operation
from webui.queries import FileQuery
from webui.services import services

__all__ = ["blueprint"]


@requires(Role.SUBMITTER)
@operation(
    "One workspace file, exactly",
    response=FileRead,
    query=FileQuery,
    errors=(400, 403, 404),
    description=(
        "The file's bytes (base64, URL-safe alphabet), its text when they are valid UTF-8, its "
        "size and canonical path, read from SIGNOFF_WORKSPACE_ROOTS exactly as the worker's "
        "read_file tool reads: a path that leads outside the roots (`..`, an absolute path, a "
        "symbolic link, a file with more than one hard link) or names no regular file of at "
        f"most {MAX_READ_BYTES} bytes is a 403 (`path_refused`), a missing file a 404 "
        "(`not_found`), and a server with no workspace roots a 404 (`not_configured`). Only "
        "the conversation's creator or an operator may read through it."
    ),
)
def read(cid: str) -> Response:
    svc = services()
    record = svc.store.get(cid)  # 404 for an unknown conversation
    check_conversation_owner(current_principal(), record, action="read workspace files through it")
    return reply(read_file(FileQuery.read().path, svc.settings))


def blueprint() -> Blueprint:
    bp = Blueprint("files", __name__)
    bp.add_url_rule("/conversations/<id:cid>/files", view_func=read, methods=["GET"])
    return bp
