"""What a user sends: plain text, or parts (text, media, slash commands).

Media bytes travel base64 in JSON. A plain string that starts with a known
command (``/compact``, ``/help``) is read as that command, so it works from every
entry point; any other text, ``/etc/hosts is which file?`` included, is text.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "SLASH_COMMANDS",
    "Content",
    "ContentPart",
    "Media",
    "SlashCommand",
    "TextPart",
    "as_content",
]

SLASH_COMMANDS = {
    "compact": "summarise the conversation so far and keep only the summary in the model's context",
    "help": "list the slash commands",
}
"""The commands the runtime handles; they never reach the model."""

_SLASH = re.compile(rf"^/({'|'.join(SLASH_COMMANDS)})(?:\s+(.*))?$", re.DOTALL)


class TextPart(BaseModel):
    kind: Literal["text"] = "text"
    text: str


class Media(BaseModel):
    """An attachment: raw bytes in Python, base64 in JSON."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    kind: Literal["media"] = "media"
    data: bytes
    mime_type: str
    description: str | None = None


class SlashCommand(BaseModel):
    kind: Literal["slash_command"] = "slash_command"
    name: str
    args: str = ""


ContentPart = Annotated[TextPart | Media | SlashCommand, Field(discriminator="kind")]


HEADLINE_CHARS = 120


class Content(BaseModel):
    """A prompt: one or more parts."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    parts: list[ContentPart] = Field(default_factory=list)

    @classmethod
    def from_text(cls, text: str) -> Content:
        """Reads ``/command args`` as that command when it is a known one; anything else is text."""
        match = _SLASH.match(text.strip())
        if match:
            return cls(parts=[SlashCommand(name=match[1], args=(match[2] or "").strip())])
        return cls(parts=[TextPart(text=text)])

    @property
    def text(self) -> str:
        """The text parts joined by newlines."""
        return "\n".join(part.text for part in self.parts if isinstance(part, TextPart))

    @property
    def headline(self) -> str:
        """The first non-blank line, cut to 120 characters: how lists name a conversation."""
        if (command := self.slash_command) is not None:
            return f"/{command.name} {command.args}".strip()
        line = next((row.strip() for row in self.text.splitlines() if row.strip()), "")
        return line if len(line) <= HEADLINE_CHARS else line[: HEADLINE_CHARS - 1] + "…"

    @property
    def media(self) -> list[Media]:
        return [part for part in self.parts if isinstance(part, Media)]

    @property
    def slash_command(self) -> SlashCommand | None:
        return next((part for part in self.parts if isinstance(part, SlashCommand)), None)


def as_content(value: str | Content | list[ContentPart]) -> Content:
    """Accepts the forms callers use and returns one Content."""
    if isinstance(value, Content):
        return value
    if isinstance(value, str):
        return Content.from_text(value)
    return Content(parts=list(value))
