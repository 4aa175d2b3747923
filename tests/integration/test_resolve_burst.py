"""A burst of concurrent resolves against a real `signoff web`: real answers, not 5xx."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx

from shared.client import Client
from shared.local.embedded_redis import free_port
from shared.models.users import Role
from shared.store.users import TokenStore
from tests.integration.test_web_command import wait_healthy
from tests.stack import ROOT, SIGNOFF, WorkerProcess
from tests.web.conftest import wait_for

EMAIL = 'call send_email {"to": "ops@example.com", "subject": "Hi", "body": "Hello."}'
NOTES = 50
RACERS = 20  # concurrent resolves of each notification: 1,000 requests in all


def test_a_thousand_concurrent_resolves_get_one_winner_each_and_no_5xx(
    stack_env: dict[str, str], worker: WorkerProcess, client: Client
) -> None:
    conversations = [client.new_conversation() for _ in range(NOTES)]
    for conversation in conversations:
        conversation.send(EMAIL)
    notes = wait_for(
        lambda: (
            (found := client.notifications.pending(limit=NOTES * 2))
            and len(
                [
                    n
                    for n in found
                    if n.conversation_id in {c.conversation_id for c in conversations}
                ]
            )
            == NOTES
            and found
        ),
        "every conversation to park",
        timeout_s=60,
    )
    ids = [n.id for n in notes if n.conversation_id in {c.conversation_id for c in conversations}]
    token = TokenStore(client.redis, client.keys).create("burst", Role.OPERATOR)
    port = free_port()
    env = {**os.environ, **stack_env, "SIGNOFF_WEB_PORT": str(port), "SIGNOFF_SECRET_KEY": "k" * 40}
    web = subprocess.Popen([SIGNOFF, "web"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, web)
        with httpx.Client(
            base_url=url,
            headers={"Authorization": f"Bearer {token}"},
            limits=httpx.Limits(max_connections=200),
            timeout=30,
        ) as http:

            def resolve(nid: str) -> tuple[str, int, str | None]:
                answer = http.post(f"/api/v1/notifications/{nid}/resolve", json={"kind": "allow"})
                return nid, answer.status_code, answer.headers.get("Retry-After")

            with ThreadPoolExecutor(max_workers=100) as pool:
                results = list(pool.map(resolve, [nid for nid in ids for _ in range(RACERS)]))
    finally:
        web.terminate()
        web.wait(timeout=30)
    statuses = Counter(status for _, status, _ in results)
    assert set(statuses) <= {200, 409}, statuses
    winners = Counter(nid for nid, status, _ in results if status == 200)
    assert winners == Counter(dict.fromkeys(ids, 1))
    assert statuses[409] == NOTES * (RACERS - 1)
