"""A TCP forwarder, the provider host's public face: the sandbox binds loopback only (its control
API is unauthenticated), so on the provider host this relays <address>:<port> to 127.0.0.1.

    python -m reliability.cluster.forward 10.77.0.4 8025 8026
"""

from __future__ import annotations

import asyncio
import contextlib
import sys


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def serve(listen: str, port: int, target_port: int) -> None:
    async def relay(reader, writer):
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(relay, listen, port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
