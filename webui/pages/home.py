"""The home page: what needs a person now, batches under way, recent failures."""

from __future__ import annotations

from flask import Blueprint, render_template
from flask.typing import ResponseReturnValue

from shared.models.users import Role
from webui.auth import requires
from webui.home import home_view
from webui.services import services

__all__ = ["blueprint"]


@requires(Role.VIEWER)
def index() -> ResponseReturnValue:
    return render_template("home.html", view=home_view(services()))


def blueprint() -> Blueprint:
    bp = Blueprint("home", __name__)
    bp.add_url_rule("/", view_func=index)
    return bp
