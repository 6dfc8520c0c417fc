"""A TCP relay in front of a server on its host, and the cluster's link delay.

    python -m reliability.cluster.forward 10.77.0.4 8025 8026 [--delays FILE --stats FILE]

It listens on <address>:<port> and relays each connection to 127.0.0.1:<target port>. The
provider host needs it anyway (the sandbox binds loopback only: its control API is
unauthenticated); with faults on, PgBouncer, Redis and gunicorn sit behind one too, because this
kernel has no `sch_netem` and so no `tc ... netem delay`.

Delay: FILE is JSON, {"<host address>": [low_ms, high_ms], ...}, rewritten by the harness when a
link's delay starts or heals and read here at most every 0.1 s (so connections that are already
open slow down too, as on a real link). A delayed host's egress is what slows, as netem on its
interface would do: bytes a delayed client sends, and bytes this server sends when its own host
is delayed. Each chunk is held for a random low-high ms; the chunks of one direction keep their
order (a TCP stream cannot reorder). What was held goes to --stats (per delayed address: chunks,
total ms), rewritten every second while it changes, so the harness can say what it injected.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
from collections import defaultdict
from pathlib import Path


class Delays:
    """The delay table, re-read when its file changes (checked at most every 0.1 s)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.table: dict[str, list[float]] = {}
        self.mtime: float | None = None
        self.checked = 0.0
        self.held: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])

    def of(self, address: str) -> float:
        """Seconds to hold a chunk of `address`'s egress (0: none), counted in `held`."""
        if self.path is None:
            return 0.0
        now = asyncio.get_running_loop().time()
        if now - self.checked > 0.1:
            self.checked = now
            with contextlib.suppress(OSError, ValueError):
                mtime = self.path.stat().st_mtime
                if mtime != self.mtime:
                    self.table, self.mtime = json.loads(self.path.read_text() or "{}"), mtime
        span = self.table.get(address)
        if not span:
            return 0.0
        ms = random.uniform(span[0], span[1])
        self.held[address][0] += 1
        self.held[address][1] += ms
        return ms / 1000


async def pipe(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delays: Delays, egress: str
) -> None:
    """Relay one direction; with a delay, each chunk leaves at its time, in order."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes | None]] = asyncio.Queue()

    async def release() -> None:
        try:
            while (item := await queue.get())[1] is not None:
                if (wait := item[0] - loop.time()) > 0:
                    await asyncio.sleep(wait)
                writer.write(item[1])
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    sender = asyncio.create_task(release())
    last = 0.0
    try:
        while not sender.done() and (data := await reader.read(65536)):
            last = max(last, loop.time() + delays.of(egress))
            queue.put_nowait((last, data))
    except (ConnectionError, OSError):
        pass
    finally:
        queue.put_nowait((last, None))
        with contextlib.suppress(Exception):
            await sender


def flush_stats(delays: Delays, path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({k: [int(v[0]), round(v[1])] for k, v in delays.held.items()}))
    os.replace(tmp, path)


async def write_stats(delays: Delays, path: Path) -> None:
    written = None
    while True:
        await asyncio.sleep(1.0)
        if (snapshot := json.dumps(delays.held)) != written:
            flush_stats(delays, path)
            written = snapshot


async def serve(listen: str, port: int, target_port: int, delays: Delays, stats: Path | None):
    async def relay(reader, writer):
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target_port)
        except OSError:
            writer.close()
            return
        peer = (writer.get_extra_info("peername") or ("?",))[0]
        await asyncio.gather(
            pipe(reader, up_writer, delays, peer), pipe(up_reader, writer, delays, listen)
        )

    loop = asyncio.get_running_loop()
    stats_task = None  # held, so the loop keeps it
    if stats is not None:
        stats_task = loop.create_task(write_stats(delays, stats))

        def stop() -> None:
            # A stop writes what was held since the last second's file, and stops in any case.
            try:
                flush_stats(delays, stats)
            finally:
                os._exit(0)

        loop.add_signal_handler(signal.SIGTERM, stop)
    server = await asyncio.start_server(relay, listen, port)
    async with server:
        await server.serve_forever()
    assert stats_task is None or stats_task.done()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m reliability.cluster.forward")
    parser.add_argument("listen")
    parser.add_argument("port", type=int)
    parser.add_argument("target_port", type=int)
    parser.add_argument("--delays", type=Path, default=None)
    parser.add_argument("--stats", type=Path, default=None)
    args = parser.parse_args()
    asyncio.run(serve(args.listen, args.port, args.target_port, Delays(args.delays), args.stats))


if __name__ == "__main__":
    main()
