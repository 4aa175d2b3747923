"""One approval email over SMTP (stdlib `smtplib` and `email`): the request's summary and a
signed link for its recipient.

The SMTP host is the operator's, so the connection goes through `shared.outbound`: its
address is resolved once, checked (loopback, private, link-local and metadata addresses are
refused unless SIGNOFF_OUTBOUND_ALLOW allows them) and connected to, while TLS still checks
the certificate against the host's name. STARTTLS or TLS from the start, as
SIGNOFF_SMTP_SECURITY says.
"""

from __future__ import annotations

import json
import smtplib
import socket
import ssl
from email.message import EmailMessage
from typing import Any

from shared.models.notifications import Notification
from shared.outbound import OutboundPolicy
from shared.settings import Settings, SmtpSecurity

__all__ = ["approval_message", "send_message"]

_SUBJECT_CHARS = 150
_ARGUMENT_CHARS = 4_000


def _line(text: str, limit: int) -> str:
    """One header-safe line: no line breaks, at most `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def approval_message(note: Notification, *, to: str, sender: str, link: str) -> EmailMessage:
    """The email asking `to` to decide `note`, with the link that decides it."""
    message = EmailMessage()
    message["Subject"] = _line(f"Approval needed: {note.title}", _SUBJECT_CHARS)
    message["From"] = sender
    message["To"] = to
    lines = [note.title, ""]
    if note.tool_call is not None:
        arguments = json.dumps(note.tool_call.args, indent=2, ensure_ascii=False)
        lines += [f"Tool: {note.tool_call.name}", "Arguments:", arguments[:_ARGUMENT_CHARS], ""]
    if note.question:
        lines += ["Question:", note.question, ""]
    lines += [
        f"Request: {note.id}",
        f"Conversation: {note.conversation_id}"
        + (f" (batch {note.batch_id})" if note.batch_id else ""),
        "",
        "Open this link to review and decide (it works once, for you, signed in):",
        link,
    ]
    message.set_content("\n".join(lines))
    return message


class _CheckedSmtp(smtplib.SMTP):
    """SMTP to an address checked by the outbound policy; TLS checks the host's name."""

    def __init__(
        self, address: str, host: str, *, tls: ssl.SSLContext | None, timeout: float
    ) -> None:
        self._address = address
        self._tls = tls
        super().__init__(timeout=timeout)
        # the name STARTTLS checks the certificate against: smtplib keeps it only when its
        # constructor connects, and this one must not (it would skip the address check)
        self._host = host

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        sock = socket.create_connection((self._address, port), timeout)
        return self._tls.wrap_socket(sock, server_hostname=host) if self._tls else sock


def send_message(settings: Settings, message: EmailMessage) -> None:
    """Sends `message` through the configured SMTP server; raises on any failure."""
    host, port = settings.smtp_host, settings.smtp_port
    (address, *_rest) = OutboundPolicy(settings.outbound_allow).resolve(host, port)
    context = ssl.create_default_context()
    direct = context if settings.smtp_security is SmtpSecurity.TLS else None
    options: dict[str, Any] = {"tls": direct, "timeout": settings.smtp_timeout_s}
    with _CheckedSmtp(str(address), host, **options) as smtp:
        smtp.connect(host, port)  # the host's name is kept for STARTTLS's certificate check
        if settings.smtp_security is SmtpSecurity.STARTTLS:
            smtp.starttls(context=context)
        password = settings.smtp_password.get_secret_value()
        if settings.smtp_username:
            smtp.login(settings.smtp_username, password)
        smtp.send_message(message)
