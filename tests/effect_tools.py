"""A user tool module for tests: `record_effect` appends a line to a file to count runs."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from worker.tools import ToolContext, object_schema, tool

log = logging.getLogger(__name__)


@tool(parameters=object_schema({"note": {"type": "string"}}, required=["note"]))
def record_effect(args: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    """Appends the note to $SIGNOFF_TEST_EFFECTS; a visible, countable side effect."""
    path = Path(os.environ["SIGNOFF_TEST_EFFECTS"])
    log.info(
        "recording %s", args["note"]
    )  # a line logged inside a leg (tests/integration/test_json_logs.py)
    with path.open("a") as effects:
        effects.write(f"{context.call_id} {args['note']}\n")
    time.sleep(float(os.environ.get("SIGNOFF_TEST_EFFECT_DELAY_S", "0")))
    return {"recorded": args["note"]}


TOOLS = [record_effect]
