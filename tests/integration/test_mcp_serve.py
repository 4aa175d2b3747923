"""`signoff mcp serve` driven by the SDK's own client over stdio, on a real Redis and worker.

A submitter's host starts a conversation whose send_email parks; an operator's host
finds the approval and allows it with edited arguments; the first host reads the
answer, which shows the tool ran with exactly those arguments. Roles hold as in the
API: a viewer cannot start, a submitter cannot resolve or loosen the tool policy,
and an unknown or revoked token is refused.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator

import pytest

from shared.client import Client
from shared.models.notifications import NotificationStatus
from shared.models.steps import StepType
from shared.settings import Settings
from shared.store.users import TokenStore
from tests.mcp_hosts import (
    EDITED,
    EMAIL_PROMPT,
    McpHost,
    allow_edited,
    completed_answer,
    over_stdio,
    role_tokens,
    start_and_park,
)
from tests.stack import ROOT, SIGNOFF, WorkerProcess, state_store

pytestmark = pytest.mark.timeout(180)

Tokens = dict[str, str]


@pytest.fixture(scope="module")
def tokens(stack_env: dict[str, str]) -> Tokens:
    return role_tokens(stack_env, "mcp")


@pytest.fixture(scope="module")
def client(stack_env: dict[str, str]) -> Iterator[Client]:
    settings = Settings(
        redis_url=stack_env["SIGNOFF_REDIS_URL"], key_prefix=stack_env["SIGNOFF_KEY_PREFIX"]
    )
    with Client(settings) as signoff:
        yield signoff


def test_a_host_starts_work_an_operator_approves_it_edited_and_the_host_reads_the_answer(
    worker: WorkerProcess, stack_env: dict[str, str], tokens: Tokens, client: Client
) -> None:
    async def submit(host: McpHost) -> tuple[str, str, str]:
        assert await host.tool_names() == {
            "start_conversation",
            "get_conversation",
            "list_pending_approvals",
        }
        cid, turn_id, approval_id = await start_and_park(host)
        refused = await host.refused("resolve_approval", approval_id=approval_id, decision="allow")
        assert "needs the approver role" in refused and "submitter" in refused
        return cid, turn_id, approval_id

    cid, turn_id, approval_id = over_stdio(stack_env, tokens["submitter"], submit)
    assert client.conversation(cid).record().owner == "mcp-submitter"
    assert client.notifications.get(approval_id).status is NotificationStatus.PENDING

    async def approve(host: McpHost) -> None:
        assert "resolve_approval" in await host.tool_names()
        await allow_edited(host, cid, approval_id)

    over_stdio(stack_env, tokens["operator"], approve)
    note = client.notifications.get(approval_id)
    assert (note.resolved_by, note.resolution and note.resolution.kind) == ("mcp-operator", "allow")

    async def read(host: McpHost) -> str:
        return await completed_answer(host, cid, turn_id)

    answer = over_stdio(stack_env, tokens["submitter"], read)
    assert answer.startswith("[demo model] send_email returned:")
    assert "lead@example.com" in answer and "ops@example.com" not in answer
    [result] = [s for s in client.conversation(cid).history if s.type is StepType.TOOL_RESULT]
    assert result.tool_calls[0].args == EDITED  # the tool ran with exactly those
    assert EDITED["body"] in result.content


def test_a_denial_reaches_the_agent_with_its_reason(
    worker: WorkerProcess, stack_env: dict[str, str], tokens: Tokens
) -> None:
    async def flow(host: McpHost) -> str:
        cid, turn_id, approval_id = await start_and_park(host)
        missing = await host.refused("resolve_approval", approval_id=approval_id, decision="deny")
        assert "reason" in missing
        misplaced = await host.refused(
            "resolve_approval", approval_id=approval_id, decision="deny", reason="no", content=1
        )
        assert "content" in misplaced
        await host.ok(
            "resolve_approval", approval_id=approval_id, decision="deny", reason="not on Fridays"
        )
        return await completed_answer(host, cid, turn_id)

    answer = over_stdio(stack_env, tokens["operator"], flow)
    assert "send_email was denied" in answer and "not on Fridays" in answer


def test_roles_bad_input_and_unknown_ids_are_tool_errors(
    worker: WorkerProcess, stack_env: dict[str, str], tokens: Tokens, client: Client
) -> None:
    async def as_viewer(host: McpHost) -> None:
        assert await host.tool_names() == {"get_conversation", "list_pending_approvals"}
        refused = await host.refused("start_conversation", prompt="hello")
        assert "start_conversation needs the submitter role" in refused
        missing = await host.refused("get_conversation", conversation_id="nope")
        assert "not_found" in missing and "nope" in missing
        await host.ok("list_pending_approvals")

    before = client.store.count()
    over_stdio(stack_env, tokens["viewer"], as_viewer)

    async def as_submitter(host: McpHost) -> str:
        loosened = await host.refused(
            "start_conversation", prompt=EMAIL_PROMPT, tools={"send_email": "auto"}
        )
        assert "tools.send_email" in loosened and "operator" in loosened
        assert "prompt" in await host.refused("start_conversation", prompt="  \x00 ")
        unknown = await host.refused("start_conversation", prompt="hi", colour="blue")
        assert "colour" in unknown
        assert "agent" in await host.refused("start_conversation", prompt="hi", agent="ghost")
        assert "unknown tool" in await host.refused("drop_tables")
        assert "mcp" in await host.refused("start_conversation", prompt="hi", mcp=["no spaces"])
        tightened = await host.ok(
            "start_conversation", prompt=EMAIL_PROMPT, tools={"send_email": "deny"}, mcp=["notes"]
        )
        answer = await completed_answer(host, tightened["conversation_id"], tightened["turn_id"])
        assert "send_email was denied" in answer
        return str(tightened["conversation_id"])

    tightened = over_stdio(stack_env, tokens["submitter"], as_submitter)
    assert client.store.count() == before + 1  # only the tightened one was created
    config = client.store.get(tightened).config
    assert config.mcp == ["notes"] and not config.policy_may_loosen

    async def as_operator(host: McpHost) -> None:
        gone = await host.refused("resolve_approval", approval_id="nobody.here", decision="allow")
        assert "not_found" in gone
        bad = await host.refused("resolve_approval", approval_id="no dots", decision="allow")
        assert "approval_id" in bad

    over_stdio(stack_env, tokens["operator"], as_operator)


def refused_at_start(env: dict[str, str], token: str) -> str:
    """`signoff mcp serve` with `token`, which must exit 1 at once, printing nothing on stdout;
    its stderr."""
    done = subprocess.run(
        [SIGNOFF, "mcp", "serve"],
        env={**os.environ, **env, "SIGNOFF_TOKEN": token},
        cwd=ROOT,
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0 and done.stdout == "", done
    return done.stderr


def test_an_unknown_expired_or_revoked_token_is_refused(
    worker: WorkerProcess, stack_env: dict[str, str], tokens: Tokens
) -> None:
    assert "SIGNOFF_TOKEN" in refused_at_start(stack_env, "")
    assert "unknown or revoked" in refused_at_start(stack_env, "so_unknown")
    admin, keys = state_store(stack_env["SIGNOFF_REDIS_URL"], stack_env["SIGNOFF_KEY_PREFIX"])
    store = TokenStore(admin, keys)
    expiring = store.issue("mcp-expiring", "operator", expires_in_s=1)
    time.sleep(1.1)
    assert "expired at" in refused_at_start(stack_env, expiring.token)
    issued = store.issue("mcp-short-lived", "operator")

    async def revoked_midway(host: McpHost) -> None:
        await host.ok("list_pending_approvals")
        store.revoke(issued.info.token_id)
        refused = await host.refused("list_pending_approvals")
        assert "unknown or revoked" in refused

    over_stdio(stack_env, issued.token, revoked_midway)
    admin.close()
