package leasefmt

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

// kv is one key of a record written as raw JSON text, so tests can build
// records no encoder would produce.
type kv struct{ k, v string }

type doc []kv

func q(s string) string { return `"` + s + `"` }

// baseDoc is a valid record of kind k for id in the order a writer in
// another language might use.
func baseDoc(k Kind, id ID) doc {
	d := doc{
		{"schema", q(k.Schema())}, {"id", q(string(id))}, {"status", q("leased")}, {"owner", q("host-a/fuzz-3")},
		{"token", "7"}, {"claimed_at", "1764450000.5"}, {"renewed_at", "1764450030.5"}, {"expires_at", "1764450150.5"},
	}
	switch k {
	case Target:
		d = append(d, kv{"group", q(string(idG))})
	case Group:
		d = append(d, kv{"targets", `[` + q(string(idA)) + `,` + q(string(idB)) + `,` + q(string(idC)) + `]`})
	}
	return d
}

// set replaces key's value, or appends key when absent.
func (d doc) set(key, raw string) doc {
	out := append(doc(nil), d...)
	for i := range out {
		if out[i].k == key {
			out[i].v = raw
			return out
		}
	}
	return append(out, kv{key, raw})
}

func (d doc) del(key string) doc {
	var out doc
	for _, e := range d {
		if e.k != key {
			out = append(out, e)
		}
	}
	return out
}

// add appends key even when it is already there (duplicates).
func (d doc) add(key, raw string) doc { return append(append(doc(nil), d...), kv{key, raw}) }

func (d doc) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, e := range d {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(q(e.k))
		b.WriteByte(':')
		b.WriteString(e.v)
	}
	b.WriteString("}\n")
	return b.String()
}

// padTo returns d with an extra string key that makes its text exactly n bytes.
func padTo(d doc, n int) string {
	s := d.set("x_pad", `""`).String()
	return d.set("x_pad", q(strings.Repeat("p", n-len(s)))).String()
}

type decodeCase struct {
	name  string
	kind  Kind
	data  string
	file  ID     // defaults to idA
	field string // offending field; "" for the document, "*" for any; "ok" when the record must be accepted
}

func decodeCases() []decodeCase {
	w, tg, g := baseDoc(Work, idA), baseDoc(Target, idA), baseDoc(Group, idA)
	cases := []decodeCase{
		// Valid records.
		{name: "work valid", kind: Work, data: w.String(), field: "ok"},
		{name: "target valid", kind: Target, data: tg.String(), field: "ok"},
		{name: "group valid", kind: Group, data: g.String(), field: "ok"},
		{name: "no final newline", kind: Work, data: strings.TrimSuffix(w.String(), "\n"), field: "ok"},
		{name: "white space around", kind: Work, data: " \t\r\n" + w.String() + "\n\n ", field: "ok"},
		{name: "keys in another order", kind: Work, data: doc{w[7], w[6], w[5], w[4], w[3], w[2], w[1], w[0]}.String(), field: "ok"},
		{name: "escaped owner", kind: Work, data: w.set("owner", `"host\u002da \u00e9\/x"`).String(), field: "ok"},
		{name: "work committing with publish", kind: Work, data: w.set("status", q("committing")).set("publish", q("out.tar.gz")).String(), field: "ok"},
		{name: "work released", kind: Work, data: w.set("status", q("released")).String(), field: "ok"},
		{name: "work done", kind: Work, data: w.set("status", q("done")).String(), field: "ok"},
		{name: "target released", kind: Target, data: tg.set("status", q("released")).String(), field: "ok"},
		{name: "group released", kind: Group, data: g.set("status", q("released")).String(), field: "ok"},
		{name: "token 1", kind: Work, data: w.set("token", "1").String(), field: "ok"},
		{name: "token 2^53-1", kind: Work, data: w.set("token", "9007199254740991").String(), field: "ok"},
		{name: "time 0", kind: Work, data: w.set("claimed_at", "0").String(), field: "ok"},
		{name: "time with exponent", kind: Work, data: w.set("expires_at", "1.76445015e9").String(), field: "ok"},
		{name: "time integer", kind: Work, data: w.set("renewed_at", "1764450030").String(), field: "ok"},
		{name: "owner 256 bytes", kind: Work, data: w.set("owner", q(strings.Repeat("o", 256))).String(), field: "ok"},
		{name: "owner 256 bytes of UTF-8", kind: Work, data: w.set("owner", q(strings.Repeat("é", 128))).String(), field: "ok"},
		{name: "unknown keys", kind: Work, data: w.set("x_campaign", `{"a":[1,2]}`).set("z", "null").String(), field: "ok"},
		{name: "publish on a target is an unknown key", kind: Target, data: tg.set("publish", "17").String(), field: "ok"},
		{name: "4096 bytes", kind: Work, data: padTo(w, 4096), field: "ok"},

		// Schema.
		{name: "schema v2", kind: Work, data: w.set("schema", q("lease.work/v2")).String(), field: "schema"},
		{name: "target schema in work file", kind: Work, data: w.set("schema", q("lease.target/v1")).String(), field: "schema"},
		{name: "work schema in group file", kind: Group, data: g.set("schema", q("lease.work/v1")).String(), field: "schema"},
		{name: "schema upper case", kind: Work, data: w.set("schema", q("LEASE.WORK/V1")).String(), field: "schema"},
		{name: "schema missing", kind: Work, data: w.del("schema").String(), field: "schema"},
		{name: "schema number", kind: Work, data: w.set("schema", "1").String(), field: "schema"},
		{name: "schema null", kind: Work, data: w.set("schema", "null").String(), field: "schema"},
		{name: "table header as record", kind: Work, data: `{"schema":"lease.table/v1","work_shards":16,"target_shards":16,"created_at":1}`, field: "schema"},

		// Missing and wrongly typed fields.
		{name: "id missing", kind: Work, data: w.del("id").String(), field: "id"},
		{name: "status missing", kind: Work, data: w.del("status").String(), field: "status"},
		{name: "owner missing", kind: Work, data: w.del("owner").String(), field: "owner"},
		{name: "token missing", kind: Work, data: w.del("token").String(), field: "token"},
		{name: "claimed_at missing", kind: Work, data: w.del("claimed_at").String(), field: "claimed_at"},
		{name: "renewed_at missing", kind: Work, data: w.del("renewed_at").String(), field: "renewed_at"},
		{name: "expires_at missing", kind: Work, data: w.del("expires_at").String(), field: "expires_at"},
		{name: "group missing", kind: Target, data: tg.del("group").String(), field: "group"},
		{name: "targets missing", kind: Group, data: g.del("targets").String(), field: "targets"},
		{name: "id number", kind: Work, data: w.set("id", "12").String(), field: "id"},
		{name: "status number", kind: Work, data: w.set("status", "1").String(), field: "status"},
		{name: "status array", kind: Work, data: w.set("status", `["leased"]`).String(), field: "status"},
		{name: "owner null", kind: Work, data: w.set("owner", "null").String(), field: "owner"},
		{name: "owner object", kind: Work, data: w.set("owner", `{"a":1}`).String(), field: "owner"},
		{name: "token bool", kind: Work, data: w.set("token", "true").String(), field: "token"},
		{name: "claimed_at string", kind: Work, data: w.set("claimed_at", q("1764450000.5")).String(), field: "claimed_at"},
		{name: "renewed_at null", kind: Work, data: w.set("renewed_at", "null").String(), field: "renewed_at"},
		{name: "expires_at bool", kind: Work, data: w.set("expires_at", "false").String(), field: "expires_at"},
		{name: "expires_at array", kind: Work, data: w.set("expires_at", "[1]").String(), field: "expires_at"},
		{name: "group number", kind: Target, data: tg.set("group", "5").String(), field: "group"},
		{name: "group not canonical", kind: Target, data: tg.set("group", q(strings.ToUpper(string(idG)))).String(), field: "group"},
		{name: "targets string", kind: Group, data: g.set("targets", q(string(idA))).String(), field: "targets"},
		{name: "targets empty", kind: Group, data: g.set("targets", "[]").String(), field: "targets"},
		{name: "targets number item", kind: Group, data: g.set("targets", "[1]").String(), field: "targets"},
		{name: "targets unsorted", kind: Group, data: g.set("targets", "["+q(string(idB))+","+q(string(idA))+"]").String(), field: "targets"},
		{name: "targets duplicate", kind: Group, data: g.set("targets", "["+q(string(idA))+","+q(string(idA))+"]").String(), field: "targets"},
		{name: "targets short id", kind: Group, data: g.set("targets", "["+q("abc")+"]").String(), field: "targets"},
		{name: "publish number", kind: Work, data: w.set("publish", "1").String(), field: "publish"},
		{name: "publish empty", kind: Work, data: w.set("publish", `""`).String(), field: "publish"},
		{name: "publish with slash", kind: Work, data: w.set("publish", q("../etc/passwd")).String(), field: "publish"},
		{name: "publish dot dot", kind: Work, data: w.set("publish", q("..")).String(), field: "publish"},
		{name: "publish control", kind: Work, data: w.set("publish", `"a\nb"`).String(), field: "publish"},

		// IDs.
		{name: "id differs from file name", kind: Work, data: w.String(), file: idB, field: "id"},
		{name: "id upper case", kind: Work, data: w.set("id", q(strings.ToUpper(string(idA)))).String(), file: ID(strings.ToUpper(string(idA))), field: "id"},
		{name: "id 63 chars", kind: Work, data: w.set("id", q(string(idA[:63]))).String(), field: "id"},
		{name: "id 65 chars", kind: Work, data: w.set("id", q(string(idA)+"0")).String(), field: "id"},
		{name: "id with dot dot", kind: Work, data: w.set("id", q("../"+string(idA[3:]))).String(), field: "id"},
		{name: "id escaped upper case", kind: Work, data: w.set("id", q(`\u0041`+string(idA[1:]))).String(), field: "id"},
		{name: "id empty", kind: Work, data: w.set("id", `""`).String(), field: "id"},

		// Tokens.
		{name: "token 0", kind: Work, data: w.set("token", "0").String(), field: "token"},
		{name: "token -1", kind: Work, data: w.set("token", "-1").String(), field: "token"},
		{name: "token 2^53", kind: Work, data: w.set("token", "9007199254740992").String(), field: "token"},
		{name: "token 2^63", kind: Work, data: w.set("token", "9223372036854775808").String(), field: "token"},
		{name: "token 1.0", kind: Work, data: w.set("token", "1.0").String(), field: "token"},
		{name: "token quoted", kind: Work, data: w.set("token", q("7")).String(), field: "token"},
		{name: "token 1e3", kind: Work, data: w.set("token", "1e3").String(), field: "token"},
		{name: "token 7E0", kind: Work, data: w.set("token", "7E0").String(), field: "token"},
		{name: "token null", kind: Work, data: w.set("token", "null").String(), field: "token"},

		// Times.
		{name: "time NaN", kind: Work, data: w.set("expires_at", "NaN").String(), field: "expires_at"},
		{name: "time Infinity", kind: Work, data: w.set("expires_at", "Infinity").String(), field: "expires_at"},
		{name: "time -Infinity", kind: Work, data: w.set("claimed_at", "-Infinity").String(), field: "claimed_at"},
		{name: "time -1", kind: Work, data: w.set("renewed_at", "-1").String(), field: "renewed_at"},
		{name: "time -0.5", kind: Work, data: w.set("claimed_at", "-0.5").String(), field: "claimed_at"},
		{name: "time 1e400", kind: Work, data: w.set("expires_at", "1e400").String(), field: "expires_at"},
		{name: "time -1e400", kind: Work, data: w.set("expires_at", "-1e400").String(), field: "expires_at"},
		{name: "time quoted NaN", kind: Work, data: w.set("expires_at", q("NaN")).String(), field: "expires_at"},

		// Owners.
		{name: "owner empty", kind: Work, data: w.set("owner", `""`).String(), field: "owner"},
		{name: "owner 257 bytes", kind: Work, data: w.set("owner", q(strings.Repeat("o", 257))).String(), field: "owner"},
		{name: "owner 257 bytes of UTF-8", kind: Work, data: w.set("owner", q("o"+strings.Repeat("é", 128))).String(), field: "owner"},
		{name: "owner NUL", kind: Work, data: w.set("owner", `"a\u0000b"`).String(), field: "owner"},
		{name: "owner newline", kind: Work, data: w.set("owner", `"a\nb"`).String(), field: "owner"},
		{name: "owner escape", kind: Work, data: w.set("owner", `"\u001b[31mred"`).String(), field: "owner"},
		{name: "owner DEL", kind: Work, data: w.set("owner", `"a\u007fb"`).String(), field: "owner"},
		{name: "owner C1 control", kind: Work, data: w.set("owner", `"a\u0085b"`).String(), field: "owner"},
		{name: "owner lone surrogate", kind: Work, data: w.set("owner", `"a\ud800b"`).String(), field: "ok"}, // decoded as U+FFFD: valid UTF-8, no control

		// Statuses per kind.
		{name: "work status expired", kind: Work, data: w.set("status", q("expired")).String(), field: "status"},
		{name: "work status empty", kind: Work, data: w.set("status", `""`).String(), field: "status"},
		{name: "work status upper case", kind: Work, data: w.set("status", q("LEASED")).String(), field: "status"},
		{name: "target committing", kind: Target, data: tg.set("status", q("committing")).String(), field: "status"},
		{name: "target done", kind: Target, data: tg.set("status", q("done")).String(), field: "status"},
		{name: "group committing", kind: Group, data: g.set("status", q("committing")).String(), field: "status"},
		{name: "group done", kind: Group, data: g.set("status", q("done")).String(), field: "status"},

		// Duplicate keys.
		{name: "duplicate schema", kind: Work, data: w.add("schema", q(Work.Schema())).String(), field: "schema"},
		{name: "duplicate token", kind: Work, data: w.add("token", "8").String(), field: "token"},
		{name: "duplicate unknown key", kind: Work, data: w.add("x", "1").add("x", "2").String(), field: "x"},
		{name: "escaped duplicate schema", kind: Work, data: w.add(`sch\u0065ma`, q(Work.Schema())).String(), field: "schema"},
		{name: "escaped duplicate owner", kind: Work, data: w.add(`\u006fwner`, q("intruder")).String(), field: "owner"},

		// Encoding and framing.
		{name: "invalid UTF-8 in owner", kind: Work, data: w.set("owner", "\"a\xffb\"").String()},
		{name: "invalid UTF-8 in unknown key", kind: Work, data: w.set("x\xc3", "1").String()},
		{name: "UTF-16 BOM", kind: Work, data: "\xfe\xff" + w.String()},
		{name: "UTF-8 BOM", kind: Work, data: "\xef\xbb\xbf" + w.String()},
		{name: "second object", kind: Work, data: w.String() + "{}"},
		{name: "trailing garbage", kind: Work, data: w.String() + "x"},
		{name: "trailing comma", kind: Work, data: strings.TrimSuffix(w.String(), "\n") + ","},
		{name: "trailing NUL", kind: Work, data: w.String() + "\x00"},
		{name: "comma before close", kind: Work, data: strings.TrimSuffix(strings.TrimSuffix(w.String(), "\n"), "}") + ",}"},
		{name: "truncated", kind: Work, data: w.String()[:len(w.String())/2], field: "*"},
		{name: "4097 bytes", kind: Work, data: padTo(w, 4097)},
		{name: "64 KiB", kind: Work, data: padTo(w, 64<<10)},
		{name: "huge times grow past 4 KiB on rewrite", kind: Work, data: padTo(w.set("claimed_at", "1e300").set("expires_at", "1e308"), 4000)},
		{name: "escaped owner grows past 4 KiB on rewrite", kind: Work, data: padTo(w.set("owner", q(strings.Repeat("\u2028", 80))), 4000)},
		{name: "empty", kind: Work, data: ""},
		{name: "white space only", kind: Work, data: " \n"},
		{name: "array", kind: Work, data: "[" + w.String() + "]"},
		{name: "null", kind: Work, data: "null"},
		{name: "string", kind: Work, data: `"x"`},
		{name: "number key", kind: Work, data: `{1:2}`},
		{name: "single quotes", kind: Work, data: strings.ReplaceAll(w.String(), `"`, `'`)},
	}
	return cases
}

func TestDecode(t *testing.T) {
	for _, tc := range decodeCases() {
		t.Run(tc.name, func(t *testing.T) {
			file := tc.file
			if file == "" {
				file = idA
			}
			r, err := Decode([]byte(tc.data), tc.kind, file)
			if tc.field == "ok" {
				if err != nil {
					t.Fatalf("Decode refused a valid record: %v\n%s", err, tc.data)
				}
				if r.Kind != tc.kind || r.ID != file {
					t.Fatalf("Decode = kind %v id %s, want %v %s", r.Kind, r.ID, tc.kind, file)
				}
				return
			}
			if err == nil {
				t.Fatalf("Decode accepted %+v\n%s", r, tc.data)
			}
			if r != nil {
				t.Errorf("Decode returned a record with an error: %+v", r)
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("error %v does not wrap ErrCorrupt", err)
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FormatError", err)
			}
			if tc.field != "*" && fe.Field != tc.field {
				t.Errorf("error names field %q, want %q: %v", fe.Field, tc.field, err)
			}
			if len(err.Error()) > MaxErrorText {
				t.Errorf("error text is %d bytes: %.80s...", len(err.Error()), err)
			}
		})
	}
}

func TestDecodeFields(t *testing.T) {
	r, err := Decode([]byte(baseDoc(Work, idA).set("x_campaign", `{"a":[1,2]}`).String()), Work, idA)
	if err != nil {
		t.Fatal(err)
	}
	want := &Record{Kind: Work, ID: idA, Status: Leased, Owner: "host-a/fuzz-3", Token: 7,
		ClaimedAt: 1764450000.5, RenewedAt: 1764450030.5, ExpiresAt: 1764450150.5,
		Extra: []Field{{"x_campaign", json.RawMessage(`{"a":[1,2]}`)}}}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("Decode = %+v\nwant     %+v", r, want)
	}
	tr, err := Decode([]byte(baseDoc(Target, idA).String()), Target, idA)
	if err != nil || tr.Group != idG || tr.Targets != nil {
		t.Errorf("target: %+v, %v", tr, err)
	}
	gr, err := Decode([]byte(baseDoc(Group, idA).String()), Group, idA)
	if err != nil || !reflect.DeepEqual(gr.Targets, []ID{idA, idB, idC}) {
		t.Errorf("group: %+v, %v", gr, err)
	}
}

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

// BenchmarkDecode: one work record read back, as every lease of a batch is
// (parseObject's fast path, then validation and the Encode check).
func BenchmarkDecode(b *testing.B) {
	id := ID(strings.Repeat("ab", 32))
	data, err := Encode(&Record{Kind: Work, ID: id, Status: Leased, Owner: "host-a/fuzz-3", Token: 7,
		ClaimedAt: 1764450000.5, RenewedAt: 1764450030.5, ExpiresAt: 1764450150.5})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if _, err := Decode(data, Work, id); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decoder", func(b *testing.B) {
		for b.Loop() {
			if _, err := parseObjectSlow(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("splitter", func(b *testing.B) {
		for b.Loop() {
			if _, err := parseObject(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
