"""A small MCP server for the demo: notes in a JSON file, one read-only tool and one destructive.

    python examples/notes_server.py            # speaks MCP over stdin/stdout

`signoff up --demo` registers it as the trusted server `notes`: `list_notes` says it is
read-only, so it runs unasked; `delete_note` says it is destructive, so it waits for an
operator. The notes live in NOTES_FILE (default: notes.json beside the current directory's
`.signoff/`), created with three notes on first use.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

SAMPLE = {"1": "Renew the TLS certificate", "2": "Archive last year's tickets", "3": "Buy milk"}

server = MCPServer("notes", instructions="Notes kept in a JSON file.")


def _path() -> Path:
    return Path(os.environ.get("NOTES_FILE", ".signoff/notes.json"))


def _load() -> dict[str, str]:
    path = _path()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(SAMPLE, indent=2))
    found: dict[str, str] = json.loads(path.read_text())
    return found


@server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def list_notes() -> dict[str, str]:
    """Lists every note by its id."""
    return _load()


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def delete_note(note_id: str) -> str:
    """Deletes the note with this id for good."""
    notes = _load()
    if note_id not in notes:
        raise ValueError(f"there is no note {note_id!r}; ids: {', '.join(sorted(notes))}")
    removed = notes.pop(note_id)
    _path().write_text(json.dumps(notes, indent=2))
    return f"deleted note {note_id}: {removed}"


if __name__ == "__main__":
    server.run("stdio")
