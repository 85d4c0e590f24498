#!/usr/bin/env python3
"""seed.py: the seed's Python renewal algorithms on a lease table, a benchmark baseline (issue 8).

    seed.py renew --root DIR --now T --ttl S --strategy {f324,f323,nosync} < held

Reads `ID TOKEN` lines (blank lines and # comments skipped), the input of `lease renew-batch`,
and renews those work leases in the table's own format (shared/SPEC.md §2-§5), one record at a
time in input order: lock one byte of the shard's .lock file (fcntl, docs/design.md#locks), re-read and
validate the record, check that the token is current and the lease live, write the renewed
record (renewed_at = now, expires_at = now + ttl, every other field kept) to
.ID.json.tmp.<random hex>, fsync it, rename it over ID.json, unlock. Records are written in
lease's canonical form; unknown keys keep their values but are re-encoded by json.dumps, as a
Python writer does (lease copies them verbatim).

    f323    fsync the shard directory after every record (seed F323)
    f324    fsync every touched shard directory once, at the end (seed F324 group commit;
            also when a record fails half-way, before the error is raised)
    nosync  no fsync at all, one os.sync() at the end (the floor, not durable)

stdout: `ID TOKEN` of each renewed lease, in input order, once every barrier succeeded;
stderr: `REASON ID TOKEN detail (path)` of each lease not renewed. Exit 0 when all were
renewed, 1 otherwise (2: bad usage or input, nothing written). --stats adds a last stderr line
`stats renewed=R lost=L file_syncs=F directory_syncs=D`. Python 3.11 standard library.
"""
import argparse
import errno
import fcntl
import json
import math
import os
import re
import sys
import unicodedata

MAX_RECORD = 4096
MAX_TOKEN = 2**53 - 1
KNOWN = ("schema", "id", "status", "owner", "token", "claimed_at", "renewed_at", "expires_at", "publish")
ID_RE = re.compile(r"[0-9a-f]{64}\Z")
TOKEN_RE = re.compile(r"[1-9][0-9]{0,15}\Z")
SYNCS = {"file": 0, "directory": 0}


class Corrupt(Exception):
    pass


def fmt_time(t):
    """Seconds with microsecond precision and no trailing zeros, as lease writes them."""
    return ("%.6f" % t).rstrip("0").rstrip(".")


def jstr(s):
    # Go's encoding/json (HTML escaping off) also escapes U+2028 and U+2029.
    return json.dumps(s, ensure_ascii=False).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def no_duplicates(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise Corrupt("duplicate key %r" % k)
        d[k] = v
    return d


def not_json(literal):
    raise Corrupt("not JSON: %s" % literal)


def decode(data, ident):
    """The work record in data, validated as docs/design.md#records says, or Corrupt."""
    if not data or len(data) > MAX_RECORD:
        raise Corrupt("record is %d bytes" % len(data))
    try:
        r = json.loads(data.decode("utf-8"), object_pairs_hook=no_duplicates, parse_constant=not_json)
    except ValueError as e:  # UnicodeDecodeError and JSONDecodeError included
        raise Corrupt("not JSON: %s" % e)
    if not isinstance(r, dict):
        raise Corrupt("not a JSON object")
    if r.get("schema") != "lease.work/v1":
        raise Corrupt("schema is %r" % r.get("schema"))
    if r.get("id") != ident:
        raise Corrupt("id is %r, not the file's" % r.get("id"))
    if r.get("status") not in ("leased", "committing", "released", "done"):
        raise Corrupt("status is %r" % r.get("status"))
    owner = r.get("owner")
    if not isinstance(owner, str) or not owner or len(owner.encode("utf-8", "surrogatepass")) > 256 \
            or any(unicodedata.category(c) in ("Cc", "Cs") for c in owner):
        raise Corrupt("bad owner")
    if type(r.get("token")) is not int or not 1 <= r["token"] <= MAX_TOKEN:
        raise Corrupt("token is %r" % r.get("token"))
    for k in ("claimed_at", "renewed_at", "expires_at"):
        v = r.get(k)
        if type(v) not in (int, float) or not math.isfinite(v) or v < 0:
            raise Corrupt("%s is %r" % (k, v))
        r[k] = float(fmt_time(v))  # the precision records are written with
    if "publish" in r:
        p = r["publish"]
        if not isinstance(p, str) or p in ("", ".", "..") or "/" in p or "\0" in p:
            raise Corrupt("publish is %r" % p)
    return r


def encode(r):
    """r in lease's canonical form: known keys in order, then unknown keys as read."""
    out = ['{"schema":"lease.work/v1","id":"%s","status":"%s","owner":%s,"token":%d,'
           '"claimed_at":%s,"renewed_at":%s,"expires_at":%s' % (
               r["id"], r["status"], jstr(r["owner"]), r["token"],
               fmt_time(r["claimed_at"]), fmt_time(r["renewed_at"]), fmt_time(r["expires_at"]))]
    if r.get("publish"):
        out.append(',"publish":' + jstr(r["publish"]))
    for k, v in r.items():
        if k not in KNOWN:
            out.append("," + jstr(k) + ":" + json.dumps(v, ensure_ascii=False, separators=(",", ":")))
    out.append("}\n")
    return "".join(out).encode("utf-8")


def fsync_dir(d):
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
        SYNCS["directory"] += 1
    finally:
        os.close(fd)


def usage(msg):
    sys.stderr.write("seed.py: %s\n" % msg)
    sys.exit(2)


def read_input(f):
    items, seen = [], set()
    for n, line in enumerate(f, 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) != 2 or not ID_RE.match(fields[0]) or not TOKEN_RE.match(fields[1]) \
                or int(fields[1]) > MAX_TOKEN:
            usage("stdin:%d: malformed line %r: want \"ID TOKEN\"" % (n, line.rstrip("\n")))
        if fields[0] in seen:
            usage("stdin:%d: duplicate id %s" % (n, fields[0]))
        seen.add(fields[0])
        items.append((fields[0], int(fields[1])))
    return items


def renew_one(root, shards, ident, token, now, ttl, strategy):
    """Renews one lease under its lock; returns (reason, detail, dir), reason None when renewed."""
    width = max(2, len("%x" % (shards - 1)))
    d = os.path.join(root, "work", "%0*x" % (width, int(ident[:8], 16) % shards))
    final = os.path.join(d, ident + ".json")
    try:
        lk = os.open(os.path.join(d, ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except FileNotFoundError:
        return "missing", "no record", d  # no shard directory
    try:
        fcntl.lockf(lk, fcntl.LOCK_EX, 1, int(ident[:15], 16), os.SEEK_SET)  # F_SETLKW, one byte
        try:
            fd = os.open(final, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return "missing", "no record", d
        except OSError as e:  # a symbolic link (ELOOP) or worse in the record's place
            return "corrupt", "cannot open: %s" % e.strerror, d
        try:
            data = os.read(fd, MAX_RECORD + 1)
        except IsADirectoryError:
            return "corrupt", "not a regular file", d
        finally:
            os.close(fd)
        try:
            r = decode(data, ident)
        except Corrupt as e:
            return "corrupt", str(e), d
        if r["token"] != token:
            return "stale-token", "current token is %d (%s, owner %s)" % (r["token"], r["status"], jstr(r["owner"])), d
        if r["status"] in ("done", "released"):
            return r["status"], "work is done" if r["status"] == "done" else "lease was released", d
        if not now < r["expires_at"]:
            return "expired", "expired %.1fs ago" % (now - r["expires_at"]), d
        r["renewed_at"], r["expires_at"] = now, now + ttl
        data = encode(r)
        tmp = os.path.join(d, ".%s.json.tmp.%s" % (ident, os.urandom(6).hex()))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        try:
            try:
                if os.write(fd, data) != len(data):  # at most 4 KiB: short only when the disk is full
                    raise OSError(errno.ENOSPC, "short write", tmp)
                if strategy != "nosync":
                    os.fsync(fd)
                    SYNCS["file"] += 1
            finally:
                os.close(fd)
            os.rename(tmp, final)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        if strategy == "f323":
            fsync_dir(d)
        return None, "", d
    finally:
        os.close(lk)  # drops the lock


def renew(args):
    with open(os.path.join(args.root, "TABLE"), "rb") as f:
        try:
            shards = json.loads(f.read())["work_shards"]
        except (ValueError, KeyError, TypeError):
            shards = None
    if type(shards) is not int or not 1 <= shards <= 65536:
        usage("%s/TABLE: bad work_shards" % args.root)
    items = read_input(sys.stdin)
    renewed, pending, lost = [], {}, 0  # pending: the shard directories renamed into, in order
    try:
        for ident, token in items:
            reason, detail, d = renew_one(args.root, shards, ident, token, args.now, args.ttl, args.strategy)
            if reason is None:
                renewed.append("%s %d\n" % (ident, token))
                pending[d] = True
            else:
                lost += 1
                sys.stderr.write("%s %s %d %s (%s)\n" % (reason, ident, token, detail,
                                                         os.path.join(d, ident + ".json")))
    finally:
        # F324: the directories renamed into are fsynced even when a record failed half-way.
        if args.strategy == "f324":
            for d in pending:
                fsync_dir(d)
        elif args.strategy == "nosync":
            os.sync()
    sys.stdout.writelines(renewed)
    if args.stats:
        sys.stderr.write("stats renewed=%d lost=%d file_syncs=%d directory_syncs=%d\n" % (
            len(renewed), lost, SYNCS["file"], SYNCS["directory"]))
    return 1 if lost else 0


def main():
    p = argparse.ArgumentParser(prog="seed.py", description="The seed's Python lease renewal (a benchmark baseline).")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("renew", help="renew the ID TOKEN lines of stdin")
    r.add_argument("--root", required=True)
    r.add_argument("--now", type=float, required=True)
    r.add_argument("--ttl", type=float, required=True)
    r.add_argument("--strategy", choices=("f324", "f323", "nosync"), default="f324")
    r.add_argument("--stats", action="store_true", help="print the counts of renewals and fsyncs on stderr")
    args = p.parse_args()
    if not (math.isfinite(args.now) and math.isfinite(args.ttl) and args.now >= 0 and args.ttl >= 0):
        p.error("--now and --ttl must be finite and >= 0")
    try:
        return renew(args)
    except OSError as e:  # nothing is reported as renewed (G6)
        sys.stderr.write("seed.py: I/O error, nothing renewed: %s\n" % e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
