"""Snapshots over the API and NBD: creation latency against volume size, and
the copy-on-write cost of 4 KiB writes after a snapshot.

`snapshot_bench.py BASE EMAIL PASSWORD SVS_PID DATA_DIR SNAPSHOT_ROUNDS ROUNDS`

Signs in, creates the policy `snap-bench` (resiliency 0/0/0: one copy) and
volumes with it, attached read-write to node-a (127.0.0.1 in the demo
topology) and written with `qemu-img bench -f raw` over their nbd:// URIs
(the client bench/nbd.sh uses). `sync` runs before every timed NBD run.

1. Creation: volumes `snap-1g` (1 GiB) and `snap-64g` (64 GiB) receive the
   same 256 MiB: 256 writes of 1 MiB, depth 16, spread evenly over each
   volume (step = size / 256), so every part of the volume holds data. Then
   SNAPSHOT_ROUNDS rounds, the volume order alternating: write a little
   (16 writes of 4 KiB where the previous round did not write) so each
   snapshot has something new, then POST /volumes/{v}/snapshots
   {name, consistency: crash} and poll GET /jobs/{id} every 1 ms on the same
   keep-alive connection until Done. The time runs from just before the
   POST is sent to the answer that says Done. Snapshots are kept: round k's
   snapshot is taken with k - 1 older ones on the volume. Figures: median,
   min, max per volume. Reference, in the same rounds: an in-place resize
   (+1 GiB) of a third volume `snap-ref` (1 GiB, not attached) -> Done,
   timed the same way: the cost of a job that does almost nothing
   (bench/run.sh's figure 2).

2. Write cost: volume `snap-cow` (1 GiB = 16384 chunks of 64 KiB) is written
   whole once (1 MiB writes). Every timed run is the same command: 8192
   writes of 4 KiB at depth 16 (as bench/nbd.sh's random writes) with the
   step 7919 * 64 KiB. qemu-img bench wraps offsets modulo the device size
   and 7919 is odd, so the writes land at the starts of 8192 different
   chunks (half the volume's), scattered over it (checked with this
   qemu-img on a scratch raw file first).
     (a) no snapshot on the volume: the command 4 times in a row
     (b) right after a snapshot: the command once; each write is the first
         to its chunk since the snapshot, so each saves its chunk
     (c) then the command 4 times again: every chunk is already saved
   IOPS = writes / the sum of qemu-img bench's own times; "with the closing
   flush" = writes / the wall time of the whole commands, which includes
   the flush each sends as it closes (and so, in (b), the saves that a
   flush makes: see docs/architecture.md "Held writes"). The volume's
   snapshots are deleted (untimed) before (a) and before (b)'s snapshot, so
   (a) runs with none and (b)'s is the only one. ROUNDS rounds; the order
   of (a) and the (snapshot, b, c) sequence alternates between rounds.
   Figures: IOPS medians, the ratio to (a), and the server CPU time per
   request as in bench/nbd.sh. The snapshot's delta files must grow by at
   least 8192 * 64 KiB during (b) and not at all during (c), else the run
   fails.

3. Clones: CLONE_ROUNDS times (env BENCH_CLONE_ROUNDS, default 5), a clone
   of `snap-64g` from its newest snapshot (64 GiB holding the 256 MiB of
   figure 1 and the rounds' 4 KiB writes): POST /volumes {contentvolume,
   contentsnapshot} -> job Done, timed as in figure 1, then the clone is
   deleted (untimed). The clone's slice files must hold at least the
   256 MiB written and less than 1 GiB on disk (holes stay holes), else
   the run fails. Target: < 5 s.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

from nbd_bench import bench, cpu_secs, sync
from svs_api import Api, ApiError

NODE = "node-a"
POLICY = "snap-bench"
GIB = 1 << 30
MIB = 1 << 20
# The data plane's copy-on-write chunk (svs_dataplane::snapshot::COW_CHUNK).
CHUNK = 64 * 1024
WRITTEN_MIB = 256
COW_GIB = 1
COW_CHUNKS = COW_GIB * GIB // CHUNK
# Odd, so 16384 steps of it visit every chunk of a 1 GiB device once.
COW_STEP = 7919 * CHUNK
# Writes per run: each a first write to its chunk in (b). Saving a chunk
# costs two fdatasyncs, so (b) runs far slower than (a) and (c).
COW_WRITES = 8192
STEADY_RUNS = 4
DEPTH = "16"


def attach(api, volume, gib):
    """Creates VOLUME (GIB GiB, one copy), attaches it to node-a read-write;
    returns (volume id, nbd URI)."""
    started = api.request(
        "POST", "/volumes", {"name": volume, "type": "block", "size": gib, "policy": POLICY}
    )
    api.wait_job(started["JobID"], poll=0.01)
    started = api.request(
        "POST", f"/volumes/{volume}/snapshots/top/attachments", {"node": NODE, "readonly": False}
    )
    api.wait_job(started["JobID"], poll=0.01)
    attachment = api.request("GET", f"/volumes/{volume}/snapshots/top/attachments/{NODE}")
    uri = attachment.get("uri", "")
    if attachment.get("state") != "Attached" or not uri.startswith("nbd://"):
        raise ApiError(f"unexpected attachment: {attachment}")
    slices = api.request("GET", f"/volumes/{volume}/slices")
    info = api.request("GET", f"/volumes/{volume}")
    print(f"  {volume}: {gib} GiB, {len(slices)} slice(s), {uri}", flush=True)
    return info["volumeid"], uri


def write(uri, args, count):
    return bench(uri, ["-w", *args], count)


def snapshot_ms(api, volume, name):
    """POST a snapshot, poll its job every 1 ms until Done; milliseconds."""
    started = time.perf_counter()
    job = api.request(
        "POST", f"/volumes/{volume}/snapshots", {"name": name, "consistency": "crash"}
    )
    api.wait_job(job["JobID"], poll=0.001, timeout=60)
    return (time.perf_counter() - started) * 1000


def resize_ms(api, volume, gib):
    """PATCH the size in place, poll its job every 1 ms until Done; ms."""
    started = time.perf_counter()
    job = api.request("PATCH", f"/volumes/{volume}", {"size": gib, "allowdatamovement": False})
    api.wait_job(job["JobID"], poll=0.001, timeout=60)
    return (time.perf_counter() - started) * 1000


def delete_snapshots(api, volume):
    for s in api.request("GET", f"/volumes/{volume}/snapshots"):
        job = api.request("DELETE", f"/volumes/{volume}/snapshots/{s['name']}")
        api.wait_job(job["JobID"], poll=0.01)


def allocated_bytes(data_dir, volume_id, suffix):
    """Bytes allocated on disk by the volume's files named *SUFFIX."""
    total = 0
    for root, _, files in os.walk(data_dir):
        if volume_id not in root.split(os.sep):
            continue
        for name in files:
            if name.endswith(suffix):
                total += os.stat(os.path.join(root, name)).st_blocks * 512
    return total


def delta_bytes(data_dir, volume_id):
    """Bytes allocated by the volume's snapshot delta files (what the data
    plane reports as a snapshot's `used`, less its chunk maps)."""
    return allocated_bytes(data_dir, volume_id, ".delta")


def check_step(tmp):
    """The write pattern must touch each chunk of a 1 GiB device once, at
    the chunk's start: checked with this qemu-img on a sparse raw file."""
    path = os.path.join(tmp, "step-check.raw")
    with open(path, "wb") as f:
        f.truncate(COW_GIB * GIB)
    write(path, ["--pattern", "0x5a", "-d", DEPTH, "-s", "4K", "-S", str(COW_STEP)], COW_CHUNKS)
    hit = 0
    with open(path, "rb") as f:
        for c in range(COW_CHUNKS):
            f.seek(c * CHUNK)
            block = f.read(CHUNK)
            if any(block[4096:]):
                sys.exit(f"qemu-img bench wrote past 4 KiB into chunk {c}: unexpected step rule")
            hit += any(block[:4096])
    os.unlink(path)
    if hit != COW_CHUNKS:
        sys.exit(f"step {COW_STEP} hit {hit} of {COW_CHUNKS} chunks with this qemu-img")
    print(f"  step check: {COW_CHUNKS} writes of 4 KiB hit all {COW_CHUNKS} chunks once")


def creation(api, rounds):
    """Figure 1; returns {volume: [ms, ...]}."""
    volumes = {"snap-1g": 1, "snap-64g": 64}
    uris = {v: attach(api, v, gib)[1] for v, gib in volumes.items()}
    for v, gib in volumes.items():
        step = gib * GIB // WRITTEN_MIB
        args = ["--pattern", "0xa5", "-d", DEPTH, "-s", "1M", "-S", str(step)]
        secs = write(uris[v], args, WRITTEN_MIB)
        print(
            f"  {v}: {WRITTEN_MIB} MiB written (1 MiB every {step // MIB} MiB) in {secs:.2f}s",
            flush=True,
        )
    sync()
    started = api.request(
        "POST", "/volumes", {"name": "snap-ref", "type": "block", "size": 1, "policy": POLICY}
    )
    api.wait_job(started["JobID"], poll=0.01)
    times = {v: [] for v in volumes}
    times["resize"] = []
    for r in range(rounds):
        order = list(volumes) if r % 2 == 0 else list(volumes)[::-1]
        line = []
        for v in order:
            # Something new for this snapshot: 16 x 4 KiB, 1 MiB apart,
            # where the previous round did not write.
            at = ((r + 1) * 64 * MIB) % GIB + 4096
            args = ["--pattern", str(r + 1), "-d", "1", "-s", "4K", "-S", "1M", "-o", str(at)]
            write(uris[v], args, 16)
            ms = snapshot_ms(api, v, f"r{r + 1}")
            times[v].append(ms)
            line.append(f"{v} {ms:.1f} ms")
        ms = resize_ms(api, "snap-ref", r + 2)
        times["resize"].append(ms)
        line.append(f"reference resize {ms:.1f} ms")
        print(f"    round {r + 1}: " + ", ".join(line), flush=True)
    for v in volumes:
        listed = api.request("GET", f"/volumes/{v}/snapshots")
        ready = [s for s in listed if s.get("state") == "Ready"]
        if len(ready) != rounds:
            sys.exit(f"{v}: {len(ready)} Ready snapshots, expected {rounds}: {listed}")
    return times


def write_cost(api, pid, data_dir, rounds):
    """Figure 2; returns {phase: [IOPS, ...]}."""
    volume = "snap-cow"
    volume_id, uri = attach(api, volume, COW_GIB)
    args = ["--pattern", "0xa5", "-d", DEPTH, "-s", "1M", "-S", "1M"]
    secs = write(uri, args, COW_GIB * GIB // MIB)
    print(f"  {volume}: written whole in {secs:.2f}s", flush=True)
    args = ["-d", DEPTH, "-s", "4K", "-S", str(COW_STEP)]
    print(
        f"  qemu-img bench -f raw -w -c {COW_WRITES} {' '.join(args)} URI: "
        f"(a) {STEADY_RUNS} times, (b) once, (c) {STEADY_RUNS} times",
        flush=True,
    )
    iops = {"a": [], "b": [], "c": []}
    walls = {"a": [], "b": [], "c": []}
    cpu = {"a": [], "b": [], "c": []}

    def timed(phase, pattern, runs):
        sync()
        cpu0 = cpu_secs(pid)
        started = time.perf_counter()
        secs = sum(write(uri, ["--pattern", pattern, *args], COW_WRITES) for _ in range(runs))
        # The whole commands: with the flush each sends as it closes.
        wall = time.perf_counter() - started
        count = runs * COW_WRITES
        cpu[phase].append((cpu_secs(pid) - cpu0) * 1e6 / count)
        iops[phase].append(count / secs)
        walls[phase].append(count / wall)
        return f"{phase} {count / secs:,.0f} IOPS ({count / wall:,.0f} with the flush)"

    def no_snapshots():
        delete_snapshots(api, volume)
        if delta_bytes(data_dir, volume_id) != 0:
            sys.exit(f"{volume}: snapshot data left after deleting its snapshots")

    def no_snapshot(r):
        no_snapshots()
        return [timed("a", "0x11", STEADY_RUNS)]

    def after_snapshot(r):
        no_snapshots()
        snapshot_ms(api, volume, f"cow{r + 1}")
        before = delta_bytes(data_dir, volume_id)
        line = [timed("b", "0x22", 1)]
        saved = delta_bytes(data_dir, volume_id)
        line.append(timed("c", "0x33", STEADY_RUNS))
        after = delta_bytes(data_dir, volume_id)
        if saved - before < COW_WRITES * CHUNK:
            sys.exit(
                f"(b) saved {saved - before} bytes, expected one chunk per write "
                f"({COW_WRITES * CHUNK})"
            )
        if after != saved:
            sys.exit(f"(c) saved {after - saved} more bytes: it hit unsaved chunks")
        line.append(f"saved {(saved - before) / MIB:.0f} MiB in b, 0 in c")
        return line

    for r in range(rounds):
        order = (no_snapshot, after_snapshot) if r % 2 == 0 else (after_snapshot, no_snapshot)
        line = order[0](r) + order[1](r)
        print(f"    round {r + 1}: " + ", ".join(line), flush=True)
    return iops, walls, cpu


def clones(api, data_dir, rounds):
    """Figure 3; returns [ms, ...]."""
    source = "snap-64g"
    snapshot = api.request("GET", f"/volumes/{source}/snapshots")[-1]["name"]
    times = []
    for r in range(rounds):
        name = f"clone-{r + 1}"
        body = {
            "name": name,
            "type": "block",
            "size": 64,
            "policy": POLICY,
            "contentvolume": source,
            "contentsnapshot": snapshot,
        }
        started = time.perf_counter()
        job = api.request("POST", "/volumes", body)
        api.wait_job(job["JobID"], poll=0.001, timeout=600)
        ms = (time.perf_counter() - started) * 1000
        times.append(ms)
        clone_id = api.request("GET", f"/volumes/{name}")["volumeid"]
        on_disk = allocated_bytes(data_dir, clone_id, ".slice")
        if not WRITTEN_MIB * MIB <= on_disk < GIB:
            sys.exit(f"{name}: {on_disk} bytes on disk, expected the data only")
        print(
            f"    round {r + 1}: clone of {source}/{snapshot} -> Done in {ms:.0f} ms, "
            f"{on_disk / MIB:.0f} MiB on disk",
            flush=True,
        )
        job = api.request("DELETE", f"/volumes/{name}")
        api.wait_job(job["JobID"], poll=0.01)
    return times


def table(head, rows):
    widths = [max(len(row[i]) for row in rows + [head]) for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    for row in [head, tuple("-" * w for w in widths)] + rows:
        print(fmt.format(*row).rstrip())


def main():
    if len(sys.argv) != 8:
        sys.exit(
            "usage: snapshot_bench.py BASE EMAIL PASSWORD SVS_PID DATA_DIR SNAPSHOT_ROUNDS ROUNDS"
        )
    _, base, email, password, pid, data_dir, snapshot_rounds, rounds = sys.argv
    pid, snapshot_rounds, rounds = int(pid), int(snapshot_rounds), int(rounds)
    api = Api(base)
    api.sign_in(email, password)
    api.request(
        "POST",
        "/policies",
        {"name": POLICY, "resiliencymedia": 0, "resiliencynode": 0, "resiliencyzone": 0},
    )

    print(
        f"\n== 1. snapshot creation -> job Done, {snapshot_rounds} rounds (poll every 1 ms)",
        flush=True,
    )
    times = creation(api, snapshot_rounds)

    print(f"\n== 2. 4 KiB writes at depth {DEPTH} after a snapshot, {rounds} rounds", flush=True)
    with tempfile.TemporaryDirectory(dir=data_dir) as tmp:
        check_step(tmp)
    iops, walls, cpu = write_cost(api, pid, data_dir, rounds)

    clone_rounds = int(os.environ.get("BENCH_CLONE_ROUNDS", "5"))
    print(f"\n== 3. a clone of a 64 GiB volume -> job Done, {clone_rounds} rounds", flush=True)
    clone_ms = clones(api, data_dir, clone_rounds)

    print(f"\n== summary: medians of {snapshot_rounds} and {rounds} rounds")
    labels = {
        "snap-1g": f"snapshot, 1 GiB volume, {WRITTEN_MIB} MiB written",
        "snap-64g": f"snapshot, 64 GiB volume, {WRITTEN_MIB} MiB written",
        "resize": "reference: in-place resize",
    }
    table(
        ("request -> job Done", "median", "min", "max"),
        [
            (
                labels[k],
                f"{statistics.median(t):.1f} ms",
                f"{min(t):.1f} ms",
                f"{max(t):.1f} ms",
            )
            for k, t in times.items()
        ],
    )
    ratio = statistics.median(times["snap-64g"]) / statistics.median(times["snap-1g"])
    print(f"64 GiB / 1 GiB: {ratio:.2f}x\n")
    labels = {
        "a": "(a) no snapshot",
        "b": "(b) after a snapshot, first write per chunk",
        "c": "(c) after a snapshot, chunk already saved",
    }
    base_iops = statistics.median(iops["a"])
    base_wall = statistics.median(walls["a"])
    table(
        (
            "4 KiB writes, depth 16",
            "IOPS",
            "vs (a)",
            "with the closing flush",
            "vs (a)",
            "server CPU/request",
        ),
        [
            (
                labels[p],
                f"{statistics.median(iops[p]):,.0f}",
                f"{statistics.median(iops[p]) / base_iops:.2f}x",
                f"{statistics.median(walls[p]):,.0f}",
                f"{statistics.median(walls[p]) / base_wall:.2f}x",
                f"{statistics.median(cpu[p]):.0f} us",
            )
            for p in ("a", "b", "c")
        ],
    )
    print(
        f"\nclone of a 64 GiB volume ({WRITTEN_MIB} MiB of data) -> Done: "
        f"median {statistics.median(clone_ms):,.0f} ms, min {min(clone_ms):,.0f} ms, "
        f"max {max(clone_ms):,.0f} ms"
    )


if __name__ == "__main__":
    try:
        main()
    except (ApiError, subprocess.CalledProcessError) as e:
        sys.exit(f"snapshot benchmark failed: {e}")
