"""Exact file reads (`shared.workspace.read_file`): the bytes, and every way out that is refused,
the same as the worker's read_file tool; and through the public Python API.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import uuid
from pathlib import Path

import pytest

from shared import AsyncClient, Client, FileRead
from shared.errors import InvalidInput, NotConfigured, NotFound, PathRefused
from shared.local.embedded_redis import EmbeddedRedis
from shared.models.steps import ToolCall
from shared.settings import Settings
from shared.workspace import MAX_READ_BYTES, read_file
from tests.stack import make_settings
from worker.tools import ToolContext, default_registry


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A root holding docs/a.txt, next to an outside directory holding secret.txt."""
    (tmp_path / "root" / "docs").mkdir(parents=True)
    (tmp_path / "root" / "docs" / "a.txt").write_bytes("line\r\nünï ✓\n".encode())
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret")
    return tmp_path / "root"


def test_utf8_text_is_read_exactly_with_its_canonical_path(root: Path) -> None:
    found = read_file("./docs//a.txt", make_settings(root))
    data = "line\r\nünï ✓\n".encode()
    assert found == FileRead(
        path="./docs//a.txt", canonical_path="docs/a.txt", data=data, text=data.decode(), size=16
    )
    assert found.size == len(data)


def test_binary_is_read_exactly_without_text(root: Path) -> None:
    data = b"\x89PNG\r\n\x1a\n\x00\xff\xfb"
    (root / "img.png").write_bytes(data)
    found = read_file("img.png", make_settings(root))
    assert (found.data, found.text, found.size) == (data, None, len(data))


def test_bytes_travel_as_base64_in_json(root: Path) -> None:
    (root / "b.bin").write_bytes(b"\xfb\xff\x00")
    found = read_file("b.bin", make_settings(root))
    wire = json.loads(found.model_dump_json())
    assert base64.urlsafe_b64decode(wire["data"]) == b"\xfb\xff\x00"
    assert FileRead.model_validate_json(found.model_dump_json()) == found


def test_empty_and_nul_text_files_keep_their_text(root: Path) -> None:
    (root / "empty").write_bytes(b"")
    (root / "nul").write_bytes(b"a\x00b")
    assert read_file("empty", make_settings(root)).text == ""
    assert read_file("nul", make_settings(root)).text == "a\x00b"


def test_a_file_at_the_limit_is_read_and_one_over_is_refused(root: Path) -> None:
    (root / "fits").write_bytes(b"a" * MAX_READ_BYTES)
    (root / "big").write_bytes(b"a" * (MAX_READ_BYTES + 1))
    assert read_file("fits", make_settings(root)).size == MAX_READ_BYTES
    with pytest.raises(PathRefused, match=f"'big' is over the limit of {MAX_READ_BYTES} bytes"):
        read_file("big", make_settings(root))


@pytest.mark.parametrize("raw", ["..", "../outside/secret.txt", "docs/../../outside/secret.txt"])
def test_dot_dot_leading_out_is_refused(root: Path, raw: str) -> None:
    with pytest.raises(PathRefused, match=r"outside the workspace through '\.\.'"):
        read_file(raw, make_settings(root))


def test_absolute_paths_are_refused_even_inside_the_root(root: Path) -> None:
    for raw in (str(root.parent / "outside" / "secret.txt"), str(root / "docs" / "a.txt")):
        with pytest.raises(PathRefused, match="is absolute"):
            read_file(raw, make_settings(root))


def test_a_symlink_out_of_the_root_is_refused(root: Path) -> None:
    (root / "link.txt").symlink_to(root.parent / "outside" / "secret.txt")
    (root / "out").symlink_to(root.parent / "outside", target_is_directory=True)
    for raw in ("link.txt", "out/secret.txt"):
        with pytest.raises(PathRefused, match="outside the workspace through a symbolic link"):
            read_file(raw, make_settings(root))


def test_a_hard_link_to_a_file_outside_the_root_is_refused(root: Path) -> None:
    os.link(root.parent / "outside" / "secret.txt", root / "hard.txt")
    with pytest.raises(PathRefused, match=r"'hard\.txt' has 2 hard links") as caught:
        read_file("hard.txt", make_settings(root))
    assert "secret" not in caught.value.message


@pytest.mark.parametrize(
    ("raw", "message"),
    [(".", "'.' is a directory, not a file"), ("docs", "'docs' is a directory, not a file")],
)
def test_a_directory_is_refused(root: Path, raw: str, message: str) -> None:
    with pytest.raises(PathRefused) as caught:
        read_file(raw, make_settings(root))
    assert caught.value.message == message


def test_a_fifo_is_refused_without_blocking(root: Path) -> None:
    os.mkfifo(root / "fifo")
    with pytest.raises(PathRefused, match="'fifo' is not a regular file"):
        read_file("fifo", make_settings(root))


@pytest.mark.parametrize("raw", ["missing.txt", "docs/missing/a.txt", "docs/a.txt/x"])
def test_a_missing_file_is_not_found(root: Path, raw: str) -> None:
    with pytest.raises(NotFound, match=re.escape(f"cannot read {raw!r}: ")):
        read_file(raw, make_settings(root))


def test_refusals_are_invalid_input_but_missing_is_not() -> None:
    assert issubclass(PathRefused, InvalidInput)
    assert not issubclass(NotFound, InvalidInput)


def test_no_roots_names_the_setting() -> None:
    with pytest.raises(NotConfigured, match="file reads need SIGNOFF_WORKSPACE_ROOTS"):
        read_file("a.txt", Settings(workspace_roots=()))


def test_the_tool_refuses_exactly_what_the_read_refuses(root: Path) -> None:
    """The same confinement, the same messages: the tool only adds its own advice for dirs."""
    (root / "link.txt").symlink_to(root.parent / "outside" / "secret.txt")
    os.link(root.parent / "outside" / "secret.txt", root / "hard.txt")
    os.mkfifo(root / "fifo")
    settings = make_settings(root)
    registry = default_registry(settings)
    context = ToolContext(settings=settings, conversation_id="c", turn_id="t", call_id="k")
    for raw in ("../x", "/etc/hostname", "link.txt", "hard.txt", "fifo", "missing", ""):
        with pytest.raises((PathRefused, NotFound)) as caught:
            read_file(raw, settings)
        outcome = registry.execute(ToolCall(name="read_file", args={"path": raw}), context)
        assert outcome.error == caught.value.message, raw


# Through the public Python API


@pytest.fixture
def environment(
    redis_server: EmbeddedRedis, root: Path, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    """SIGNOFF_* variables naming the test Redis, a fresh key prefix and the root."""
    monkeypatch.setenv("SIGNOFF_REDIS_URL", redis_server.url)
    monkeypatch.setenv("SIGNOFF_KEY_PREFIX", f"fr{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("SIGNOFF_WORKSPACE_ROOTS", json.dumps([str(root)]))
    return Settings()


def test_read_file_through_the_client(environment: Settings, root: Path) -> None:
    with Client() as first:
        cid = first.new_conversation().conversation_id
    with Client() as signoff:
        conversation = signoff.conversation(cid)
        found = conversation.read_file("docs/a.txt")
        assert found.data == (root / "docs" / "a.txt").read_bytes()
        assert (found.canonical_path, found.text) == ("docs/a.txt", found.data.decode())
        with pytest.raises(PathRefused, match=r"'\.\.'"):
            conversation.read_file("../outside/secret.txt")
        with pytest.raises(NotFound):
            conversation.read_file("nope.txt")


def test_read_file_through_the_async_client(environment: Settings, root: Path) -> None:
    with Client() as first:
        cid = first.new_conversation().conversation_id

    async def read() -> FileRead:
        async with AsyncClient() as signoff:
            conversation = await signoff.conversation(cid)
            return await conversation.read_file("docs/a.txt")

    assert asyncio.run(read()).data == (root / "docs" / "a.txt").read_bytes()
