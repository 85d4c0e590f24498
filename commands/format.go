package commands

// FormatManual is the text of lease-format(5), the table layout and
// record format that other programs rely on (docs markup, see manual.go).
type FormatManual struct {
	// Name is the page's one-line description, in NAME.
	Name string
	// Intro is the DESCRIPTION; Sections follow it, each under its own
	// heading.
	Intro    string
	Sections []Section
	// Examples are the page's examples.
	Examples []Example
	// SeeAlso are the page's references.
	SeeAlso []string
}

// Section is one section of a page: its heading and its text (docs
// markup).
type Section struct{ Title, Text string }

// FormatPage returns the text of lease-format(5).
func FormatPage() FormatManual {
	return FormatManual{
		Name:     "layout and record format of a lease table",
		Intro:    formatIntro,
		Sections: formatSections,
		Examples: formatExamples,
		SeeAlso:  []string{"lease(1)", "lease-fsck(1)", "lease-qualify(1)", "fcntl(2)", "rename(2)", "fsync(2)"},
	}
}

const formatIntro = "A lease table is a directory tree on a POSIX filesystem shared by every worker (local disk, " +
	"NFS, GlusterFS, CephFS; on any other, such as Lustre, run lease qualify first). Other programs (Python coordinators, shell scripts, jq) read and write the same table, so the " +
	"layout, the records, the durability protocol and the locks below are an interface, not an implementation " +
	"detail."

var formatSections = []Section{
	{"LAYOUT", "\tROOT/TABLE                     table header (JSON), written once, durably\n" +
		"\tROOT/work/SS/ID.json           work lease records\n" +
		"\tROOT/work/SS/ID.STATUS.N       status marker: a hard link of a done or failed record with N attempts\n" +
		"\tROOT/targets/SS/ID.json        target lease records\n" +
		"\tROOT/groups/SS/GID.json        group manifests, one per claimed target group\n" +
		"\tROOT/{work,targets,groups}/SS/.lock   lock file of shard SS\n" +
		"\tROOT/queue/SS/ID               one empty file per queued work item that is not done or failed\n" +
		"\tROOT/held/ID.E.TOKEN           one empty file per work lease in flight (E: expires_at when claimed, rounded up)\n" +
		"\tROOT/input/SS/ID               the content of work item ID (lease add --content), ID its SHA-256\n" +
		"\tROOT/stage/ID.TOKEN/NAME       results staged by the holder of token TOKEN of ID\n" +
		"\tROOT/public/NAME               results published by lease complete --publish NAME (a file or a directory)\n" +
		"\tROOT/public/ID/                the whole staging directory of ID, published (lease run --complete)\n" +
		"\tROOT/lost+found/               where lease fsck --repair quarantines what it cannot trust\n" +
		"\tROOT/reserve/spare.N           preallocated spare files for writes on a full filesystem (optional; see DURABILITY)\n" +
		"\tROOT/reserve/.lock             lock file of the spares: byte N is spare N's lock\n" +
		"\tROOT/tally/B/ID.STATUS.N       the tally: a hard link of a done or failed record, B its renewed_at rounded down to 300\n" +
		"\tROOT/tally/unqueued/ID         flag of an unfinished item whose record was made without a queue entry\n" +
		"\tROOT/tally/TRUSTED             the tally holds every finished record (lease status --summary counts from it)\n" +
		"\tROOT/tally/CHECKPOINT          a summary's cache of the counts of past buckets (JSON; may be deleted)\n\n" +
		"A status marker (ID.done.N, ID.failed.N) is only a hint for lease status --summary: it counts a done or " +
		"failed record without reading it when the marker and ID.json are one inode (any rewrite of the record " +
		"replaces ID.json by a new file, so a marker of an older version is never trusted). Programs that write " +
		"records need not make or remove markers; one that does makes it, under the record's lock, with link(2) " +
		"of ID.json after the rename. lease fsck reports a marker that is not its record's file as debris.\n\n" +
		"The tally is not a hint: while tally/TRUSTED exists, lease status --summary counts the finished items from " +
		"it alone. A program that writes work records must then, under the record's lock: link a record it writes " +
		"done or failed as tally/B/ID.STATUS.N (B = floor(renewed_at / 300) * 300, in decimal), after the record's " +
		"rename and before it removes the item's queue entry (the link need not be fsynced: a crash may lose it, " +
		"and lease fsck --repair, the procedure after any crash, makes the link of every finished record that " +
		"has none, so the summary may count short after a crash until the repair); remove the link of a done or " +
		"failed record, durably, before it replaces it; and make " +
		"tally/unqueued/ID (and fsync tally/unqueued) before it writes the first record of an ID that has no queue " +
		"entry. A program that cannot, or will not, removes tally/TRUSTED (and tally/TRUSTED.pending) before it " +
		"writes: the summary then reads the shards, and lease fsck --repair checks and trusts the tally again.\n\n" +
		"held/ is not authoritative either, only a claim's accelerator (abandoned first): lease makes held/ID.E.TOKEN " +
		"(E the lease's expires_at rounded up to the second, in decimal; TOKEN its token) under the record's lock " +
		"after a claim's write, not durably (a name a crash loses only leaves the item to be found in the queue), " +
		"and removes the names of an ID with a token up to the " +
		"record's after a release, complete, failed release or revoke (not durably). Renewals leave the name: E is a " +
		"lower bound of the expiry. claim --next (and every claimer from the queue) lists held/ first and tries the " +
		"queued items whose E + clock_skew has passed, oldest first, their record lock tried once, before the " +
		"queue; under the lock it renames a name of a lease renewed since to the record's expiry, removes the " +
		"name of a finished item, and a takeover renames it to the new lease's. Programs that write records need " +
		"not make or remove names: an item without one is still found in the queue. lease fsck reports a name of an " +
		"item not held under its token as debris (--repair removes it) and anything else in held/ as an error " +
		"(moved to lost+found/). A table without held/ is fine: the first claim makes it.\n\n" +
		"An ID is exactly 64 lowercase hex characters (a SHA-256 digest). Anything else is rejected before any " +
		"file is touched, so no path can be built from a bad ID.\n\n" +
		"The shard of an ID is int(ID[0:8], 16) % shards. The shard directory SS is the shard index in lowercase " +
		"hex, zero-padded to max(2, D) digits, D being the number of hex digits of shards - 1 (no 0x prefix counted: " +
		"1 for up to 16 shards, 2 up to 256, 3 up to 4096, 4 up to the maximum, 65536): with 16 shards, 00 to 0f; " +
		"with 256, 00 to ff; with 4096, 000 to fff. A directory of another name in work/, targets/, groups/ or " +
		"queue/ is not a shard.\n\n" +
		"TABLE holds one JSON object:\n\n" +
		"\t{\"schema\":\"lease.table/v1\",\"work_shards\":N,\"target_shards\":M,\"created_at\":T}\n\n" +
		"A table shared by a group (lease init --shared) also has `\"shared\":\"group\"` (or \"all\", or an octal mode such as " +
		"\"0660\"): every program that creates directories or files in the table must then make directories setgid and " +
		"readable, writable and searchable by the group (the root and stage/ also sticky, so that a member can rename " +
		"only its own entries there), lock files writable by the group, and other files readable by " +
		"it (see lease-init(1)); the modes it gives are bounded by the root's own mode, never let others write, and lock " +
		"files are readable only by those who may write them (in any table: 0600 when not shared). A table that lease init --force created on a filesystem lease knows is unsafe has " +
		"the filesystem type and the options that made it unsafe:\n\n" +
		"\t\"unsafe_filesystem\":{\"fstype\":\"fuse.glusterfs\",\"options\":[\"performance.open-behind\",...],\n" +
		"\t  \"accepted_by\":\"lease init --force\",\"accepted_at\":T}\n\n" +
		"It changes nothing in the protocol; lease warns on every command there. Other unknown keys are preserved by " +
		"lease and may be ignored by readers.\n\n" +
		"It is authoritative: shard counts from the configuration apply only when the table is created, and an explicit " +
		"conflicting --shards is a usage error. ROOT/stage/ must be on the same filesystem as ROOT/public/.\n\n" +
		"Only lease init creates a table: every other command refuses a ROOT without TABLE (exit 2) and creates " +
		"nothing there, so a mistyped root or an unset LEASE_ROOT never starts a second campaign. Missing " +
		"directories of an existing table (queue/, held/, stage/, public/, a shard) are created on demand, durably (mkdir, then " +
		"an fsync of the parent), since other programs make tables too."},
	{"RECORDS", "One JSON object per file, UTF-8, newline-terminated, at most 4 KiB. A work record:\n\n" +
		"\t{\"schema\":\"lease.work/v1\",\"id\":\"<ID>\",\"status\":\"leased\",\n" +
		"\t \"owner\":\"host-a/fuzz-3\",\"token\":7,\"claimed_at\":1764450000.5,\n" +
		"\t \"renewed_at\":1764450030.5,\"expires_at\":1764450150.5}\n\n" +
		"status is one of leased, committing, released, done, failed. A committing record written by lease complete " +
		"--publish also carries `\"publish\":\"<basename>\"`, or `\"publish\":\".\"` when its result is the whole " +
		"staging directory (see STAGING); a done record keeps it. A lease is live when its " +
		"status is leased or committing and now < expires_at. Times are seconds since the Unix epoch as JSON " +
		"numbers, written with microsecond precision.\n\n" +
		"Attempts: a work record may carry `\"attempts\":N`, the runs of the item that ended in failure (a plain " +
		"integer in [0, 2^53-1]; left out when 0), and from the last failed run `\"exit_status\":S` (its exit " +
		"status, an integer in [1, 255], 128+n for a command killed by signal n; left out when not known) and " +
		"`\"stderr_tail\":\"...\"` (the end of its standard error: at most 1024 bytes of UTF-8 whose only control " +
		"characters are newline and tab; writers replace invalid UTF-8, turn carriage returns into newlines and " +
		"leave terminal escape sequences (CSI, OSC: a fuzzer's colours) and other control characters out, so that the largest tail still fits a 4 KiB record, and shorten it, " +
		"keeping its end, when unknown keys leave less room). A release after a failed run (lease release " +
		"--failed, lease run --complete when its command fails) writes the record released with attempts + 1 " +
		"and these fields; once attempts reaches max_attempts (default 3) it writes it `failed` instead and then " +
		"removes the item's queue entry. failed is terminal like done: claims, renewals, releases, completes and " +
		"revokes refuse it (reason word failed), until lease retry writes it released with the three fields " +
		"cleared, keeping its token, after making its queue entry again, durably, under the record's lock. A " +
		"queue entry of a failed item is removed only under the record's lock, after the record was read there " +
		"as failed. Records without these fields (older tables) are valid: no attempts.\n\n" +
		"The token of an ID never decreases, and every new claim of an ID gets a strictly larger token than any " +
		"earlier claim of it (fencing): a holder that lost its lease cannot renew, release, complete or publish " +
		"with its old token. This holds across repair too: when lease fsck --repair quarantines a record, it " +
		"leaves a released record in its place (owner lease-fsck) whose token is at least the highest token it " +
		"can read from the quarantined bytes, or, when it can read none, a token no earlier claim can have had " +
		"(the time in microseconds).\n\n" +
		"An expired committing record that carries publish is never simply taken over: whoever meets it under " +
		"its lock first (the next claim, lease revoke, lease fsck --repair) rolls it forward to done when the " +
		"result is in public/ (public/NAME, or public/ID for \".\") and the staged result is gone or is the same " +
		"file or the same bytes; otherwise it rolls it back to released, whether the staged result is still in " +
		"its staging directory (it stays there) or is in neither place (lost before the move, or removed by " +
		"hand): the record keeps its token and its queue entry, so the item is claimed and run again. A result " +
		"is published at most once per ID. A claim settles it only once it could take the record over (now >= " +
		"expires_at + clock_skew); a release with the current token and lease revoke settle it whenever they " +
		"meet it; lease fsck --repair rolls it forward whenever it meets it, and back only once a claim could.\n\n" +
		"A target record (targets/SS/ID.json, schema lease.target/v1) has the same fields plus " +
		"`\"group\":\"<GID>\"`; its status is leased or released. A group manifest (groups/SS/GID.json, schema " +
		"lease.group/v1) has the fields of a work record plus `\"targets\":[sorted unique IDs]`. All targets of a " +
		"live group carry the group's token, owner and expires_at.\n\n" +
		"Readers must reject: an unknown schema; missing fields or fields of the wrong type; an id different from " +
		"the file name; non-canonical IDs; a token that is not an integer in [1, 2^53-1]; times that are not " +
		"finite numbers >= 0 (the literals NaN and Infinity included); an owner that is empty, longer than 256 " +
		"bytes or holds control characters; a string anywhere in the record (unknown keys included) that holds a " +
		"\\u escape of a lone surrogate (U+D800 to U+DFFF not as a high surrogate escape followed at once by a " +
		"low one, as in \"a\\ud800b\": JSON decoders read it as U+FFFD, so that a rewrite would change the owner " +
		"with no one asking); an unknown status; duplicate keys; attempts, exit_status or " +
		"stderr_tail out of their ranges above; a publish that is neither \".\" nor a plain file name. Unknown extra keys are preserved " +
		"on rewrite. A record that exists but does not validate is never treated as free and never overwritten " +
		"by normal operations: it is reported as corrupt (exit 3) and left for lease fsck. Writers refuse the same " +
		"values before anything is written: an owner given as --owner, LEASE_OWNER or the config file that is " +
		"not such text is a usage error (exit 2), and lease never writes a surrogate escape.\n\n" +
		"The answers of renew, release, complete and verify for an ID TOKEN line are decided under the record's " +
		"lock, in this order: missing (no record); stale-token when TOKEN is not the record's token, whatever " +
		"the record's status (a stale token of a done item is stale-token, not done); then done, failed, " +
		"released; then expired when now >= expires_at - clock_skew (a lease within clock_skew of its end " +
		"counts as lost). A claim answers done or failed for such records; held while a leased or committing " +
		"record has now < expires_at + clock_skew; corrupt when the token cannot grow (it is 2^53-1); and " +
		"otherwise writes the record leased with the token plus one (a new record starts at token 1)."},
	{"DURABILITY", "Every record change is: lock; re-read and validate under the lock; write a temporary file " +
		"`.ID.json.tmp.<random>` in the same directory; flush and fsync it; rename it over ID.json; fsync the " +
		"directory before success is reported. The invariants:\n\n" +
		"- G1: content is fsynced before its name changes.\n" +
		"- G2: each record switches atomically, with one rename.\n" +
		"- G3: success is returned only after every directory touched by the operation was fsynced.\n" +
		"- G4: within one batch each directory is fsynced once (group commit: N file fsyncs and K directory fsyncs for N records in K shards).\n" +
		"- G5: if record i fails, the directories of records already renamed are still fsynced before the error is returned.\n" +
		"- G6: a failed directory fsync fails the whole batch: nothing is reported as renewed.\n" +
		"- G7: a stale token (or a done, released, missing or corrupt record) causes no write and no fsync.\n" +
		"- G8: a batch refuses a rename whose source and destination directories differ; the move from stage/ to public/ is a durable replace that fsyncs the destination directory first, then the source directory, and never replaces an existing name (of a directory result too: every file and directory of it is fsynced before the move).\n" +
		"- G9: a group is all-or-nothing: all locks in a fixed global order, all tokens validated before the first write, old records restored if any write or barrier fails.\n\n" +
		"The reserve: a full filesystem (ENOSPC, or EDQUOT for a quota) must not end a live lease. ROOT/reserve/ holds spare " +
		"files spare.N (N a decimal number), each 4096 bytes written and fsynced, made by lease init (256 of them) and topped up " +
		"by lease fsck --repair and by batches when space allows. A holder's own write of its record (a renewal, a release, a " +
		"complete, the committing and done records of complete --publish: the token stays, the record is leased or committing) " +
		"whose temp file cannot be created or written for want of space takes a spare instead: it locks byte N of " +
		"ROOT/reserve/.lock (an OFD lock, as for records; a spare whose lock is held is another writer's), writes the new record " +
		"over the start of spare.N in place, truncates it to the record's length and fdatasyncs it (writing inside allocated " +
		"blocks allocates nothing on filesystems that update in place, such as ext4 and XFS), then swaps spare.N with ID.json " +
		"in one step (renameat2 RENAME_EXCHANGE: ID.json now holds the new record, spare.N the replaced record's file, which is the " +
		"next spare), fsyncs the record's directory and then ROOT/reserve/, and only then unlocks the spare. Nothing is " +
		"allocated, no directory entry is made, and the reserve lasts as long as the full disk does. A spare with more than one link " +
		"(a crash can leave the replaced record's file under both names) or with fewer bytes allocated than the record needs is " +
		"never written: its name is removed. Claims of new work and lease add never use the reserve: on a full filesystem they " +
		"fail (exit 4). The reserve is optional: a table without ROOT/reserve/, or on a filesystem without RENAME_EXCHANGE (NFS), " +
		"has no spares and fails on a full filesystem as any write does; other programs may ignore ROOT/reserve/ entirely, or use " +
		"it the same way. On copy-on-write filesystems (btrfs, ZFS) an overwrite allocates, and the reserve helps only as far as " +
		"their own reserves do."},
	{"STAGING", "A holder stages results in its own directory ROOT/stage/ID.TOKEN/, named by its token (lease " +
		"run makes it and passes it as LEASE_STAGE). lease complete --publish NAME fsyncs ROOT/stage/ID.TOKEN/NAME, " +
		"writes the record committing with publish NAME, moves the file to ROOT/public/NAME with the durable " +
		"cross-directory replace (never over an existing name) and writes the record done, all under the record's " +
		"lock, and only while TOKEN is current. A stale holder writing the same NAME writes into its own, " +
		"never-published directory. Staging directories of tokens that are no longer current are garbage that " +
		"lease fsck --repair moves to lost+found/ (never deletes): a stale staged file whose bytes equal a published " +
		"result is moved too. Only a staged name that is the same file (one inode) as its published result, a link " +
		"left by a move that fell back to link and unlink, is removed, since no byte goes with it.\n\n" +
		"A result is a regular file or a directory tree of regular files and directories (any names; a symbolic " +
		"link or anything else in it refuses the publish, before anything is written). It becomes visible " +
		"atomically and once: every file of it is fsynced, then every directory of it, deepest first; then the " +
		"record is written committing; then one rename without replacing (renameat2 RENAME_NOREPLACE) moves it " +
		"into public/, which is fsynced, then the directory it left; then the record is written done. " +
		"`\"publish\":\".\"` names the whole staging directory: ROOT/stage/ID.TOKEN itself is renamed to " +
		"ROOT/public/ID, a name no other item's result can take, whatever names the files in it have (what lease " +
		"run --complete publishes of what its command left in LEASE_STAGE; lease complete --publish . or the " +
		"staging directory's own path). A publish that fails (a name taken, a link staged, an I/O error before " +
		"the move) leaves the item not done and everything staged in place; a committing record whose publisher " +
		"died is settled as above (public/ID there: rolled forward; ROOT/stage/ID.TOKEN still there: rolled " +
		"back). lease fsck counts a directory in public/ that no done or committing record names as an orphan."},
	{"INPUT", "An item may carry its input: ROOT/input/SS/ID holds the content of work item ID, where ID is the " +
		"SHA-256 of that content (as lease id --content and sha256sum compute it) and SS the ID's work shard " +
		"directory name. lease add --content FILE... stores each file so: it is hashed, then copied to a temp " +
		"file `.ID.tmp.<random>` in input/SS/ while it is hashed again (a file that changed in between is refused " +
		"and its copy removed), fsynced, and renamed to ID without replacing (a content stored already is the " +
		"same bytes); each input shard directory touched is fsynced once, and only then are the IDs queued, so " +
		"that a queued item's input is durable. Contents are at most 1 GiB. lease run passes the path to its " +
		"command as LEASE_INPUT (empty for an item without one). lease fsck hashes every file of input/: one " +
		"whose content does not hash to its name, or that is not a regular file named by an ID, is moved to " +
		"lost+found/; one in the wrong shard is moved to its shard; a temp file an hour old is removed. The store " +
		"is optional: a table without input/ is fine, and other programs may store inputs the same way."},
	{"CLOCKS", "Every operation reads the clock while it holds the record's lock, never once per process: " +
		"input that arrives late cannot grant or renew a lease that is already over, and a claim or renewal whose " +
		"new expires_at (less clock_skew) has passed by the time it is durable is reported expired, not granted. " +
		"A renewal without --ttl keeps the lease's own duration (expires_at - renewed_at). clock_skew (default " +
		"1 s) bounds the clock difference between nodes: a claimer takes over an expired lease only when now >= " +
		"expires_at + clock_skew, and a holder (verify, renew, complete, lease run) counts its lease as lost from " +
		"expires_at - clock_skew. A ttl must be more than clock_skew (and renew_interval less than ttl - " +
		"clock_skew): anything else is a usage error (exit 2), since the lease would count as lost when granted.\n\n" +
		"clock_skew is each client's setting and is not recorded in TABLE, for two reasons. The records do not " +
		"depend on it: every write is fenced by the token under the record's lock, so a client whose clock_skew " +
		"is too small (or whose clock is wrong) can make two workers believe they hold one item for a while, " +
		"but cannot make a stale holder's renew, complete or publish succeed. And the margins of the two sides " +
		"add up: a holder with clock_skew h and a claimer with clock_skew c never both hold the lease while their " +
		"clocks differ by at most h + c, so a second program that uses 0 beside lease's 1 s is still safe up to " +
		"1 s of difference. A campaign that wants one value gives it to every client in the config file " +
		"(clock_skew) or LEASE_CLOCK_SKEW."},
	{"LOCKS", "Mutual exclusion per record is an exclusive fcntl(2) write lock (POSIX or OFD; they conflict with " +
		"each other on Linux), a byte-range lock on one byte of the shard's .lock file, at offset int(ID[0:15], 16), length 1. " +
		"flock(2), and so flock(1), takes a different kind of lock, not this one: on a local filesystem the two " +
		"kinds do not conflict, so flock on a .lock file excludes no lease operation and no lease operation waits " +
		"for it (on NFS, Linux emulates flock with an fcntl lock of the whole file, which would stall every record " +
		"of the shard instead). Either way flock takes no record's lock. A shell script that must " +
		"change a record takes the lock through lease (lease claim, lease run) or through a language with " +
		"fcntl(2) (Python's fcntl.lockf(fd, fcntl.LOCK_EX, 1, offset)). The " +
		"kernel drops it when the holder dies; it works between processes and between the nodes of a shared " +
		"filesystem that supports fcntl locks. The shard lock file is created once and never deleted. Waiting " +
		"is bounded (--lock-timeout, default 10 s; exit 5 past it). Groups take the manifest's lock first, then " +
		"the targets' locks in ascending ID order.\n\n" +
		"A program that changes records without lease must take the same lock, follow the durability protocol " +
		"above, and never write a token smaller than the record's.\n\n" +
		"lease fsck --repair holds, from its start to its end, an exclusive lock on the byte at offset 2^60 " +
		"(1152921504606846976) of work shard 0's .lock file (ROOT/work/00/.lock with up to 256 work shards): beyond " +
		"the byte of every record, so it excludes other repairs and nothing else. A second repair waits for it " +
		"(--lock-timeout), then exits 8 saying that another repair runs; a check without --repair takes no such " +
		"lock. A program that repairs a table on its own should take the same byte."},
}

var formatExamples = []Example{
	{"Find the record of an ID in a table with 16 work shards (lease id item-42 makes the same ID as sha256sum):",
		"id=$(printf %s item-42 | sha256sum | cut -c1-64)   # or: id=$(lease id item-42)\nprintf '%02x\\n' $(( 0x${id:0:8} % 16 ))   # shard directory\ncat \"$LEASE_ROOT/work/$(printf '%02x' $(( 0x${id:0:8} % 16 )))/$id.json\""},
	{"Read every live lease with jq:", "lease status --json --live | jq -r '[.id, .owner, .token] | @tsv'"},
}
