"""The archive in an S3 bucket: a real S3 API server (moto's, its own process, over HTTP on
loopback) behind boto3, a real Redis and a real worker, the CLI as operators run it."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.client import Client
from tests.s3_server import BUCKET, S3Server
from tests.stack import ROOT, keys_of, run_cli

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def s3_server() -> Iterator[S3Server]:
    with S3Server.running() as server:
        yield server


@pytest.fixture
def s3_env(stack_env: dict[str, str], s3_server: S3Server) -> dict[str, str]:
    return {**stack_env, **s3_server.env()}


@pytest.fixture(autouse=True)
def no_rules(client: Client) -> Iterator[None]:
    yield
    client.redis.delete(client.keys.retention())


def _object(server: S3Server, cid: str) -> list[dict[str, Any]]:
    key = f"prod/signoff/{cid[:2].lower()}/{cid}.jsonl.gz"
    body = server.s3().get_object(Bucket=BUCKET, Key=key)["Body"].read()
    return [json.loads(line) for line in gzip.decompress(body).splitlines()]


def test_a_conversation_goes_to_the_bucket_and_comes_back_whole(
    client: Client, s3_env: dict[str, str], s3_server: S3Server, tmp_path: Path
) -> None:
    conversation = client.new_conversation(labels=["to-s3"])
    conversation.chat_to_completion("a turn to keep in the bucket")
    cid = conversation.conversation_id
    before, keys_before = conversation.snapshot(), keys_of(client, cid)

    assert run_cli(s3_env, "archive", "retention", "set", "0", "--label", "to-s3").returncode == 0
    ran = run_cli(s3_env, "archive", "run")
    assert ran.returncode == 0 and ran.stdout.startswith("1 archived"), ran.stdout + ran.stderr
    assert keys_of(client, cid) == []
    records = _object(s3_server, cid)
    assert records[0]["conversation_id"] == cid
    steps = next(r["value"] for r in records[1:] if r["name"] == "steps")
    assert json.loads(steps[0])["content"] == "a turn to keep in the bucket"
    assert not list((ROOT / ".signoff").rglob(f"{cid}*"))  # nothing beside the bucket

    out = tmp_path / "exported.jsonl"
    exported = run_cli(s3_env, "archive", "export", cid, "--output", str(out))
    assert exported.returncode == 0, exported.stderr
    assert [json.loads(line) for line in out.read_text().splitlines()] == records

    restored = run_cli(s3_env, "archive", "restore", cid)
    assert restored.returncode == 0, restored.stderr
    assert keys_of(client, cid) == keys_before
    assert client.conversation(cid).snapshot() == before


def test_with_the_bucket_away_nothing_leaves_redis_and_the_next_pass_archives(
    client: Client, s3_env: dict[str, str], s3_server: S3Server
) -> None:
    conversation = client.new_conversation(labels=["s3-away"])
    conversation.chat_to_completion("before the bucket goes away")
    cid = conversation.conversation_id
    keys_before = keys_of(client, cid)
    assert run_cli(s3_env, "archive", "retention", "set", "0", "--label", "s3-away").returncode == 0

    s3_server.stop()
    try:
        ran = run_cli(s3_env, "archive", "run")
        assert ran.returncode == 1
        assert f"s3://{BUCKET}/prod/signoff/" in ran.stderr and cid in ran.stderr, ran.stderr
        assert "archive-secret" not in ran.stdout + ran.stderr
        assert keys_of(client, cid) == keys_before  # all of it stays in Redis
        # the claim was given up: the conversation takes prompts while the bucket is away
        assert conversation.chat_to_completion("while it is away").text
    finally:
        s3_server.start()
        s3_server.s3().create_bucket(Bucket=BUCKET)  # moto keeps its buckets in memory

    again = run_cli(s3_env, "archive", "run")
    assert again.returncode == 0 and again.stdout.startswith("1 archived"), again.stdout
    contents = [json.loads(s)["content"] for s in _steps(_object(s3_server, cid))]
    assert "while it is away" in contents  # the prompt it took is archived too


def test_a_missing_bucket_is_named_and_the_conversation_stays(
    client: Client, s3_env: dict[str, str]
) -> None:
    conversation = client.new_conversation()
    conversation.chat_to_completion("hello")
    cid = conversation.conversation_id
    env = {**s3_env, "SIGNOFF_ARCHIVE_URL": "s3://no-such-bucket"}
    ran = run_cli(env, "archive", "conversation", cid)
    assert ran.returncode == 1
    assert "NoSuchBucket" in ran.stderr and f"s3://no-such-bucket/{cid[:2].lower()}/" in ran.stderr
    assert client.redis.hget(client.keys.conversation(cid), "archiving") is None
    assert client.conversation(cid).snapshot().steps  # still whole in Redis


def test_doctor_says_whether_the_bucket_answers(
    s3_env: dict[str, str], s3_server: S3Server
) -> None:
    lines = run_cli(s3_env, "doctor").stdout.splitlines()
    [archive] = [line for line in lines if "archive:" in line]
    assert archive.split()[:2] == ["ok", "archive:"]
    assert f"s3://{BUCKET}/prod/signoff at {s3_server.url}" in archive
    missing = run_cli({**s3_env, "SIGNOFF_ARCHIVE_URL": "s3://no-such-bucket"}, "doctor")
    assert missing.returncode == 1
    [archive] = [line for line in missing.stdout.splitlines() if "archive:" in line]
    assert archive.startswith("FAIL") and "s3://no-such-bucket" in archive, archive


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("https://bucket/x", "must be s3://"),
        ("s3://Bad_Bucket", "is not a bucket name"),
        ("s3://ok-bucket/a//b", "the prefix"),
        ("s3://ok-bucket/a?x=1", "the prefix"),
    ],
)
def test_a_bad_archive_url_is_refused_naming_it(
    stack_env: dict[str, str], url: str, named: str
) -> None:
    ran = run_cli({**stack_env, "SIGNOFF_ARCHIVE_URL": url}, "archive", "list")
    assert ran.returncode != 0
    assert "archive_url" in ran.stderr.lower() and named in ran.stderr, ran.stderr


def _steps(records: list[dict[str, Any]]) -> list[str]:
    return next(r["value"] for r in records[1:] if r["name"] == "steps")
