"""NBD data path: svs against nbdkit and qemu-nbd, same clients, same run.

`nbd_bench.py SIZE ROUNDS NAME PID URI [NAME PID URI ...]`

Each server is a NAME (svs, svs-2-copies, nbdkit, qemu-nbd), the PID of its
process (its CPU time is reported per run) and the nbd:// URI of an export of
SIZE bytes. The names `svs`, `nbdkit` and `qemu-nbd` must be among them: the
target compares svs (one copy) with nbdkit; the other ratios are information.

1. Pre-write: the whole of every device is written once with a non-zero
   pattern (1 MiB writes, depth 16), then `sync`: every read below hits
   allocated, written data, never a hole.
2. Figures, ROUNDS rounds each; in a round every server runs once, the order
   rotating by one server each round (so each server runs first, second, ...
   equally often):
     seq-read    1 MiB reads,  depth 1,  2048 requests (2 GiB) from offset 0
     seq-write   1 MiB writes, depth 1,  1024 requests (1 GiB) from offset 0
     rand-read   4 KiB reads,  depth 16, 100000 requests
     rand-write  4 KiB writes, depth 16, 50000 requests
   with `qemu-img bench -f raw` (the qemu NBD client, one connection), and
   two multi-connection figures:
     copy-4conn  `nbdcopy --connections=4 --threads=4 --no-extents -S 0
                 URI null:`: the whole device read over 4 connections
                 (256 KiB requests, up to 64 in flight per connection);
                 MB/s of SIZE over the wall time of the process
     rand-read-4conn  4 `qemu-img bench` rand-read clients at once, each on
                 its own connection (4 x 50000 requests, offsets started at
                 different places); IOPS = all requests / the slowest
                 client's time
   `qemu-img bench` only steps offsets (offset += step, wrapped modulo the
   device size); the random figures use the step 7919 * 4096 bytes (7919 is
   prime): every offset is 4 KiB aligned and, as 7919 is coprime with the
   number of 4 KiB blocks (a power of two) and with that number minus one
   when it is prime or has no factor 7919 (the wrap rule of newer qemu), the
   offsets are distinct and scattered over the whole device. `sync` runs
   before every timed run, so no dirty data of an earlier run is written
   back during it. The time of a `qemu-img bench` run is its own ("Run
   completed in X seconds": first request sent to last reply, connection
   setup excluded). MB/s are 10^6 bytes per second. Medians of the rounds
   are the figures; the best round of each is printed too.
3. Check: `qemu-img compare` of every device with qemu-nbd's. All received
   the same writes (same patterns, counts and offsets), so they must be
   identical; a difference fails the run.
4. Summary table: one row per figure, the median of every server, the ratios
   svs / nbdkit, svs / qemu-nbd and svs-2-copies / nbdkit, and the verdict
   of the target (svs >= 1.0x nbdkit) on the figures of issue 14's table:
   sequential read, random read and random write; the others are shown for
   information. When there are servers besides svs, nbdkit and qemu-nbd
   (more svs volumes), a second table gives each against svs (issue 21:
   a mirrored volume's random write >= 0.8x a single copy's). A last table
   gives the median server CPU per request of every server (user + system
   time of its PID over the run, divided by the requests; for a volume on
   storage nodes, the front's CPU: the nodes' is not counted).

Environment: NBD_BENCH_FILES (see `residency`); NBD_BENCH_SCALE (default 1):
every request count and the pre-write are multiplied by it (at least 1
request), for a quick check of a script on a slow build or a busy machine;
figures are only comparable at the default.
"""

import os
import re
import statistics
import subprocess
import sys
import time

TARGET_RATIO = 1.0
TARGET_REF = "nbdkit"
# The figures of issue 14's table, which carry the target; the others are
# information.
TARGET_FIGURES = ("seq-read", "rand-read", "rand-write")
MIB = 1 << 20
RANDOM_STEP = 7919 * 4096
CLK_TCK = os.sysconf("SC_CLK_TCK")
CLIENTS = 4
SCALE = float(os.environ.get("NBD_BENCH_SCALE", "1"))


def scaled(count):
    """A request count times NBD_BENCH_SCALE, at least 1."""
    return max(1, int(count * SCALE))


# name, qemu-img bench arguments, bytes per request, count, unit
FIGURES = (
    ("seq-read", ["-d", "1", "-s", "1M", "-S", "1M"], MIB, scaled(2048), "MB/s"),
    (
        "seq-write",
        ["-w", "--pattern", "0x5a", "-d", "1", "-s", "1M", "-S", "1M"],
        MIB,
        scaled(1024),
        "MB/s",
    ),
    ("rand-read", ["-d", "16", "-s", "4K", "-S", str(RANDOM_STEP)], 4096, scaled(100000), "IOPS"),
    (
        "rand-write",
        ["-w", "--pattern", "0x3c", "-d", "16", "-s", "4K", "-S", str(RANDOM_STEP)],
        4096,
        scaled(50000),
        "IOPS",
    ),
)
# Multi-connection figures: name, unit (run by `multi_conn`).
MULTI = (("copy-4conn", "MB/s"), ("rand-read-4conn", "IOPS"))
RAND_READ_4CONN_COUNT = scaled(50000)
LABELS = {
    "seq-read": "sequential read, 1 MiB, depth 1",
    "seq-write": "sequential write, 1 MiB, depth 1",
    "rand-read": "random read, 4 KiB, depth 16",
    "rand-write": "random write, 4 KiB, depth 16",
    "copy-4conn": "nbdcopy read, 4 connections",
    "rand-read-4conn": "random read, 4 KiB, 4 x depth 16",
}


def cpu_secs(pid):
    """User + system CPU seconds of a process (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def bench_cmd(uri, args, count):
    return ["qemu-img", "bench", "-f", "raw", "-c", str(count), *args, uri]


def bench_secs(out):
    m = re.search(r"Run completed in ([0-9.]+) seconds", out)
    if not m:
        sys.exit(f"unexpected qemu-img bench output: {out!r}")
    return float(m.group(1))


def bench(uri, args, count):
    """Runs qemu-img bench; returns its measured seconds."""
    out = subprocess.run(
        bench_cmd(uri, args, count), check=True, stdout=subprocess.PIPE, text=True
    ).stdout
    return bench_secs(out)


def sync():
    subprocess.run(["sync"], check=True)


def residency(when):
    """Prints how much of each file in NBD_BENCH_FILES (space-separated
    paths: the servers' backing files) is in the page cache: a figure whose
    file was partly evicted (memory taken by other work on the machine)
    measures the disk, not the server."""
    files = os.environ.get("NBD_BENCH_FILES", "").split()
    if not files:
        return
    out = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--output", "RES,SIZE,FILE", *files],
        stdout=subprocess.PIPE,
        text=True,
    ).stdout
    parts = []
    for line in out.splitlines():
        res, size, path = line.split(None, 2)
        parts.append(f"{os.path.basename(os.path.dirname(path))}/{os.path.basename(path)} "
                     f"{int(res) * 100 // max(int(size), 1)}%")
    print(f"    page cache {when}: " + ", ".join(parts), flush=True)


def copy_4conn(uri, size):
    """nbdcopy of the whole device to null: over 4 connections: MB/s."""
    cmd = [
        "nbdcopy",
        f"--connections={CLIENTS}",
        f"--threads={CLIENTS}",
        "--no-extents",
        "-S",
        "0",
        uri,
        "null:",
    ]
    started = time.perf_counter()
    subprocess.run(cmd, check=True)
    return size / (time.perf_counter() - started) / 1e6


def rand_read_4conn(uri, size):
    """CLIENTS qemu-img bench random readers at once: total IOPS."""
    blocks = size // 4096
    procs = []
    for i in range(CLIENTS):
        offset = (i * blocks // CLIENTS) * 4096
        args = ["-d", "16", "-s", "4K", "-S", str(RANDOM_STEP), "-o", str(offset)]
        procs.append(
            subprocess.Popen(
                bench_cmd(uri, args, RAND_READ_4CONN_COUNT), stdout=subprocess.PIPE, text=True
            )
        )
    secs = []
    for p in procs:
        out, _ = p.communicate()
        if p.returncode != 0:
            sys.exit(f"qemu-img bench failed ({p.returncode})")
        secs.append(bench_secs(out))
    return CLIENTS * RAND_READ_4CONN_COUNT / max(secs)


def run_rounds(servers, rounds, fig, unit, count, run, cpu_medians):
    """ROUNDS rounds of `run(uri)` -> value on every server, rotating order;
    the medians of the values. The median server CPU per request of each
    server goes into `cpu_medians[name][fig]` (microseconds)."""
    values = {name: [] for name in servers}
    cpus = {name: [] for name in servers}
    names = list(servers)
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        line = []
        for name in order:
            pid, uri = servers[name]
            sync()
            cpu0 = cpu_secs(pid)
            value = run(uri)
            cpu = cpu_secs(pid) - cpu0
            values[name].append(value)
            if count:
                cpus[name].append(cpu * 1e6 / count)
            per = f", server CPU {cpu * 1e6 / count:.1f} us/request" if count else ""
            line.append(f"{name} {value:,.0f} {unit}{per}")
        print(f"    round {r + 1}: " + "; ".join(line), flush=True)
    best = {n: max(v) for n, v in values.items()}
    print("    best: " + "; ".join(f"{n} {v:,.0f} {unit}" for n, v in best.items()), flush=True)
    for name, per_request in cpus.items():
        if per_request:
            cpu_medians.setdefault(name, {})[fig] = statistics.median(per_request)
    return {name: statistics.median(v) for name, v in values.items()}


def ratio_cell(a, b):
    return f"{a / b:.2f}x" if b else "-"


def print_table(head, rows):
    widths = [max(len(row[i]) for row in rows + [head]) for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    for row in [head, tuple("-" * w for w in widths)] + rows:
        print(fmt.format(*row).rstrip())


def main():
    if len(sys.argv) < 6 or (len(sys.argv) - 3) % 3 != 0:
        sys.exit("usage: nbd_bench.py SIZE ROUNDS NAME PID URI [NAME PID URI ...]")
    size, rounds = int(sys.argv[1]), int(sys.argv[2])
    rest = sys.argv[3:]
    servers = {rest[i]: (int(rest[i + 1]), rest[i + 2]) for i in range(0, len(rest), 3)}
    for needed in ("svs", TARGET_REF, "qemu-nbd"):
        if needed not in servers:
            sys.exit(f"nbd_bench.py: server {needed} missing")

    blocks = scaled(size // MIB)
    for name, (_, uri) in servers.items():
        secs = bench(uri, ["-w", "--pattern", "0xa5", "-d", "16", "-s", "1M", "-S", "1M"], blocks)
        print(f"  pre-write {name}: {blocks} MiB in {secs:.2f}s", flush=True)
    sync()

    results = {}
    units = {}
    cpu = {}
    for fig, args, req_bytes, count, unit in FIGURES:
        units[fig] = unit
        print(f"  {fig}: qemu-img bench -f raw -c {count} {' '.join(args)} URI", flush=True)
        residency("before")

        def one(uri, args=args, count=count, req_bytes=req_bytes, unit=unit):
            secs = bench(uri, args, count)
            return count * req_bytes / secs / 1e6 if unit == "MB/s" else count / secs

        results[fig] = run_rounds(servers, rounds, fig, unit, count, one, cpu)

    for fig, unit in MULTI:
        units[fig] = unit
        if fig == "copy-4conn":
            print(
                f"  {fig}: nbdcopy --connections={CLIENTS} --threads={CLIENTS} --no-extents "
                "-S 0 URI null:",
                flush=True,
            )
            results[fig] = run_rounds(
                servers,
                rounds,
                fig,
                unit,
                size // (256 * 1024),
                lambda u: copy_4conn(u, size),
                cpu,
            )
        else:
            print(
                f"  {fig}: {CLIENTS} x qemu-img bench -f raw -c {RAND_READ_4CONN_COUNT} -d 16 "
                f"-s 4K -S {RANDOM_STEP} -o OFFSET URI, at once",
                flush=True,
            )
            results[fig] = run_rounds(
                servers,
                rounds,
                fig,
                unit,
                CLIENTS * RAND_READ_4CONN_COUNT,
                lambda u: rand_read_4conn(u, size),
                cpu,
            )

    ref_uri = servers["qemu-nbd"][1]
    for name, (_, uri) in servers.items():
        if name == "qemu-nbd":
            continue
        print(f"  compare: qemu-img compare -f raw -F raw {name} qemu-nbd", flush=True)
        cmp = subprocess.run(
            ["qemu-img", "compare", "-f", "raw", "-F", "raw", uri, ref_uri],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        print(f"    {cmp.stdout.strip()}", flush=True)
        if cmp.returncode != 0:
            sys.exit(f"{name} and qemu-nbd devices differ after the same writes")

    print(f"\n== summary: medians of {rounds} rounds")
    names = list(servers)
    head = ("figure", *names, "svs/nbdkit", "svs/qemu-nbd")
    mirrored = [n for n in names if n not in ("svs", TARGET_REF, "qemu-nbd")]
    head += tuple(f"{n}/nbdkit" for n in mirrored) + ("target", "result")
    rows = []
    for fig, unit in units.items():
        r = results[fig]
        s, k, q = r["svs"], r[TARGET_REF], r["qemu-nbd"]
        rows.append(
            (
                f"{LABELS[fig]} ({unit})",
                *(f"{r[n]:,.0f}" for n in names),
                ratio_cell(s, k),
                ratio_cell(s, q),
                *(ratio_cell(r[n], k) for n in mirrored),
                *(
                    (f"svs >= {TARGET_RATIO:.1f}x nbdkit", "PASS" if s >= TARGET_RATIO * k else "FAIL")
                    if fig in TARGET_FIGURES
                    else ("(info)", "-")
                ),
            )
        )
    print_table(head, rows)

    if mirrored:
        print("\n== against svs (same figure, medians): issue 21's target is a mirrored")
        print("   volume's random write >= 0.8x a single copy's")
        head = ("figure", *(f"{n}/svs" for n in mirrored))
        rows = [
            (f"{LABELS[fig]}", *(ratio_cell(results[fig][n], results[fig]["svs"]) for n in mirrored))
            for fig in units
        ]
        print_table(head, rows)

    print("\n== server CPU per request, microseconds (medians of the rounds; user + system")
    print("   time of each server's process; several svs volumes share svs serve's)")
    head = ("figure", *names)
    rows = [
        (f"{LABELS[fig]}", *(f"{cpu[n][fig]:,.1f}" if fig in cpu.get(n, {}) else "-" for n in names))
        for fig in units
    ]
    print_table(head, rows)


if __name__ == "__main__":
    main()
