"""Settings fail loudly at start-up; keys carry the hash tag and refuse unsafe ids."""

from __future__ import annotations

import pytest

from shared.errors import InvalidInput, NotFound, ProviderError, SettingsError, SignoffError
from shared.models.steps import StepStatus, StepType
from shared.settings import load_settings
from shared.store.keys import KeySpace


def test_invalid_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNOFF_FLUSH_INTERVAL_MS", "soon")
    with pytest.raises(SettingsError, match="SIGNOFF_FLUSH_INTERVAL_MS"):
        load_settings()


def test_unknown_provider_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNOFF_PROVIDER", "magic")
    with pytest.raises(SettingsError, match=r"SIGNOFF_PROVIDER: .*scripted, openai, ollama"):
        load_settings()


def test_environment_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNOFF_MAX_HISTORY_SIZE", "0")
    monkeypatch.setenv("SIGNOFF_KEY_PREFIX", "acme")
    settings = load_settings()
    assert settings.max_history_size == 0
    assert settings.key_prefix == "acme"


def test_secret_is_not_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNOFF_OPENAI_API_KEY", "sk-very-secret")
    settings = load_settings()
    assert "sk-very-secret" not in repr(settings)
    assert settings.openai_api_key.get_secret_value() == "sk-very-secret"


def test_conversation_keys_share_one_hash_tag() -> None:
    keys = KeySpace("signoff")
    assert keys.steps("abc") == "signoff:{abc}:steps"
    assert keys.events("abc").startswith("signoff:{abc}:")
    assert keys.turn("abc", "t1") == "signoff:{abc}:turn:t1"


@pytest.mark.parametrize("bad", ["", "a}b", "a{b", "x:y", "a b", "x" * 129])
def test_unsafe_ids_are_refused(bad: str) -> None:
    with pytest.raises(InvalidInput, match="conversation id"):
        KeySpace().steps(bad)


def test_unknown_enum_values_parse_as_unknown() -> None:
    assert StepType("from_the_future") is StepType.UNKNOWN
    assert StepStatus("?") is StepStatus.UNKNOWN


@pytest.mark.parametrize("error", [NotFound("no such thing"), ProviderError("boom", http_code=503)])
def test_errors_are_rebuilt_from_their_arguments(error: SignoffError) -> None:
    """Celery's JSON result format keeps an exception's type and arguments, nothing else."""
    copy = type(error)(*error.args)
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert getattr(copy, "http_code", None) == getattr(error, "http_code", None)
