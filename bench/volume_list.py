"""GET /volumes with many volumes: the whole list against one page, and a
single volume's read with few and with many volumes (python3 stdlib only).

    volume_list.py BASE EMAIL PASSWORD COUNT

Creates COUNT 1 GiB volumes (policy 0/0/0, sparse slice files), timing the
reads at 5 volumes and again at COUNT; prints the table.
"""

import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from svs_api import Api

READS = 50


def timed(api, path, reads=READS):
    """Median and best wall time (ms) and the answer's size (bytes)."""
    times, size = [], 0
    for _ in range(reads):
        start = time.perf_counter()
        api.conn.request("GET", path, headers={"authorization": api.token})
        resp = api.conn.getresponse()
        body = resp.read()
        times.append((time.perf_counter() - start) * 1000)
        if resp.status != 200:
            sys.exit(f"GET {path}: HTTP {resp.status}: {body[:300]!r}")
        size = len(body)
    return statistics.median(times), min(times), size


def create(base, token, names):
    api = Api(base, token)
    for name in names:
        job = api.request(
            "POST", "/volumes", {"name": name, "type": "block", "size": 1, "policy": "list"}
        )
        api.wait_job(job["JobID"], poll=0.005, timeout=300)


def create_many(base, token, first, last, workers=8):
    names = [f"vol-{i:05d}" for i in range(first, last)]
    chunks = [names[i::workers] for i in range(workers)]
    with ThreadPoolExecutor(workers) as pool:
        for f in [pool.submit(create, base, token, c) for c in chunks]:
            f.result()


def main():
    if len(sys.argv) != 5:
        sys.exit("usage: volume_list.py BASE EMAIL PASSWORD COUNT")
    _, base, email, password, count = sys.argv
    count = int(count)
    api = Api(base)
    token = api.sign_in(email, password)
    api.request(
        "POST",
        "/policies",
        {"name": "list", "resiliencymedia": 0, "resiliencynode": 0, "resiliencyzone": 0},
    )
    rows = []
    create_many(base, token, 0, 5)
    rows.append(("GET /volumes/vol-00002", 5, *timed(api, "/volumes/vol-00002")))
    rows.append(("GET /volumes (whole)", 5, *timed(api, "/volumes")))
    start = time.monotonic()
    create_many(base, token, 5, count)
    print(f"  created {count - 5} more volumes in {time.monotonic() - start:.0f} s", flush=True)
    middle = f"vol-{count // 2:05d}"
    rows.append((f"GET /volumes/{middle}", count, *timed(api, f"/volumes/{middle}")))
    rows.append(("GET /volumes?page=1&count=100", count, *timed(api, "/volumes?page=1&count=100")))
    last = max(1, (count + 99) // 100)  # pages count from 1
    rows.append(
        (
            f"GET /volumes?page={last}&count=100",
            count,
            *timed(api, f"/volumes?page={last}&count=100"),
        )
    )
    rows.append(("GET /volumes (whole)", count, *timed(api, "/volumes", reads=10)))
    print(f"\n  {'request':<34} {'volumes':>8} {'median ms':>10} {'best ms':>8} {'bytes':>10}")
    for name, n, median, best, size in rows:
        print(f"  {name:<34} {n:>8} {median:>10.2f} {best:>8.2f} {size:>10}")


if __name__ == "__main__":
    main()
