"""The `signoff` command line. It imports only `shared`: workers and the web server are
started as processes by module name, the way the web process sends tasks by name."""

from __future__ import annotations

from cli.main import main

__all__ = ["main"]
