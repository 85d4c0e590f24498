package leasefmt

// Encode (round trips, canonical bytes, refusals), unknown keys, the table
// header, tokens and quoting; Decode's table of documents is in
// decode_test.go.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

// idA < idB < idC, so that [idA, idB, idC] is a valid target list.
var (
	idA = ID("0" + sum("a")[1:])
	idB = ID("5" + sum("b")[1:])
	idC = ID("a" + sum("c")[1:])
	idG = sum("group")
)

func sampleRecords() []*Record {
	return []*Record{
		{Kind: Work, ID: idA, Status: Leased, Owner: "host-a/fuzz-3", Token: 7, ClaimedAt: 1764450000.5, RenewedAt: 1764450030.5, ExpiresAt: 1764450150.5},
		{Kind: Work, ID: idB, Status: Committing, Owner: `we"ird\owner é ☃ <&>`, Token: MaxToken, ClaimedAt: 0, RenewedAt: 1.000001, ExpiresAt: 4e9, Publish: "result-1.tar"},
		{Kind: Work, ID: idC, Status: Done, Owner: "o", Token: 1, ClaimedAt: 1, RenewedAt: 2, ExpiresAt: 3,
			Extra: []Field{{"x_campaign", json.RawMessage(`{"a":[1,2]}`)}, {"a_first", json.RawMessage(`true`)}, {"é\u2028", json.RawMessage(`"\u00e9"`)}}},
		{Kind: Work, ID: idA, Status: Released, Owner: strings.Repeat("x", MaxOwnerLen), Token: 2, ClaimedAt: 10, RenewedAt: 20, ExpiresAt: 20},
		{Kind: Target, ID: idA, Status: Leased, Owner: "h", Token: 3, ClaimedAt: 1.25, RenewedAt: 1.25, ExpiresAt: 31.25, Group: idG},
		{Kind: Target, ID: idB, Status: Released, Owner: "h", Token: 3, ClaimedAt: 1, RenewedAt: 1, ExpiresAt: 1, Group: idG, Extra: []Field{{"publish", json.RawMessage(`1`)}}},
		{Kind: Group, ID: idG, Status: Leased, Owner: "h", Token: 9, ClaimedAt: 5, RenewedAt: 6, ExpiresAt: 7, Targets: []ID{idA, idB, idC}},
		{Kind: Work, ID: idB, Status: Failed, Owner: "w", Token: 4, ClaimedAt: 1, RenewedAt: 2, ExpiresAt: 2, Attempts: 3, ExitStatus: 139,
			StderrTail: "==1== ERROR: AddressSanitizer: \"heap-buffer-overflow\"\n\tat parse \u2028 é"},
		{Kind: Work, ID: idC, Status: Committing, Owner: "w", Token: 2, ClaimedAt: 1, RenewedAt: 2, ExpiresAt: 9, Publish: PublishStage, Attempts: 1},
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	for i, r := range sampleRecords() {
		data, err := Encode(r)
		if err != nil {
			t.Fatalf("record %d: Encode: %v", i, err)
		}
		if !bytes.HasSuffix(data, []byte("}\n")) || bytes.Count(data, []byte("\n")) != 1 {
			t.Errorf("record %d: not one newline-terminated line: %q", i, data)
		}
		if !json.Valid(data) {
			t.Errorf("record %d: not valid JSON: %s", i, data)
		}
		back, err := Decode(data, r.Kind, r.ID)
		if err != nil {
			t.Fatalf("record %d: Decode(Encode(r)): %v\n%s", i, err, data)
		}
		if !reflect.DeepEqual(back, r) {
			t.Errorf("record %d: round trip changed it:\n got %+v\nwant %+v", i, back, r)
		}
		again, err := Encode(back)
		if err != nil || !bytes.Equal(again, data) {
			t.Errorf("record %d: encoding is not canonical:\n%s\n%s", i, data, again)
		}
	}
}

func TestEncodeCanonical(t *testing.T) {
	r := &Record{Kind: Work, ID: idA, Status: Leased, Owner: "host-a/fuzz-3", Token: 7,
		ClaimedAt: 1764450000.5, RenewedAt: 1764450030.123456789, ExpiresAt: 1764450150}
	data, err := Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"schema":"lease.work/v1","id":"` + string(idA) + `","status":"leased","owner":"host-a/fuzz-3","token":7,` +
		`"claimed_at":1764450000.5,"renewed_at":1764450030.123457,"expires_at":1764450150}` + "\n"
	if string(data) != want {
		t.Errorf("Encode =\n%s\nwant\n%s", data, want)
	}
	for _, tc := range []struct {
		t    float64
		want string
	}{{0, "0"}, {1, "1"}, {0.5, "0.5"}, {1.0000004, "1"}, {1.0000005, "1.000001"}, {1764450000.000001, "1764450000.000001"}, {12.34, "12.34"}} {
		if got := string(AppendTime(nil, tc.t)); got != tc.want {
			t.Errorf("AppendTime(%v) = %s, want %s", tc.t, got, tc.want)
		}
	}
}

func TestEncodeRefusesInvalid(t *testing.T) {
	good := sampleRecords()[0]
	for name, mod := range map[string]func(r *Record){
		"bad id":        func(r *Record) { r.ID = "../x" },
		"bad status":    func(r *Record) { r.Status = "expired" },
		"work in group": func(r *Record) { r.Kind, r.Status, r.Targets = Group, Done, []ID{idA} },
		"empty owner":   func(r *Record) { r.Owner = "" },
		"long owner":    func(r *Record) { r.Owner = strings.Repeat("o", 257) },
		"control owner": func(r *Record) { r.Owner = "a\x1bb" },
		"bad UTF-8":     func(r *Record) { r.Owner = "a\xffb" },
		"token 0":       func(r *Record) { r.Token = 0 },
		"token 2^53":    func(r *Record) { r.Token = MaxToken + 1 },
		"NaN time":      func(r *Record) { r.ExpiresAt = math.NaN() },
		"Inf time":      func(r *Record) { r.ClaimedAt = math.Inf(1) },
		"negative time": func(r *Record) { r.RenewedAt = -1 },
		"publish path":  func(r *Record) { r.Publish = "a/b" },
		"target group":  func(r *Record) { r.Kind, r.Group = Target, "" },
		"group empty":   func(r *Record) { r.Kind, r.Targets = Group, nil },
		"group order":   func(r *Record) { r.Kind, r.Targets = Group, []ID{idB, idA} },
		"oversize":      func(r *Record) { r.Extra = []Field{{"x", json.RawMessage(q(strings.Repeat("x", 4096)))}} },
	} {
		r := good.Clone()
		mod(r)
		if data, err := Encode(r); err == nil || !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Encode = %q, %v; want an ErrCorrupt error", name, data, err)
		}
	}
}

// Unknown keys survive a rewrite verbatim (compacted) and in the order read,
// whatever known keys they were interleaved with.
func TestUnknownKeysPreserved(t *testing.T) {
	w := baseDoc(Work, idA)
	in := doc{
		{"x_campaign", `{ "a" : [1, 2] }`}, w[0], w[1], {"a_first", "true"}, w[2], w[3], w[4],
		{"z_str", `"\u00e9\n<&>"`}, w[5], w[6], w[7], {"n", "1e400"}, {"big", "123456789012345678901234567890"}, {"nil", "null"},
	}
	r, err := Decode([]byte(in.String()), Work, idA)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, f := range r.Extra {
		keys = append(keys, f.Key)
	}
	if got := strings.Join(keys, ","); got != "x_campaign,a_first,z_str,n,big,nil" {
		t.Errorf("extra keys %s, want them in input order", got)
	}
	r.Token++
	r.ExpiresAt += 60
	data, err := Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	wantTail := `,"x_campaign":{"a":[1,2]},"a_first":true,"z_str":"\u00e9\n<&>","n":1e400,"big":123456789012345678901234567890,"nil":null}` + "\n"
	if !strings.HasSuffix(string(data), wantTail) {
		t.Errorf("rewrite lost or changed unknown keys:\n%s\nwant suffix\n%s", data, wantTail)
	}
	back, err := Decode(data, Work, idA)
	if err != nil || back.Token != 8 || !reflect.DeepEqual(back.Extra, r.Extra) {
		t.Errorf("Decode(rewrite) = %+v, %v", back, err)
	}
}

func TestDecodeTable(t *testing.T) {
	data := `{"schema":"lease.table/v1","work_shards":16,"target_shards":256,"created_at":1764450000.5,"x_site":"lab"}` + "\n"
	tb, err := DecodeTable([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if tb.WorkShards != 16 || tb.TargetShards != 256 || tb.CreatedAt != 1764450000.5 || tb.Shards(Work) != 16 || tb.Shards(Group) != 256 {
		t.Errorf("DecodeTable = %+v", tb)
	}
	out, err := EncodeTable(tb)
	if err != nil || string(out) != data {
		t.Errorf("EncodeTable = %s, %v; want %s", out, err, data)
	}
	for _, bad := range []string{
		`{"schema":"lease.table/v2","work_shards":16,"target_shards":16,"created_at":1}`,
		`{"schema":"lease.table/v1","work_shards":0,"target_shards":16,"created_at":1}`,
		`{"schema":"lease.table/v1","work_shards":65537,"target_shards":16,"created_at":1}`,
		`{"schema":"lease.table/v1","work_shards":1.5,"target_shards":16,"created_at":1}`,
		`{"schema":"lease.table/v1","work_shards":"16","target_shards":16,"created_at":1}`,
		`{"schema":"lease.table/v1","work_shards":16,"created_at":1}`,
		`{"schema":"lease.table/v1","work_shards":16,"target_shards":16,"created_at":-1}`,
		`{"schema":"lease.table/v1","work_shards":16,"target_shards":16,"created_at":NaN}`,
		`{"schema":"lease.table/v1","work_shards":16,"work_shards":16,"target_shards":16,"created_at":1}`,
		`{"schema":"lease.table/v1","work_shards":16,"target_shards":16,"created_at":1} {}`,
	} {
		if tb, err := DecodeTable([]byte(bad)); err == nil || !errors.Is(err, ErrCorrupt) {
			t.Errorf("DecodeTable(%s) = %+v, %v; want ErrCorrupt", bad, tb, err)
		}
	}
}

func TestParseToken(t *testing.T) {
	for s, want := range map[string]int64{"1": 1, "7": 7, "9007199254740991": MaxToken} {
		if got, err := ParseToken(s); err != nil || got != want {
			t.Errorf("ParseToken(%q) = %d, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "0", "-1", "+1", "01", "1.0", "1e3", " 1", "1 ", "9007199254740992", "99999999999999999999", "0x10", "٣"} {
		if got, err := ParseToken(s); err == nil {
			t.Errorf("ParseToken(%q) = %d, want an error", s, got)
		}
	}
}

func TestQuoteAndBound(t *testing.T) {
	if got := Quote("a\x1b[31m\xff"); strings.ContainsAny(got, "\x1b\xff") {
		t.Errorf("Quote left control or invalid bytes: %q", got)
	}
	if got := Quote(strings.Repeat("x", 1000)); len(got) > 90 || !strings.HasSuffix(got, "...") {
		t.Errorf("Quote of 1000 bytes = %d bytes: %s", len(got), got)
	}
	b := Bound(strings.Repeat("\x00é", 1000))
	if len(b) > MaxErrorText || strings.ContainsRune(b, 0) {
		t.Errorf("Bound = %d bytes, %q...", len(b), b[:20])
	}
	if got := Bound("short\nline"); got != `short\nline` {
		t.Errorf("Bound = %q", got)
	}
}

func ExampleShardDirName() {
	fmt.Println(ShardDirName(15, 16), ShardDirName(255, 256), ShardDirName(4095, 4096), ShardDirName(0, 1))
	// Output: 0f ff fff 00
}
