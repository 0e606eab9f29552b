"""Figure 2: time from an in-place resize request to its job being Done.

`resize_latency.py BASE TOKEN VOLUME N RESULTS`: N times, PATCH the volume's
size +1 GiB (allowdatamovement false: in place), then poll GET /jobs/{id}
every 1 ms on the same keep-alive connection until Done. The time runs from
just before the PATCH is sent to the response that says Done. Appends
`resize_median_ms` and `resize_p90_ms` to RESULTS.
"""

import statistics
import sys
import time

from svs_api import Api


def percentile(values, p):
    """Nearest-rank percentile."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, -(-len(s) * p // 100) - 1))
    return s[int(k)]


def main():
    if len(sys.argv) != 6:
        sys.exit("usage: resize_latency.py BASE TOKEN VOLUME N RESULTS")
    _, base, token, volume, n, results = sys.argv
    n = int(n)
    api = Api(base, token)
    size = api.request("GET", f"/volumes/{volume}")["size"]
    times = []
    polls = []
    for _ in range(n):
        size += 1
        started = time.perf_counter()
        job = api.request("PATCH", f"/volumes/{volume}", {"size": size, "allowdatamovement": False})
        count = 0
        while True:
            state = api.request("GET", f"/jobs/{job['JobID']}")["state"]
            count += 1
            if state == "Done":
                break
            if state == "Error":
                sys.exit(f"resize job {job['JobID']} failed")
            if time.perf_counter() - started > 60:
                sys.exit(f"resize job {job['JobID']} not Done after 60s")
            time.sleep(0.001)
        times.append((time.perf_counter() - started) * 1000)
        polls.append(count)
    final = api.request("GET", f"/volumes/{volume}")["size"]
    if final != size:
        sys.exit(f"volume size is {final} GiB after the resizes, expected {size}")
    median = statistics.median(times)
    p90 = percentile(times, 90)
    print(
        f"  {n} in-place resizes ({size - n} -> {size} GiB): median {median:.1f} ms, "
        f"p90 {p90:.1f} ms, min {min(times):.1f} ms, max {max(times):.1f} ms, "
        f"median polls per job {statistics.median(polls):.0f}"
    )
    with open(results, "a") as f:
        f.write(f"resize_median_ms {median:.3f}\nresize_p90_ms {p90:.3f}\n")


if __name__ == "__main__":
    main()
