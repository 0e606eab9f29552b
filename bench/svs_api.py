"""Tiny svs API client for the benchmark (python3 stdlib only).

One keep-alive http.client connection; JSON in and out; fails loudly.
"""

import http.client
import json
import sys
import time
import urllib.parse


class ApiError(Exception):
    pass


class Api:
    def __init__(self, base, token=None):
        url = urllib.parse.urlsplit(base)
        self.host, self.port = url.hostname, url.port
        self.token = token
        self.conn = self._connect()

    def _connect(self):
        return http.client.HTTPConnection(self.host, self.port, timeout=30)

    def request(self, method, path, body=None):
        headers = {}
        data = None
        if self.token:
            headers["authorization"] = self.token
        if body is not None:
            data = json.dumps(body).encode()
            headers["content-type"] = "application/json"
        try:
            self.conn.request(method, path, body=data, headers=headers)
            resp = self.conn.getresponse()
        except (http.client.HTTPException, ConnectionError):
            # The server may close an idle keep-alive connection: retry once.
            self.conn.close()
            self.conn = self._connect()
            self.conn.request(method, path, body=data, headers=headers)
            resp = self.conn.getresponse()
        text = resp.read()
        value = json.loads(text) if text else None
        if resp.status not in (200, 201):
            raise ApiError(f"{method} {path}: HTTP {resp.status}: {text[:500]!r}")
        return value

    def sign_in(self, email, password):
        tokens = self.request("POST", "/signin", {"email": email, "password": password})
        self.token = tokens["IdToken"]
        return self.token

    def wait_job(self, job_id, poll=0.001, timeout=120.0):
        """Polls GET /jobs/{id} until Done; returns the job. Error raises."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.request("GET", f"/jobs/{job_id}")
            if job["state"] == "Done":
                return job
            if job["state"] == "Error":
                raise ApiError(f"job {job_id} failed: {job}")
            if time.monotonic() > deadline:
                raise ApiError(f"job {job_id} did not finish in {timeout}s: {job}")
            if poll:
                time.sleep(poll)


def main():
    """`svs_api.py setup BASE EMAIL PASSWORD`: signs in, creates the policy
    and the benchmark volumes, prints the IdToken."""
    if len(sys.argv) != 5 or sys.argv[1] != "setup":
        sys.exit("usage: svs_api.py setup BASE EMAIL PASSWORD")
    _, _, base, email, password = sys.argv
    api = Api(base)
    token = api.sign_in(email, password)
    api.request(
        "POST",
        "/policies",
        {"name": "bench", "resiliencymedia": 0, "resiliencynode": 0, "resiliencyzone": 0},
    )
    for name, size in (("bench-get", 1), ("bench-resize", 10)):
        started = api.request(
            "POST", "/volumes", {"name": name, "type": "block", "size": size, "policy": "bench"}
        )
        api.wait_job(started["JobID"], poll=0.01)
    # The read wrk will hammer must answer 200.
    api.request("GET", "/volumes/bench-get")
    print(token)


if __name__ == "__main__":
    main()
