"""Jobs run per second: creations sent at once through one address.

`job_rate.py BASE TOKEN N PREFIX RESULTS`: 16 client threads send N volume
creations (1 GiB, policy `bench`, names PREFIX-0 ...) through BASE as fast
as they are answered, then poll the job list until every one of those jobs
is Done. Appends `<PREFIX>_jobs_per_s` (jobs Done per second, from the first
request to the last Done) and `<PREFIX>_accept_per_s` (creations accepted per
second) to RESULTS, then deletes the volumes again (untimed). Any refusal or
failed job fails the run.
"""

import sys
import threading
import time

from svs_api import Api

THREADS = 16


def main():
    if len(sys.argv) != 6:
        sys.exit("usage: job_rate.py BASE TOKEN N PREFIX RESULTS")
    _, base, token, n, prefix, results = sys.argv
    n = int(n)
    jobs = []
    errors = []
    lock = threading.Lock()
    names = iter(range(n))

    def client():
        api = Api(base, token)
        while True:
            with lock:
                i = next(names, None)
            if i is None:
                return
            try:
                started = api.request(
                    "POST",
                    "/volumes",
                    {"name": f"{prefix}-{i}", "type": "block", "size": 1, "policy": "bench"},
                )
                with lock:
                    jobs.append(started["JobID"])
            except Exception as e:  # noqa: BLE001 - reported below
                with lock:
                    errors.append(str(e))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    accepted = time.perf_counter() - t0
    if errors:
        sys.exit(f"{len(errors)} creations refused, first: {errors[0]}")
    api = Api(base, token)
    wanted = set(str(j) for j in jobs)
    while True:
        listed = api.request("GET", f"/jobs?count=1000&type=volume_create")
        states = {str(j["id"]): j["state"] for j in listed if str(j["id"]) in wanted}
        failed = [j for j, s in states.items() if s == "Error"]
        if failed:
            sys.exit(f"jobs failed: {failed[:5]}")
        if len(states) == len(wanted) and all(s == "Done" for s in states.values()):
            break
        if time.perf_counter() - t0 > 300:
            sys.exit("jobs still unfinished after 300 s")
        time.sleep(0.01)
    done = time.perf_counter() - t0
    print(f"  {n} creations accepted in {accepted:.2f} s, all Done in {done:.2f} s")
    with open(results, "a") as f:
        f.write(f"{prefix}_jobs_per_s {n / done:.1f}\n{prefix}_accept_per_s {n / accepted:.1f}\n")
    # Untimed: the volumes go again, so that the next figures run beside as
    # many volumes as before (a job's work grows with the volumes of its
    # medium).
    for i in range(n):
        deleted = api.request("DELETE", f"/volumes/{prefix}-{i}")
        api.wait_job(deleted["JobID"], poll=0.005)
    print(f"  the {n} volumes deleted again")


if __name__ == "__main__":
    main()
