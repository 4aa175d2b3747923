"""The OpenAPI document's patterns say exactly what the server's own checks accept."""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from flask.testing import FlaskClient
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from shared.models.content import Content
from shared.models.patterns import NOT_BLANK, NOT_SPACE
from shared.models.webhooks import IPV6_PATTERN
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


def test_token_names_refuse_exactly_control_and_format_characters_and_the_owner_separator() -> None:
    pattern = re.compile(TOKEN_NAME_PATTERN[1:-1])
    refused = [c for c in EVERY_CHARACTER if not pattern.fullmatch("a" + c)]
    invisible = [c for c in EVERY_CHARACTER if unicodedata.category(c) in ("Cc", "Cf")]
    assert refused == sorted([*invisible, ":"])
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


def _patterns(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                yield value
            yield from _patterns(value)
    elif isinstance(node, list):
        for value in node:
            yield from _patterns(value)


def test_no_pattern_of_the_document_means_one_thing_to_one_engine_and_another_to_the_next(
    http: FlaskClient, operator: dict[str, str]
) -> None:
    """`\\s`, `\\d`, `\\w` and `\\b` differ between ECMA-262 (clients, schemathesis), Rust
    (pydantic) and Python: the MCP selection's `[^\\s/]` took U+001C for pydantic, not for Python,
    and U+0085 for ECMA-262, not for pydantic. `[\\s\\S]` (any character) means the same to all."""
    document = http.get("/api/v1/openapi.json", headers=operator).json
    found = list(_patterns(document))
    assert len(found) > 20
    ambiguous = [p for p in found if re.search(r"\\[sdwbSDWB]", p.replace(r"[\s\S]", ""))]
    assert ambiguous == []


def _urlsplit_reads(host: str) -> bool:
    try:
        urlsplit(f"http://[{host}]/").port  # noqa: B018
    except ValueError:
        return False
    return True


@settings(max_examples=3000, deadline=None)
@given(st.from_regex(IPV6_PATTERN, fullmatch=True))
def test_every_ipv6_address_the_url_pattern_takes_is_one_urlsplit_reads(host: str) -> None:
    assert _urlsplit_reads(host)


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet="0123456789abcdefABCDEF:.", max_size=45))
def test_the_url_pattern_takes_every_bracketed_host_urlsplit_reads(host: str) -> None:
    """Schemathesis sent `http://[:]`: the pattern took it (hex digits, dots, a colon), and
    urlsplit did not (a 422 for a URL the document allowed)."""
    assert bool(re.fullmatch(IPV6_PATTERN, host)) == _urlsplit_reads(host)


@pytest.mark.parametrize(
    "host",
    [":", "1:2", "1.2.3.4", "::1.2.3.04", "1::2::3", "12345::", "::", "::1", "1:2:3:4:5:6:7::"],
)
def test_ipv6_examples(host: str) -> None:
    assert bool(re.fullmatch(IPV6_PATTERN, host)) == _urlsplit_reads(host)
