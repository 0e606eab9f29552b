"""Signs in to the service under test, creates the objects the fuzzing run
addresses by name (see own.toml / volumez.toml) and prints the IdToken, then
the RefreshToken, one per line."""

import json
import os
import sys
import time
import urllib.error
import urllib.request

BASE = os.environ["FUZZ_BASE"]


def call(method, path, body=None, token=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(BASE + path, data=data, method=method)
    request.add_header("content-type", "application/json")
    if token:
        request.add_header("authorization", token)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)
    except urllib.error.HTTPError as e:
        sys.exit(f"seed: {method} {path}: {e.code} {e.read().decode()}")


def wait_job(job_id, token):
    for _ in range(600):
        job = call("GET", f"/jobs/{job_id}", token=token)
        if job["state"] in ("Done", "Error"):
            if job["state"] == "Error":
                sys.exit(f"seed: job {job_id} failed: {job}")
            return
        time.sleep(0.05)
    sys.exit(f"seed: job {job_id} did not end")


def main():
    tokens = call(
        "POST",
        "/signin",
        {"email": os.environ["FUZZ_EMAIL"], "password": os.environ["FUZZ_PASSWORD"]},
    )
    token = tokens["IdToken"]
    for name in ("fuzz", "fuzz-spare"):
        call(
            "POST",
            "/policies",
            {
                "name": name,
                "capacityoptimization": "performance",
                "resiliencymedia": 0,
                "resiliencynode": 0,
                "resiliencyzone": 0,
            },
            token,
        )
    for name in ("fuzz", "fuzz-doomed"):
        started = call(
            "POST", "/volumes", {"name": name, "type": "block", "size": 1, "policy": "fuzz"}, token
        )
        wait_job(started["JobID"], token)
    started = call(
        "POST", "/volumes/fuzz/snapshots/top/attachments", {"node": "node-a"}, token
    )
    wait_job(started["JobID"], token)
    # Users the user routes address (own.toml): one to change, one to delete.
    for email in ("fuzz-user@example.com", "fuzz-doomed@example.com"):
        call("POST", "/users", {"email": email, "password": "fuzz-password"}, token)
    print(token)
    print(tokens["RefreshToken"])


main()
