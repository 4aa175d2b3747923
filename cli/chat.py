"""`signoff chat`: a conversation at the terminal that asks you about its tool calls inline.

Prompts and answers are read line by line from stdin, so piped input works too. A
turn is followed through the conversation's event stream; a pending notification
of the conversation is shown as it arrives and resolved through the store. Leaving
(Ctrl-C or end of input) cancels nothing: turns and approvals go on without us.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from enum import Enum
from typing import IO, Any

import click

from cli.approvals import cli_actor, notification_lines, parse_json
from cli.conversations import show_chunk
from shared.client import Client, Conversation
from shared.client.follow import TurnFollower
from shared.errors import Conflict, InvalidInput, NotFound, SignoffError
from shared.models.chunks import StreamChunk, Thought
from shared.models.events import NotificationEvent
from shared.models.notifications import Notification, NotificationStatus, ResolutionKind

__all__ = ["Answer", "ChatSession", "chat", "parse_answer"]


class Answer(str, Enum):
    """The first word of an operator's answer to a pending notification."""

    ALLOW = "allow"
    DENY = "deny"
    SUBMIT = "submit"
    SKIP = "skip"


def parse_answer(line: str) -> tuple[Answer, dict[str, Any] | None]:
    """`allow [JSON args]`, `deny REASON`, `submit JSON` or `skip` -> (answer, resolution)."""
    word, _, rest = line.strip().partition(" ")
    try:
        answer = Answer(word.lower())
    except ValueError:
        raise InvalidInput(
            f"{word!r} is not an answer: type allow, deny <reason>, submit <json> or skip"
        ) from None
    rest = rest.strip()
    if answer is Answer.SKIP:
        return answer, None
    if answer is Answer.DENY:
        return answer, {"kind": "deny", "reason": rest}
    if answer is Answer.SUBMIT:
        if not rest:
            raise InvalidInput('submit needs the answer as JSON, e.g. submit {"answer": "yes"}')
        return answer, {"kind": "submit", "content": parse_json(rest, option="submit")}
    arguments = parse_json(rest, option="allow") if rest else None
    return answer, {"kind": "allow", "arguments": arguments}


def choices(note: Notification) -> str:
    """The answers this notification accepts, as the question to ask."""
    words = {
        ResolutionKind.ALLOW: "allow [<json args>]",
        ResolutionKind.DENY: "deny <reason>",
        ResolutionKind.SUBMIT: "submit <json>",
    }
    return " / ".join([*(words[kind] for kind in note.allowed), "skip"])


@dataclass
class LineReader:
    """Lines from stdin; a prompt is shown only when a person is typing."""

    stream: IO[str]

    def read(self, prompt: str) -> str | None:
        """The next line without its newline, or None at end of input."""
        if self.stream.isatty():
            click.secho(prompt, bold=True, nl=False, err=True)
        line = self.stream.readline()
        return None if line == "" else line.rstrip("\r\n")


def note_say(message: str, **style: Any) -> None:
    """Chat chatter goes to stderr, so stdout carries only the model's answer."""
    click.secho(message, err=True, **style)


class ChatSession:
    """One chat: prompts in, chunks out, pending notifications answered inline."""

    def __init__(
        self, client: Client, conversation: Conversation, *, actor: str, reader: LineReader
    ) -> None:
        self.client = client
        self.conversation = conversation
        self.actor = actor
        self.reader = reader
        self.failed_turns = 0
        self._thinking = False

    @property
    def cid(self) -> str:
        return self.conversation.conversation_id

    def run(self) -> None:
        """Reads prompts until end of input; each turn runs to its end before the next."""
        for note in self.conversation.pending_notifications():
            self.ask(note.id)
        while (prompt := self.reader.read("you> ")) is not None:
            if prompt.strip():
                self.turn(prompt)

    def turn(self, prompt: str) -> None:
        after = self.client.events.last_id(self.cid)
        try:
            turn_id = self.conversation.send(prompt)
        except SignoffError as exc:
            note_say(f"error: {exc}", fg="red")
            return
        follower = TurnFollower(self.cid, turn_id, after=after)
        for event in self.conversation.follow(follower):
            for chunk in follower.chunks(event):
                self._show(chunk)
            if isinstance(event, NotificationEvent) and event.status == "pending":
                self._end_thought()
                self.ask(event.notification_id)
        self._end_thought()
        click.echo()
        if follower.error is not None:
            self.failed_turns += 1
            note_say(f"error: {follower.error}", fg="red")

    def _show(self, chunk: StreamChunk) -> None:
        """A chunk as `submit --follow` shows it; a line ends the thoughts before the answer."""
        if not isinstance(chunk, Thought):
            self._end_thought()
        self._thinking = isinstance(chunk, Thought)
        show_chunk(chunk)

    def _end_thought(self) -> None:
        if self._thinking:
            click.echo(err=True)
            self._thinking = False

    def ask(self, notification_id: str) -> None:
        """Shows a pending notification and resolves it with the answer typed (or skips it)."""
        try:
            note = self.client.notifications.get(notification_id)
        except NotFound as exc:
            note_say(f"error: {exc}", fg="red")
            return
        if note.status is not NotificationStatus.PENDING:
            return
        note_say("\n" + "\n".join(notification_lines(note)), fg="yellow")
        while not self._answer(note):
            pass

    def _answer(self, note: Notification) -> bool:
        """Reads one answer; False when it should be asked again."""
        line = self.reader.read(f"{choices(note)}> ")
        if line is None:
            raise EOFError
        try:
            answer, resolution = parse_answer(line)
            if resolution is None:
                note_say(f"left {note.id} pending (web UI: Approvals, or `signoff approvals`)")
                return True
            self.client.notifications.resolve(note.id, resolution, actor=self.actor)
        except InvalidInput as exc:
            note_say(f"error: {exc}", fg="red")
            return False
        except (Conflict, NotFound) as exc:
            note_say(str(exc), fg="yellow")
            return True
        note_say(f"{answer.value}: {note.id} resolved as {self.actor}", fg="green")
        return True


def _open(client: Client, conversation_id: str | None, allow_all: bool) -> Conversation:
    if conversation_id is None:
        return client.new_conversation(allow_all=allow_all)
    if allow_all:
        raise click.UsageError("--allow-all applies to a new conversation, not --conversation")
    return client.conversation(conversation_id)


@click.command()
@click.option("--conversation", "conversation_id", default=None, help="Continue this one.")
@click.option("--allow-all", is_flag=True, help="Run every tool without asking (new ones only).")
def chat(conversation_id: str | None, allow_all: bool) -> None:
    """Chat at the terminal; tool calls that need approval are asked about inline.

    Reads one prompt per line from stdin (piped input works; it ends at end of input).
    Leaving with Ctrl-C or end of input cancels nothing.
    """
    with Client() as client:
        conversation = _open(client, conversation_id, allow_all)
        cid = conversation.conversation_id
        note_say(f"conversation {cid} (Ctrl-D or Ctrl-C leaves; nothing is cancelled)")
        session = ChatSession(client, conversation, actor=cli_actor(), reader=LineReader(sys.stdin))
        try:
            session.run()
        except (KeyboardInterrupt, EOFError):
            note_say("")
        note_say(
            f"left the chat; nothing was cancelled: conversation {cid} goes on "
            f"(follow it with `signoff tail {cid}`)"
        )
    if session.failed_turns:
        raise SignoffError(f"{session.failed_turns} turn(s) of conversation {cid} failed")
