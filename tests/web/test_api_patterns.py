"""The OpenAPI document's patterns say exactly what the server's own checks accept."""

from __future__ import annotations

import json
import re
import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from shared.models.content import Content
from shared.models.patterns import NOT_BLANK, NOT_SPACE
from shared.settings import Settings
from shared.store.users import TOKEN_NAME_PATTERN
from shared.validation import strip_control_characters, validate_prompt
from webui.api.prompt_body import BASE64

EVERY_CHARACTER = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]


def test_not_space_is_what_strip_keeps() -> None:
    pattern = re.compile(NOT_SPACE)
    assert [c for c in EVERY_CHARACTER if bool(pattern.search(c)) != bool(c.strip())] == []


def test_not_blank_is_what_a_prompt_keeps() -> None:
    pattern = re.compile(NOT_BLANK)
    kept = [c for c in EVERY_CHARACTER if strip_control_characters(c).strip()]
    assert [c for c in EVERY_CHARACTER if pattern.search(c)] == kept


def test_token_names_refuse_exactly_control_and_format_characters() -> None:
    pattern = re.compile(TOKEN_NAME_PATTERN[1:-1])
    refused = [c for c in EVERY_CHARACTER if not pattern.fullmatch("a" + c)]
    invisible = [c for c in EVERY_CHARACTER if unicodedata.category(c) in ("Cc", "Cf")]
    assert refused == invisible
    assert not pattern.fullmatch(" \u3000") and pattern.fullmatch(" Zoë 🙂 ")


def _pydantic_reads(data: str) -> bool:
    part = {"kind": "media", "data": data, "mime_type": "text/plain"}
    try:
        return bool(Content.model_validate_json(json.dumps({"parts": [part]})).parts[0].data)  # type: ignore[union-attr]
    except ValidationError:
        return False


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet="AQgwEIaZ09+/-_=", max_size=9))
def test_base64_is_what_pydantic_decodes(data: str) -> None:
    assert bool(re.fullmatch(BASE64[1:-1], data)) == _pydantic_reads(data)


@pytest.mark.parametrize("data", ["aGk=", "aGk", "aQ==", "aQ=", "aQ", "-_8=", "+/+/", "aGkx"])
def test_base64_examples(data: str) -> None:
    assert re.fullmatch(BASE64[1:-1], data) and _pydantic_reads(data)


@settings(max_examples=1500, deadline=None)
@given(
    st.tuples(
        st.sampled_from(["", " ", "\t\n", "x", "\x00"]),
        st.sampled_from(["/", "/help", "/compact", "/etc", "/1", "a/", "/helpx"]),
        st.integers(min_value=0, max_value=68),
        st.sampled_from(["", " args", "\nmore", "!", "\x00"]),
    )
)
def test_any_text_with_a_visible_character_is_accepted(parts: tuple[str, str, int, str]) -> None:
    """Only a known command is a command, so no text is refused for its command's name."""
    before, head, length, after = parts
    text = before + head + "b" * length + after
    validate_prompt(text, Settings())
