"""Workspace path resolution: what stays inside the roots, and every way out that is refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from shared.settings import Settings
from tests.stack import make_settings
from worker.tools.base import ToolFailed
from worker.tools.workspace import resolve_path, workspace_roots


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A root holding src/app.py, next to an outside directory holding secret.txt."""
    (tmp_path / "root" / "src").mkdir(parents=True)
    (tmp_path / "root" / "src" / "app.py").write_text("print(1)\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret")
    return tmp_path / "root"


def test_relative_path_resolves_inside_the_root(root: Path) -> None:
    found = resolve_path("src/app.py", make_settings(root))
    assert found.path == root.resolve() / "src" / "app.py"
    assert found.root == root.resolve()
    assert found.relative == "src/app.py"


@pytest.mark.parametrize(
    ("raw", "relative"),
    [
        (".", "."),
        ("./src//app.py", "src/app.py"),
        ("src/../src/app.py", "src/app.py"),
        ("src/", "src"),
    ],
)
def test_canonical_path_is_normalised(root: Path, raw: str, relative: str) -> None:
    assert resolve_path(raw, make_settings(root)).relative == relative


def test_the_root_itself_is_flagged(root: Path) -> None:
    assert resolve_path(".", make_settings(root)).is_root
    assert not resolve_path("src", make_settings(root)).is_root


@pytest.mark.parametrize("raw", ["../x", "..", "src/../../x", "src/../../root/src/app.py"])
def test_dot_dot_leading_out_is_refused(root: Path, raw: str) -> None:
    with pytest.raises(ToolFailed, match=r"outside the workspace through '\.\.'") as caught:
        resolve_path(raw, make_settings(root))
    assert repr(raw) in caught.value.message


def test_absolute_paths_are_refused_even_inside_the_root(root: Path) -> None:
    for raw in ("/etc/passwd", str(root / "src" / "app.py")):
        with pytest.raises(ToolFailed, match="is absolute") as caught:
            resolve_path(raw, make_settings(root))
        assert raw in caught.value.message


@pytest.mark.parametrize(("raw", "why"), [("", "empty"), ("  ", "empty"), ("a\x00b", "NUL")])
def test_empty_and_nul_paths_are_refused(root: Path, raw: str, why: str) -> None:
    with pytest.raises(ToolFailed, match=why):
        resolve_path(raw, make_settings(root))


def test_symlink_to_a_file_outside_is_refused(root: Path) -> None:
    (root / "link.txt").symlink_to(root.parent / "outside" / "secret.txt")
    with pytest.raises(
        ToolFailed, match=r"'link\.txt' leads outside the workspace through a symbolic"
    ):
        resolve_path("link.txt", make_settings(root))


def test_symlinked_directory_pointing_outside_is_refused(root: Path) -> None:
    (root / "out").symlink_to(root.parent / "outside", target_is_directory=True)
    for raw in ("out", "out/secret.txt", "src/../out/secret.txt"):
        with pytest.raises(ToolFailed, match="symbolic link"):
            resolve_path(raw, make_settings(root))


def test_dangling_symlink_pointing_outside_is_refused_for_writing(root: Path) -> None:
    (root / "new.txt").symlink_to(root.parent / "outside" / "not-yet.txt")
    with pytest.raises(ToolFailed, match="symbolic link"):
        resolve_path("new.txt", make_settings(root, writable=True), for_write=True)


def test_symlink_within_the_root_resolves_to_its_target(root: Path) -> None:
    (root / "alias.py").symlink_to(root / "src" / "app.py")
    found = resolve_path("alias.py", make_settings(root))
    assert found.relative == "src/app.py"
    assert found.path == (root / "src" / "app.py").resolve()


def test_a_root_that_is_itself_a_symlink_works(root: Path) -> None:
    linked = root.parent / "linked-root"
    linked.symlink_to(root, target_is_directory=True)
    found = resolve_path("src/app.py", make_settings(linked))
    assert found.path == root.resolve() / "src" / "app.py"
    assert found.relative == "src/app.py"


def test_writing_is_refused_when_the_workspace_is_read_only(root: Path) -> None:
    with pytest.raises(ToolFailed, match=r"read-only .*SIGNOFF_WORKSPACE_WRITABLE") as caught:
        resolve_path("src/app.py", make_settings(root), for_write=True)
    assert "'src/app.py'" in caught.value.message
    found = resolve_path("src/app.py", make_settings(root, writable=True), for_write=True)
    assert found.relative == "src/app.py"


def test_no_roots_names_the_setting() -> None:
    with pytest.raises(ToolFailed, match="SIGNOFF_WORKSPACE_ROOTS"):
        resolve_path("x", Settings(workspace_roots=()))


def test_a_missing_root_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ToolFailed, match="'gone' does not exist"):
        resolve_path("x", make_settings(tmp_path / "gone"))


# Several roots: a leading root name picks that root, anything else goes to the first.


@pytest.fixture
def two_roots(tmp_path: Path) -> tuple[Path, Path]:
    proj, docs = tmp_path / "proj", tmp_path / "docs"
    (proj / "docs").mkdir(parents=True)
    (docs / "guide").mkdir(parents=True)
    return proj, docs


def test_root_name_prefix_selects_that_root(two_roots: tuple[Path, Path]) -> None:
    proj, docs = two_roots
    found = resolve_path("docs/guide/intro.md", make_settings(proj, docs))
    assert found.path == docs.resolve() / "guide" / "intro.md"
    assert found.root == docs.resolve()
    assert found.relative == "docs/guide/intro.md"


def test_unprefixed_path_goes_to_the_first_root_and_gains_its_name(
    two_roots: tuple[Path, Path],
) -> None:
    proj, docs = two_roots
    found = resolve_path("main.py", make_settings(proj, docs))
    assert found.path == proj.resolve() / "main.py"
    assert found.relative == "proj/main.py"
    assert resolve_path("proj/main.py", make_settings(proj, docs)).path == found.path


def test_root_name_prefix_wins_over_a_same_named_subdirectory(two_roots: tuple[Path, Path]) -> None:
    proj, docs = two_roots
    settings = make_settings(proj, docs)
    assert resolve_path("docs", settings).path == docs.resolve()
    assert resolve_path("docs", settings).relative == "docs"
    assert resolve_path("proj/docs", settings).path == proj.resolve() / "docs"
    assert resolve_path(".", settings).relative == "proj"


def test_dot_dot_is_normalised_before_a_root_is_chosen(two_roots: tuple[Path, Path]) -> None:
    proj, docs = two_roots
    settings = make_settings(proj, docs)
    assert resolve_path("docs/../proj/main.py", settings).path == proj.resolve() / "main.py"
    with pytest.raises(ToolFailed, match=r"'\.\.'"):
        resolve_path("docs/../../x", settings)


def test_symlink_from_one_root_into_another_is_allowed(two_roots: tuple[Path, Path]) -> None:
    proj, docs = two_roots
    (proj / "manual").symlink_to(docs / "guide", target_is_directory=True)
    found = resolve_path("manual/intro.md", make_settings(proj, docs))
    assert found.root == docs.resolve()
    assert found.relative == "docs/guide/intro.md"


def test_roots_sharing_a_name_are_refused(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "src", tmp_path / "b" / "src"
    first.mkdir(parents=True)
    second.mkdir(parents=True)
    with pytest.raises(ToolFailed, match="share the directory name src"):
        workspace_roots(make_settings(first, second))


segments = st.sampled_from(["..", ".", "src", "app.py", "out", "alias", "new", ""])


@hypothesis_settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(segments, min_size=1, max_size=6))
def test_whatever_resolves_is_inside_the_root(root: Path, parts: list[str]) -> None:
    """Any mix of '..', links in and out, and names: either refused or inside the root."""
    if not (root / "out").is_symlink():
        (root / "out").symlink_to(root.parent / "outside", target_is_directory=True)
        (root / "alias").symlink_to(root / "src", target_is_directory=True)
    try:
        found = resolve_path("/".join(parts), make_settings(root))
    except ToolFailed:
        return
    real_root = root.resolve()
    assert found.path == real_root or real_root in found.path.parents
    assert os.path.realpath(found.path) == str(found.path)
    assert resolve_path(found.relative, make_settings(root)).path == found.path
