"""A counting TCP proxy in front of Redis: round trips of the processes that connect through it.

`python -m bench.redis_proxy LISTEN_PORT REDIS_PORT` forwards bytes both ways. A round
trip is a request that follows a reply (or opens the connection): a pipeline or a script
call counts once, however many commands it holds. Requests that carry the delta tick
script (`worker/lua/deltas.lua`, by its digest or its body) are counted apart.
The counts are printed as a JSON line on stdout, with the time, each time SIGUSR1 arrives.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time

from worker.deltas import _DELTAS


class Counts:
    def __init__(self) -> None:
        self.round_trips = 0
        self.ticks = 0
        self.marks = (_DELTAS.sha.encode(), b"The worker's delta tick")

    def report(self) -> None:
        counts = {"at": time.time(), "round_trips": self.round_trips, "ticks": self.ticks}
        print(json.dumps(counts), flush=True)


async def _pipe_up(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, counts: Counts, waiting: list[bool]
) -> None:
    while data := await reader.read(262_144):
        if not waiting[0]:
            counts.round_trips += 1
            if any(mark in data for mark in counts.marks):
                counts.ticks += 1
            waiting[0] = True
        writer.write(data)
        await writer.drain()
    writer.close()


async def _pipe_down(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, waiting: list[bool]
) -> None:
    while data := await reader.read(262_144):
        waiting[0] = False
        writer.write(data)
        await writer.drain()
    writer.close()


async def main(listen: int, upstream: int) -> None:
    counts = Counts()
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, counts.report)

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection("127.0.0.1", upstream)
        waiting = [False]
        await asyncio.gather(
            _pipe_up(client_r, server_w, counts, waiting),
            _pipe_down(server_r, client_w, waiting),
            return_exceptions=True,
        )

    server = await asyncio.start_server(handle, "127.0.0.1", listen, backlog=4096)
    print("ready.", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
