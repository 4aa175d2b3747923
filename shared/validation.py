"""Prompt validation: one function, used by every entry point before anything is queued."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from shared.errors import InvalidInput, PayloadTooLarge, PromptRejected
from shared.models.config import ConversationOptions, PromptOptions
from shared.models.content import (
    SLASH_COMMANDS,
    Content,
    ContentPart,
    Media,
    SlashCommand,
    TextPart,
    as_content,
)
from shared.schema import check_schema
from shared.settings import Settings

__all__ = [
    "checked_options",
    "conversation_options",
    "describe_problems",
    "key_value_pairs",
    "prompt_options",
    "strip_control_characters",
    "validate_prompt",
]

Options = TypeVar("Options", bound=BaseModel)

# C0 controls except tab and newline, DEL, and C1 controls. Carriage returns go too:
# a prompt's line breaks are normalised to "\n".
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def strip_control_characters(text: str) -> str:
    """Removes control characters, keeping newline and tab (CRLF becomes LF)."""
    return _CONTROL.sub("", text.replace("\r\n", "\n"))


def validate_prompt(value: str | Content | list[ContentPart], settings: Settings) -> Content:
    """Returns a cleaned prompt, or raises an error naming what was wrong and the limit.

    A plain string is cleaned before it is parsed, so ``/help\x00`` is the command.
    """
    content = as_content(strip_control_characters(value) if isinstance(value, str) else value)
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
        if name not in SLASH_COMMANDS:
            known = ", ".join(f"/{command}" for command in SLASH_COMMANDS)
            raise PromptRejected(f"unknown slash command {name[:64]!r}; known commands: {known}")
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


def prompt_options(options: PromptOptions | None = None, /, **chosen: Any) -> PromptOptions:
    """`options`, or `PromptOptions` from keywords, checked; an error names each bad option."""
    checked = _either(PromptOptions, "prompt", options, chosen)
    if checked.response_schema is not None:
        check_schema(checked.response_schema)
    return checked


def conversation_options(
    options: ConversationOptions | None = None, /, **chosen: Any
) -> ConversationOptions:
    """`options`, or `ConversationOptions` from keywords; an error names each bad or unknown one."""
    return _either(ConversationOptions, "conversation", options, chosen)


def _either(
    model: type[Options], what: str, options: Options | None, chosen: Mapping[str, Any]
) -> Options:
    if options is None:
        return checked_options(model, what, chosen)
    if chosen:
        raise InvalidInput(f"pass {model.__name__} or keywords, not both: {', '.join(chosen)}")
    return options


def checked_options(model: type[Options], what: str, options: Mapping[str, Any]) -> Options:
    """`model` from keyword arguments (None meaning "not chosen"), or InvalidInput naming why."""
    try:
        return model.model_validate({k: v for k, v in options.items() if v is not None})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in exc.errors()
        )
        raise InvalidInput(f"invalid {what} options: {problems}") from exc


def key_value_pairs(option: str, pairs: Iterable[str]) -> dict[str, str]:
    """`KEY=VALUE` command-line pairs as a dict; InvalidInput naming the option otherwise."""
    found = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InvalidInput(f"{option} {pair!r}: write KEY=VALUE")
        found[key] = value
    return found


def describe_problems(exc: ValidationError, subject: str) -> str:
    """Every problem of a failed validation on one line, each named by its field (or by
    `subject` when it is about the whole input), for a form's or a command's error."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or subject}: {e['msg']}" for e in exc.errors()
    )
