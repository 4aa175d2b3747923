"""`signoff doctor`'s memory check: bytes per conversation measured, and when Redis fills."""

from __future__ import annotations

import re

from cli.doctor import Level, check_memory
from shared.client import Client


def test_memory_per_conversation_and_the_day_it_fills(client: Client) -> None:
    for n in range(3):
        client.new_conversation().chat_to_completion(f"hello {n}")
    used = int(client.redis.info("memory")["used_memory"])
    roomy = check_memory(
        client.redis, client.settings, {"used_memory": used, "maxmemory": used * 1000}
    )
    assert roomy.level is Level.OK, roomy.message
    match = re.search(
        r"(\d+) conversations, ([\d.]+) KB each .*\+(\d+) new, -0 archived; "
        r"full in about ([\d.]+) days",
        roomy.message,
    )
    assert match, roomy.message
    count, kb, new, days = int(match[1]), float(match[2]), int(match[3]), float(match[4])
    assert count >= 3 and new >= 3 and 0.5 < kb < 500
    expected = (used * 999) / (new * kb * 1024)  # KB is shown rounded to 0.1
    assert abs(days - expected) / expected < 0.01, (days, expected)

    tight = check_memory(
        client.redis, client.settings, {"used_memory": used, "maxmemory": used + 1024}
    )
    assert tight.level is Level.WARN and "signoff archive retention set" in tight.message
