"""NBD data path: svs against nbdkit and qemu-nbd, same clients, same run.

`nbd_bench.py SIZE ROUNDS NAME PIDS URI [NAME PIDS URI ...]`

Each server is a NAME (svs, svs-2-copies, nbdkit, qemu-nbd), its PIDS and the
nbd:// URI of an export of SIZE bytes. PIDS is `PID[,PID...]`: the first is
the process serving the export (its fan-out point: its CPU time is reported
per run), all of them together are every process of the server (for svs on
storage nodes: svs serve and every storage node, whose CPU the fan-out
point's leaves out); a single PID is both. The names `svs`, `nbdkit` and `qemu-nbd` must be among them: the
target compares svs (one copy) with nbdkit; the other ratios are information.

A URI may instead be a `json:` description of qemu block drivers that the
client assembles itself, e.g. `quorum-2`: qemu's quorum driver over two NBD
exports, each an nbdkit process (bench/nodes.sh: the off-the-shelf mirror,
reference of the mirrored volumes). Such a client-side device runs the
`qemu-img bench` figures like the others (the json wraps it in the raw
driver, so `-f raw` opens it the same way) but not the multi-connection
figures (nbdcopy and 4 readers open one export, not a driver graph: "-"
there, not faked); its fan-out is in the client (qemu-img), so none of its
PIDS is a fan-out point: they are all its servers (every nbdkit), and its
fan-out CPU is "-" (the client CPU column holds it).

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
     qd1-read    4 KiB reads,  depth 1,  20000 requests, `-t none`
     qd1-write   4 KiB writes, depth 1,  20000 requests, `-t none` (the
                 latency a database committing at depth 1 sees)
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
   a mirrored volume's random write >= 0.8x a single copy's), and beside it,
   for every client-side device quorum-N, its ratio to nbdkit (what an
   off-the-shelf mirror of N copies costs over one copy on this machine) and
   the ratio of the volume named *-N (nodes-N) to it. Then the
   CPU accounting, medians of the rounds, every figure and server:
     fan-out CPU    user + system time (/proc/PID/stat) of the first PID over
                    the run, per request (for a volume on storage nodes, the
                    front's node: the other nodes' CPU is not in it; "-" for
                    a client-side device: its fan-out is the client's)
     all servers    the same, summed over all of PIDS (every svs process)
     client CPU     user + system time of the client processes (qemu-img
                    bench, nbdcopy: getrusage(RUSAGE_CHILDREN) over the run),
                    per request
     busy           (all servers + client CPU) / (wall time of the run x
                    the number of CPUs), beside /proc/stat's busy fraction
                    of the whole machine over the same interval (everything
                    else running counts there: a gap between the two is
                    other work, or kernel work charged to no process)
   The CPU clock ticks CLK_TCK (usually 100) times a second: short runs
   (NBD_BENCH_SCALE < 1) give coarse figures. All processes share the
   machine's cores: when busy nears 100% the figures measure the CPU, not
   the data path. Last, the 4 KiB random write in one table (IOPS, the
   three CPU figures, busy) and, for every volume besides svs and the
   references, an estimate of the IOPS its fan-out point alone could
   sustain on one core of its own: 1e6 / its CPU microseconds per request.

Environment: NBD_BENCH_FILES (see `residency`); NBD_BENCH_SCALE (default 1):
every request count and the pre-write are multiplied by it (at least 1
request), for a quick check of a script on a slow build or a busy machine;
figures are only comparable at the default.
"""

import os
import re
import resource
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
# /proc/stat's `cpu` line counts every CPU of the machine, so this does too.
NCPU = os.cpu_count() or 1
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
        "qd1-read",
        ["-t", "none", "-d", "1", "-s", "4K", "-S", str(RANDOM_STEP)],
        4096,
        scaled(20000),
        "IOPS",
    ),
    (
        "qd1-write",
        ["-t", "none", "-w", "--pattern", "0x6b", "-d", "1", "-s", "4K", "-S", str(RANDOM_STEP)],
        4096,
        scaled(20000),
        "IOPS",
    ),
    (
        "rand-write",
        ["-w", "--pattern", "0x3c", "-d", "16", "-s", "4K", "-S", str(RANDOM_STEP)],
        4096,
        scaled(50000),
        "IOPS",
    ),
)
# NBD_BENCH_FIGURES (e.g. "rand-read,rand-write"): only those figures, for
# a longer A/B of a few of them; empty: every figure.
ONLY = [f for f in os.environ.get("NBD_BENCH_FIGURES", "").split(",") if f]

# Multi-connection figures: name, unit (run by `multi_conn`).
MULTI = (("copy-4conn", "MB/s"), ("rand-read-4conn", "IOPS"))
RAND_READ_4CONN_COUNT = scaled(50000)
LABELS = {
    "seq-read": "sequential read, 1 MiB, depth 1",
    "seq-write": "sequential write, 1 MiB, depth 1",
    "rand-read": "random read, 4 KiB, depth 16",
    "rand-write": "random write, 4 KiB, depth 16",
    "qd1-read": "random read, 4 KiB, depth 1",
    "qd1-write": "random write, 4 KiB, depth 1",
    "copy-4conn": "nbdcopy read, 4 connections",
    "rand-read-4conn": "random read, 4 KiB, 4 x depth 16",
}


def client_side(uri):
    """A device the client assembles (a `json:` block-driver graph, e.g.
    quorum over NBD exports), not one NBD export: only qemu-img bench opens
    it, and its fan-out point is the client, none of its servers."""
    return uri.startswith("json:")


def cpu_secs(pid):
    """User + system CPU seconds of a process (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def client_cpu_secs():
    """User + system CPU seconds of this process's finished, waited-for
    children (the clients: qemu-img, nbdcopy) so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def machine_ticks():
    """(busy, total) clock ticks of all CPUs from /proc/stat: idle and
    iowait are not busy."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:9]]
    total = sum(fields)
    return total - fields[3] - fields[4], total


def cpu_snapshot(pids):
    """CPU seconds of every server process, of the clients, and the
    machine's ticks, at one moment (read back to back)."""
    return [cpu_secs(pid) for pid in pids], client_cpu_secs(), machine_ticks()


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


# The CPU accounting of one run: name, heading of its table, format of a cell.
METRICS = (
    ("fan-out", "fan-out point's CPU per request, microseconds", "{:,.1f}"),
    ("all", "CPU of all server processes per request, microseconds", "{:,.1f}"),
    ("client", "client CPU per request, microseconds", "{:,.1f}"),
    ("busy", "busy %: (all servers + client) / (wall x CPUs)", "{:.0f}%"),
    ("machine", "busy % of the whole machine (/proc/stat)", "{:.0f}%"),
)


def run_rounds(servers, rounds, fig, unit, count, run, stats):
    """ROUNDS rounds of `run(uri)` -> value on every server, rotating order;
    the medians of the values. The medians of the CPU accounting of each
    server (METRICS: per request in microseconds, busy in percent) go into
    `stats[name][fig][metric]`."""
    values = {name: [] for name in servers}
    runs = {name: {metric: [] for metric, _, _ in METRICS} for name in servers}
    names = list(servers)
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        print(f"    round {r + 1}:", flush=True)
        for name in order:
            pids, uri = servers[name]
            sync()
            servers0, client0, (busy0, total0) = cpu_snapshot(pids)
            started = time.perf_counter()
            value = run(uri)
            wall = time.perf_counter() - started
            servers1, client1, (busy1, total1) = cpu_snapshot(pids)
            spent = [b - a for a, b in zip(servers0, servers1)]
            client = client1 - client0
            values[name].append(value)
            m = runs[name]
            m["busy"].append((sum(spent) + client) * 100 / (wall * NCPU))
            m["machine"].append((busy1 - busy0) * 100 / max(total1 - total0, 1))
            per = ""
            if count:
                if client_side(uri):
                    fan_out = "in the client"
                else:
                    m["fan-out"].append(spent[0] * 1e6 / count)
                    fan_out = f"{m['fan-out'][-1]:.1f}"
                m["all"].append(sum(spent) * 1e6 / count)
                m["client"].append(client * 1e6 / count)
                per = (
                    f"; CPU us/request: fan-out {fan_out}, "
                    f"all servers {m['all'][-1]:.1f}, client {m['client'][-1]:.1f}"
                )
            print(
                f"      {name} {value:,.0f} {unit}{per}; busy {m['busy'][-1]:.0f}% "
                f"(machine {m['machine'][-1]:.0f}%)",
                flush=True,
            )
    best = {n: max(v) for n, v in values.items()}
    print("    best: " + "; ".join(f"{n} {v:,.0f} {unit}" for n, v in best.items()), flush=True)
    for name, metrics in runs.items():
        for metric, samples in metrics.items():
            if samples:
                stats.setdefault(name, {}).setdefault(fig, {})[metric] = statistics.median(samples)
    return {name: statistics.median(v) for name, v in values.items()}


def ratio_cell(a, b):
    """a / b, or "-" when either is missing (a figure a device skipped)."""
    return f"{a / b:.2f}x" if a is not None and b else "-"


def value_cell(v):
    return "-" if v is None else f"{v:,.0f}"


def print_table(head, rows):
    widths = [max(len(row[i]) for row in rows + [head]) for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    for row in [head, tuple("-" * w for w in widths)] + rows:
        print(fmt.format(*row).rstrip())


def main():
    if len(sys.argv) < 6 or (len(sys.argv) - 3) % 3 != 0:
        sys.exit("usage: nbd_bench.py SIZE ROUNDS NAME PIDS URI [NAME PIDS URI ...]")
    size, rounds = int(sys.argv[1]), int(sys.argv[2])
    rest = sys.argv[3:]
    servers = {}
    for i in range(0, len(rest), 3):
        try:
            pids = [int(p) for p in rest[i + 1].split(",")]
        except ValueError:
            sys.exit(f"nbd_bench.py: {rest[i]}: PIDS must be PID[,PID...]: {rest[i + 1]!r}")
        # The fan-out point first, each process once (it is in the list too).
        servers[rest[i]] = (list(dict.fromkeys(pids)), rest[i + 2])
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
    print(f"  CPU accounting: {NCPU} CPUs, {CLK_TCK} ticks per second; processes: " + "; ".join(
        f"{n} {','.join(map(str, pids))}" for n, (pids, _) in servers.items()), flush=True)
    for fig, args, req_bytes, count, unit in FIGURES:
        if ONLY and fig not in ONLY:
            continue
        units[fig] = unit
        print(f"  {fig}: qemu-img bench -f raw -c {count} {' '.join(args)} URI", flush=True)
        residency("before")

        def one(uri, args=args, count=count, req_bytes=req_bytes, unit=unit):
            secs = bench(uri, args, count)
            return count * req_bytes / secs / 1e6 if unit == "MB/s" else count / secs

        results[fig] = run_rounds(servers, rounds, fig, unit, count, one, cpu)

    # nbdcopy and the 4 readers open one NBD export each: a client-side
    # device is not one, so it sits these figures out ("-" in the tables).
    exports = {n: v for n, v in servers.items() if not client_side(v[1])}
    skipped = [n for n in servers if n not in exports]
    for fig, unit in MULTI:
        if ONLY and fig not in ONLY:
            continue
        units[fig] = unit
        if skipped:
            print(f"  {fig}: skipped for {', '.join(skipped)} (client-side, not one NBD export)",
                  flush=True)
        if fig == "copy-4conn":
            print(
                f"  {fig}: nbdcopy --connections={CLIENTS} --threads={CLIENTS} --no-extents "
                "-S 0 URI null:",
                flush=True,
            )
            results[fig] = run_rounds(
                exports,
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
                exports,
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
                *(value_cell(r.get(n)) for n in names),
                ratio_cell(s, k),
                ratio_cell(s, q),
                *(ratio_cell(r.get(n), k) for n in mirrored),
                *(
                    (f"svs >= {TARGET_RATIO:.1f}x nbdkit", "PASS" if s >= TARGET_RATIO * k else "FAIL")
                    if fig in TARGET_FIGURES
                    else ("(info)", "-")
                ),
            )
        )
    print_table(head, rows)

    # The client-side mirrors (quorum-N) are references, not volumes: beside
    # the volumes against svs go their own cost over one copy (quorum-N /
    # nbdkit) and the volume of as many copies against them (nodes-N /
    # quorum-N), matched by the trailing -N.
    # forward-N: the same mirror served by one process that forwards, as a
    # front does (bench/nodes.sh): a reference too, beside quorum-N.
    refs = [n for n in mirrored if client_side(servers[n][1])]
    forwards = [n for n in mirrored if n.startswith("forward-")]
    volumes = [n for n in mirrored if n not in refs and n not in forwards]

    def copies(name):
        return name.rsplit("-", 1)[-1]

    pairs = [(v, q) for q in refs + forwards for v in volumes if copies(v) == copies(q)]
    pairs += [(f, q) for q in refs for f in forwards if copies(f) == copies(q)]
    if mirrored:
        print("\n== against svs (same figure, medians): issue 21's target is a mirrored")
        print("   volume's random write >= 0.8x a single copy's")
        if refs:
            print("   quorum-N/nbdkit: qemu's quorum over N nbdkit processes against one, the")
            print("   off-the-shelf mirror's cost over a single copy on this machine, same client")
        head = (
            "figure",
            *(f"{n}/svs" for n in volumes),
            *(f"{q}/{TARGET_REF}" for q in refs),
            *(f"{v}/{q}" for v, q in pairs),
        )
        rows = []
        for fig in units:
            r = results[fig]
            rows.append(
                (
                    f"{LABELS[fig]}",
                    *(ratio_cell(r.get(n), r["svs"]) for n in volumes),
                    *(ratio_cell(r.get(q), r[TARGET_REF]) for q in refs),
                    *(ratio_cell(r.get(v), r.get(q)) for v, q in pairs),
                )
            )
        print_table(head, rows)
        if refs and "rand-write" in results:
            r = results["rand-write"]
            print(
                f"{LABELS['rand-write']}: "
                + ", ".join(f"{n}/svs {ratio_cell(r.get(n), r['svs'])}" for n in volumes)
                + " (target >= 0.8x); off-the-shelf mirror: "
                + ", ".join(f"{q}/{TARGET_REF} {ratio_cell(r.get(q), r[TARGET_REF])}" for q in refs)
                + "; against it: "
                + ", ".join(f"{v}/{q} {ratio_cell(r.get(v), r.get(q))}" for v, q in pairs)
            )

    qd1 = [f for f in ("qd1-read", "qd1-write") if f in units]
    if qd1:
        # Depth 1: one request at a time, so the time of one is 1e6 / IOPS.
        print("\n== depth 1: microseconds per 4 KiB request (medians); issue 51's targets:")
        print("   write: nodes-3 <= 1.2x quorum-3 and <= 1.15x nodes-2, nodes-1 <= 1.1x nbdkit;")
        print("   read through a node's front (nodes-N) <= 1.2x nbdkit")
        usec = {f: {n: 1e6 / v for n, v in results[f].items() if v} for f in qd1}
        head = ("figure", *names)
        rows = [(LABELS[f], *(f"{usec[f][n]:.0f}" if n in usec[f] else "-" for n in names))
                for f in qd1]
        print_table(head, rows)
        checks = (
            ("qd1-write", "nodes-3", "quorum-3", 1.2),
            ("qd1-write", "nodes-3", "nodes-2", 1.15),
            ("qd1-write", "nodes-1", TARGET_REF, 1.1),
            ("qd1-read", "nodes-1", TARGET_REF, 1.2),
            ("qd1-read", "nodes-3", TARGET_REF, 1.2),
        )
        # Information: svs against the forwarding twin, and that twin's own
        # cost over the client-side mirror (the hop every front pays).
        for f in qd1:
            for a, b in [(v, w) for v, w in pairs if w.startswith("forward-") or v.startswith("forward-")]:
                if a in usec[f] and b in usec[f]:
                    print(f"   {LABELS[f]}: {a}/{b} = {usec[f][a] / usec[f][b]:.2f}x (information)")
        for f, a, b, limit in checks:
            if f in usec and a in usec[f] and b in usec[f]:
                ratio = usec[f][a] / usec[f][b]
                verdict = "PASS" if ratio <= limit else "FAIL"
                print(f"   {LABELS[f]}: {a}/{b} = {ratio:.2f}x (target <= {limit}x) {verdict}")

    print(f"\n== CPU accounting (medians of the rounds; user + system time; {NCPU} CPUs)")
    print("   fan-out point: the process serving the export (svs serve, or the front's")
    print("   storage node; several svs volumes share svs serve's). All server processes:")
    print("   svs serve and every storage node together (nbdkit, qemu-nbd: their own).")
    if refs:
        print("   quorum-N: its N nbdkit processes; its fan-out is in the client: \"-\".")
    print("   Client: qemu-img bench / nbdcopy. Busy: (all servers + client) / (wall x CPUs);")
    print("   all of them share the machine's cores, so near 100% the figures are CPU-bound.")
    for metric, heading, cell in METRICS:
        print(f"\n-- {heading}")
        head = ("figure", *names)
        rows = [
            (
                f"{LABELS[fig]}",
                *(
                    cell.format(cpu[n][fig][metric]) if metric in cpu.get(n, {}).get(fig, {}) else "-"
                    for n in names
                ),
            )
            for fig in units
        ]
        print_table(head, rows)

    fig = "rand-write"
    if fig not in results:
        return  # left out by NBD_BENCH_FIGURES
    print(f"\n== {LABELS[fig]}: IOPS and CPU per request in microseconds (medians)")
    head = ("device", "IOPS", "fan-out CPU", "all-svs CPU", "client CPU", "busy", "machine busy")
    rows = []
    for n in names:
        m = cpu.get(n, {}).get(fig, {})
        rows.append(
            (
                n,
                value_cell(results[fig].get(n)),
                *(cell.format(m[metric]) if metric in m else "-" for metric, _, cell in METRICS),
            )
        )
    print_table(head, rows)
    estimates = [
        f"{n} {1e6 / cpu[n][fig]['fan-out']:,.0f}"
        for n in mirrored
        if cpu.get(n, {}).get(fig, {}).get("fan-out")
    ]
    if estimates:
        print(
            "ESTIMATE, not a measurement: IOPS the fan-out point alone could sustain on one core "
            "of its own (1e6 / its CPU us per request; the other nodes and the client on other "
            "cores): " + "; ".join(estimates)
        )


if __name__ == "__main__":
    main()
