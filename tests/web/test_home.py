"""The home page and the batch list count pending approvals per group and per batch."""

from __future__ import annotations

import re

from flask.testing import FlaskClient

from shared.models.batches import BatchConfig
from tests.pending_records import put
from webui.services import Services


def _rows(html: str, table: str) -> list[list[str]]:
    """The text of each cell of each body row of the table with this id."""
    body = html.split(f'id="{table}"', 1)[1].split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", body, re.DOTALL)
    return [
        [
            re.sub(r"<[^>]+>", "", cell).strip()
            for cell in re.findall(r"<td>(.*?)</td>", row, re.DOTALL)
        ]
        for row in rows
    ]


def test_pending_counts_per_group_and_per_batch_are_exact(
    signed_in: FlaskClient, svc: Services, viewer: dict[str, str]
) -> None:
    first, second, idle = (svc.batches.create(BatchConfig()) for _ in range(3))
    layout = [(first, "send_email")] * 3 + [(first, "write_file"), (second, "send_email")]
    layout += [(None, "send_email")] * 2
    for n, (bid, tool) in enumerate(layout):
        put(svc.redis, svc.keys, n, tool=tool, batch=bid)

    home = signed_in.get("/")
    assert home.status_code == 200
    assert "7 pending" in home.text
    groups = {(row[0], row[1]): row[2] for row in _rows(home.text, "pending-groups")}
    assert groups == {
        (first[:8], "send_email"): "3 to decide",
        (first[:8], "write_file"): "1 to decide",
        (second[:8], "send_email"): "1 to decide",
        ("no batch", "send_email"): "2 to decide",
    }
    waiting = {row[0]: row[2] for row in _rows(home.text, "home-batches")}
    assert waiting == {first[:8]: "4", second[:8]: "1", idle[:8]: "0"}

    listed = signed_in.get("/api/v1/batches", headers=viewer)
    assert listed.status_code == 200, listed.text
    counts = {item["id"]: item["pending_approvals"] for item in listed.json["items"]}
    assert counts == {first: 4, second: 1, idle: 0}
