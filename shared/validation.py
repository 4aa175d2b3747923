"""Prompt validation: one function, used by every entry point before anything is queued."""

from __future__ import annotations

import re

from shared.content import Content, ContentPart, Media, SlashCommand, TextPart, as_content
from shared.errors import PayloadTooLarge, PromptRejected
from shared.settings import Settings

__all__ = ["strip_control_characters", "validate_prompt"]

# C0 controls except tab and newline, DEL, and C1 controls. Carriage returns go too:
# a prompt's line breaks are normalised to "\n".
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def strip_control_characters(text: str) -> str:
    """Removes control characters, keeping newline and tab (CRLF becomes LF)."""
    return _CONTROL.sub("", text.replace("\r\n", "\n"))


def validate_prompt(value: str | Content | list[ContentPart], settings: Settings) -> Content:
    """Returns a cleaned prompt, or raises an error naming what was wrong and the limit."""
    content = as_content(value)
    parts = [_clean_part(part, settings) for part in content.parts]
    parts = [part for part in parts if not (isinstance(part, TextPart) and not part.text.strip())]
    if not parts:
        raise PromptRejected("prompt is empty after removing control characters and whitespace")
    _check_sizes(parts, settings)
    return Content(parts=parts)


def _clean_part(part: ContentPart, settings: Settings) -> ContentPart:
    if isinstance(part, TextPart):
        return TextPart(text=strip_control_characters(part.text))
    if isinstance(part, SlashCommand):
        name = strip_control_characters(part.name).strip()
        if not re.fullmatch(r"[A-Za-z][\w-]{0,63}", name):
            raise PromptRejected(
                f"slash command name {name!r} is not a word of at most 64 characters"
            )
        return SlashCommand(name=name, args=strip_control_characters(part.args).strip())
    return _check_media(part, settings)


def _check_media(part: Media, settings: Settings) -> Media:
    allowed = settings.allowed_media_types
    if part.mime_type not in allowed:
        raise PromptRejected(
            f"media type {part.mime_type!r} is not supported; allowed: {', '.join(sorted(allowed))}"
        )
    if not part.data:
        raise PromptRejected(f"media part of type {part.mime_type} has no data")
    description = part.description
    if description is not None:
        description = strip_control_characters(description)
    return Media(data=part.data, mime_type=part.mime_type, description=description)


def _check_sizes(parts: list[ContentPart], settings: Settings) -> None:
    text_bytes = sum(
        len(part.text.encode()) if isinstance(part, TextPart) else len(part.args.encode())
        for part in parts
        if isinstance(part, TextPart | SlashCommand)
    )
    if text_bytes > settings.max_prompt_text_bytes:
        raise PayloadTooLarge(
            f"prompt text is {text_bytes} bytes; "
            f"the limit is {settings.max_prompt_text_bytes} bytes"
        )
    media_bytes = sum(len(part.data) for part in parts if isinstance(part, Media))
    if media_bytes > settings.max_prompt_media_bytes:
        raise PayloadTooLarge(
            f"prompt media is {media_bytes} bytes; "
            f"the limit is {settings.max_prompt_media_bytes} bytes"
        )
