"""Inputs that cannot poison an edge: numbers, dates, stream ids, ids and bearer headers."""

from __future__ import annotations

import re

import pytest
from flask.testing import FlaskClient

from shared.errors import InvalidInput
from shared.store.keys import ID_PATTERN, check_id
from tests.web.conftest import bearer, new_conversation
from webui.services import Services

NOT_NUMBERS = [
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e999",
    "1e3",
    "1_0",
    "\u0663",
    " 5",
    "0x10",
    "",
    "5\n",
]


def _bad_parameter(response: object, name: str) -> None:
    assert response.status_code == 400, response.text  # type: ignore[attr-defined]
    error = response.json["error"]  # type: ignore[attr-defined]
    assert error["code"] == "bad_parameter"
    assert f"'{name}'" in error["message"] or error["message"].startswith(name)


@pytest.mark.parametrize("raw", [*[n for n in NOT_NUMBERS if n], "9" * 40, "-1", "10000000000"])
@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/api/v1/conversations", "offset"),
        ("/api/v1/conversations", "limit"),
        ("/api/v1/batches", "limit"),
        ("/api/v1/notifications", "offset"),
        ("/api/v1/audit", "limit"),
    ],
)
def test_integer_parameters_are_plain_bounded_integers(
    http: FlaskClient, viewer: dict[str, str], path: str, name: str, raw: str
) -> None:
    _bad_parameter(http.get(path, query_string={name: raw}, headers=viewer), name)


@pytest.mark.parametrize(
    "raw",
    [*[n for n in NOT_NUMBERS if n and n.strip() == n and n != "1e3"], "-1", "1e300", "9" * 400],
)
def test_min_age_is_a_finite_bounded_number(
    http: FlaskClient, viewer: dict[str, str], raw: str
) -> None:
    response = http.get("/api/v1/notifications", query_string={"min_age_s": raw}, headers=viewer)
    _bad_parameter(response, "min_age_s")


def test_good_numbers_still_pass(http: FlaskClient, viewer: dict[str, str]) -> None:
    assert http.get("/api/v1/conversations?offset=0&limit=200", headers=viewer).status_code == 200
    for age in ("0", "60", "2.5", "315360000", "1e3", "1e-05", "2.5E+2"):  # JSON numbers
        query = {"min_age_s": age}
        response = http.get("/api/v1/notifications", query_string=query, headers=viewer)
        assert response.status_code == 200, age


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("start=2025-1-1", "start"),
        ("start=20250101", "start"),
        ("end=2025-02-30", "end"),
        ("end=0000-01-01", "end"),
        ("end=\u0662\u0660\u0662\u0665-01-01", "end"),
    ],
)
def test_usage_dates_are_dates(
    http: FlaskClient, signed_in: FlaskClient, viewer: dict[str, str], query: str, name: str
) -> None:
    _bad_parameter(http.get(f"/api/v1/usage?{query}", headers=viewer), name)
    assert signed_in.get(f"/usage?{query}").status_code == 400


def test_a_full_year_of_usage_is_allowed(http: FlaskClient, viewer: dict[str, str]) -> None:
    response = http.get("/api/v1/usage?start=2024-01-01&end=2024-12-31", headers=viewer)
    assert response.status_code == 200
    assert len(response.json["days"]) == 366


@pytest.mark.parametrize("before", ["0-0", "0", "1-0", "0-1"])
def test_audit_before_the_first_entry_is_an_empty_page(
    http: FlaskClient, signed_in: FlaskClient, viewer: dict[str, str], svc: Services, before: str
) -> None:
    svc.redis.xadd(svc.keys.audit(), {"notification_id": "c.n", "actor": "ada", "at": "1"})
    response = http.get(f"/api/v1/audit?before={before}", headers=viewer)
    assert response.status_code == 200, response.text
    assert response.json["items"] == [] and response.json["next_before"] is None
    assert signed_in.get(f"/audit?before={before}").status_code == 200


@pytest.mark.parametrize(
    "before",
    ["99999999999999999999-0", "1-18446744073709551616", "1-0\n", "\u0661-\u0660", "-1-0", "1-"],
)
def test_audit_before_that_is_no_stream_id_is_a_400(
    http: FlaskClient, viewer: dict[str, str], before: str
) -> None:
    _bad_parameter(
        http.get("/api/v1/audit", query_string={"before": before}, headers=viewer), "before"
    )


def test_last_event_id_with_a_newline_is_a_400(
    http: FlaskClient, submitter: dict[str, str]
) -> None:
    cid = new_conversation(http, submitter)
    response = http.get(
        f"/api/v1/conversations/{cid}/events",
        query_string={"last_event_id": "1-0\n"},
        headers=submitter,
    )
    assert response.status_code == 400


def test_ids_are_matched_whole() -> None:
    assert check_id("a.b-c_9") == "a.b-c_9"
    for bad in ("abc\n", "abc\r\n", "\nabc", "a b", "", "x" * 129, "ä"):
        with pytest.raises(InvalidInput):
            check_id(bad, "conversation id")
    assert re.fullmatch(ID_PATTERN, "x" * 128)


def test_an_id_ending_in_a_newline_writes_nothing(
    http: FlaskClient, submitter: dict[str, str], svc: Services
) -> None:
    response = http.post(
        "/api/v1/conversations", json={"conversation_id": "abc\n"}, headers=submitter
    )
    assert response.status_code == 422, response.text
    assert re.search(r"conversation[ _]id", response.json["error"]["message"])
    batch = http.post(
        "/api/v1/batches", json={"batch_id": "b1\n", "items": ["hi"]}, headers=submitter
    )
    assert batch.status_code == 422, batch.text
    assert re.search(r"batch[ _]id", batch.json["error"]["message"])
    assert [k for k in svc.redis.scan_iter(f"{svc.keys.prefix}:*") if "\n" in k] == []
    assert svc.redis.zcard(svc.keys.conversations(0)) == svc.redis.zcard(svc.keys.batches()) == 0
    assert http.get("/api/v1/conversations/abc%0A", headers=submitter).status_code == 404


def test_openapi_path_ids_carry_the_id_pattern(http: FlaskClient, viewer: dict[str, str]) -> None:
    document = http.get("/api/v1/openapi.json", headers=viewer).json
    params = document["paths"]["/api/v1/conversations/{cid}"]["get"]["parameters"]
    cid = next(p for p in params if p["name"] == "cid")
    assert cid["schema"] == {"type": "string", "pattern": f"^{ID_PATTERN}$"}
    pattern = re.compile(cid["schema"]["pattern"])
    assert pattern.search("abc") and not pattern.search("a/b")


BAD_HEADERS = ["Bearer not-a-token", "Basic YWRhOnB3", "Bearer", "garbage"]


@pytest.mark.parametrize("header", BAD_HEADERS)
def test_public_routes_ignore_a_bad_authorization_header(http: FlaskClient, header: str) -> None:
    headers = {"Authorization": header}
    health = http.get("/healthz", headers=headers)
    assert health.status_code == 200 and health.json["status"] == "ok"
    sign_in = http.get("/sign-in", headers=headers)
    assert sign_in.status_code == 200 and 'name="csrf_token"' in sign_in.text
    assert http.get("/static/app.css", headers=headers).status_code == 200


@pytest.mark.parametrize("header", BAD_HEADERS)
def test_protected_routes_still_refuse_a_bad_authorization_header(
    http: FlaskClient, header: str
) -> None:
    headers = {"Authorization": header}
    api = http.get("/api/v1/conversations", headers=headers)
    assert api.status_code == 401
    assert api.json["error"]["code"] == "unauthorized"
    page = http.get("/conversations", headers=headers)
    assert page.status_code == 302 and page.headers["Location"].startswith("/sign-in")
    followed = http.get(page.headers["Location"], headers=headers)
    assert followed.status_code == 200  # sign-in renders: no loop


def test_a_good_token_still_works(http: FlaskClient, viewer: dict[str, str]) -> None:
    assert http.get("/healthz", headers=viewer).status_code == 200
    assert http.get("/api/v1/conversations", headers=viewer).status_code == 200
    assert http.get("/api/v1/conversations", headers=bearer("x" * 40)).status_code == 401
