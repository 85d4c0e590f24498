package leasefmt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxRecordSize is the largest record file a reader accepts (docs/design.md#records).
const MaxRecordSize = 4096

// MaxToken is the largest token: 2^53-1, exact in every JSON reader.
const MaxToken = 1<<53 - 1

// MaxOwnerLen bounds the owner field in bytes.
const MaxOwnerLen = 256

// ErrCorrupt is wrapped by every error about a record or header that exists
// but does not validate.
var ErrCorrupt = errors.New("corrupt record")

// Kind is the kind of a record, which fixes its schema and its directory.
type Kind int

// The record kinds.
const (
	Work Kind = iota
	Target
	Group
)

// Schema is the schema string of records of kind k.
func (k Kind) Schema() string {
	switch k {
	case Target:
		return "lease.target/v1"
	case Group:
		return "lease.group/v1"
	}
	return "lease.work/v1"
}

// Dir is the top-level directory of records of kind k.
func (k Kind) Dir() string {
	switch k {
	case Target:
		return "targets"
	case Group:
		return "groups"
	}
	return "work"
}

// String is the kind's directory name.
func (k Kind) String() string { return k.Dir() }

// Status is the state of a lease.
type Status string

// The statuses. Targets and groups use only Leased and Released.
const (
	Leased     Status = "leased"
	Committing Status = "committing"
	Released   Status = "released"
	Done       Status = "done"
	// Failed is terminal like Done (claims refuse it) until an operator
	// puts the item back (lease retry): its runs failed max_attempts
	// times (docs/lease-format.md).
	Failed Status = "failed"
)

func (k Kind) allows(s Status) bool {
	switch s {
	case Leased, Released:
		return true
	case Committing, Done, Failed:
		return k == Work
	}
	return false
}

// Field is a key this version does not know, kept verbatim (compacted) so a
// rewrite preserves what a newer writer put there.
type Field struct {
	Key   string
	Value json.RawMessage
}

// Record is one work, target or group lease record.
type Record struct {
	Kind      Kind
	ID        ID
	Status    Status
	Owner     string
	Token     int64
	ClaimedAt float64
	RenewedAt float64
	ExpiresAt float64
	// Publish is the staged basename a committing work record publishes,
	// or PublishStage for the whole staging directory.
	Publish string
	// Attempts counts the runs of a work item that ended in failure
	// (0: none, and the key is left out).
	Attempts int64
	// ExitStatus is the exit status of the last failed run, 1 to 255 (0:
	// not known, and the key is left out).
	ExitStatus int
	// StderrTail is the end of the last failed run's standard error, as
	// Tail makes it ("" when none).
	StderrTail string
	// Group is the group a target record belongs to.
	Group ID
	// Targets are the sorted unique targets of a group manifest.
	Targets []ID
	// Extra holds unknown keys in the order they were read.
	Extra []Field
}

// Live reports whether r is held at time now: leased or committing and
// now < expires_at.
func (r *Record) Live(now float64) bool {
	return (r.Status == Leased || r.Status == Committing) && now < r.ExpiresAt
}

// Clone returns a deep copy of r.
func (r *Record) Clone() *Record {
	c := *r
	c.Targets = append([]ID(nil), r.Targets...)
	c.Extra = append([]Field(nil), r.Extra...)
	return &c
}

// FormatError says why a record or header does not validate.
type FormatError struct {
	Field  string // the offending key, "" for the document as a whole
	Reason string
}

// Error names the field and what is wrong with it.
func (e *FormatError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return fmt.Sprintf("field %q: %s", e.Field, e.Reason)
}

// Unwrap makes every FormatError an ErrCorrupt.
func (e *FormatError) Unwrap() error { return ErrCorrupt }

func bad(field, format string, args ...any) error {
	return &FormatError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// ParseToken parses a token: a plain decimal integer in [1, 2^53-1].
func ParseToken(s string) (int64, error) {
	if len(s) == 0 || len(s) > 16 || s[0] < '1' || s[0] > '9' {
		return 0, fmt.Errorf("token %s is not an integer in [1, 2^53-1]", Quote(s))
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("token %s is not an integer in [1, 2^53-1]", Quote(s))
		}
	}
	t, err := strconv.ParseInt(s, 10, 64)
	if err != nil || t > MaxToken {
		return 0, fmt.Errorf("token %s is not an integer in [1, 2^53-1]", Quote(s))
	}
	return t, nil
}

// CheckOwner validates an owner name: non-empty, at most 256 bytes, valid
// UTF-8, no control characters.
func CheckOwner(s string) error {
	if s == "" {
		return errors.New("owner is empty")
	}
	if len(s) > MaxOwnerLen {
		return fmt.Errorf("owner is %d bytes, more than %d", len(s), MaxOwnerLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("owner %s is not valid UTF-8", Quote(s))
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("owner %s contains a control character", Quote(s))
		}
	}
	return nil
}

// CheckTime validates a time or duration: a finite number >= 0.
func CheckTime(name string, t float64) error {
	if math.IsNaN(t) || math.IsInf(t, 0) {
		return fmt.Errorf("%s is not a finite number", name)
	}
	if t < 0 {
		return fmt.Errorf("%s is negative", name)
	}
	return nil
}

// PublishStage is the publish value of a work record whose result is its
// whole staging directory stage/ID.TOKEN/, published as public/ID/
// (docs/lease-format.md): "." names the staging directory itself.
const PublishStage = "."

// CheckPublish validates the publish value of a record: a staged basename
// or PublishStage.
func CheckPublish(s string) error {
	if s == PublishStage {
		return nil
	}
	return CheckPublishName(s)
}

// CheckPublishName validates the basename of a staged result.
func CheckPublishName(s string) error {
	if s == "" || s == "." || s == ".." || len(s) > 255 {
		return fmt.Errorf("publish name %s is not a file name", Quote(s))
	}
	for _, r := range s {
		if r == '/' || r == 0 || unicode.IsControl(r) {
			return fmt.Errorf("publish name %s is not a plain file name", Quote(s))
		}
	}
	return nil
}

var knownKeys = map[string]bool{
	"schema": true, "id": true, "status": true, "owner": true, "token": true,
	"claimed_at": true, "renewed_at": true, "expires_at": true,
}

// workKeys are the optional keys of work records.
var workKeys = map[string]bool{"publish": true, "attempts": true, "exit_status": true, "stderr_tail": true}

// Decode reads a record of kind k from data, which was read from the file
// of name. Every rule of docs/design.md#records is checked; the error wraps ErrCorrupt.
func Decode(data []byte, k Kind, name ID) (*Record, error) {
	if len(data) > MaxRecordSize {
		return nil, bad("", "record is %d bytes, more than %d", len(data), MaxRecordSize)
	}
	if len(data) == 0 {
		return nil, bad("", "empty file")
	}
	o, err := parseObject(data)
	if err != nil {
		return nil, err
	}
	schema, err := o.str("schema")
	if err != nil {
		return nil, err
	}
	if schema != k.Schema() {
		return nil, bad("schema", "is %s, want %q", Quote(schema), k.Schema())
	}
	r := &Record{Kind: k}
	if r.ID, err = o.id("id"); err != nil {
		return nil, err
	}
	if r.ID != name {
		return nil, bad("id", "is %s but the file is named for %s", r.ID, name)
	}
	st, err := o.str("status")
	if err != nil {
		return nil, err
	}
	r.Status = Status(st)
	if !k.allows(r.Status) {
		return nil, bad("status", "%s is not a %s status", Quote(st), k.Dir())
	}
	if r.Owner, err = o.str("owner"); err != nil {
		return nil, err
	}
	if err := CheckOwner(r.Owner); err != nil {
		return nil, bad("owner", "%v", err)
	}
	if r.Token, err = o.token("token"); err != nil {
		return nil, err
	}
	if r.ClaimedAt, err = o.time("claimed_at"); err != nil {
		return nil, err
	}
	if r.RenewedAt, err = o.time("renewed_at"); err != nil {
		return nil, err
	}
	if r.ExpiresAt, err = o.time("expires_at"); err != nil {
		return nil, err
	}
	own := func(key string) bool { return knownKeys[key] }
	switch k {
	case Work:
		if _, ok := o.vals["publish"]; ok {
			if r.Publish, err = o.str("publish"); err != nil {
				return nil, err
			}
			if err := CheckPublish(r.Publish); err != nil {
				return nil, bad("publish", "%v", err)
			}
		}
		if r.Attempts, r.ExitStatus, r.StderrTail, err = o.failure(); err != nil {
			return nil, err
		}
		own = func(key string) bool { return knownKeys[key] || workKeys[key] }
	case Target:
		if r.Group, err = o.id("group"); err != nil {
			return nil, err
		}
		own = func(key string) bool { return knownKeys[key] || key == "group" }
	case Group:
		if r.Targets, err = o.targets("targets"); err != nil {
			return nil, err
		}
		own = func(key string) bool { return knownKeys[key] || key == "targets" }
	}
	for _, key := range o.keys {
		if !own(key) {
			var c bytes.Buffer
			_ = json.Compact(&c, o.vals[key]) // already validated by the decoder
			r.Extra = append(r.Extra, Field{Key: key, Value: c.Bytes()})
		}
	}
	// A record lease could not write back within 4 KiB (a huge time written
	// out in full, escapes that grow) is refused here rather than accepted
	// by readers and found unwritable later.
	if _, err := Encode(r); err != nil {
		return nil, err
	}
	return r, nil
}

// Encode renders r canonically: known keys in a fixed order, unknown keys
// after them in the order they were read, one line, at most 4 KiB.
func Encode(r *Record) ([]byte, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 320)
	b = append(b, `{"schema":"`...)
	b = append(b, r.Kind.Schema()...)
	b = append(b, `","id":"`...)
	b = append(b, r.ID...)
	b = append(b, `","status":"`...)
	b = append(b, r.Status...)
	b = append(b, `","owner":`...)
	b = appendString(b, r.Owner)
	b = append(b, `,"token":`...)
	b = strconv.AppendInt(b, r.Token, 10)
	b = append(b, `,"claimed_at":`...)
	b = AppendTime(b, r.ClaimedAt)
	b = append(b, `,"renewed_at":`...)
	b = AppendTime(b, r.RenewedAt)
	b = append(b, `,"expires_at":`...)
	b = AppendTime(b, r.ExpiresAt)
	switch r.Kind {
	case Work:
		if r.Publish != "" {
			b = append(b, `,"publish":`...)
			b = appendString(b, r.Publish)
		}
		if r.Attempts > 0 {
			b = append(b, `,"attempts":`...)
			b = strconv.AppendInt(b, r.Attempts, 10)
		}
		if r.ExitStatus > 0 {
			b = append(b, `,"exit_status":`...)
			b = strconv.AppendInt(b, int64(r.ExitStatus), 10)
		}
		if r.StderrTail != "" {
			b = append(b, `,"stderr_tail":`...)
			b = appendString(b, r.StderrTail)
		}
	case Target:
		b = append(b, `,"group":"`...)
		b = append(b, r.Group...)
		b = append(b, '"')
	case Group:
		b = append(b, `,"targets":[`...)
		for i, t := range r.Targets {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = append(b, t...)
			b = append(b, '"')
		}
		b = append(b, ']')
	}
	for _, f := range r.Extra {
		b = append(b, ',')
		b = appendString(b, f.Key)
		b = append(b, ':')
		b = append(b, f.Value...)
	}
	b = append(b, "}\n"...)
	if len(b) > MaxRecordSize {
		return nil, bad("", "encoded record would be %d bytes, more than %d", len(b), MaxRecordSize)
	}
	return b, nil
}

func (r *Record) validate() error {
	if _, err := ParseID(string(r.ID)); err != nil {
		return bad("id", "%v", err)
	}
	if !r.Kind.allows(r.Status) {
		return bad("status", "%q is not a %s status", r.Status, r.Kind.Dir())
	}
	if err := CheckOwner(r.Owner); err != nil {
		return bad("owner", "%v", err)
	}
	if r.Token < 1 || r.Token > MaxToken {
		return bad("token", "%d is not in [1, 2^53-1]", r.Token)
	}
	for _, t := range []struct {
		name string
		v    float64
	}{{"claimed_at", r.ClaimedAt}, {"renewed_at", r.RenewedAt}, {"expires_at", r.ExpiresAt}} {
		if err := CheckTime(t.name, t.v); err != nil {
			return bad(t.name, "%v", err)
		}
	}
	if r.Publish != "" {
		if err := CheckPublish(r.Publish); err != nil {
			return bad("publish", "%v", err)
		}
	}
	if r.Kind != Work && (r.Attempts != 0 || r.ExitStatus != 0 || r.StderrTail != "") {
		return bad("attempts", "only work records count attempts")
	}
	if r.Attempts < 0 || r.Attempts > MaxToken {
		return bad("attempts", "%d is not in [0, 2^53-1]", r.Attempts)
	}
	if r.ExitStatus < 0 || r.ExitStatus > MaxExitStatus {
		return bad("exit_status", "%d is not in [1, %d]", r.ExitStatus, MaxExitStatus)
	}
	if err := CheckTail(r.StderrTail); err != nil {
		return bad("stderr_tail", "%v", err)
	}
	if r.Kind == Target {
		if _, err := ParseID(string(r.Group)); err != nil {
			return bad("group", "%v", err)
		}
	}
	if r.Kind == Group {
		if len(r.Targets) == 0 {
			return bad("targets", "empty")
		}
		for i, t := range r.Targets {
			if _, err := ParseID(string(t)); err != nil || i > 0 && t <= r.Targets[i-1] {
				return bad("targets", "not sorted unique canonical ids")
			}
		}
	}
	return nil
}

// Now is the system's clock as records hold times: seconds since the
// epoch, with the microsecond precision they are written with.
func Now() float64 { return float64(time.Now().UnixMicro()) / 1e6 }

// AppendTime appends t with microsecond precision and no trailing zeros.
func AppendTime(b []byte, t float64) []byte {
	s := strconv.FormatFloat(t, 'f', 6, 64)
	i := len(s)
	for s[i-1] == '0' {
		i--
	}
	if s[i-1] == '.' {
		i--
	}
	return append(b, s[:i]...)
}

func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(s)
			return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
