"""A stand-in model server: OpenAI-compatible streaming Chat Completions with a set pace.

`python -m bench.standin PORT LATENCY_S TOKENS_PER_S TOKENS` answers every
`POST .../chat/completions` after LATENCY_S with TOKENS content deltas, one every
1/TOKENS_PER_S seconds, then the finish reason and usage (asyncio, one process, HTTP/1.1
keep-alive, chunked). `GET /stats` returns when each call's first token was sent (wall
clock, by the prompt's last line) and the most calls it held open at once.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n"
)


class StandIn:
    """The server's state: its pace, and what it saw."""

    def __init__(self, latency_s: float, tokens_per_s: float, tokens: int) -> None:
        self.latency_s = latency_s
        self.gap_s = 1 / tokens_per_s
        self.tokens = tokens
        self.first_token: dict[str, float] = {}
        self.open = 0
        self.peak = 0
        self.calls = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                length = next(
                    (
                        int(x.split(":", 1)[1])
                        for x in lines
                        if x.lower().startswith("content-length:")
                    ),
                    0,
                )
                body = await reader.readexactly(length) if length else b""
                if lines[0].startswith("GET /stats"):
                    await self._stats(writer)
                else:
                    await self._complete(json.loads(body), writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _stats(self, writer: asyncio.StreamWriter) -> None:
        payload = json.dumps(
            {"first_token": self.first_token, "peak_open": self.peak, "calls": self.calls}
        ).encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(payload)).encode()
            + b"\r\n\r\n"
            + payload
        )
        await writer.drain()

    async def _complete(self, request: dict, writer: asyncio.StreamWriter) -> None:
        self.calls += 1
        self.open += 1
        self.peak = max(self.peak, self.open)
        try:
            tag = str(request["messages"][-1]["content"]).rsplit("\n", 1)[-1]
            model = request.get("model", "m")
            writer.write(_HEAD)
            await asyncio.sleep(self.latency_s)
            for n in range(self.tokens):
                if n == 0:
                    self.first_token[tag] = time.time()
                _chunk(writer, _delta(model, {"content": f"w{n} "}, None))
                await writer.drain()
                await asyncio.sleep(self.gap_s)
            _chunk(writer, _delta(model, {}, "stop"))
            usage = {"prompt_tokens": 20, "completion_tokens": self.tokens}
            usage["total_tokens"] = 20 + self.tokens
            _chunk(
                writer,
                {
                    "id": "c",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": model,
                    "choices": [],
                    "usage": usage,
                },
            )
            writer.write(b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")
            await writer.drain()
        finally:
            self.open -= 1


def _delta(model: str, delta: dict, finish: str | None) -> dict:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [choice],
    }


def _chunk(writer: asyncio.StreamWriter, event: dict) -> None:
    data = b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"
    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")


async def main(port: int, latency_s: float, tokens_per_s: float, tokens: int) -> None:
    standin = StandIn(latency_s, tokens_per_s, tokens)
    server = await asyncio.start_server(standin.serve, "127.0.0.1", port, backlog=4096)
    print("ready.", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    port, latency, rate, count = sys.argv[1:5]
    asyncio.run(main(int(port), float(latency), float(rate), int(count)))
