"""Slow clients against a running svs (python3 stdlib only).

    slow_clients.py HTTP_BASE NBD_HOST:PORT SVS_PID [CONNECTIONS] [SECONDS]

Opens CONNECTIONS (default 3000) HTTP connections that send their headers a
byte a second (slowloris), and 300 idle NBD connections from 127.0.0.3 (an
address no export admits). For SECONDS (default 20) it samples, every second:
the slow connections still open, svs's open file descriptors, and the
latency of GET /version on a fresh connection. Prints one line per sample
and a summary; exits 1 if a slow connection outlives twice the expected
header timeout (SVS_HTTP_HEADER_READ_TIMEOUT, default 10 s) or /version ever
takes more than a second.
"""

import asyncio
import os
import sys
import time
import urllib.parse


async def slow_http(host, port, state):
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        state["refused"] += 1
        return
    state["open"] += 1
    opened = time.monotonic()
    try:
        writer.write(b"GET /version HTTP/1.1\r\nhost: svs\r\nx-slow: ")
        while True:
            await writer.drain()
            try:
                data = await asyncio.wait_for(reader.read(1024), timeout=1.0)
                if not data:
                    break
            except asyncio.TimeoutError:
                pass
            writer.write(b"a")
    except OSError:
        pass
    finally:
        state["open"] -= 1
        state["lifetimes"].append(time.monotonic() - opened)
        writer.close()


async def idle_nbd(host, port, state):
    try:
        reader, writer = await asyncio.open_connection(host, port, local_addr=("127.0.0.3", 0))
    except OSError:
        state["nbd_refused"] += 1
        return
    try:
        data = await asyncio.wait_for(reader.read(1024), timeout=5.0)
        if not data:
            state["nbd_closed_at_once"] += 1
        else:
            state["nbd_greeted"] += 1
    except (asyncio.TimeoutError, OSError):
        state["nbd_greeted"] += 1
    writer.close()


async def version_latency(host, port):
    started = time.monotonic()
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(b"GET /version HTTP/1.1\r\nhost: svs\r\nconnection: close\r\n\r\n")
    await writer.drain()
    answer = await reader.read()
    writer.close()
    if not answer.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"/version answered {answer[:80]!r}")
    return time.monotonic() - started


def fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


async def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    base, nbd, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
    count = int(sys.argv[4]) if len(sys.argv) > 4 else 3000
    seconds = int(sys.argv[5]) if len(sys.argv) > 5 else 20
    header_timeout = float(os.environ.get("SVS_HTTP_HEADER_READ_TIMEOUT", "10s").rstrip("s"))
    url = urllib.parse.urlsplit(base)
    nbd_host, nbd_port = nbd.rsplit(":", 1)
    state = {"open": 0, "refused": 0, "lifetimes": [], "nbd_refused": 0,
             "nbd_closed_at_once": 0, "nbd_greeted": 0}
    print(f"svs fds before: {fds(pid)}")
    tasks = [asyncio.create_task(slow_http(url.hostname, url.port, state)) for _ in range(count)]
    tasks += [asyncio.create_task(idle_nbd(nbd_host, int(nbd_port), state)) for _ in range(300)]
    worst = 0.0
    for second in range(seconds):
        await asyncio.sleep(1)
        latency = await version_latency(url.hostname, url.port)
        worst = max(worst, latency)
        print(f"t={second + 1:3d}s slow_open={state['open']:5d} svs_fds={fds(pid):5d} "
              f"version_ms={latency * 1000:7.1f}")
    for t in tasks:
        t.cancel()
    lifetimes = sorted(state["lifetimes"])
    longest = lifetimes[-1] if lifetimes else float("inf")
    print(f"slow HTTP connections: {count}, closed by svs: {len(lifetimes)}, "
          f"longest lived {longest:.1f}s, still open {state['open']}, connect refused {state['refused']}")
    print(f"NBD from 127.0.0.3: closed at once {state['nbd_closed_at_once']}, "
          f"greeted {state['nbd_greeted']}, connect refused {state['nbd_refused']}")
    print(f"worst GET /version latency: {worst * 1000:.1f} ms")
    ok = state["open"] == 0 and longest <= 2 * header_timeout and worst < 1.0 \
        and state["nbd_greeted"] == 0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    asyncio.run(main())
