#!/usr/bin/env python3
"""ceph-report.py RAW: the Markdown tables of bench/ceph from its raw samples.

Raw lines:
  # header
  T FS K CASE WALL_MS CPU_MS         one timed renew-batch process (CASE: same, cross, same-before, cross-before)
  M FS K CASE KIND COUNT ...         the MDS requests that run caused (CephFS)
  C FS claim|publish|cross-claim|cross-claim-before WALL_MS CPU_MS   one single-ID process
  W FS ITEMS WALL_MS                 one campaign
"""
import statistics
import sys
from collections import defaultdict

N = 1024
FSES = ["cephfs", "gluster-safe", "fuse-2ms"]
FSNAME = {"cephfs": "CephFS, ceph-fuse defaults", "gluster-safe": "GlusterFS, safe options", "fuse-2ms": "FUSE stand-in, 2 ms"}
KINDS = ["lookup", "getattr", "open", "create", "rename", "link", "unlink", "setfilelock", "setattr", "readdir", "mkdir"]


def med(v):
    return statistics.median(v) if v else None


def ms(v):
    return "—" if v is None else (f"{v / 1000:.1f} s" if v >= 10000 else f"{v:.0f} ms")


def main(path):
    header, times, reqs, ops, camp = "", defaultdict(list), defaultdict(list), defaultdict(list), {}
    for line in open(path):
        f = line.split()
        if not f:
            continue
        if f[0] == "#":
            header = line[2:].strip()
        elif f[0] == "T":
            times[(f[1], int(f[2]), f[3])].append(float(f[4]))
        elif f[0] == "M":
            reqs[(f[1], int(f[2]), f[3])].append(dict(zip(f[4::2], map(int, f[5::2]))))
        elif f[0] == "C":
            ops[(f[1], f[2])].append(float(f[3]))
        elif f[0] == "W":
            camp[f[1]] = (int(f[2]), float(f[3]))
    reps = max((len(v) for (_, _, c), v in times.items() if c == "same"), default=0)
    print("# lease on CephFS beside GlusterFS and the FUSE stand-in (`bench/ceph`)\n")
    print(f"{header}. N = {N} leases claimed through client A; medians of {reps} whole `lease renew-batch` processes per cell")
    print("(the lease before the journal kick: one run each). Every daemon, brick and client is on this one 2-core VM, so a")
    print("round trip to the MDS is a local exchange plus its work, which shares the CPUs with lease. *Same client*: the")
    print("batch through A right after A renewed the same leases; *other client*: through B right after A did.\n")
    print("## renew-batch of N = 1024, through one client and through the other\n")
    print("| fs | K | same client | other client | other ÷ same | same, before | other, before | other ÷ same, before |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for fs in FSES:
        for k in (16, 64):
            s, c = med(times[(fs, k, "same")]), med(times[(fs, k, "cross")])
            sb, cb = med(times[(fs, k, "same-before")]), med(times[(fs, k, "cross-before")])
            if s is None:
                continue
            r = f"**{c / s:.2f}×**" if c else "—"
            rb = f"{cb / sb:.1f}×" if cb and sb else "—"
            print(f"| {FSNAME[fs]} | {k} | {ms(s)} | {ms(c)} | {r} | {ms(sb)} | {ms(cb)} | {rb} |")
    print("\n## Requests the MDS served, per record (CephFS, perf counters of mds_server)\n")
    print("`setattr` is the journal kick (the touch of the table root that asks the MDS to write its journal now);")
    print("the lease before the kick makes none. Medians over the runs of each cell.\n")
    cols = [k for k in KINDS if any(k in d for v in reqs.values() for d in v)]
    print("| K | case | all | " + " | ".join(cols) + " |")
    print("| ---: | --- | ---: | " + " | ".join("---:" for _ in cols) + " |")
    label = {"same": "same client", "cross": "other client", "same-before": "same client, before", "cross-before": "other client, before"}
    for k in (16, 64):
        for case in ("same", "cross", "same-before", "cross-before"):
            v = reqs.get(("cephfs", k, case))
            if not v:
                continue
            per = {c: statistics.median(d.get(c, 0) for d in v) / N for c in cols}
            allr = statistics.median(sum(d.values()) for d in v) / N
            print(f"| {k} | {label[case]} | {allr:.2f} | " + " | ".join(f"{per[c]:.2f}" for c in cols) + " |")
    print("\n## One claim, one complete --publish (K = 16)\n")
    print("Each a whole `lease` process for one ID, one after another (process start included). *Claim through B after")
    print("A*: a claim through client B of an ID that A claimed and released just before.\n")
    print("| fs | claim p50 | claim p90 | complete --publish p50 | complete --publish p90 | claim through B after A p50 | the same, before | samples |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for fs in FSES:
        c, p = ops.get((fs, "claim"), []), ops.get((fs, "publish"), [])
        if not c:
            continue
        q = lambda v, x: statistics.quantiles(v, n=10)[x] if len(v) >= 10 else max(v)
        x, xb = ops.get((fs, "cross-claim")), ops.get((fs, "cross-claim-before"))
        print(f"| {FSNAME[fs]} | {med(c):.1f} ms | {q(c, 8):.1f} ms | {med(p):.1f} ms | {q(p, 8):.1f} ms | "
              f"{ms(med(x)) if x else '—'} | {ms(med(xb)) if xb else '—'} | {len(c)} |")
    print("\n## A campaign: 8 workers of `lease run --next --wait --complete`, 4 through each client\n")
    print("A queue of items (`lease add`), each a 10 ms job; fuse-2ms has one mount, so its 8 workers share it. Every item")
    print("done once (checked: none left).\n")
    print("| fs | items | wall | items/s |")
    print("| --- | ---: | ---: | ---: |")
    for fs in FSES:
        if fs in camp:
            n, w = camp[fs]
            print(f"| {FSNAME[fs]} | {n} | {ms(w)} | {n / (w / 1000):.1f} |")


if __name__ == "__main__":
    main(sys.argv[1])
