"""Regenerates the README's configuration table from the settings model (`make docs`)."""

from __future__ import annotations

import re
from pathlib import Path

from shared.settings import settings_table

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"<!-- settings-table -->.*?<!-- /settings-table -->", re.DOTALL)


def rendered(text: str) -> str:
    table = f"<!-- settings-table -->\n{settings_table()}\n<!-- /settings-table -->"
    return BLOCK.sub(lambda _: table, text)


if __name__ == "__main__":
    README.write_text(rendered(README.read_text()))
