"""A prompt request, and a schema that says which prompts `validate_prompt` accepts.

The body is read as the shared `Content` is, then checked by
`shared.validation.validate_prompt`, which answers 413 and 422 with its own codes. The
schema declares those checks too, so a client can tell a good prompt without sending
it: a character that is neither whitespace nor a control character, a known slash
command, an allowed media type, media that are not empty. Only the
sizes are summed over the parts on the server; the schema bounds each part. Settings
decide some of it: `limits` and `multipart` fill that in when the document is built.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.json_schema import JsonDict, JsonValue

from shared.models.config import MAX_TURN_TIMEOUT_S, PromptOptions, ToolSelection
from shared.models.content import (
    SLASH_COMMANDS,
    Content,
    ContentPart,
    Media,
    SlashCommand,
    TextPart,
)
from shared.models.patterns import NOT_BLANK
from shared.settings import Settings

__all__ = [
    "BASE64",
    "PromptBody",
    "PromptContent",
    "PromptMedia",
    "PromptSlashCommand",
    "PromptText",
    "limits",
    "multipart",
]


def _base64(alphabet: str) -> str:
    """Base64 as pydantic reads it: padding optional, no stray bits in the last character."""
    tail = f"{alphabet}[AQgw]={{0,2}}|{alphabet}{{2}}[AEIMQUYcgkosw048]=?"
    return f"(?:{alphabet}{{4}})*(?:{alphabet}{{4}}|{tail})"


# Not empty; standard or URL-safe, not both.
BASE64 = f"^(?:{_base64('[A-Za-z0-9+/]')}|{_base64('[A-Za-z0-9_-]')})$"
_COMMAND_NAMES: list[JsonValue] = [*sorted(SLASH_COMMANDS)]  # a fresh list of JSON values


class PromptText(TextPart):
    """Text; a part that is only whitespace is dropped."""


class PromptMedia(Media):
    """An attachment, base64 in JSON (not empty; an allowed media type)."""

    data: bytes = Field(json_schema_extra={"pattern": BASE64, "contentEncoding": "base64"})


class PromptSlashCommand(SlashCommand):
    """A slash command by name, such as ``compact``."""

    name: str = Field(json_schema_extra={"enum": _COMMAND_NAMES})

    @field_validator("name")
    @classmethod
    def _known(cls, name: str) -> str:
        if name not in SLASH_COMMANDS:
            known = ", ".join(sorted(SLASH_COMMANDS))
            raise ValueError(f"unknown slash command {name[:64]!r}; known: {known}")
        return name


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


class PromptBody(PromptOptions):
    """A prompt: `text` (``/compact`` or ``/help`` is a slash command) or `content` with parts.

    Beside it, the prompt's own options (`shared.models.config.PromptOptions`), for its turn only.
    """

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "oneOf": [
                {"required": ["text"], "properties": {"text": {"type": "string"}}},
                {"required": ["content"], "properties": {"content": {"type": "object"}}},
            ]
        },
    )

    text: str | None = Field(
        None,
        description="Not only whitespace. ``/compact`` or ``/help`` (with arguments) is that "
        "slash command; any other text, one that starts with ``/`` included, goes to the model.",
        json_schema_extra={"pattern": NOT_BLANK},
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

    def options(self) -> dict[str, Any]:
        """The prompt's options, as `Conversation.send` takes them."""
        return {name: getattr(self, name) for name in PromptOptions.model_fields}


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
    """The multipart form: a ``text`` field and ``media`` files; one of them must be there.

    `tool_selection` and `timeout_s` may come as fields too (a response schema: JSON only).
    """
    text = {"type": "string", "maxLength": settings.max_prompt_text_bytes}
    media = {"type": "string", "contentMediaType": "application/octet-stream", "minLength": 1}
    options = {
        "tool_selection": {"type": "string", "enum": [s.value for s in ToolSelection]},
        "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TURN_TIMEOUT_S},
    }
    schema = {
        "type": "object",
        "properties": {"text": text, "media": {"type": "array", "items": media}, **options},
        "anyOf": [
            {"required": ["text"], "properties": {"text": {"pattern": NOT_BLANK}}},
            {"required": ["media"], "properties": {"media": {"minItems": 1}}},
        ],
    }
    types = ", ".join(sorted(settings.allowed_media_types))
    return {"schema": schema, "encoding": {"media": {"contentType": types}}}
