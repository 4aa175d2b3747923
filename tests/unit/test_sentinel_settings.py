"""Sentinel settings: addresses checked at the edge, and the broker URL kombu is given."""

from __future__ import annotations

import pytest
from pydantic import SecretStr, ValidationError

from shared.client.broker import BrokerKind, broker_config, broker_kind, broker_url
from shared.settings import Settings, sentinel_addresses


def test_addresses_parse_and_a_bad_one_is_named() -> None:
    assert sentinel_addresses(" a:26379, [::1]:26380 ,") == [("a", 26379), ("::1", 26380)]
    for bad in ("a", "a:b", ":26379", "a:0", "a:70000"):
        with pytest.raises(ValidationError, match="is not host:port"):
            Settings(redis_sentinels=f"s1:26379,{bad}")


def test_the_broker_is_the_state_redis_through_the_same_sentinels() -> None:
    settings = Settings(
        redis_url="redis://:hunter22@ignored:1/3",
        redis_sentinels="s1:26379,s2:26379",
        redis_sentinel_master="prod",
        redis_sentinel_password=SecretStr("sentinel-secret"),
    )
    assert broker_kind(settings) is BrokerKind.STATE_REDIS  # scripts push tasks themselves
    assert broker_url(settings) == (
        "sentinel://:hunter22@s1:26379/3;sentinel://:hunter22@s2:26379/3"
    )
    transport = broker_config(settings, [])["broker_transport_options"]
    assert transport["master_name"] == "prod"
    assert transport["sentinel_kwargs"] == {"password": "sentinel-secret"}
    plain = Settings(redis_url="redis://127.0.0.1:6380/0")
    assert broker_url(plain) == "redis://127.0.0.1:6380/0"
    assert "master_name" not in broker_config(plain, [])["broker_transport_options"]
