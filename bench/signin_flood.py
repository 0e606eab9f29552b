"""A sign-in flood against a running svs (python3 stdlib only).

    signin_flood.py HTTP_BASE [CONCURRENCY] [SECONDS] [EMAIL_MODE]

CONCURRENCY (default 200) clients each send wrong-password POST /signin
requests back to back for SECONDS (default 10), every one on a fresh
connection. EMAIL_MODE "one" (default) aims every guess at one account,
"many" gives each guess an e-mail of its own. Meanwhile GET /version is
timed every 50 ms on a fresh connection. Prints the sign-in answers by
status, their rate, and /version latency p50 / p99 / max, then one
machine-readable line starting with "RESULT".
"""

import asyncio
import itertools
import json
import sys
import time
import urllib.parse

COUNTER = itertools.count()


async def request(host, port, raw):
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(raw)
        await writer.drain()
        answer = await reader.read()
    finally:
        writer.close()
    return answer


def signin_request(email):
    body = json.dumps({"email": email, "password": "not-the-password"}).encode()
    return (
        b"POST /signin HTTP/1.1\r\nhost: svs\r\ncontent-type: application/json\r\n"
        + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
        + body
    )


async def flood(host, port, until, mode, statuses):
    while time.monotonic() < until:
        email = "admin@example.com" if mode == "one" else f"guess{next(COUNTER)}@example.com"
        try:
            answer = await request(host, port, signin_request(email))
            status = answer[9:12].decode(errors="replace") or "closed"
        except OSError as e:
            status = type(e).__name__
        statuses[status] = statuses.get(status, 0) + 1


async def sample_version(host, port, until, latencies):
    raw = b"GET /version HTTP/1.1\r\nhost: svs\r\nconnection: close\r\n\r\n"
    while time.monotonic() < until:
        started = time.monotonic()
        answer = await request(host, port, raw)
        if not answer.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"/version answered {answer[:80]!r}")
        latencies.append(time.monotonic() - started)
        await asyncio.sleep(0.05)


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def main():
    base = urllib.parse.urlparse(sys.argv[1])
    concurrency = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 10
    mode = sys.argv[4] if len(sys.argv) > 4 else "one"
    host, port = base.hostname, base.port
    statuses, latencies = {}, []
    until = time.monotonic() + seconds
    await asyncio.gather(
        sample_version(host, port, until, latencies),
        *(flood(host, port, until, mode, statuses) for _ in range(concurrency)),
    )
    total = sum(statuses.values())
    p50, p99, worst = (1000 * percentile(latencies, p) for p in (50, 99, 100))
    print(f"sign-ins: {total} in {seconds:.0f} s ({total / seconds:.0f}/s), by status: "
          + ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items())))
    print(f"/version: {len(latencies)} samples, p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {worst:.1f} ms")
    print(f"RESULT signins_per_s={total / seconds:.0f} p50_ms={p50:.1f} p99_ms={p99:.1f} "
          f"max_ms={worst:.1f} statuses={json.dumps(statuses, sort_keys=True)}")


if __name__ == "__main__":
    asyncio.run(main())
