"""The tool type, the registry, user tool loading, and every built-in tool."""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import worker.tools
from shared.errors import Conflict, InvalidInput, NotFound, SettingsError
from shared.models.config import ToolPolicy
from shared.models.steps import ToolCall
from shared.settings import Settings
from tests.stack import make_settings
from worker.providers.base import ToolSpec
from worker.tools import (
    BUILTIN_TOOLS,
    Tool,
    ToolContext,
    ToolFailed,
    ToolOutcome,
    ToolRegistry,
    canonical_path_for,
    default_registry,
    object_schema,
    tool,
)
from worker.tools import files as file_tools
from worker.tools.demo import evaluate

BUILTIN_NAMES = (
    "read_file",
    "list_files",
    "write_file",
    "get_time",
    "calculator",
    "send_email",
    "ask_operator",
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "root").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret")
    return tmp_path / "root"


def make_context(settings: Settings) -> ToolContext:
    return ToolContext(settings=settings, conversation_id="c1", turn_id="t1", call_id="call-7")


def run(name: str, args: dict[str, Any], settings: Settings) -> ToolOutcome:
    registry = default_registry(settings)
    return registry.execute(ToolCall(id="call-7", name=name, args=args), make_context(settings))


def ok_result(name: str, args: dict[str, Any], settings: Settings) -> Any:
    outcome = run(name, args, settings)
    assert outcome.ok, outcome.error
    return outcome.result


def error_of(name: str, args: dict[str, Any], settings: Settings) -> str:
    outcome = run(name, args, settings)
    assert not outcome.ok and outcome.result is None
    return outcome.error


@tool(parameters=object_schema({"word": {"type": "string"}}, required=("word",)))
def shout(args: dict[str, Any], context: ToolContext) -> str:
    """Shouts a word.

    Longer notes that the model does not need.
    """
    return args["word"].upper() + "!"


def explode(args: dict[str, Any], context: ToolContext) -> None:
    raise ValueError("boom")


def give_up(args: dict[str, Any], context: ToolContext) -> None:
    raise ToolFailed("the printer is on fire")


def return_a_set(args: dict[str, Any], context: ToolContext) -> set[int]:
    return {1}


def bare(name: str, run_: Any) -> Tool:
    return Tool(name=name, description="", parameters=object_schema({}), run=run_)


# The tool type


def test_public_surface_is_declared() -> None:
    assert sorted(worker.tools.__all__) == worker.tools.__all__
    for name in worker.tools.__all__:
        assert getattr(worker.tools, name) is not None


def test_decorator_takes_name_and_first_docstring_paragraph() -> None:
    assert shout.name == "shout"
    assert shout.description == "Shouts a word."
    assert shout.policy is ToolPolicy.AUTO
    assert shout.spec() == ToolSpec(
        name="shout", description="Shouts a word.", parameters=shout.parameters
    )


def test_decorator_overrides_name_description_and_policy() -> None:
    made = tool(name="x-1", description="d", policy=ToolPolicy.DENY, parameters=object_schema({}))(
        explode
    )
    assert (made.name, made.description, made.policy) == ("x-1", "d", ToolPolicy.DENY)


@pytest.mark.parametrize(
    ("name", "parameters", "match"),
    [
        ("has space", {"type": "object"}, "tool name"),
        ("x" * 65, {"type": "object"}, "tool name"),
        ("ok", {"type": "string"}, "type 'object'"),
        (
            "ok",
            {"type": "object", "properties": {"a": {"type": "no-such-type"}}},
            "not a JSON schema",
        ),
    ],
)
def test_bad_tool_definitions_are_refused(
    name: str, parameters: dict[str, Any], match: str
) -> None:
    with pytest.raises(InvalidInput, match=match):
        Tool(name=name, description="", parameters=parameters, run=explode)


def test_tool_failed_is_rebuilt_from_its_arguments() -> None:
    """What Celery's JSON result format keeps of an exception: its type and arguments."""
    original = ToolFailed("no such file 'a'")
    copy = type(original)(*original.args)
    assert isinstance(copy, ToolFailed)
    assert copy.message == "no such file 'a'" and str(copy) == str(original)


# The registry


def test_registry_refuses_a_duplicate_name() -> None:
    registry = ToolRegistry([shout])
    with pytest.raises(Conflict, match="'shout' is already registered"):
        registry.register(shout)


def test_get_unknown_tool_names_it_and_lists_the_available_ones() -> None:
    registry = ToolRegistry([shout, bare("zeta", explode)])
    assert registry.get("shout") is shout
    with pytest.raises(NotFound, match="unknown tool 'nope'; available tools: shout, zeta"):
        registry.get("nope")


def test_names_and_specs_follow_registration_or_the_order_asked() -> None:
    registry = ToolRegistry([shout, bare("zeta", explode)])
    assert registry.names() == ("shout", "zeta")
    assert [spec.name for spec in registry.specs()] == ["shout", "zeta"]
    assert registry.specs(["zeta", "shout"]) == (registry.get("zeta").spec(), shout.spec())
    assert registry.specs([]) == ()
    with pytest.raises(NotFound, match="'gone'"):
        registry.specs(["shout", "gone"])


def test_validate_arguments_reports_every_violation_with_its_path() -> None:
    schema = object_schema(
        {
            "path": {"type": "string"},
            "items": {"type": "array", "items": {"type": "integer"}},
            "mode": {"enum": ["a", "b"]},
        },
        required=("path", "mode"),
    )
    registry = ToolRegistry([Tool(name="t", description="", parameters=schema, run=explode)])
    problems = registry.validate_arguments("t", {"items": [1, "two", 3.5], "extra": True})
    assert problems == [
        "$: 'mode' is a required property",
        "$: 'path' is a required property",
        "$: Additional properties are not allowed ('extra' was unexpected)",
        "$.items[1]: 'two' is not of type 'integer'",
        "$.items[2]: 3.5 is not of type 'integer'",
    ]
    assert registry.validate_arguments("t", {"path": "p", "mode": "a", "items": [1]}) == []


@pytest.mark.parametrize("args", [[1, 2], "path", None, 3])
def test_arguments_that_are_not_an_object_are_a_violation(args: Any) -> None:
    problems = ToolRegistry([shout]).validate_arguments("shout", args)
    assert problems == [f"$: {args!r} is not of type 'object'"]


def test_validate_arguments_of_an_unknown_tool_is_not_found() -> None:
    with pytest.raises(NotFound, match="'nope'"):
        ToolRegistry([shout]).validate_arguments("nope", {})


def execute(registry: ToolRegistry, name: str, args: Any) -> ToolOutcome:
    context = make_context(Settings())
    return registry.execute(ToolCall(id="1", name=name, args=args), context)


def test_execute_runs_a_valid_call() -> None:
    assert execute(ToolRegistry([shout]), "shout", {"word": "hi"}) == ToolOutcome(
        ok=True, result="HI!"
    )


def test_execute_reports_every_argument_problem_instead_of_running() -> None:
    outcome = execute(ToolRegistry([shout]), "shout", {"word": 1, "loud": True})
    assert not outcome.ok
    assert outcome.error.startswith("invalid arguments for 'shout': ")
    assert "$.word: 1 is not of type 'string'" in outcome.error
    assert "'loud' was unexpected" in outcome.error


def test_execute_unknown_tool_names_it() -> None:
    outcome = execute(ToolRegistry([shout]), "nope", {})
    assert outcome == ToolOutcome(ok=False, error="unknown tool 'nope'; available tools: shout")


def test_execute_passes_a_tool_failed_message_through() -> None:
    outcome = execute(ToolRegistry([bare("fails", give_up)]), "fails", {})
    assert outcome == ToolOutcome(ok=False, error="the printer is on fire")


def test_execute_turns_any_exception_into_its_type_and_message() -> None:
    outcome = execute(ToolRegistry([bare("boom", explode)]), "boom", {})
    assert outcome == ToolOutcome(ok=False, error="tool 'boom' failed: ValueError: boom")


def test_execute_refuses_a_result_that_is_not_json() -> None:
    outcome = execute(ToolRegistry([bare("sets", return_a_set)]), "sets", {})
    assert not outcome.ok
    assert "'sets' returned a result that is not JSON" in outcome.error


def test_a_tool_sees_its_context_and_a_copy_of_the_arguments() -> None:
    seen: list[ToolContext] = []

    def spy(args: dict[str, Any], context: ToolContext) -> str:
        seen.append(context)
        args["word"] = "changed"
        return "done"

    args = {"word": "w"}
    registry = ToolRegistry(
        [Tool(name="spy", description="", parameters=shout.parameters, run=spy)]
    )
    assert execute(registry, "spy", args).ok
    assert (seen[0].call_id, seen[0].turn_id, seen[0].conversation_id) == ("call-7", "t1", "c1")
    assert args == {"word": "w"}


# The default registry and user tools


def test_default_registry_holds_the_built_ins() -> None:
    registry = default_registry(Settings())
    assert registry.names() == BUILTIN_NAMES
    assert tuple(t.name for t in BUILTIN_TOOLS) == BUILTIN_NAMES
    policies = {name: registry.get(name).policy for name in BUILTIN_NAMES}
    assert {name for name, policy in policies.items() if policy is ToolPolicy.ASK} == {
        "write_file",
        "send_email",
        "ask_operator",
    }


def write_module(directory: Path, name: str, body: str, monkeypatch: pytest.MonkeyPatch) -> str:
    (directory / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(directory))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return name


USER_MODULE = '''
from worker.tools import object_schema, tool

@tool(parameters=object_schema({"n": {"type": "integer"}}, required=("n",)))
def double(args, context):
    """Doubles a number."""
    return args["n"] * 2

TOOLS = [double]
'''


def test_user_tools_are_loaded_from_the_module_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = write_module(tmp_path, "my_signoff_tools", USER_MODULE, monkeypatch)
    settings = Settings(tools_module=module)
    registry = default_registry(settings)
    assert registry.names() == (*BUILTIN_NAMES, "double")
    assert registry.get("double").description == "Doubles a number."
    assert execute(registry, "double", {"n": 21}) == ToolOutcome(ok=True, result=42)


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("X = 1\n", "must define TOOLS"),
        ("TOOLS = 'read_file'\n", "must define TOOLS"),
        ("TOOLS = [len]\n", "not Tool: <built-in function len>"),
        ("raise RuntimeError('broken at import')\n", "RuntimeError: broken at import"),
        (
            "from worker.tools.demo import get_time\nTOOLS = [get_time]\n",
            "'get_time' is already registered",
        ),
    ],
)
def test_an_unusable_tools_module_is_a_settings_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, match: str
) -> None:
    module = write_module(tmp_path, "bad_signoff_tools", body, monkeypatch)
    with pytest.raises(SettingsError, match=match) as caught:
        default_registry(Settings(tools_module=module))
    assert "SIGNOFF_TOOLS_MODULE='bad_signoff_tools'" in caught.value.message


@pytest.mark.parametrize("path", ["no_such_module_anywhere", "worker.tools.nope", ".relative"])
def test_a_bad_module_path_is_a_settings_error_naming_the_variable(path: str) -> None:
    with pytest.raises(SettingsError, match="SIGNOFF_TOOLS_MODULE") as caught:
        default_registry(Settings(tools_module=path))
    assert "cannot be imported" in caught.value.message


# read_file


def test_read_file_returns_exact_text_and_canonical_path(root: Path) -> None:
    text = "line one\r\nünïcödé ✓\n\ttabbed"
    (root / "docs").mkdir()
    (root / "docs" / "a.txt").write_bytes(text.encode())
    result = ok_result("read_file", {"path": "./docs//a.txt"}, make_settings(root))
    assert result == {"path": "docs/a.txt", "content": text, "size": len(text.encode())}


def test_read_file_refuses_binary(root: Path) -> None:
    (root / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    assert "'img.png' looks binary" in error_of(
        "read_file", {"path": "img.png"}, make_settings(root)
    )


def test_read_file_refuses_non_utf8(root: Path) -> None:
    (root / "latin.txt").write_bytes("café".encode("latin-1"))
    error = error_of("read_file", {"path": "latin.txt"}, make_settings(root))
    assert error == "file 'latin.txt' is not UTF-8 text (invalid byte at offset 3)"


def test_read_file_refuses_a_file_over_the_limit(root: Path) -> None:
    (root / "big.txt").write_bytes(b"a" * (file_tools.MAX_READ_BYTES + 1))
    (root / "fits.txt").write_bytes(b"a" * file_tools.MAX_READ_BYTES)
    error = error_of("read_file", {"path": "big.txt"}, make_settings(root))
    assert error == f"file 'big.txt' is over the limit of {file_tools.MAX_READ_BYTES} bytes"
    result = ok_result("read_file", {"path": "fits.txt"}, make_settings(root))
    assert result["size"] == file_tools.MAX_READ_BYTES


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (".", "'.' is a directory; use list_files"),
        ("missing.txt", "cannot read 'missing.txt': No such file or directory"),
        ("fifo", "'fifo' is not a regular file"),
    ],
)
def test_read_file_refuses_what_is_not_a_readable_file(root: Path, path: str, message: str) -> None:
    os.mkfifo(root / "fifo")
    assert error_of("read_file", {"path": path}, make_settings(root)) == message


@pytest.mark.parametrize(
    "path", ["../outside/secret.txt", "/etc/hostname", "link.txt", "out/secret.txt"]
)
def test_read_file_refuses_escapes(root: Path, path: str) -> None:
    (root / "link.txt").symlink_to(root.parent / "outside" / "secret.txt")
    (root / "out").symlink_to(root.parent / "outside", target_is_directory=True)
    error = error_of("read_file", {"path": path}, make_settings(root))
    assert repr(path) in error
    assert "secret" not in error.replace(path, "")


# list_files


def test_list_files_gives_sorted_entries_with_type_and_size(root: Path) -> None:
    (root / "b.txt").write_text("12345")
    (root / "a-dir").mkdir()
    (root / "c-link").symlink_to(root.parent / "outside", target_is_directory=True)
    os.mkfifo(root / "d-fifo")
    result = ok_result("list_files", {}, make_settings(root))
    assert result == {
        "path": ".",
        "entries": [
            {"name": "a-dir", "type": "dir", "size": None},
            {"name": "b.txt", "type": "file", "size": 5},
            {"name": "c-link", "type": "symlink", "size": None},
            {"name": "d-fifo", "type": "other", "size": None},
        ],
        "total": 4,
        "truncated": False,
    }


def test_list_files_of_a_subdirectory_uses_its_canonical_path(root: Path) -> None:
    (root / "sub").mkdir()
    (root / "sub" / "x.py").write_text("")
    result = ok_result("list_files", {"path": "sub/"}, make_settings(root))
    assert result["path"] == "sub"
    assert [entry["name"] for entry in result["entries"]] == ["x.py"]


def test_list_files_is_bounded(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_tools, "MAX_LIST_ENTRIES", 3)
    for index in range(5):
        (root / f"f{index}").write_text("")
    result = ok_result("list_files", {"path": "."}, make_settings(root))
    assert [entry["name"] for entry in result["entries"]] == ["f0", "f1", "f2"]
    assert (result["total"], result["truncated"]) == (5, True)


def test_list_files_refuses_a_file_and_escapes(root: Path) -> None:
    (root / "f.txt").write_text("")
    (root / "out").symlink_to(root.parent / "outside", target_is_directory=True)
    settings = make_settings(root)
    assert "'f.txt' is a file, not a directory" in error_of(
        "list_files", {"path": "f.txt"}, settings
    )
    assert "symbolic link" in error_of("list_files", {"path": "out"}, settings)
    assert "'..'" in error_of("list_files", {"path": ".."}, settings)


# write_file


def test_write_file_asks_by_default() -> None:
    assert default_registry(Settings()).get("write_file").policy is ToolPolicy.ASK


def test_write_file_is_refused_when_the_workspace_is_read_only(root: Path) -> None:
    error = error_of("write_file", {"path": "new.txt", "content": "x"}, make_settings(root))
    assert "read-only" in error and "'new.txt'" in error
    assert not (root / "new.txt").exists()


def test_write_file_creates_parents_and_writes_exact_bytes(root: Path) -> None:
    settings = make_settings(root, writable=True)
    text = "a\r\nb ✓"
    result = ok_result("write_file", {"path": "deep/er/new.txt", "content": text}, settings)
    assert result == {
        "path": "deep/er/new.txt",
        "bytes_written": len(text.encode()),
        "created": True,
    }
    assert (root / "deep" / "er" / "new.txt").read_bytes() == text.encode()


def test_write_file_replaces_an_existing_file(root: Path) -> None:
    (root / "old.txt").write_text("a much longer original text")
    result = ok_result(
        "write_file", {"path": "old.txt", "content": "new"}, make_settings(root, writable=True)
    )
    assert result["created"] is False
    assert (root / "old.txt").read_text() == "new"


@pytest.mark.parametrize(
    "path", ["../outside/evil.txt", "/tmp/evil.txt", "out/evil.txt", "dangling"]
)
def test_write_file_refuses_escapes_even_when_writable(root: Path, path: str) -> None:
    (root / "out").symlink_to(root.parent / "outside", target_is_directory=True)
    (root / "dangling").symlink_to(root.parent / "outside" / "evil.txt")
    error = error_of(
        "write_file", {"path": path, "content": "x"}, make_settings(root, writable=True)
    )
    assert repr(path) in error
    assert not (root.parent / "outside" / "evil.txt").exists()


def test_write_file_refuses_a_hard_link_to_a_file_outside(root: Path) -> None:
    outside = root.parent / "outside-target.txt"
    outside.write_text("must survive")
    os.link(outside, root / "linked.txt")
    error = error_of(
        "write_file", {"path": "linked.txt", "content": "x"}, make_settings(root, writable=True)
    )
    assert "has 2 hard links" in error
    assert outside.read_text() == "must survive"  # not truncated, not overwritten


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (".", "'.' is the workspace root, not a file"),
        ("sub", "cannot write 'sub': Is a directory"),
        ("file.txt/child", "cannot write 'file.txt/child': a parent of it is a file"),
    ],
)
def test_write_file_refuses_what_is_not_a_file(root: Path, path: str, message: str) -> None:
    (root / "sub").mkdir()
    (root / "file.txt").write_text("keep")
    error = error_of(
        "write_file", {"path": path, "content": "x"}, make_settings(root, writable=True)
    )
    assert error == message
    assert (root / "file.txt").read_text() == "keep"


def test_write_file_refuses_content_over_the_limit(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_tools, "MAX_WRITE_BYTES", 4)
    error = error_of(
        "write_file", {"path": "a", "content": "12345"}, make_settings(root, writable=True)
    )
    assert error == "content is 5 bytes; the limit is 4 bytes"
    assert not (root / "a").exists()


# Canonical paths, for the runtime to record on the ToolCall


def test_canonical_path_for_file_tools(root: Path) -> None:
    settings = make_settings(root)
    (root / "src").mkdir()
    (root / "alias").symlink_to(root / "src", target_is_directory=True)
    assert canonical_path_for({"path": "./alias/x.py"}, settings) == "src/x.py"
    assert canonical_path_for({}, settings) == "."
    assert canonical_path_for({"path": "../x"}, settings) is None
    assert canonical_path_for({"path": 3}, settings) is None
    assert canonical_path_for(["x"], settings) is None


def test_registry_canonical_path_only_for_file_tools(root: Path) -> None:
    settings = make_settings(root)
    registry = default_registry(settings)

    def path_of(name: str, args: Any) -> str | None:
        return registry.canonical_path(ToolCall(name=name, args=args), settings)

    assert path_of("read_file", {"path": "a//b.txt"}) == "a/b.txt"
    assert path_of("write_file", {"path": "c.txt", "content": ""}) == "c.txt"
    assert path_of("list_files", {}) == "."
    assert path_of("calculator", {"expression": "1"}) is None
    assert path_of("nope", {"path": "a"}) is None


# Demo tools


def test_get_time_returns_now_in_utc_iso_8601() -> None:
    result = ok_result("get_time", {}, Settings())
    stamp = datetime.fromisoformat(result["utc"])
    assert stamp.utcoffset() == timedelta(0)
    assert abs(datetime.now(UTC) - stamp) < timedelta(seconds=5)


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("2 ** 10", 1024),
        ("2 ** 3 ** 2", 512),
        ("-3 + +2", -1),
        ("7 / 2", 3.5),
        ("1.5 * 4 - 0.5", 5.5),
        ("2 ** -1", 0.5),
        (" ( ( 4 ) ) ", 4),
    ],
)
def test_calculator_evaluates_arithmetic(expression: str, value: float) -> None:
    result = ok_result("calculator", {"expression": expression}, Settings())
    assert result == {"expression": expression, "result": value}
    assert type(result["result"]) is type(value)


@pytest.mark.parametrize(
    ("expression", "found"),
    [
        ("x + 1", "the name 'x'"),
        ("abs(-1)", "a function call"),
        ("__import__('os').system('true')", "a function call"),
        ("(1).real", "attribute access"),
        ("[1][0]", "indexing"),
        ("'a' * 3", "the str constant 'a'"),
        ("True + 1", "the bool constant True"),
        ("1j * 2", "the complex constant 1j"),
        ("7 // 2", "the operator FloorDiv"),
        ("7 % 2", "the operator Mod"),
        ("~1", "the operator Invert"),
        ("1 if 1 else 2", "a IfExp expression"),
        ("lambda: 1", "a Lambda expression"),
    ],
)
def test_calculator_refuses_anything_but_arithmetic(expression: str, found: str) -> None:
    error = error_of("calculator", {"expression": expression}, Settings())
    assert error == f"only numbers, + - * / ** and parentheses are allowed; found {found}"


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1 / 0", "division by zero"),
        ("0 ** -1", "division by zero"),
        ("9 ** 9 ** 9", "the result is too large"),
        ("10.0 ** 400", "the result is too large"),
        ("1e308 * 10", "the result is too large"),
        ("(-8) ** 0.5", "the result is not a real number"),
        ("1 +", "is not valid arithmetic"),
        ("1; 2", "is not valid arithmetic"),
    ],
)
def test_calculator_reports_errors_clearly(expression: str, message: str) -> None:
    assert message in error_of("calculator", {"expression": expression}, Settings())


def test_calculator_bounds_the_expression_length() -> None:
    long = "1+" * 300 + "1"
    error = error_of("calculator", {"expression": long}, Settings())
    assert error == "expression is longer than 500 characters"
    with pytest.raises(ToolFailed, match="longer than"):
        evaluate(long)


def test_send_email_asks_and_only_queues() -> None:
    registry = default_registry(Settings())
    assert registry.get("send_email").policy is ToolPolicy.ASK
    args = {"to": "ops@example.com", "subject": "Deploy", "body": "Ship it."}
    result = ok_result("send_email", args, Settings())
    assert result == {"status": "queued", "id": "call-7", "message": args}


def test_send_email_validates_its_arguments() -> None:
    error = error_of("send_email", {"to": "nobody", "subject": 1}, Settings())
    assert "$.to: 'nobody' is not a 'email'" in error
    assert "$.subject: 1 is not of type 'string'" in error
    assert "'body' is a required property" in error
