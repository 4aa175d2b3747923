"""A prompt request, and a schema that says which prompts `validate_prompt` accepts.

The body is read as the shared `Content` is, then checked by
`shared.validation.validate_prompt`, which answers 413 and 422 with its own codes. The
schema declares those checks too, so a client can tell a good prompt without sending
it: a character that is neither whitespace nor a control character, slash command names
of at most 64 characters, an allowed media type, media that are not empty. Only the
sizes are summed over the parts on the server; the schema bounds each part. Settings
decide some of it: `limits` and `multipart` fill that in when the document is built.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import JsonDict

from shared.content import Content, ContentPart, Media, SlashCommand, TextPart
from shared.settings import Settings
from webui.api.models import RequestBody
from webui.api.patterns import LONG_COMMAND, NOT_BLANK

__all__ = [
    "BASE64",
    "COMMAND_NAME",
    "PromptBody",
    "PromptContent",
    "PromptMedia",
    "PromptSlashCommand",
    "PromptText",
    "limits",
    "multipart",
]

COMMAND_NAME = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"


def _base64(alphabet: str) -> str:
    """Base64 as pydantic reads it: padding optional, no stray bits in the last character."""
    tail = f"{alphabet}[AQgw]={{0,2}}|{alphabet}{{2}}[AEIMQUYcgkosw048]=?"
    return f"(?:{alphabet}{{4}})*(?:{alphabet}{{4}}|{tail})"


# Not empty; standard or URL-safe, not both.
BASE64 = f"^(?:{_base64('[A-Za-z0-9+/]')}|{_base64('[A-Za-z0-9_-]')})$"
_TEXT_TOO: JsonDict = {"type": "string", "pattern": LONG_COMMAND}


class PromptText(TextPart):
    """Text; a part that is only whitespace is dropped."""


class PromptMedia(Media):
    """An attachment, base64 in JSON (not empty; an allowed media type)."""

    data: bytes = Field(json_schema_extra={"pattern": BASE64, "contentEncoding": "base64"})


class PromptSlashCommand(SlashCommand):
    """A slash command by name, such as ``compact``."""

    name: str = Field(pattern=COMMAND_NAME)


PromptPart = Annotated[PromptText | PromptMedia | PromptSlashCommand, Field(discriminator="kind")]
# A part that is still there once the prompt is cleaned: media, a command, or text.
_KEPT_PART: JsonDict = {
    "anyOf": [
        {"properties": {"kind": {"enum": ["media", "slash_command"]}}},
        {"properties": {"text": {"pattern": NOT_BLANK}}, "required": ["text"]},
    ]
}


class PromptContent(BaseModel):
    """A prompt in parts; one of them at least must be more than whitespace."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    parts: list[PromptPart] = Field(json_schema_extra={"contains": _KEPT_PART})

    def content(self) -> Content:
        parts: list[ContentPart] = [*self.parts]
        return Content(parts=parts)


class PromptBody(RequestBody):
    """A prompt: `text` (``/name args`` is a slash command) or `content` with parts."""

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [
                {"required": ["text"], "properties": {"text": {"type": "string"}}},
                {"required": ["content"], "properties": {"content": {"type": "object"}}},
            ]
        }
    )

    text: str | None = Field(
        None,
        description="Not only whitespace; ``/name args`` names a command of at most 64 characters.",
        json_schema_extra={"pattern": NOT_BLANK, "not": _TEXT_TOO},
    )
    content: PromptContent | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> PromptBody:
        if (self.text is None) == (self.content is None):
            raise ValueError("send exactly one of 'text' and 'content'")
        return self

    def prompt(self) -> str | Content:
        if self.content is not None:
            return self.content.content()
        return self.text or ""


def limits(settings: Settings) -> dict[str, dict[str, dict[str, Any]]]:
    """Keywords that settings decide, by schema and property (sizes are summed over parts)."""
    text_bytes, media_bytes = settings.max_prompt_text_bytes, settings.max_prompt_media_bytes
    size = f"A prompt's text and command arguments: at most {text_bytes:,} bytes of UTF-8 in all."
    text = {"maxLength": text_bytes, "description": size}  # bytes: at most as many characters
    body_text = f"{PromptBody.model_fields['text'].description} {size}"
    data = f"Base64. A prompt's media: at most {media_bytes:,} bytes in all (decoded)."
    return {
        "PromptBody": {"text": {**text, "description": body_text}},
        "PromptText": {"text": text},
        "PromptSlashCommand": {"args": text},
        "PromptMedia": {
            "mime_type": {"enum": sorted(settings.allowed_media_types)},
            "data": {"description": data},
        },
    }


def multipart(settings: Settings) -> dict[str, Any]:
    """The multipart form: a ``text`` field and ``media`` files; one of them must be there."""
    text = {"type": "string", "maxLength": settings.max_prompt_text_bytes, "not": _TEXT_TOO}
    media = {"type": "string", "contentMediaType": "application/octet-stream", "minLength": 1}
    schema = {
        "type": "object",
        "properties": {"text": text, "media": {"type": "array", "items": media}},
        "anyOf": [
            {"required": ["text"], "properties": {"text": {"pattern": NOT_BLANK}}},
            {"required": ["media"], "properties": {"media": {"minItems": 1}}},
        ],
    }
    types = ", ".join(sorted(settings.allowed_media_types))
    return {"schema": schema, "encoding": {"media": {"contentType": types}}}
