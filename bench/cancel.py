"""Cancelling a data movement of many GiB (python3 stdlib only).

    cancel.py BASE EMAIL PASSWORD WORKDIR GIB ROUNDS

See bench/cancel.sh for the layout. Prints one line per round and the
medians: the DELETE's answer, the job's end, and a blocked operation (a
snapshot) accepted again, each in ms after the DELETE was sent.
"""

import os
import statistics
import sys
import time

from svs_api import Api, ApiError

MIB = 1 << 20


def write_data(path, gib):
    """GIB GiB of non-zero data at the start of the slice file, flushed."""
    block = bytes(range(256)) * (MIB // 256)
    with open(path, "r+b") as f:
        for _ in range(gib * 1024):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())


def job_state(api, job_id):
    return api.request("GET", f"/jobs/{job_id}")


def main():
    if len(sys.argv) != 7:
        sys.exit("usage: cancel.py BASE EMAIL PASSWORD WORKDIR GIB ROUNDS")
    _, base, email, password, work, gib, rounds = sys.argv
    gib, rounds = int(gib), int(rounds)
    api = Api(base)
    api.sign_in(email, password)
    api.request(
        "POST",
        "/policies",
        {"name": "mirror", "resiliencymedia": 1, "resiliencynode": 1, "resiliencyzone": 0},
    )
    job = api.request(
        "POST", "/volumes", {"name": "data", "type": "block", "size": 12, "policy": "mirror"}
    )
    api.wait_job(job["JobID"], timeout=60)
    data = job["ObjectID"]
    moving = [s for s in api.request("GET", "/volumes/data/slices") if s["media"] == "m2"][0]
    start = time.monotonic()
    write_data(
        os.path.join(work, "m2", data, f"c{moving['copy']}-k{moving['column']}.slice"), gib
    )
    print(f"  wrote {gib} GiB of data into the slice in {time.monotonic() - start:.0f} s")
    api.request(
        "POST",
        "/media",
        {"mediaid": "m3", "node": "n3", "zone": "z3", "media": os.path.join(work, "m3"),
         "size": 64},
    )

    answers, ends, usable = [], [], []
    print(f"\n  {'round':>5} {'copied':>10} {'answer ms':>10} {'job end ms':>11} "
          f"{'usable ms':>10}  job")
    for r in range(1, rounds + 1):
        started = api.request(
            "PATCH", "/volumes/data", {"size": 20, "allowdatamovement": True}
        )
        job_id = started["JobID"]
        deadline = time.monotonic() + 300
        while True:
            job = job_state(api, job_id)
            if job["state"] in ("Done", "Error"):
                sys.exit(f"the movement ended before its cancel: {job}")
            if job["progress"] >= 30:
                break
            if time.monotonic() > deadline:
                sys.exit(f"the movement made no progress: {job}")
            time.sleep(0.02)
        copied = job["status"].split(": ", 1)[-1].split(" of ")[0]
        sent = time.perf_counter()
        api.request("DELETE", f"/jobs/{job_id}")
        answered = time.perf_counter()
        while True:
            job = job_state(api, job_id)
            if job["state"] in ("Done", "Error"):
                break
            time.sleep(0.002)
        ended = time.perf_counter()
        if job["status"] != "Cancelled":
            sys.exit(f"round {r}: the job did not end cancelled: {job}")
        while True:
            try:
                snap = api.request(
                    "POST", "/volumes/data/snapshots", {"name": f"s{r}", "consistency": "crash"}
                )
                break
            except ApiError as e:
                if "409" not in str(e):
                    raise
                time.sleep(0.002)
        accepted = time.perf_counter()
        api.wait_job(snap["JobID"], timeout=60)
        job = api.request("DELETE", f"/volumes/data/snapshots/s{r}")
        api.wait_job(job["JobID"], timeout=60)
        volume = api.request("GET", "/volumes/data")
        if volume["size"] != 12:
            sys.exit(f"round {r}: the volume changed size: {volume}")
        a, e, u = ((t - sent) * 1000 for t in (answered, ended, accepted))
        answers.append(a)
        ends.append(e)
        usable.append(u)
        print(f"  {r:>5} {copied:>10} {a:>10.1f} {e:>11.1f} {u:>10.1f}  {job_id}")
    print(f"\n  median: DELETE answered in {statistics.median(answers):.1f} ms, job ended in "
          f"{statistics.median(ends):.1f} ms, volume usable (a snapshot accepted) in "
          f"{statistics.median(usable):.1f} ms after the DELETE; worst {max(usable):.1f} ms "
          f"(target < 2000 ms)")


if __name__ == "__main__":
    main()
