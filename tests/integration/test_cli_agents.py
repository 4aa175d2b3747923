"""`signoff agent` and `signoff schedule`, errors included: in process (each start of the
command costs seconds on a busy machine), and once through the real entry point."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner

from cli.main import cli
from shared.client import Client
from shared.settings import Settings
from tests.stack import run_cli


def _cli(env: dict[str, str], *args: str) -> Any:
    return CliRunner(env=env).invoke(cli, list(args))


def test_agents_and_schedules_from_the_command_line(stack_env: dict[str, str]) -> None:
    created = _cli(
        stack_env,
        "agent", "create", "triage",
        "--system-prompt", "Sort it.",
        "--tools", '{"calculator": "ask"}',
        "--max-model-calls", "4",
        "--meta", "team=ops",
    )  # fmt: skip
    assert created.exit_code == 0, created.stderr
    assert created.stdout.strip() == "created agent triage version 1"
    updated = _cli(stack_env, "agent", "update", "triage", "--description", "Sorts tickets")
    assert updated.stdout.strip() == "updated agent triage: now version 2", updated.stderr
    shown = json.loads(_cli(stack_env, "agent", "show", "triage").stdout)
    assert (shown["version"], shown["system_prompt"], shown["max_model_calls"]) == (
        2,
        "Sort it.",
        4,
    )
    assert shown["metadata"] == {"team": "ops"} and shown["description"] == "Sorts tickets"
    listed = _cli(stack_env, "agent", "list").stdout
    assert listed.startswith("triage") and "v2" in listed

    submitted = _cli(stack_env, "submit", "hello", "--agent", "triage")
    assert submitted.exit_code == 0, submitted.stderr
    cid = json.loads(submitted.stdout)["conversation_id"]
    settings = Settings(
        redis_url=stack_env["SIGNOFF_REDIS_URL"], key_prefix=stack_env["SIGNOFF_KEY_PREFIX"]
    )
    with Client(settings) as client:
        config = client.store.get(cid).config
    assert (config.agent, config.agent_version, config.system_prompt) == ("triage", 2, "Sort it.")

    made = _cli(
        stack_env,
        "schedule", "create", "morning",
        "--agent", "triage", "--prompt", "Any news?",
        "--cron", "0 9 * * 1-5", "--tz", "America/New_York", "--overlap", "cancel",
    )  # fmt: skip
    assert made.exit_code == 0, made.stderr
    assert "created schedule morning: cron '0 9 * * 1-5' (America/New_York)" in made.stdout
    assert made.stdout.count("next: ") == 5 and "T09:00:00-0" in made.stdout
    assert (
        _cli(stack_env, "schedule", "pause", "morning").stdout.strip() == "paused schedule morning"
    )
    assert "paused" in _cli(stack_env, "schedule", "list").stdout
    resumed = _cli(stack_env, "schedule", "resume", "morning").stdout
    assert resumed.startswith("resumed schedule morning: next ")
    status = json.loads(_cli(stack_env, "schedule", "show", "morning", "--runs", "0").stdout)
    assert status["schedule"]["overlap"] == "cancel" and len(status["next_fire_times"]) == 5

    for args, problem in [
        (("--cron", "0 9 * *"), "bad cron expression '0 9 * *'"),
        (("--cron", "0 9 * * *", "--tz", "Nowhere/Land"), "unknown time zone 'Nowhere/Land'"),
        (("--every", "60", "--agent", "ghost"), "no agent named 'ghost'"),
    ]:
        base = ["schedule", "create", "bad", "--agent", "triage", "--prompt", "x"]
        refused = _cli(stack_env, *base, *args)
        assert refused.exit_code == 1 and problem in refused.stderr, refused.stderr
    loose = _cli(stack_env, "agent", "create", "loose", "--tools", '{"send_email": "auto"}')
    assert loose.exit_code == 1 and "tools.send_email would loosen" in loose.stderr
    in_use = _cli(stack_env, "agent", "delete", "triage")
    assert in_use.exit_code == 1 and "used by schedules morning" in in_use.stderr
    assert "--force" not in in_use.stdout and "deleted" not in in_use.stdout
    assert _cli(stack_env, "schedule", "delete", "morning").exit_code == 0
    assert _cli(stack_env, "agent", "delete", "triage").stdout.strip() == "deleted agent triage"
    _cli(stack_env, "agent", "create", "spare")
    _cli(
        stack_env,
        "schedule",
        "create",
        "hourly",
        "--agent",
        "spare",
        "--prompt",
        "x",
        "--every",
        "3600",
    )
    forced = _cli(stack_env, "agent", "delete", "spare", "--force")
    assert forced.exit_code == 0 and forced.stdout.strip() == "deleted agent spare"
    assert "hourly" in _cli(stack_env, "schedule", "list").stdout  # the schedule is left
    assert _cli(stack_env, "schedule", "delete", "hourly").exit_code == 0
    missing = run_cli(stack_env, "agent", "show", "triage")  # the installed command
    assert missing.returncode == 2 and "no agent named 'triage'" in missing.stderr
