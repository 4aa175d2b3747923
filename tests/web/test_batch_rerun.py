"""Re-running a batch through the API: who may, what it refuses, and the link to its source."""

from __future__ import annotations

from flask.testing import FlaskClient

from shared.models.users import Role
from tests.web.conftest import OPERATOR, bearer, sign_in, submit_batch
from webui.services import Services

ITEMS = [{"id": "a", "prompt": "first"}, {"id": "b"}]


def test_rerun_needs_a_token_and_a_batch(http: FlaskClient, submitter: dict[str, str]) -> None:
    assert http.post("/api/v1/batches/b1/rerun", json={}).status_code == 401
    missing = http.post("/api/v1/batches/nope/rerun", json={}, headers=submitter)
    assert missing.status_code == 404 and "batch nope does not exist" in missing.text


def test_a_rerun_through_the_api_links_to_its_source(
    http: FlaskClient, svc: Services, tokens: dict[Role, str]
) -> None:
    submitter, viewer = bearer(tokens[Role.SUBMITTER]), bearer(tokens[Role.VIEWER])
    source = submit_batch(http, submitter, ITEMS)["batch"]["id"]
    url = f"/api/v1/batches/{source}/rerun"
    assert http.post(url, json={}, headers=viewer).status_code == 403
    other = bearer(svc.tokens.create("someone else", Role.SUBMITTER))
    assert http.post(url, json={}, headers=other).status_code == 403
    for body, status, says in [
        ({"model": "scripted-b", "agent": "triage"}, 422, "an agent decides"),
        ({"agent_version": 2}, 422, "the source ran as no agent"),
        ({"model_settings": {"temperature": 0.5}}, 422, "cannot honour it"),
        ({"batch_id": "not-mine"}, 403, "batch_id: the caller"),
        ({"provider": " "}, 422, "provider"),
        ({"max_concurrency": 0}, 422, "max_concurrency"),
    ]:
        refused = http.post(url, json=body, headers=submitter)
        assert refused.status_code == status, (body, refused.text)
        assert says in refused.json["error"]["message"], body
    response = http.post(
        url, json={"model": "scripted-b", "max_concurrency": 5.0}, headers=submitter
    )
    assert response.status_code == 201, response.text
    started = response.json
    assert (started["source"], started["submitted"], started["invalid"]) == (source, 1, 1)
    batch = started["batch"]
    assert batch["source"] == source and batch["model"] == "scripted-b"
    assert batch["max_concurrency"] == 5 and batch["total"] == 2
    assert response.headers["Location"].endswith(f"/api/v1/batches/{batch['id']}")
    assert http.get(f"/api/v1/batches/{source}", headers=viewer).json["source"] is None
    svc.users.add(*OPERATOR)
    assert sign_in(http).status_code == 302
    page = http.get(f"/batches/{batch['id']}").text
    assert f'A re-run of <a href="/batches/{source}"><code>{source}</code></a>' in page


def test_the_document_bounds_the_rerun_numbers_as_json_schema(
    http: FlaskClient, submitter: dict[str, str]
) -> None:
    """The short fuzz run sent max_concurrency 0 as valid: the bound was pydantic's `gt`."""
    document = http.get("/api/v1/openapi.json", headers=submitter).json
    properties = document["components"]["schemas"]["RerunBody"]["properties"]
    for name, bound in (("max_concurrency", {"exclusiveMinimum": 0, "maximum": 10000}),
                        ("agent_version", {"exclusiveMinimum": 0})):  # fmt: skip
        [number] = [o for o in properties[name]["anyOf"] if o.get("type") == "integer"]
        assert {k: v for k, v in number.items() if k != "type"} == bound, name
    refused = http.post("/api/v1/batches/b1/rerun", json={"max_concurrency": 0}, headers=submitter)
    assert refused.status_code == 422 and "max_concurrency" in refused.json["error"]["message"]
