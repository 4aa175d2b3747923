"""/api/v1/budgets: operators set and remove budgets, every role reads them; bad input is 4xx."""

from __future__ import annotations

from flask.testing import FlaskClient

from tests.web.conftest import new_conversation


def test_budgets_api(http: FlaskClient, operator: dict[str, str], viewer: dict[str, str]) -> None:
    url = "/api/v1/budgets/owner/alice"
    assert http.put(url, json={"tokens": 5}, headers=viewer).status_code == 403
    put = http.put(url, json={"tokens": 500, "cost": 2.5}, headers=operator)
    assert put.status_code == 200, put.text
    assert (put.json["tokens"], put.json["cost"], put.json["spent_tokens"]) == (500, 2.5, 0)
    assert put.json["day"] is not None
    shown = http.get(url, headers=viewer).json
    assert shown["tokens"] == 500 and shown["reserved_tokens"] == 0
    empty = http.put(url, json={}, headers=operator)
    assert empty.status_code == 422 and "give tokens, cost or both" in empty.text
    negative = http.put(url, json={"tokens": -1}, headers=operator)
    assert negative.status_code == 422 and "tokens" in negative.text
    assert http.delete(url, headers=operator).json["tokens"] == 500
    assert http.get(url, headers=viewer).status_code == 404

    kind = http.put("/api/v1/budgets/planet/x", json={"tokens": 1}, headers=operator)
    assert kind.status_code == 404 and "budget kind 'planet'" in kind.text
    missing = http.put("/api/v1/budgets/conversation/nope", json={"tokens": 1}, headers=operator)
    assert missing.status_code == 404 and "conversation nope does not exist" in missing.text

    cid = new_conversation(http, operator)
    set_ = http.put(f"/api/v1/budgets/conversation/{cid}", json={"cost": 1}, headers=operator)
    assert set_.status_code == 200 and set_.json["day"] is None
    record = http.get(f"/api/v1/conversations/{cid}", headers=viewer)
    assert record.status_code == 200  # its hash holds the budget, and still reads
