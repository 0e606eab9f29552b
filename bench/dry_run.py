"""Dry runs with many volumes (python3 stdlib only).

    dry_run.py BASE EMAIL PASSWORD COUNT WORKDIR

See bench/dry_run.sh for the layout. Prints one line per dry run: the
volumes in the store, the median and best wall time in ms, and the answer.
"""

import json
import os
import statistics
import sys
import time

from svs_api import Api
from volume_list import create_many

READS = 50


def timed(api, method, path, body):
    """Median and best wall time (ms), and the last answer."""
    times, answer = [], None
    data = json.dumps(body)
    for _ in range(READS):
        start = time.perf_counter()
        api.conn.request(
            method,
            path,
            body=data,
            headers={"authorization": api.token, "content-type": "application/json"},
        )
        resp = api.conn.getresponse()
        raw = resp.read()
        times.append((time.perf_counter() - start) * 1000)
        if resp.status != 200:
            sys.exit(f"{method} {path}: HTTP {resp.status}: {raw[:300]!r}")
        answer = json.loads(raw)
    return statistics.median(times), min(times), answer


def slice_file(work, medium, volume_id, copy, column):
    return os.path.join(work, medium, volume_id, f"c{copy}-k{column}.slice")


def main():
    if len(sys.argv) != 6:
        sys.exit("usage: dry_run.py BASE EMAIL PASSWORD COUNT WORKDIR")
    _, base, email, password, count, work = sys.argv
    count = int(count)
    api = Api(base)
    token = api.sign_in(email, password)
    for name, media, node in (("list", 0, 0), ("mirror", 1, 1)):
        api.request(
            "POST",
            "/policies",
            {"name": name, "resiliencymedia": media, "resiliencynode": node, "resiliencyzone": 0},
        )

    def create(name, size, policy):
        job = api.request(
            "POST", "/volumes", {"name": name, "type": "block", "size": size, "policy": policy}
        )
        api.wait_job(job["JobID"], timeout=60)
        return job["ObjectID"]

    create("filler", 20, "list")  # takes m3
    data = create("data", 15, "mirror")  # m1 + m2
    job = api.request("DELETE", "/volumes/filler")
    api.wait_job(job["JobID"], timeout=60)
    with open(slice_file(work, "m2", data, 1, 0), "r+b") as f:
        f.write(b"\xab" * (32 << 20))
    api.request(
        "POST",
        "/media",
        {"mediaid": "big", "node": "nb", "zone": "zb", "media": os.path.join(work, "big"),
         "size": 8192},
    )
    start = time.monotonic()
    create_many(base, token, 0, count)
    print(f"  created {count} volumes in {time.monotonic() - start:.0f} s", flush=True)

    cases = [
        ("resize, in place", "PATCH", "/volumes/data?dryrun=true",
         {"size": 16, "allowdatamovement": False}),
        ("resize, with movement", "PATCH", "/volumes/data?dryrun=true",
         {"size": 18, "allowdatamovement": True}),
        ("resize, refused", "PATCH", "/volumes/data?dryrun=true",
         {"size": 150, "allowdatamovement": False}),
        ("creation", "POST", "/volumes?dryrun=true",
         {"name": "new", "type": "block", "size": 10, "policy": "mirror"}),
        # Every volume but "data" sits on "big": the drain plans each of them.
        ("drain of big", "PATCH", "/media/big?dryrun=true", {"state": "Draining"}),
        ("rebalance, every medium", "POST", "/media/rebalance?dryrun=true", {}),
    ]
    # Creating the volumes may outlast the server's keep-alive timeout:
    # the timed requests go on a fresh connection.
    api.conn.close()
    print(f"\n  {'dry run':<24} {'volumes':>8} {'median ms':>10} {'best ms':>8}  answer")
    for name, method, path, body in cases:
        median, best, answer = timed(api, method, path, body)
        said = answer.get("outcome")
        if "scope" in answer:
            said = (f"{len(answer['moves'])} move(s), {len(answer['stuck'])} stuck, "
                    f"{answer['gib']} GiB")
        elif answer.get("moves"):
            m = answer["moves"][0]
            said += f" ({m['slice']} {m['from']} -> {m['to']}, {m['bytes']} bytes)"
        print(f"  {name:<24} {count + 1:>8} {median:>10.2f} {best:>8.2f}  {said}")


if __name__ == "__main__":
    main()
