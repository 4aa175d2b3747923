"""GET /api/v1/conversations/{id}/files?path=: exact bytes, confined as read_file is."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from shared.models.users import Role
from tests.web.conftest import AppFactory, bearer, new_conversation, services_of


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A root holding a text and a binary file, next to an outside secret."""
    (tmp_path / "root" / "docs").mkdir(parents=True)
    (tmp_path / "root" / "docs" / "a.txt").write_text("hello ✓\n")
    (tmp_path / "root" / "b.bin").write_bytes(b"\xfb\xff\x00\x01")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret")
    (tmp_path / "root" / "link.txt").symlink_to(tmp_path / "outside" / "secret.txt")
    os.link(tmp_path / "outside" / "secret.txt", tmp_path / "root" / "hard.txt")
    return tmp_path / "root"


@pytest.fixture
def files_http(make_app: AppFactory, root: Path) -> FlaskClient:
    return make_app(workspace_roots=(root,)).test_client()


@pytest.fixture
def role_headers(files_http: FlaskClient) -> dict[Role, dict[str, str]]:
    svc = services_of(files_http.application)
    return {role: bearer(svc.tokens.create(f"{role.value} token", role)) for role in Role}


def files_url(cid: str) -> str:
    return f"/api/v1/conversations/{cid}/files"


def test_a_text_file_comes_back_exactly(
    files_http: FlaskClient, role_headers: dict[Role, dict[str, str]]
) -> None:
    operator = role_headers[Role.OPERATOR]
    cid = new_conversation(files_http, operator)
    response = files_http.get(
        files_url(cid), query_string={"path": "./docs//a.txt"}, headers=operator
    )
    assert response.status_code == 200, response.text
    data = "hello ✓\n".encode()
    assert response.json == {
        "path": "./docs//a.txt",
        "canonical_path": "docs/a.txt",
        "data": base64.urlsafe_b64encode(data).decode(),
        "text": "hello ✓\n",
        "size": len(data),
    }


def test_binary_bytes_come_back_base64_without_text(
    files_http: FlaskClient, role_headers: dict[Role, dict[str, str]]
) -> None:
    submitter = role_headers[Role.SUBMITTER]
    cid = new_conversation(files_http, submitter)  # its own conversation
    response = files_http.get(files_url(cid), query_string={"path": "b.bin"}, headers=submitter)
    assert response.status_code == 200, response.text
    assert base64.urlsafe_b64decode(response.json["data"]) == b"\xfb\xff\x00\x01"
    assert (response.json["text"], response.json["size"]) == (None, 4)


def test_a_missing_file_is_404(
    files_http: FlaskClient, role_headers: dict[Role, dict[str, str]]
) -> None:
    operator = role_headers[Role.OPERATOR]
    cid = new_conversation(files_http, operator)
    response = files_http.get(files_url(cid), query_string={"path": "nope.txt"}, headers=operator)
    assert response.status_code == 404
    assert response.json["error"]["code"] == "not_found"
    assert "'nope.txt'" in response.json["error"]["message"]


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("../outside/secret.txt", "'..'"),
        ("/etc/hostname", "is absolute"),
        ("link.txt", "symbolic link"),
        ("hard.txt", "hard links"),
        ("docs", "is a directory"),
    ],
)
def test_a_refused_path_is_403_saying_why(
    files_http: FlaskClient, role_headers: dict[Role, dict[str, str]], path: str, why: str
) -> None:
    operator = role_headers[Role.OPERATOR]
    cid = new_conversation(files_http, operator)
    response = files_http.get(files_url(cid), query_string={"path": path}, headers=operator)
    assert response.status_code == 403
    error = response.json["error"]
    assert error["code"] == "path_refused"
    assert why in error["message"] and "secret" not in error["message"].replace(path, "")


@pytest.mark.parametrize("query", [{}, {"path": ""}])
def test_a_missing_path_parameter_is_400_naming_it(
    files_http: FlaskClient, role_headers: dict[Role, dict[str, str]], query: dict[str, str]
) -> None:
    operator = role_headers[Role.OPERATOR]
    cid = new_conversation(files_http, operator)
    response = files_http.get(files_url(cid), query_string=query, headers=operator)
    assert response.status_code == 400
    assert response.json["error"] == {
        "code": "bad_parameter",
        "message": "query parameter 'path' is required",
    }


def test_another_callers_conversation_is_403(
    files_http: FlaskClient, role_headers: dict[Role, dict[str, str]]
) -> None:
    cid = new_conversation(files_http, role_headers[Role.OPERATOR])
    for role in (Role.SUBMITTER, Role.VIEWER):
        response = files_http.get(
            files_url(cid), query_string={"path": "docs/a.txt"}, headers=role_headers[role]
        )
        assert response.status_code == 403, role
        assert response.json["error"]["code"] == "forbidden"
        assert "hello" not in response.text


def test_unauthenticated_is_401(
    files_http: FlaskClient, role_headers: dict[Role, dict[str, str]]
) -> None:
    cid = new_conversation(files_http, role_headers[Role.OPERATOR])
    response = files_http.get(files_url(cid), query_string={"path": "docs/a.txt"})
    assert response.status_code == 401
    assert "hello" not in response.text


def test_an_unknown_conversation_is_404(
    files_http: FlaskClient, role_headers: dict[Role, dict[str, str]]
) -> None:
    response = files_http.get(
        files_url("nope"), query_string={"path": "docs/a.txt"}, headers=role_headers[Role.OPERATOR]
    )
    assert response.status_code == 404
    assert "conversation" in response.json["error"]["message"]


def test_no_workspace_roots_names_the_setting(http: FlaskClient, operator: dict[str, str]) -> None:
    cid = new_conversation(http, operator)
    response = http.get(files_url(cid), query_string={"path": "a.txt"}, headers=operator)
    assert response.status_code == 404
    assert response.json["error"]["code"] == "not_configured"
    assert "SIGNOFF_WORKSPACE_ROOTS" in response.json["error"]["message"]


def test_the_document_declares_the_operation(http: FlaskClient, operator: dict[str, str]) -> None:
    document = http.get("/api/v1/openapi.json", headers=operator).json
    get = document["paths"]["/api/v1/conversations/{cid}/files"]["get"]
    assert sorted(get["responses"]) == ["200", "400", "401", "403", "404"]
    (path,) = [p for p in get["parameters"] if p["in"] == "query"]
    assert (path["name"], path["required"], path.get("allowEmptyValue")) == ("path", True, None)
    assert get["x-required-role"] == "submitter"
