#!/usr/bin/env python3
"""A TCP relay that delays every byte by a fixed time in each direction:
a network farther away than this machine's loopback (the kernel here has
no netem). `delay_relay.py LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT
DELAY_US`: each connection accepted is relayed to a new connection to the
target; what is read on one side is written to the other DELAY_US
microseconds after it was read, in order (the delay adds to the time on
the wire, it is not a bandwidth limit). Used by bench/nodes.sh
(BENCH_SLICE_DELAY_US) between the volumes' fronts and the storage nodes'
slice servers. Runs until killed."""

import asyncio
import socket
import sys
import time


async def pump(reader, writer, delay):
    """Copies reader to writer, each chunk due `delay` seconds after it was
    read; a second task writes them when due, so reading goes on meanwhile."""
    queue = asyncio.Queue()

    async def deliver():
        while True:
            item = await queue.get()
            if item is None:
                break
            due, data = item
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        writer.close()

    task = asyncio.create_task(deliver())
    try:
        while True:
            data = await reader.read(1 << 20)
            if not data:
                break
            queue.put_nowait((time.monotonic() + delay, data))
    except (ConnectionError, OSError):
        pass
    queue.put_nowait(None)
    try:
        await task
    except (ConnectionError, OSError):
        pass


def nodelay(writer):
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def main():
    host, port, target_host, target_port, delay_us = sys.argv[1:6]
    delay = int(delay_us) / 1e6

    async def relay(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection(target_host, int(target_port))
        except OSError:
            client_writer.close()
            return
        nodelay(client_writer)
        nodelay(server_writer)
        await asyncio.gather(
            pump(client_reader, server_writer, delay),
            pump(server_reader, client_writer, delay),
        )

    server = await asyncio.start_server(relay, host, int(port))
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
