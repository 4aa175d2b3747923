"""/schedules: run a named agent by cron, interval or once; operators write, every role reads."""

from __future__ import annotations

import logging

from flask import Blueprint, Response
from pydantic import BaseModel, ConfigDict, Field

from shared.models.schedules import NewSchedule, ScheduleRun, ScheduleStatus
from shared.models.users import Role
from webui.api.replies import created, reply
from webui.auth import current_principal, requires
from webui.operations import operation
from webui.params import json_body
from webui.services import services

__all__ = ["NewScheduleBody", "ScheduleList", "ScheduleRuns", "blueprint"]

log = logging.getLogger(__name__)


class NewScheduleBody(NewSchedule):
    """A schedule: exactly one of `cron` (with `timezone`), `every_s` or `at`. An unknown
    agent or version, a bad cron expression or an unknown time zone is a 422 naming it."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class ScheduleList(BaseModel):
    items: list[ScheduleStatus]


class ScheduleRuns(BaseModel):
    items: list[ScheduleRun] = Field(description="Newest first.")


@requires(Role.VIEWER)
@operation("Every schedule with its state and next fire times, by name", response=ScheduleList)
def list_schedules() -> Response:
    return reply(ScheduleList(items=services().stores.schedules.list()))


@requires(Role.OPERATOR)
@operation(
    "Create a schedule; `signoff beat` fires it",
    request=NewScheduleBody,
    response=ScheduleStatus,
    status=201,
    errors=(400, 409, 422),
)
def create_schedule() -> Response:
    body = json_body(NewScheduleBody)
    actor = current_principal().name
    store = services().stores.schedules
    store.create(body, actor=actor)
    log.info("%s created schedule %s for agent %s", actor, body.name, body.agent)
    return created(store.status(body.name), ".get_schedule", name=body.name)


@requires(Role.VIEWER)
@operation("A schedule, its state and next fire times", response=ScheduleStatus, errors=(404,))
def get_schedule(name: str) -> Response:
    return reply(services().stores.schedules.status(name))


@requires(Role.VIEWER)
@operation("A schedule's latest 100 fires and what each did", response=ScheduleRuns, errors=(404,))
def schedule_runs(name: str) -> Response:
    store = services().stores.schedules
    store.get(name)
    return reply(ScheduleRuns(items=store.runs(name, limit=100)))


@requires(Role.OPERATOR)
@operation("Pause a schedule: no fire until resumed", response=ScheduleStatus, errors=(404,))
def pause_schedule(name: str) -> Response:
    return _set_paused(name, paused=True)


@requires(Role.OPERATOR)
@operation(
    "Resume a schedule from the first slot after now", response=ScheduleStatus, errors=(404,)
)
def resume_schedule(name: str) -> Response:
    return _set_paused(name, paused=False)


def _set_paused(name: str, *, paused: bool) -> Response:
    store = services().stores.schedules
    (store.pause if paused else store.resume)(name)
    done = "paused" if paused else "resumed"
    log.info("%s %s schedule %s", current_principal().name, done, name)
    return reply(store.status(name))


@requires(Role.OPERATOR)
@operation(
    "Delete a schedule (its conversations stay); answers it as it was",
    response=ScheduleStatus,
    errors=(404,),
)
def delete_schedule(name: str) -> Response:
    store = services().stores.schedules
    status = store.status(name)
    store.delete(name)
    log.info("%s deleted schedule %s", current_principal().name, name)
    return reply(status)


def blueprint() -> Blueprint:
    bp = Blueprint("schedules", __name__)
    bp.add_url_rule("/schedules", view_func=list_schedules, methods=["GET"])
    bp.add_url_rule("/schedules", view_func=create_schedule, methods=["POST"])
    bp.add_url_rule("/schedules/<id:name>", view_func=get_schedule, methods=["GET"])
    bp.add_url_rule("/schedules/<id:name>", view_func=delete_schedule, methods=["DELETE"])
    bp.add_url_rule("/schedules/<id:name>/runs", view_func=schedule_runs, methods=["GET"])
    bp.add_url_rule("/schedules/<id:name>/pause", view_func=pause_schedule, methods=["POST"])
    bp.add_url_rule("/schedules/<id:name>/resume", view_func=resume_schedule, methods=["POST"])
    return bp
