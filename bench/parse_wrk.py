"""Figure 1: reads wrk --latency output on stdin, appends `<PREFIX>_rps` and
`<PREFIX>_p99_ms` to RESULTS (argv[1]; PREFIX argv[2], default `get`). Exits non-zero if wrk's output lacks the
figures or any response was not 2xx (e.g. authentication broke), since then
the figure would measure error responses."""

import re
import sys

UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: parse_wrk.py RESULTS [PREFIX] < wrk-output")
    prefix = sys.argv[2] if len(sys.argv) == 3 else "get"
    out = sys.stdin.read()
    rps = re.search(r"^Requests/sec:\s+([\d.]+)", out, re.M)
    p99 = re.search(r"^\s+99%\s+([\d.]+)(us|ms|s|m)\s*$", out, re.M)
    total = re.search(r"^\s+(\d+) requests in", out, re.M)
    if not (rps and p99 and total):
        sys.exit(f"cannot parse wrk output:\n{out}")
    bad = re.search(r"^\s+Non-2xx or 3xx responses:\s+(\d+)", out, re.M)
    if bad:
        sys.exit(f"{bad.group(1)} of {total.group(1)} responses were not 2xx:\n{out}")
    errors = re.search(r"^\s+Socket errors:.*$", out, re.M)
    if errors:
        print(f"  note: wrk reported {errors.group(0).strip()}")
    p99_ms = float(p99.group(1)) * UNITS_MS[p99.group(2)]
    with open(sys.argv[1], "a") as f:
        f.write(f"{prefix}_rps {float(rps.group(1)):.1f}\n{prefix}_p99_ms {p99_ms:.3f}\n")


if __name__ == "__main__":
    main()
