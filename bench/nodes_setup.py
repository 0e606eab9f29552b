"""Storage-node benchmark setup: nodes and their credentials.

`nodes_setup.py BASE EMAIL PASSWORD DIR N`: signs in, creates the node
`this-host` (address 127.0.0.1, zone z0: this machine opens the NBD exports)
unless it exists (a configuration file's `[[nodes]]` or `[[media]]` made it), and the
storage nodes sn-1 .. sn-N (addresses 127.0.0.2 ..., zones z1 ...), issues
each storage node's credential with role `storage` into DIR/sn-K.credential
(mode 0600). Progress goes to stderr.
"""

import os
import sys

from svs_api import Api


def main():
    if len(sys.argv) != 6:
        sys.exit("usage: nodes_setup.py BASE EMAIL PASSWORD DIR N")
    _, base, email, password, directory, count = sys.argv
    api = Api(base)
    api.sign_in(email, password)
    existing = {n["name"] for n in api.request("GET", "/nodes")}
    if "this-host" not in existing:
        api.request("POST", "/nodes", {"name": "this-host", "address": "127.0.0.1", "zone": "z0"})
    for k in range(1, int(count) + 1):
        name = f"sn-{k}"
        api.request("POST", "/nodes", {"name": name, "address": f"127.0.0.{k + 1}", "zone": f"z{k}"})
        issued = api.request("POST", f"/nodes/{name}/credentials", {"role": "storage"})
        path = os.path.join(directory, f"{name}.credential")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(issued["credential"] + "\n")
        print(f"  node {name} (127.0.0.{k + 1}): storage credential in {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
