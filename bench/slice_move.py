"""Figure 3: unthrottled slice move against `cp --sparse=always`, same run.

`slice_move.py EXAMPLE ROOT ROUNDS RESULTS`, EXAMPLE being the release build
of crates/dataplane/examples/slice_move.rs. For each layout (`full`: 1 GiB all
written; `sparse`: 4 GiB logical, 1 GiB of data in 4 extents) it writes the
source slice on medium a (ROOT/a), then runs one untimed warm-up of each
variant and ROUNDS timed rounds of:

  move      a -> b as a job moves a slice: the volume's I/O opened, then the
            move's phases begin, fill, switch, finish (writes, re-reads and
            verifies each chunk, fsyncs, renames)
  cp        cp --sparse=always SRC DST
  cp+fsync  cp --sparse=always SRC DST && sync DST (fsync of DST: the
            durability a move has before its placement switches)
  cp+fsync+check
            the same, then `cksum -a crc DST` (a re-read of the output with a
            fast checksum: the work of the move's verification; information)

The variant order rotates each round. Before every timed run the outputs of
earlier runs are deleted and `sync` is run, so no dirty data or pending
deletes from earlier runs are flushed inside the timed run. The source stays
in the page cache for all of them (it cannot be dropped reliably here), so
all variants read it from memory alike. Times are wall clock around the
processes (each run also shows the kernel CPU time of its processes, which
tells host-side memory stalls from device waits); throughput is of data
bytes (1 GiB in both layouts). Medians are the figures, appended to RESULTS
as `move_<layout>_mibs`, `cp_<layout>_mibs`, `cpsync_<layout>_mibs` (the
target: move >= 1.0x cp+fsync); the ratios of the medians are printed, and
the best of the rounds with their ratios, for information.
"""

import os
import resource
import statistics
import subprocess
import sys
import time

DATA_MIB = 1024
LAYOUTS = {"full": 1 << 30, "sparse": 4 << 30}
VARIANTS = ("move", "cp", "cp+fsync", "cp+fsync+check")


def run(*cmd):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout


def remove(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def main():
    if len(sys.argv) != 5:
        sys.exit("usage: slice_move.py EXAMPLE ROOT ROUNDS RESULTS")
    _, example, root, rounds, results = sys.argv
    rounds = int(rounds)
    out = {}
    for layout, length in LAYOUTS.items():
        src = run(example, "prepare", root, layout).strip()
        moved = os.path.join(root, "b", f"bench-{layout}", "c0-k0.slice")
        copied = os.path.join(root, "b", f"cp-{layout}.out")

        def timed(variant):
            remove(moved)
            remove(copied)
            subprocess.run(["sync"], check=True)
            cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            if variant == "move":
                inner = float(run(example, "move", root, layout))
            else:
                run("cp", "--sparse=always", src, copied)
                if variant != "cp":
                    run("sync", copied)
                if variant == "cp+fsync+check":
                    run("cksum", "-a", "crc", copied)
            secs = time.perf_counter() - started
            cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            sys_secs = cpu1.ru_stime - cpu0.ru_stime
            target = moved if variant == "move" else copied
            st = os.stat(target)
            if st.st_size != length:
                sys.exit(f"{variant}: {target} is {st.st_size} bytes, expected {length}")
            if st.st_blocks * 512 < DATA_MIB << 20:
                sys.exit(f"{variant}: {target} holds less than {DATA_MIB} MiB of data")
            return secs, sys_secs, (inner if variant == "move" else None)

        for variant in VARIANTS:  # warm-up: lets the device settle after the source was written
            timed(variant)
        times = {v: [] for v in VARIANTS}
        inner = []
        for r in range(rounds):
            shift = r % len(VARIANTS)
            order = VARIANTS[shift:] + VARIANTS[:shift]
            line = []
            for variant in order:
                secs, sys_secs, inside = timed(variant)
                times[variant].append(secs)
                if inside is not None:
                    inner.append(inside)
                line.append(f"{variant} {secs:.3f}s (sys {sys_secs:.2f}s)")
            print(f"  {layout} round {r + 1}: " + ", ".join(line), flush=True)
        med = {v: statistics.median(t) for v, t in times.items()}
        rate = {v: DATA_MIB / t for v, t in med.items()}
        best = {v: DATA_MIB / min(t) for v, t in times.items()}
        print(
            f"  {layout} ({length >> 30} GiB logical, {DATA_MIB} MiB data), median of {rounds}: "
            + ", ".join(f"{v} {med[v]:.3f}s = {rate[v]:.0f} MiB/s" for v in VARIANTS)
            + f" (move inside the process: {statistics.median(inner):.3f}s); "
            f"move/(cp+fsync) {rate['move'] / rate['cp+fsync']:.2f}x, "
            f"move/(cp+fsync+check) {rate['move'] / rate['cp+fsync+check']:.2f}x, "
            f"move/cp {rate['move'] / rate['cp']:.2f}x",
            flush=True,
        )
        print(
            f"  {layout} best of {rounds} (info): "
            + ", ".join(f"{v} {best[v]:.0f} MiB/s" for v in VARIANTS)
            + f"; move/(cp+fsync) {best['move'] / best['cp+fsync']:.2f}x, "
            f"move/(cp+fsync+check) {best['move'] / best['cp+fsync+check']:.2f}x, "
            f"move/cp {best['move'] / best['cp']:.2f}x",
            flush=True,
        )
        out[f"move_{layout}_mibs"] = rate["move"]
        out[f"cp_{layout}_mibs"] = rate["cp"]
        out[f"cpsync_{layout}_mibs"] = rate["cp+fsync"]
        out[f"cpcheck_{layout}_mibs"] = rate["cp+fsync+check"]
        remove(moved)
        remove(copied)
        remove(src)
    with open(results, "a") as f:
        for k, v in out.items():
            f.write(f"{k} {v:.1f}\n")


if __name__ == "__main__":
    main()
