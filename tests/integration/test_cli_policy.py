"""`signoff policy` through the real entry point, against a real worker that obeys it."""

from __future__ import annotations

from shared.client import Client
from shared.models.config import ToolPolicy
from shared.models.events import ConversationStatus
from shared.store.policy import PolicyStore
from tests.stack import WorkerProcess, run_cli
from tests.web.conftest import wait_for


def test_policy_set_show_unset_log_and_the_worker_obeys(
    stack_env: dict[str, str], worker: WorkerProcess, client: Client
) -> None:
    shown = run_cli(stack_env, "policy", "show")
    assert shown.returncode == 0, shown.stderr
    assert "send_email" in shown.stdout and "calculator" in shown.stdout
    assert [
        line.split()[:2] for line in shown.stdout.splitlines() if line.startswith("send_email")
    ] == [["send_email", "ask"]]
    done = run_cli(stack_env, "policy", "set", "calculator", "ask", "--actor", "ada")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "calculator in *: - -> ask"
    conversation = client.new_conversation(policy_may_loosen=False)
    conversation.send('call calculator {"expression": "6*7"}')
    wait_for(
        lambda: conversation.status is ConversationStatus.WAITING_FOR_USER,
        "the calculator call to wait for an operator",
    )
    scoped = run_cli(stack_env, "policy", "set", "calculator", "deny", "--label", "frozen")
    assert scoped.returncode == 0 and "label:frozen" in scoped.stdout
    log = run_cli(stack_env, "policy", "log")
    assert log.returncode == 0
    assert [line.split(" ", 3)[3] for line in log.stdout.splitlines()][:2] == [
        "calculator in label:frozen: - -> deny",
        "calculator in *: - -> ask",
    ]
    assert "ada:" in log.stdout
    removed = run_cli(stack_env, "policy", "unset", "calculator")
    assert removed.returncode == 0 and removed.stdout.strip() == "calculator in *: ask -> -"
    missing = run_cli(stack_env, "policy", "unset", "calculator")
    assert missing.returncode == 2 and "no policy rule for tool 'calculator'" in missing.stderr
    bad = run_cli(stack_env, "policy", "set", "calculator", "sometimes")
    assert bad.returncode == 2 and "sometimes" in bad.stderr
    bad_name = run_cli(stack_env, "policy", "set", "no such tool", "ask")
    assert bad_name.returncode == 1 and "tool" in bad_name.stderr
    rules = client.redis.hgetall(client.keys.policy_rules())
    assert rules == {"calculator|label:frozen": ToolPolicy.DENY.value}
    client.redis.delete(client.keys.policy_rules())


def test_policy_title_names_the_arguments_that_title_a_tools_requests(
    stack_env: dict[str, str], client: Client
) -> None:
    done = run_cli(stack_env, "policy", "title", "send_email", "to", "subject")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "send_email: titled by to, subject"
    assert PolicyStore(client.redis, client.keys).title_arguments() == {
        "send_email": ("to", "subject")
    }
    three = run_cli(stack_env, "policy", "title", "send_email", "a", "b", "c")
    assert three.returncode == 1 and "at most 2" in three.stderr
    cleared = run_cli(stack_env, "policy", "title", "send_email")
    assert cleared.returncode == 0 and "first short string arguments" in cleared.stdout
    again = run_cli(stack_env, "policy", "title", "send_email")
    assert again.returncode == 2 and "no title arguments are chosen" in again.stderr
