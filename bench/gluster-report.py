#!/usr/bin/env python3
"""gluster-report.py RAW: the Markdown tables of bench/gluster from its raw samples.

Raw lines:
  # header
  T FS K STRATEGY WALL_MS CPU_MS REP        one timed renew-batch process
  S FS K STRATEGY RENEWALS FSYNCS DIRSYNCS P50_S DURATION_S   the untimed --json run's stats
  P FS K STRATEGY FOP CALLS LAT_NS_TOTAL    calls that reached the servers in that run
  C FS claim|publish WALL_MS CPU_MS         one single-ID claim or complete --publish process
"""
import statistics
import sys
from collections import defaultdict

N = 1024
STRATS = ["concurrent", "sequential", "one-at-a-time", "nosync"]
NAMES = {"concurrent": "concurrent (lease)", "sequential": "F324", "one-at-a-time": "F323", "nosync": "no-fsync floor"}
FSES = ["gluster-safe", "gluster-default", "fuse-2ms"]
FSNAME = {"gluster-safe": "GlusterFS, safe options", "gluster-default": "GlusterFS, defaults (unsafe)", "fuse-2ms": "FUSE stand-in, 2 ms"}


def main(path):
    header, times, stats, prof, ops = "", defaultdict(list), {}, defaultdict(dict), defaultdict(list)
    for line in open(path):
        f = line.split()
        if not f:
            continue
        if f[0] == "#":
            header = line[2:].strip()
        elif f[0] == "T":
            times[(f[1], int(f[2]), f[3])].append(float(f[4]))
        elif f[0] == "S":
            stats[(f[1], int(f[2]), f[3])] = f[4:]
        elif f[0] == "P":
            prof[(f[1], int(f[2]), f[3])][f[4]] = (int(f[5]), float(f[6]))
        elif f[0] == "C":
            ops[(f[1], f[2])].append(float(f[3]))
    med = {k: statistics.median(v) for k, v in times.items()}
    reps = max((len(v) for v in times.values()), default=0)
    print("# lease on GlusterFS beside the FUSE stand-in (`bench/gluster`)\n")
    print(f"{header}. N = {N} leases, medians of {reps} whole `lease renew-batch` processes per cell, strategies interleaved.")
    print("GlusterFS 2 x 2 distributed-replicate, bricks on the root disk, glusterd and all bricks and clients on this same")
    print("2-core VM (so a \"round trip\" is a local TCP exchange plus the brick's work, which shares the CPUs with lease);")
    print("read through one FUSE client mount. The stand-in is lease-faultfs over its own tmpfs adding 2 ms to every")
    print("fsync, fsyncdir, rename and create (bench/matrix's `fuse-2ms`). `gluster-default` is unsafe for lease")
    print("(lease qualify fails there): it is shown for what its caches save, not as a place to run.\n")
    print("## renew-batch, N = 1024\n")
    print("| fs | K | concurrent (lease) | F324 | F323 | floor | F324 ÷ lease | F323 ÷ lease | lease ÷ floor |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for fs in FSES:
        for k in (16, 64):
            m = {s: med.get((fs, k, s)) for s in STRATS}
            if None in m.values():
                continue
            c = m["concurrent"]
            print(f"| {FSNAME[fs]} | {k} | {c:.0f} ms | {m['sequential']:.0f} ms | {m['one-at-a-time']:.0f} ms | {m['nosync']:.0f} ms | "
                  f"**{m['sequential'] / c:.2f}×** | **{m['one-at-a-time'] / c:.2f}×** | {c / m['nosync']:.2f}× |")
    print("\n## Calls that reach the servers, per record (K = 16, one --json run per strategy)\n")
    print("GlusterFS: the fops the 4 bricks served (volume profile), summed over the bricks, divided by N; a fop the")
    print("replicate translator sends to both replicas of a pair counts twice. Stand-in: the calls lease-faultfs counted.\n")
    for fs in FSES:
        rows = [(s, prof.get((fs, 16, s), {})) for s in STRATS]
        fops = sorted({f for _, p in rows for f in p}, key=lambda f: -sum(p.get(f, (0, 0))[0] for _, p in rows))
        fops = [f for f in fops if any(p.get(f, (0, 0))[0] for _, p in rows)]
        if not fops:
            continue
        top = fops[:12]
        print(f"**{FSNAME[fs]}**\n")
        print("| strategy | all | " + " | ".join(top) + " |")
        print("| --- | ---: | " + " | ".join("---:" for _ in top) + " |")
        for s, p in rows:
            total = sum(c for c, _ in p.values())
            print(f"| {NAMES[s]} | {total / N:.1f} | " + " | ".join(f"{p.get(f, (0, 0))[0] / N:.2f}" for f in top) + " |")
        print()
    print("## Where the time goes (GlusterFS, K = 16)\n")
    print("Brick-side service time of each fop (volume profile: average latency × calls, summed over the bricks), ms per")
    print("run, the largest first; beside it the run's wall time and lease's own p50 latency per record.\n")
    for fs in ("gluster-safe", "gluster-default"):
        print(f"**{FSNAME[fs]}**\n")
        print("| strategy | wall (--json run) | p50 per record | brick time, all fops | largest fops (ms) |")
        print("| --- | ---: | ---: | ---: | --- |")
        for s in STRATS:
            p = prof.get((fs, 16, s), {})
            st = stats.get((fs, 16, s))
            if not st:
                continue
            tot = sum(l for _, l in p.values()) / 1e6
            big = sorted(p.items(), key=lambda kv: -kv[1][1])[:5]
            print(f"| {NAMES[s]} | {float(st[4]) * 1e3:.0f} ms | {float(st[3]) * 1e3:.1f} ms | {tot:.0f} ms | " +
                  ", ".join(f"{f} {l / 1e6:.0f}" for f, (_, l) in big) + " |")
        print()
    print("## One claim, one complete --publish (K = 16)\n")
    print("Each a whole `lease` process for one ID, one after another (process start included, about 3 ms here).\n")
    print("| fs | claim p50 | claim p90 | complete --publish p50 | complete --publish p90 | samples |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for fs in FSES:
        c, p = sorted(ops.get((fs, "claim"), [])), sorted(ops.get((fs, "publish"), []))
        if not c or not p:
            continue
        q = lambda xs, f: xs[min(len(xs) - 1, int(f * len(xs)))]
        print(f"| {FSNAME[fs]} | {statistics.median(c):.1f} ms | {q(c, 0.9):.1f} ms | {statistics.median(p):.1f} ms | {q(p, 0.9):.1f} ms | {len(c)} |")


if __name__ == "__main__":
    main(sys.argv[1])
