"""Rebuild of a lost copy onto another storage node against `cp` + fsync.

The steps of bench/rebuild.sh that talk to the API or time something, one
subcommand each (python3 stdlib only; progress on stderr, results on stdout):

  rebuild_bench.py wait-online BASE EMAIL PASSWORD NODE
      waits until NODE is Online and every medium of it Online.
  rebuild_bench.py copies BASE EMAIL PASSWORD VOLUME
      prints the nodes holding VOLUME's copies in the order of their numbers
      (sn-1 sn-3: one line); fails unless every copy is Healthy.
  rebuild_bench.py wait-lost BASE EMAIL PASSWORD VOLUME NODE
      waits until NODE is Offline and VOLUME's copy on it Lost (what the
      control plane sees of a SIGKILLed node after storage_node_timeout).
  rebuild_bench.py rebuild BASE EMAIL PASSWORD VOLUME TARGET PIDS...
      POST /volumes/VOLUME/recover, then polls its job every 5 ms until Done;
      checks that every copy is Healthy again and the rebuilt one on TARGET.
      Prints `rebuild SECS WALL CPU...`: SECS from the job's starttime to its
      endtime (the job's own timestamps, milliseconds), WALL from the POST to
      the poll that saw Done, and the CPU seconds (user + system) each of the
      PIDS (svs serve, the source node, the target node) spent meanwhile.
  rebuild_bench.py cp SRC DST
      `cp SRC DST`, then `sync DST` (an fsync of DST: a rebuilt copy is
      durable before the job is Done); prints `cp SECS CPU`: the wall time of
      both and their CPU seconds.
  rebuild_bench.py net SRC DST ADDRESS
      the same bytes over TCP, as a rebuild carries them between two nodes:
      a receiver listening on ADDRESS (an IP of this machine: the target
      node's) writes DST in 1 MiB pieces and fsyncs it, a sender reads SRC
      and sends it; no verification. Prints `net SECS CPU` (this process's
      CPU seconds, both ends).
  rebuild_bench.py summary BYTES RESULTS
      RESULTS holds the lines `rebuild ...`, `cp ...` and (when measured)
      `net ...` of the rounds; prints each round and the medians in MB/s
      (10^6 bytes per second of BYTES, the data written to the volume) and
      the ratios rebuild / cp (issue 21's target: >= 0.8x) and rebuild /
      net.
"""

import datetime
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

from svs_api import Api, ApiError

CLK_TCK = os.sysconf("SC_CLK_TCK")
TARGET_RATIO = 0.8
# Node liveness is a heartbeat timeout and a reconciler pass away: generous,
# as the machine may be busy.
WAIT_SECS = 120.0
REBUILD_TIMEOUT_SECS = 3600.0


def cpu_secs(pid):
    """User + system CPU seconds of a process (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def children_cpu_secs():
    usage = os.times()
    return usage.children_user + usage.children_system


def api_for(base, email, password):
    api = Api(base)
    api.sign_in(email, password)
    return api


def wait_for(what, check):
    deadline = time.monotonic() + WAIT_SECS
    while True:
        state = check()
        if state is True:
            return
        if time.monotonic() > deadline:
            raise ApiError(f"gave up waiting for {what} after {WAIT_SECS:.0f}s: {state}")
        time.sleep(0.1)


def wait_online(api, node):
    def check():
        n = api.request("GET", f"/nodes/{node}")
        media = [m for m in api.request("GET", "/media") if m.get("node") == node]
        if n.get("state") == "Online" and media and all(m.get("state") == "Online" for m in media):
            return True
        return {"node": n.get("state"), "media": [(m["media"], m.get("state")) for m in media]}

    wait_for(f"node {node} and its media Online", check)


def copies(api, volume):
    slices = sorted(api.request("GET", f"/volumes/{volume}/slices"), key=lambda s: (s["copy"], s["column"]))
    return slices


def print_copies(api, volume):
    slices = copies(api, volume)
    if not all(s["health"] == "Healthy" for s in slices):
        raise ApiError(f"volume {volume} has a copy that is not Healthy: {slices}")
    nodes = sorted({s["node"] for s in slices}, key=lambda n: (len(n), n))
    print(" ".join(nodes))


def wait_lost(api, volume, node):
    def check():
        n = api.request("GET", f"/nodes/{node}")
        on_node = [s for s in copies(api, volume) if s["node"] == node]
        if n.get("state") == "Offline" and on_node and all(s["health"] == "Lost" for s in on_node):
            return True
        return {"node": n.get("state"), "copies": [(s["name"], s["health"]) for s in on_node]}

    wait_for(f"node {node} Offline and its copy of {volume} Lost", check)


def parse_time(text):
    """The API's RFC 3339 timestamps (`...T06:43:03.123Z`) as seconds."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def rebuild(api, volume, target, pids):
    cpu0 = [cpu_secs(p) for p in pids]
    started = time.perf_counter()
    job_id = api.request("POST", f"/volumes/{volume}/recover")["JobID"]
    job = api.wait_job(job_id, poll=0.005, timeout=REBUILD_TIMEOUT_SECS)
    wall = time.perf_counter() - started
    cpu = [cpu_secs(p) - c for p, c in zip(pids, cpu0)]
    if not job.get("starttime") or not job.get("endtime"):
        raise ApiError(f"job {job_id} is Done without its times: {job}")
    secs = parse_time(job["endtime"]) - parse_time(job["starttime"])
    slices = copies(api, volume)
    if not all(s["health"] == "Healthy" for s in slices) or target not in {s["node"] for s in slices}:
        raise ApiError(f"after the rebuild, volume {volume} is not Healthy with a copy on {target}: {slices}")
    for line in job.get("details") or []:
        print(f"    job {job_id}: {line}", file=sys.stderr)
    print(f"rebuild {secs:.3f} {wall:.3f} " + " ".join(f"{c:.2f}" for c in cpu))


def cp(src, dst):
    cpu0 = children_cpu_secs()
    started = time.perf_counter()
    subprocess.run(["cp", src, dst], check=True)
    subprocess.run(["sync", dst], check=True)
    secs = time.perf_counter() - started
    print(f"cp {secs:.3f} {children_cpu_secs() - cpu0:.2f}")


PIECE = 1 << 20


def net(src, dst, address):
    listener = socket.create_server((address, 0))
    port = listener.getsockname()[1]
    failed = []

    def receive():
        try:
            conn, _ = listener.accept()
            with conn, open(dst, "wb") as out:
                while True:
                    piece = conn.recv(PIECE)
                    if not piece:
                        break
                    out.write(piece)
                out.flush()
                os.fsync(out.fileno())
        except OSError as e:
            failed.append(e)

    cpu0 = time.process_time()
    started = time.perf_counter()
    receiver = threading.Thread(target=receive)
    receiver.start()
    with socket.create_connection((address, port)) as conn, open(src, "rb") as f:
        while piece := f.read(PIECE):
            conn.sendall(piece)
    receiver.join()
    secs = time.perf_counter() - started
    listener.close()
    if failed:
        sys.exit(f"rebuild_bench.py net: {failed[0]}")
    print(f"net {secs:.3f} {time.process_time() - cpu0:.2f}")


def mbs(data_bytes, secs):
    return data_bytes / secs / 1e6


def summary(data_bytes, results):
    rebuilds, cps, nets = [], [], []
    with open(results) as f:
        for line in f:
            fields = line.split()
            if fields and fields[0] == "rebuild":
                rebuilds.append(fields[1:])
            elif fields and fields[0] == "cp":
                cps.append(fields[1:])
            elif fields and fields[0] == "net":
                nets.append(fields[1:])
    if not rebuilds or len(rebuilds) != len(cps):
        sys.exit(f"rebuild_bench.py: {len(rebuilds)} rebuilds and {len(cps)} cp runs in {results}")
    print(f"\n== rebuild of a lost copy onto another node vs cp + fsync, {data_bytes / 1e6:,.0f} MB")
    for i, (r, c) in enumerate(zip(rebuilds, cps), 1):
        secs, wall = float(r[0]), float(r[1])
        print(
            f"  round {i}: rebuild {mbs(data_bytes, secs):,.0f} MB/s ({secs:.2f}s job, {wall:.2f}s "
            f"request to Done seen; CPU s: svs serve {r[2]}, source node {r[3]}, target node {r[4]}); "
            f"cp + fsync {mbs(data_bytes, float(c[0])):,.0f} MB/s ({float(c[0]):.2f}s, CPU {c[1]} s)"
            + (
                f"; over TCP + fsync {mbs(data_bytes, float(nets[i - 1][0])):,.0f} MB/s "
                f"({float(nets[i - 1][0]):.2f}s, CPU {nets[i - 1][1]} s)"
                if len(nets) >= i
                else ""
            )
        )
    rebuild_mbs = statistics.median(mbs(data_bytes, float(r[0])) for r in rebuilds)
    cp_mbs = statistics.median(mbs(data_bytes, float(c[0])) for c in cps)
    ratio = rebuild_mbs / cp_mbs
    verdict = "PASS" if ratio >= TARGET_RATIO else "FAIL"
    print(f"\n  medians of {len(rebuilds)} rounds:")
    print("  | figure | MB/s |")
    print("  |---|---|")
    print(f"  | rebuild of a lost copy onto another storage node | {rebuild_mbs:,.0f} |")
    print(f"  | cp + fsync of the same data, same filesystem | {cp_mbs:,.0f} |")
    print(f"  | rebuild / cp + fsync (target >= {TARGET_RATIO}x) | {ratio:.2f}x ({verdict}) |")
    if nets:
        net_mbs = statistics.median(mbs(data_bytes, float(n[0])) for n in nets)
        print(f"  | the same bytes over TCP to the target's address + fsync, unverified | {net_mbs:,.0f} |")
        print(f"  | rebuild / over TCP + fsync | {rebuild_mbs / net_mbs:.2f}x |")


def main():
    args = sys.argv[1:]
    usage = "usage: see the docstring of bench/rebuild_bench.py"
    if not args:
        sys.exit(usage)
    cmd, rest = args[0], args[1:]
    if cmd == "cp" and len(rest) == 2:
        return cp(*rest)
    if cmd == "net" and len(rest) == 3:
        return net(*rest)
    if cmd == "summary" and len(rest) == 2:
        return summary(int(rest[0]), rest[1])
    if len(rest) < 4:
        sys.exit(usage)
    api = api_for(*rest[:3])
    rest = rest[3:]
    if cmd == "wait-online" and len(rest) == 1:
        return wait_online(api, rest[0])
    if cmd == "copies" and len(rest) == 1:
        return print_copies(api, rest[0])
    if cmd == "wait-lost" and len(rest) == 2:
        return wait_lost(api, *rest)
    if cmd == "rebuild" and len(rest) >= 2:
        return rebuild(api, rest[0], rest[1], [int(p) for p in rest[2:]])
    sys.exit(usage)


if __name__ == "__main__":
    main()
