"""NBD data path: svs against qemu-nbd, same client (`qemu-img bench`), same run.

`nbd_bench.py SVS_PID SVS_URI REF_PID REF_URI SIZE ROUNDS`

SVS_URI is the svs export of the attached volume, REF_URI the qemu-nbd export
of a raw file of the same SIZE (bytes) on the same filesystem; the PIDs are
the two server processes (their CPU time is reported per run).

1. Pre-write: the whole of both devices is written once with a non-zero
   pattern (1 MiB writes, depth 16), then `sync`: every read below hits
   allocated, written data, never a hole.
2. Figures, ROUNDS rounds each; in a round both servers run once, the order
   alternating (svs first in odd rounds, qemu-nbd first in even ones):
     seq-read    1 MiB reads,  depth 1,  2048 requests (2 GiB) from offset 0
     seq-write   1 MiB writes, depth 1,  1024 requests (1 GiB) from offset 0
     rand-read   4 KiB reads,  depth 16, 100000 requests
     rand-write  4 KiB writes, depth 16, 50000 requests
   `qemu-img bench` only steps offsets (offset += step, wrapped modulo the
   device size); the random figures use the step 7919 * 4096 bytes (7919 is
   prime and odd): every offset is 4 KiB aligned and, as 7919 is coprime
   with the number of 4 KiB blocks (2^20) and with 2^20 - 1 (the wrap rule of
   newer qemu), the first 2^20 - 1 offsets are all distinct and scattered
   over the whole device. `sync` runs before every timed run, so no dirty
   data of an earlier run is written back during it.
   The time is qemu-img bench's own ("Run completed in X seconds": first
   request sent to last reply, connection setup excluded). MB/s are 10^6
   bytes per second. Medians of the rounds are the figures.
3. Check: `qemu-img compare` of the two devices. Both received the same
   writes (same patterns, counts and offsets), so they must be identical;
   a difference fails the run.
4. Summary table: figure, svs, qemu-nbd, ratio svs/qemu-nbd, target, verdict.
"""

import os
import re
import statistics
import subprocess
import sys

TARGET_RATIO = 1.0
MIB = 1 << 20
RANDOM_STEP = 7919 * 4096
CLK_TCK = os.sysconf("SC_CLK_TCK")

# name, qemu-img bench arguments, bytes per request, count, unit
FIGURES = (
    ("seq-read", ["-d", "1", "-s", "1M", "-S", "1M"], MIB, 2048, "MB/s"),
    ("seq-write", ["-w", "--pattern", "0x5a", "-d", "1", "-s", "1M", "-S", "1M"], MIB, 1024, "MB/s"),
    ("rand-read", ["-d", "16", "-s", "4K", "-S", str(RANDOM_STEP)], 4096, 100000, "IOPS"),
    (
        "rand-write",
        ["-w", "--pattern", "0x3c", "-d", "16", "-s", "4K", "-S", str(RANDOM_STEP)],
        4096,
        50000,
        "IOPS",
    ),
)
LABELS = {
    "seq-read": "sequential read, 1 MiB, depth 1",
    "seq-write": "sequential write, 1 MiB, depth 1",
    "rand-read": "random read, 4 KiB, depth 16",
    "rand-write": "random write, 4 KiB, depth 16",
}


def cpu_secs(pid):
    """User + system CPU seconds of a process (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def bench(uri, args, count):
    """Runs qemu-img bench; returns its measured seconds."""
    cmd = ["qemu-img", "bench", "-f", "raw", "-c", str(count), *args, uri]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    m = re.search(r"Run completed in ([0-9.]+) seconds", out)
    if not m:
        sys.exit(f"unexpected qemu-img bench output: {out!r}")
    return float(m.group(1))


def sync():
    subprocess.run(["sync"], check=True)


def main():
    if len(sys.argv) != 7:
        sys.exit("usage: nbd_bench.py SVS_PID SVS_URI REF_PID REF_URI SIZE ROUNDS")
    _, svs_pid, svs_uri, ref_pid, ref_uri, size, rounds = sys.argv
    size, rounds = int(size), int(rounds)
    servers = {"svs": (int(svs_pid), svs_uri), "qemu-nbd": (int(ref_pid), ref_uri)}

    blocks = size // MIB
    for name, (_, uri) in servers.items():
        secs = bench(uri, ["-w", "--pattern", "0xa5", "-d", "16", "-s", "1M", "-S", "1M"], blocks)
        print(f"  pre-write {name}: {blocks} MiB in {secs:.2f}s", flush=True)
    sync()

    results = {}
    for fig, args, req_bytes, count, unit in FIGURES:
        values = {name: [] for name in servers}
        cmd = f"qemu-img bench -f raw -c {count} {' '.join(args)} URI"
        print(f"  {fig}: {cmd}", flush=True)
        for r in range(rounds):
            order = list(servers) if r % 2 == 0 else list(servers)[::-1]
            line = []
            for name in order:
                pid, uri = servers[name]
                sync()
                cpu0 = cpu_secs(pid)
                secs = bench(uri, args, count)
                cpu = cpu_secs(pid) - cpu0
                if unit == "MB/s":
                    value = count * req_bytes / secs / 1e6
                else:
                    value = count / secs
                values[name].append(value)
                line.append(
                    f"{name} {value:,.0f} {unit} ({secs:.3f}s, server CPU "
                    f"{cpu * 1e6 / count:.0f} us/request)"
                )
            print(f"    round {r + 1}: " + ", ".join(line), flush=True)
        results[fig] = {name: statistics.median(v) for name, v in values.items()}

    print("  compare: qemu-img compare -f raw -F raw SVS_URI REF_URI", flush=True)
    cmp = subprocess.run(
        ["qemu-img", "compare", "-f", "raw", "-F", "raw", svs_uri, ref_uri],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    print(f"    {cmp.stdout.strip()}", flush=True)
    if cmp.returncode != 0:
        sys.exit("svs and qemu-nbd devices differ after the same writes")

    print(f"\n== summary: medians of {rounds} rounds")
    head = ("figure", "svs", "qemu-nbd", "svs/qemu-nbd", "target", "result")
    rows = []
    for fig, _, _, _, unit in FIGURES:
        s, q = results[fig]["svs"], results[fig]["qemu-nbd"]
        ratio = s / q
        rows.append(
            (
                LABELS[fig],
                f"{s:,.0f} {unit}",
                f"{q:,.0f} {unit}",
                f"{ratio:.2f}x",
                f">= {TARGET_RATIO:.1f}x",
                "PASS" if ratio >= TARGET_RATIO else "FAIL",
            )
        )
    widths = [max(len(row[i]) for row in rows + [head]) for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    for row in [head, tuple("-" * w for w in widths)] + rows:
        print(fmt.format(*row).rstrip())


if __name__ == "__main__":
    main()
