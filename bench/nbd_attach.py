"""NBD benchmark setup: one volume attached to node-a, its NBD URI printed.

`nbd_attach.py BASE EMAIL PASSWORD VOLUME GIB`: signs in, creates the policy
`nbd-bench` (resiliency 0/0/0: one copy), creates VOLUME (GIB GiB) with it,
attaches its top snapshot read-write to node-a (address 127.0.0.1 in the demo
topology, so this machine may open the export), waits for both jobs, and
prints the attachment's `uri` (nbd://HOST:PORT/EXPORTNAME) on stdout.
Progress goes to stderr.
"""

import sys

from svs_api import Api, ApiError

NODE = "node-a"


def main():
    if len(sys.argv) != 6:
        sys.exit("usage: nbd_attach.py BASE EMAIL PASSWORD VOLUME GIB")
    _, base, email, password, volume, gib = sys.argv
    api = Api(base)
    api.sign_in(email, password)
    api.request(
        "POST",
        "/policies",
        {"name": "nbd-bench", "resiliencymedia": 0, "resiliencynode": 0, "resiliencyzone": 0},
    )
    started = api.request(
        "POST",
        "/volumes",
        {"name": volume, "type": "block", "size": int(gib), "policy": "nbd-bench"},
    )
    api.wait_job(started["JobID"], poll=0.01)
    slices = api.request("GET", f"/volumes/{volume}/slices")
    print(f"  volume {volume}: {int(gib)} GiB, slices {slices}", file=sys.stderr)
    started = api.request(
        "POST",
        f"/volumes/{volume}/snapshots/top/attachments",
        {"node": NODE, "readonly": False},
    )
    api.wait_job(started["JobID"], poll=0.01)
    attachment = api.request("GET", f"/volumes/{volume}/snapshots/top/attachments/{NODE}")
    uri = attachment.get("uri", "")
    if attachment.get("state") != "Attached" or not uri.startswith("nbd://"):
        raise ApiError(f"unexpected attachment: {attachment}")
    print(f"  attached to {NODE}: {attachment}", file=sys.stderr)
    print(uri)


if __name__ == "__main__":
    main()
