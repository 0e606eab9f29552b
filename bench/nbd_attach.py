"""NBD benchmark setup: one volume attached to node-a, its NBD URI printed.

`nbd_attach.py BASE EMAIL PASSWORD VOLUME GIB [COPIES]`: signs in, creates
the policy `nbd-bench-COPIES` (resiliency media COPIES - 1, node and zone 0:
COPIES copies on distinct media; COPIES 1 to 3, default 1) unless it exists,
creates VOLUME (GIB GiB) with it,
attaches its top snapshot read-write to node-a (address 127.0.0.1 in the demo
topology, so this machine may open the export), waits for both jobs, and
prints the attachment's `uri` (nbd://HOST:PORT/EXPORTNAME) on stdout.
Progress goes to stderr. Environment: NBD_BENCH_NODE, the node to attach to
instead of node-a; NBD_BENCH_COPIES_ON=nodes, every copy on its own node
(resiliency node COPIES - 1, policy `nbd-bench-COPIES-nodes`); NBD_BENCH_ZONE,
the zone asked for at creation (every column of copy 0 in that zone: how a
benchmark picks the medium of a one-copy volume).
"""

import os
import sys

from svs_api import Api, ApiError

NODE = os.environ.get("NBD_BENCH_NODE", "node-a")
ON_NODES = os.environ.get("NBD_BENCH_COPIES_ON") == "nodes"
ZONE = os.environ.get("NBD_BENCH_ZONE", "")


def main():
    if len(sys.argv) not in (6, 7):
        sys.exit("usage: nbd_attach.py BASE EMAIL PASSWORD VOLUME GIB [COPIES]")
    _, base, email, password, volume, gib = sys.argv[:6]
    copies = int(sys.argv[6]) if len(sys.argv) == 7 else 1
    if not 1 <= copies <= 3:
        sys.exit("nbd_attach.py: COPIES must be 1, 2 or 3")
    api = Api(base)
    api.sign_in(email, password)
    policy = f"nbd-bench-{copies}" + ("-nodes" if ON_NODES else "")
    existing = {p["name"] for p in api.request("GET", "/policies")}
    if policy not in existing:
        api.request(
            "POST",
            "/policies",
            {
                "name": policy,
                "resiliencymedia": copies - 1,
                "resiliencynode": copies - 1 if ON_NODES else 0,
                "resiliencyzone": 0,
            },
        )
    body = {"name": volume, "type": "block", "size": int(gib), "policy": policy}
    if ZONE:
        body["zone"] = ZONE
    started = api.request("POST", "/volumes", body)
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
