"""Retention and archive end to end: a real Redis, a real worker, the CLI in process."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from shared.archive.archiver import Archiver
from shared.archive.storage import DirectoryStorage
from shared.client import Client, Conversation
from shared.errors import Conflict, NotFound
from shared.models.notifications import Allow
from tests.stack import keys_of, parked, run_cli

CALC = 'call calculator {"expression": "6*7"}'


@pytest.fixture
def archive_dir(tmp_path: Path) -> Path:
    return tmp_path / "archive"


@pytest.fixture
def archiver(client: Client, archive_dir: Path) -> Archiver:
    settings = client.settings.model_copy(update={"archive_dir": str(archive_dir)})
    return Archiver(client.redis, client.keys, settings)


@pytest.fixture
def cli_run(stack_env: dict[str, str], archive_dir: Path) -> Iterator[CliRunner]:
    yield CliRunner(env={**stack_env, "SIGNOFF_ARCHIVE_DIR": str(archive_dir)})


@pytest.fixture(autouse=True)
def no_rules(client: Client) -> Iterator[None]:
    yield
    client.redis.delete(client.keys.retention())


def _finished_with_an_approval(client: Client) -> Conversation:
    conversation = client.new_conversation(tools={"calculator": "ask"}, labels=["finance"])
    turn = conversation.send(CALC)
    [note] = parked(conversation)
    client.resolve_notification(note.id, Allow(), actor="alice")
    conversation.wait_for_turn(turn, timeout=30)
    conversation.chat_to_completion("and a second turn")
    return conversation


def test_a_finished_conversation_leaves_redis_for_its_file_and_comes_back_whole(
    client: Client, cli_run: CliRunner, archive_dir: Path
) -> None:
    conversation = _finished_with_an_approval(client)
    cid = conversation.conversation_id
    before, keys_before = conversation.snapshot(), keys_of(client, cid)
    assert any(":notification:" in k for k in keys_before)
    assert sum(":turn:" in k for k in keys_before) == 2

    made = cli_run.invoke(cli, ["archive", "retention", "set", "0s", "--label", "finance"])
    assert made.exit_code == 0, made.output
    assert made.output.strip() == "label:finance: archived 0s after it finished"
    ran = cli_run.invoke(cli, ["archive", "run"])
    assert ran.exit_code == 0, ran.output
    assert keys_of(client, cid) == []  # nothing of it is left in Redis
    shard = client.keys.shard_of(cid)
    assert client.redis.zscore(client.keys.conversations(shard), cid) is None
    assert client.redis.zscore(client.keys.archived(shard), cid) is not None
    with pytest.raises(NotFound):
        client.conversation(cid).snapshot()

    path = DirectoryStorage(archive_dir).path(cid)
    with gzip.open(path, "rt") as lines:
        records = [json.loads(line) for line in lines]
    assert records[0]["conversation_id"] == cid
    names = {record["name"] for record in records[1:]}
    assert {"conv", "steps", "usage", "hmeta", "turn_ids", "notification_ids"} <= names
    steps = next(r["value"] for r in records[1:] if r["name"] == "steps")
    assert json.loads(steps[0])["content"] == CALC

    exported = cli_run.invoke(cli, ["archive", "export", cid])
    assert exported.exit_code == 0 and exported.output.count("\n") == len(records)
    listed = cli_run.invoke(cli, ["archive", "list"])
    assert cid in listed.output

    restored = cli_run.invoke(cli, ["archive", "restore", cid])
    assert restored.exit_code == 0, restored.output
    assert keys_of(client, cid) == keys_before
    assert client.conversation(cid).snapshot() == before
    assert client.redis.zscore(client.keys.archived(client.keys.shard_of(cid)), cid) is None
    again = client.conversation(cid).chat_to_completion("a third turn, after the restore")
    assert again.text.startswith("[demo model]")


def test_a_crash_between_the_file_and_the_removal_loses_nothing_and_archives_once(
    client: Client, archiver: Archiver, archive_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conversation = client.new_conversation(agent=None, labels=["crash"])
    conversation.chat_to_completion("hello")
    cid = conversation.conversation_id
    keys_before = keys_of(client, cid)

    def crash(*args: object) -> bool:
        raise OSError("the archiver died here")

    monkeypatch.setattr(Archiver, "_remove", crash)
    with pytest.raises(OSError):
        archiver.archive(cid)
    assert DirectoryStorage(archive_dir).path(cid).is_file()  # the file is written...
    assert set(keys_before) <= set(keys_of(client, cid))  # ...and nothing left Redis
    with pytest.raises(Conflict, match="being archived"):
        conversation.send("a prompt while it is being archived")

    monkeypatch.undo()
    client.redis.hset(client.keys.retention(), "label:crash", "0.0")
    done = archiver.run_pass()  # the next pass takes the claim up
    assert cid in done.archived and not done.failed
    assert keys_of(client, cid) == []
    files = list(archive_dir.rglob(f"{cid}*"))
    assert files == [DirectoryStorage(archive_dir).path(cid)]  # no temporary file is left either
    assert archiver.run_pass().archived == []  # and it is not archived twice


def test_only_finished_conversations_past_their_retention_go(
    client: Client, archiver: Archiver
) -> None:
    waiting = client.new_conversation(tools={"calculator": "ask"}, labels=["kept"])
    waiting.send(CALC)
    parked(waiting)
    young = client.new_conversation(labels=["kept"])
    young.chat_to_completion("hello")
    unruled = client.new_conversation()
    unruled.chat_to_completion("hello")
    client.redis.hset(client.keys.retention(), "label:kept", "3600.0")
    assert archiver.run_pass().archived == []
    client.redis.hset(client.keys.retention(), "label:kept", "0.0")
    done = archiver.run_pass()
    assert young.conversation_id in done.archived
    assert waiting.conversation_id not in done.archived  # it waits for a person
    assert unruled.conversation_id not in done.archived  # no rule: it stays
    with pytest.raises(Conflict, match="not finished"):
        archiver.archive(waiting.conversation_id)


def test_retention_refuses_bad_input(cli_run: CliRunner) -> None:
    bad = cli_run.invoke(cli, ["archive", "retention", "set", "5 weeks"])
    assert bad.exit_code == 1 and "not a duration" in bad.output
    both = cli_run.invoke(
        cli, ["archive", "retention", "set", "1d", "--agent", "a", "--batch", "b"]
    )
    assert both.exit_code == 1 and "at most one" in both.output
    odd = cli_run.invoke(cli, ["archive", "retention", "set", "1d", "--label", "a:b"])
    assert odd.exit_code == 1 and "label name" in odd.output
    missing = cli_run.invoke(cli, ["archive", "retention", "unset", "--agent", "nobody"])
    assert missing.exit_code == 2 and "no retention rule" in missing.output
    absent = cli_run.invoke(cli, ["archive", "restore", "no-such-conversation"])
    assert absent.exit_code == 1 and "not archived" in absent.output


def test_a_batch_keeps_its_results_once_its_conversations_are_archived(
    tmp_path: Path, stack_env: dict[str, str], archive_dir: Path, client: Client
) -> None:
    source = tmp_path / "items.jsonl"
    lines = [{"id": "a", "prompt": "first item"}, {"id": "b", "prompt": "please #fail"}]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    env = {**stack_env, "SIGNOFF_ARCHIVE_DIR": str(archive_dir)}
    run_cli(env, "batch", "run", str(source), "--out", str(tmp_path / "out.jsonl"))
    bid = (tmp_path / "out.jsonl.batch").read_text().strip()
    before = run_cli(env, "batch", "results", bid).stdout
    assert "first item" in before

    set_rule = run_cli(env, "archive", "retention", "set", "0", "--batch", bid)
    assert set_rule.returncode == 0, set_rule.stderr
    ran = run_cli(env, "archive", "run")
    assert ran.stdout.startswith("2 archived"), ran.stdout + ran.stderr
    items = [json.loads(line) for line in before.splitlines()]
    for item in items:
        assert keys_of(client, item["conversation_id"]) == []
    after = run_cli(env, "batch", "results", bid).stdout
    assert [json.loads(line) for line in after.splitlines()] == items  # nothing lost


def test_an_unwritable_archive_keeps_the_conversation_and_gives_its_claim_up(
    client: Client, stack_env: dict[str, str], tmp_path: Path
) -> None:
    conversation = client.new_conversation()
    conversation.chat_to_completion("hello")
    cid = conversation.conversation_id
    keys_before = keys_of(client, cid)
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the archive's folder should be")
    env = {**stack_env, "SIGNOFF_ARCHIVE_DIR": str(blocked)}
    ran = run_cli(env, "archive", "conversation", cid)
    assert ran.returncode == 1 and f"{blocked} cannot be written" in ran.stderr, ran.stderr
    assert keys_of(client, cid) == keys_before
    assert client.redis.hget(client.keys.conversation(cid), "archiving") is None
    assert conversation.chat_to_completion("it still takes prompts").text
    doctor = run_cli(env, "doctor").stdout
    assert f"archive: {blocked} is not a directory this process can write" in doctor, doctor
