"""The WSGI entry point for gunicorn: ``gunicorn -k gthread 'webui.wsgi:app'``.

The only module that builds an app when imported; nothing but gunicorn imports it.
"""

from __future__ import annotations

import logging

from webui import create_app

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

app = create_app()
