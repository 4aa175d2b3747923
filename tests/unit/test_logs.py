"""Log lines: secrets masked (known values and shapes), JSON with the context's ids."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from shared.logs import Redactor, adopt, configure, log_context
from shared.logs.redact import _SHAPES, MASK
from shared.settings import LogFormat, Settings

SECRETS = Settings(
    openai_api_key=SecretStr("not-a-shape-but-a-known-key"),
    smtp_password=SecretStr("smtp-pass-word-1"),
    secret_key=SecretStr("session-signing-key-42"),
    metrics_token=SecretStr("scrape-token-abc"),
    redis_url="redis://:redis-pass-99@127.0.0.1:6379/0",
)


@pytest.fixture(autouse=True)
def root_logger() -> Iterator[None]:
    """`configure` replaces the root logger's handlers: the next test gets them back."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_known_secrets_and_secret_shapes_are_masked() -> None:
    redact = Redactor.for_settings(SECRETS)
    lines = {
        "key not-a-shape-but-a-known-key in a sentence": "key *** in a sentence",
        "smtp-pass-word-1 / session-signing-key-42 / scrape-token-abc": "*** / *** / ***",
        "redis-pass-99": MASK,
        "token so_AbCdEfGhIjKlMnOpQrStUv_123 made": "token so_*** made",
        "secret whsec_c2VjcmV0LXNpZ25pbmc= set": "secret whsec_*** set",
        "Authorization: Bearer abc.def-ghi": "Authorization: *** ***",
        "GET /approve/eyJhbGciOi.sig123 HTTP/1.1": "GET /approve/*** HTTP/1.1",
        "redis://user:hunter2@host:6379/0": "redis://user:***@host:6379/0",
        'password=hunter2 {"api_key": "k-123"}': 'password=*** {"api_key": "***"}',
        "openai sk-proj-abcdefghijklmnop": "openai sk-***",
        "slack xoxb-1234-5678-abcdefgh": "slack xox-***",
        "input tokens: 35, max_tokens=10, a fencing token of 3": (
            "input tokens: 35, max_tokens=10, a fencing token of 3"
        ),
    }
    for line, masked in lines.items():
        assert redact(line) == masked, line


def test_the_quick_check_before_each_shape_never_lets_a_secret_through() -> None:
    """Each shape runs only on lines holding its literal: the same lines come out as if every
    shape ran on every line, in any case and in the middle of other text."""
    redact = Redactor([])

    def every_shape(text: str) -> str:
        for pattern, replacement, _ in _SHAPES:
            text = pattern.sub(replacement, text)
        return text

    samples = [
        "so_AbCdEfGhIjKlMnOpQrStUv_123",
        "whsec_c2VjcmV0LXNpZ25pbmc=",
        "sk-proj-abcdefghijklmnop",
        "xoxp-1234-5678-abcdefgh",
        "BEARER abc.def",
        "Basic dXNlcjpwYXNz",
        "/approve/eyJhbGciOi.sig123",
        "HTTPS://user:hunter2@host",
        "PassWord: 'x1'",
        "PASSWD=abc",
        "Secret=abc",
        "TOKEN: abc",
        "Api-Key=abc",
        "APIKEY=abc",
        '"authorization": "abc"',
        "advance 94192c0de5bc4170ba96: finished",
    ]
    for sample in samples:
        for line in (sample, f"before {sample} after", f"x={sample};"):
            assert redact(line) == every_shape(line), line
    assert sum(redact(sample) != sample for sample in samples) == len(samples) - 1


def _captured(settings: Settings) -> io.StringIO:
    stream = io.StringIO()
    configure(settings, process="test")
    logging.getLogger().handlers[0].setStream(stream)  # type: ignore[attr-defined]
    return stream


def test_json_lines_carry_the_context_and_no_secret() -> None:
    settings = SECRETS.model_copy(update={"log_format": LogFormat.JSON})
    stream = _captured(settings)
    log = logging.getLogger("signoff.test")
    log.info("outside")
    with log_context(conversation_id="c1"), log_context(turn_id="t1"):
        log.warning("leg with %s", "smtp-pass-word-1")
        try:
            raise ValueError("password=letmein")
        except ValueError:
            log.exception("failed")
    log.info("after")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["message"] for line in lines] == ["outside", "leg with ***", "failed", "after"]
    assert "conversation_id" not in lines[0] and "conversation_id" not in lines[3]
    assert lines[1]["conversation_id"] == "c1" and lines[1]["turn_id"] == "t1"
    assert lines[1]["level"] == "warning" and lines[1]["logger"] == "signoff.test"
    assert lines[1]["process"] == "test" and lines[1]["time"].endswith("Z")
    assert "password=***" in lines[2]["exception"] and "letmein" not in stream.getvalue()


def test_text_lines_are_masked_too_and_adopted_handlers_follow_the_format() -> None:
    stream = _captured(SECRETS)
    logging.getLogger("signoff.test").info("key %s", "scrape-token-abc")
    assert stream.getvalue().endswith("INFO signoff.test: key ***\n")
    other = logging.getLogger("celery.like")
    foreign = io.StringIO()
    handler = logging.StreamHandler(foreign)
    handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
    other.addHandler(handler)
    other.propagate = False
    try:
        adopt(SECRETS.model_copy(update={"log_format": LogFormat.JSON}), [other], process="w")
        with log_context(conversation_id="c2"):
            other.info("Bearer so_AbCdEfGhIjKlMnOpQrStUv")
    finally:
        other.removeHandler(handler)
    line = json.loads(foreign.getvalue())
    assert line["message"] == "Bearer ***" and line["conversation_id"] == "c2"
