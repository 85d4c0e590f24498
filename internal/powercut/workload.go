package powercut

import (
	"fmt"
	"strings"
)

// The workload the guest runs: lease commands against the table on the
// image, each acknowledged operation reported on the console (a write the
// cut cannot take back) only after the command returned success. Lines:
//
//	ACK init
//	ACK add ID              the ID is queued (or has a record)
//	ACK claim ID TOKEN      a lease granted with TOKEN
//	RENEW-START T0          a renew-batch of every held lease began at T0
//	ACK renew T0            ... and returned: each such lease expires at >= T0+RenewTTL
//	ACK done ID TOKEN       completed with TOKEN
//	ACK publish ID TOKEN SHA256 BYTES   completed, public/ID/res holds those bytes
//	ACK work ID TOKEN       lease work ran and finished the item: done, public/ID/out = ID
//	ACK fsck RC             lease fsck --repair returned (not checked: a record of what ran)
//	PCFAIL WHAT             a command failed (the harness reports it: a workload that does
//	                        not run proves nothing)

// ClaimTTL and RenewTTL are the leases' durations: long, so that nothing
// expires while a cut runs, and different, so that a record shows whether
// a renewal reached it.
const (
	ClaimTTL = 100000
	RenewTTL = 200000
	// Batch is the number of leases claimed at the start and renewed by
	// every renew-batch (in every shard of the table).
	Batch = 300
)

func workload(lease, fstype, mountOpts string, seed int64) string {
	opts := ""
	if mountOpts != "" {
		opts = "-o " + mountOpts
	}
	s := `set -u
L=@LEASE@; R=/run/d/t; S=@SEED@
O="--owner pc --lock-timeout 60"
ack() { echo "ACK $*" > /dev/console; }
fail() { echo "PCFAIL $*" > /dev/console; exit 1; }
mkdir -p /run/d && mount -t @FSTYPE@ @OPTS@ /dev/ubda /run/d || fail mount
$L init --root $R --shards 8 >/dev/null 2>&1 || fail init
ack init
seq -f "b-$S-%g" 1 @BATCH@ | $L id - > /run/ids || fail id
$L add --root $R /run/ids > /run/added 2>/run/err || fail add "$(cat /run/err)"
sed 's/^/ACK add /' /run/added > /dev/console
$L claim --root $R $O --ttl @CLAIMTTL@ --next @BATCH@ > /run/held 2>/run/err || fail claim-next "$(cat /run/err)"
sed 's/^/ACK claim /' /run/held > /dev/console
i=0
while :; do
	i=$((i+1))
	case $((i % 5)) in
	0)	T0=$(date +%s)
		echo "RENEW-START $T0" > /dev/console
		$L renew-batch --root $R $O --ttl @RENEWTTL@ --in-place /run/held 2>/run/err || fail renew-batch "$(cat /run/err)"
		ack renew $T0 ;;
	1)	ID=$(echo "p-$S-$i" | $L id -)
		out=$($L claim --root $R $O --ttl @CLAIMTTL@ $ID 2>/run/err) || fail claim "$(cat /run/err)"
		ack claim $out
		TOK=${out#* }
		D=$R/stage/$ID.$TOK
		mkdir -m 0700 $D || fail mkdir-stage
		head -c $(( (i % 7 + 1) * 4096 )) /dev/urandom > $D/res || fail stage
		SUM=$(sha256sum < $D/res); SUM=${SUM%% *}
		echo "$ID $TOK" | $L complete --root $R $O --publish $D > /dev/null 2>/run/err || fail publish "$(cat /run/err)"
		ack publish $ID $TOK $SUM $(( (i % 7 + 1) * 4096 )) ;;
	2)	head -n 7 /run/held > /run/c
		[ -s /run/c ] || continue
		$L complete --root $R $O /run/c > /run/cdone 2>/run/err || fail complete "$(cat /run/err)"
		sed 's/^/ACK done /' /run/cdone > /dev/console
		tail -n +8 /run/held > /run/held.new && mv /run/held.new /run/held ;;
	3)	printf "w-$S-$i-1\nw-$S-$i-2\n" | $L id - > /run/wids
		$L add --root $R /run/wids > /run/added 2>/run/err || fail add "$(cat /run/err)"
		sed 's/^/ACK add /' /run/added > /dev/console
		$L work --root $R --owner w --ttl @CLAIMTTL@ --json --max-items 1 -- sh -c 'echo "$LEASE_ID" > "$LEASE_STAGE/out"' 2>/run/wj >/dev/null || fail work "$(tail -c 300 /run/wj)"
		sed -n 's/.*"id":"\([0-9a-f]*\)","token":\([0-9]*\),.*"finish":"done".*/ACK work \1 \2/p' /run/wj > /dev/console ;;
	4)	if [ $((i % 10)) = 4 ]; then
			$L fsck --root $R --repair > /run/fsck 2>&1; rc=$?
			[ $rc -le 1 ] || fail fsck-repair $rc "$(tail -c 300 /run/fsck)"
			ack fsck $rc
		else
			ID=$(echo "c-$S-$i" | $L id -)
			out=$($L claim --root $R $O --ttl @CLAIMTTL@ $ID 2>/run/err) || fail claim "$(cat /run/err)"
			ack claim $out
		fi ;;
	esac
done
`
	r := strings.NewReplacer("@LEASE@", lease, "@SEED@", fmt.Sprint(seed), "@FSTYPE@", fstype, "@OPTS@", opts,
		"@BATCH@", fmt.Sprint(Batch), "@CLAIMTTL@", fmt.Sprint(ClaimTTL), "@RENEWTTL@", fmt.Sprint(RenewTTL))
	return r.Replace(s)
}
