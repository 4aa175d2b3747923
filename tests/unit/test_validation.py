"""Prompt validation, case by case."""

from __future__ import annotations

import pytest

from shared.errors import PayloadTooLarge, PromptRejected
from shared.models.content import Content, Media, SlashCommand, TextPart
from shared.settings import Settings
from shared.validation import strip_control_characters, validate_prompt

SETTINGS = Settings(max_prompt_text_bytes=100, max_prompt_media_bytes=50)
PNG = b"\x89PNG\r\n\x1a\n" + b"0" * 10


def test_control_characters_are_stripped_but_newline_and_tab_kept() -> None:
    assert strip_control_characters("a\x00b\x07c\td\ne\x1bf\x7fg\x85h\r\n") == "abc\td\nefgh\n"


def test_plain_text_is_cleaned() -> None:
    assert validate_prompt("hi\x00 there", SETTINGS) == Content(parts=[TextPart(text="hi there")])


@pytest.mark.parametrize("prompt", ["", "   ", "\x00\x01\x02", "\n\t \x1b"])
def test_empty_after_stripping_is_rejected(prompt: str) -> None:
    with pytest.raises(PromptRejected, match="empty"):
        validate_prompt(prompt, SETTINGS)


def test_multipart_text_goes_through_the_same_strip() -> None:
    content = Content(parts=[TextPart(text="\x00\x01"), TextPart(text="ok\x08")])
    assert validate_prompt(content, SETTINGS).parts == [TextPart(text="ok")]


def test_multipart_of_only_control_characters_is_rejected() -> None:
    with pytest.raises(PromptRejected, match="empty"):
        validate_prompt(Content(parts=[TextPart(text="\x00"), TextPart(text=" \x7f ")]), SETTINGS)


def test_media_alone_is_a_prompt() -> None:
    content = validate_prompt(Content(parts=[Media(data=PNG, mime_type="image/png")]), SETTINGS)
    assert content.media[0].data == PNG


def test_unsupported_mime_type_is_named() -> None:
    with pytest.raises(PromptRejected, match="'video/mp4' is not supported"):
        validate_prompt(Content(parts=[Media(data=b"x", mime_type="video/mp4")]), SETTINGS)


def test_oversize_text_names_size_and_limit() -> None:
    with pytest.raises(PayloadTooLarge, match="101 bytes; the limit is 100 bytes"):
        validate_prompt("x" * 101, SETTINGS)


def test_text_limit_counts_bytes_not_characters() -> None:
    with pytest.raises(PayloadTooLarge):
        validate_prompt("é" * 51, SETTINGS)


def test_oversize_media_names_size_and_limit() -> None:
    parts = [
        TextPart(text="look"),
        Media(data=b"1" * 30, mime_type="image/png"),
        Media(data=b"2" * 21, mime_type="image/png"),
    ]
    with pytest.raises(PayloadTooLarge, match="media is 51 bytes; the limit is 50"):
        validate_prompt(Content(parts=parts), SETTINGS)


def test_slash_command_from_text() -> None:
    assert validate_prompt("/compact now", SETTINGS).slash_command == SlashCommand(
        name="compact", args="now"
    )


def test_unknown_slash_command_part_is_rejected_naming_the_known_ones() -> None:
    with pytest.raises(PromptRejected, match=r"unknown slash command '1; drop'.*/compact, /help"):
        validate_prompt(Content(parts=[SlashCommand(name="1; drop")]), SETTINGS)


@pytest.mark.parametrize(
    "text", ["/etc/hosts is which file?", "/frobnicate now", "/helpme", "/Compact", "/ help"]
)
def test_text_that_is_not_a_known_command_stays_text(text: str) -> None:
    prompt = validate_prompt(text, SETTINGS)
    assert prompt.slash_command is None and prompt.text == text


@pytest.mark.parametrize(
    ("text", "name", "args"),
    [
        ("/help\x00", "help", ""),
        ("\x07/compact\x00 now", "compact", "now"),
        (" /help ", "help", ""),
    ],
)
def test_control_characters_are_stripped_before_a_command_is_read(
    text: str, name: str, args: str
) -> None:
    assert validate_prompt(text, SETTINGS).slash_command == SlashCommand(name=name, args=args)


def test_media_survives_json_as_base64() -> None:
    content = Content(parts=[Media(data=PNG, mime_type="image/png", description="d")])
    raw = content.model_dump_json()
    assert "iVBORw0K" in raw
    assert Content.model_validate_json(raw) == content
