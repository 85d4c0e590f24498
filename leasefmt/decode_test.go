package leasefmt

// Decode: records built as raw JSON text (so that no encoder's habits hide
// what a reader must refuse), the table of valid and invalid documents,
// the decoded fields, and the benchmark of one record read back.

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
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
		{name: "work failed", kind: Work, data: w.set("status", q("failed")).set("attempts", "3").set("exit_status", "139").set("stderr_tail", `"Segmentation fault\n\tat parse"`).String(), field: "ok"},
		{name: "work released with attempts", kind: Work, data: w.set("status", q("released")).set("attempts", "1").String(), field: "ok"},
		{name: "attempts 0", kind: Work, data: w.set("attempts", "0").String(), field: "ok"},
		{name: "attempts 2^53-1", kind: Work, data: w.set("attempts", "9007199254740991").String(), field: "ok"},
		{name: "exit_status 255", kind: Work, data: w.set("exit_status", "255").String(), field: "ok"},
		{name: "stderr_tail 1024 bytes", kind: Work, data: w.set("stderr_tail", q(strings.Repeat("e", 1024))).String(), field: "ok"},
		{name: "committing the whole staging directory", kind: Work, data: w.set("status", q("committing")).set("publish", q(".")).String(), field: "ok"},
		{name: "attempts on a target is an unknown key", kind: Target, data: tg.set("attempts", q("x")).String(), field: "ok"},
		{name: "largest failure fields fit", kind: Work, data: w.set("owner", q(strings.Repeat("\u2028", 85))).set("status", q("failed")).
			set("publish", q(strings.Repeat(`\"`, 255))).set("attempts", "9007199254740991").set("exit_status", "255").
			set("stderr_tail", q(strings.Repeat(`\"`, 1024))).String(), field: "ok"},

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

		{name: "attempts -1", kind: Work, data: w.set("attempts", "-1").String(), field: "attempts"},
		{name: "attempts 1.0", kind: Work, data: w.set("attempts", "1.0").String(), field: "attempts"},
		{name: "attempts 1e1", kind: Work, data: w.set("attempts", "1e1").String(), field: "attempts"},
		{name: "attempts 01", kind: Work, data: w.set("attempts", "01").String()},
		{name: "attempts quoted", kind: Work, data: w.set("attempts", q("2")).String(), field: "attempts"},
		{name: "attempts null", kind: Work, data: w.set("attempts", "null").String(), field: "attempts"},
		{name: "attempts 2^53", kind: Work, data: w.set("attempts", "9007199254740992").String(), field: "attempts"},
		{name: "attempts NaN", kind: Work, data: w.set("attempts", "NaN").String(), field: "*"},
		{name: "duplicate attempts", kind: Work, data: w.add("attempts", "1").add("attempts", "2").String(), field: "attempts"},
		{name: "exit_status 0", kind: Work, data: w.set("exit_status", "0").String(), field: "exit_status"},
		{name: "exit_status 256", kind: Work, data: w.set("exit_status", "256").String(), field: "exit_status"},
		{name: "exit_status -1", kind: Work, data: w.set("exit_status", "-1").String(), field: "exit_status"},
		{name: "exit_status string", kind: Work, data: w.set("exit_status", q("139")).String(), field: "exit_status"},
		{name: "stderr_tail 1025 bytes", kind: Work, data: w.set("stderr_tail", q(strings.Repeat("e", 1025))).String(), field: "stderr_tail"},
		{name: "stderr_tail escape", kind: Work, data: w.set("stderr_tail", `"\u001b[31mred"`).String(), field: "stderr_tail"},
		{name: "stderr_tail carriage return", kind: Work, data: w.set("stderr_tail", `"a\rb"`).String(), field: "stderr_tail"},
		{name: "stderr_tail number", kind: Work, data: w.set("stderr_tail", "1").String(), field: "stderr_tail"},
		{name: "publish dot on a work record done is fine, slash dot is not", kind: Work, data: w.set("publish", q("./")).String(), field: "publish"},
		{name: "target failed", kind: Target, data: tg.set("status", q("failed")).String(), field: "status"},
		{name: "group failed", kind: Group, data: g.set("status", q("failed")).String(), field: "status"},

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
		// Strings are text: a surrogate escape only in a pair (JSON would
		// read a lone one as U+FFFD, and a rewrite would change the owner).
		{name: "owner lone high surrogate", kind: Work, field: "owner", data: w.set("owner", q(`a\ud800b`)).String()},
		{name: "owner lone low surrogate", kind: Work, field: "owner", data: w.set("owner", q(`a\udc00b`)).String()},
		{name: "owner high surrogate at end", kind: Work, field: "owner", data: w.set("owner", q(`a\ud800`)).String()},
		{name: "owner high then not low", kind: Work, field: "owner", data: w.set("owner", q(`\uD800\u0041`)).String()},
		{name: "owner two highs", kind: Work, field: "owner", data: w.set("owner", q(`\ud800\ud800\udc00`)).String()},
		{name: "extra key lone surrogate", kind: Work, field: "x_note", data: w.set("x_note", `["ok", "\udfff"]`).String()},
		{name: "owner surrogate pair", kind: Work, field: "ok", data: w.set("owner", q(`a\ud83d\ude00b`)).String()},
		{name: "owner escaped backslash then u", kind: Work, field: "ok", data: w.set("owner", q(`a\\ud800b`)).String()},
		{name: "owner replacement character", kind: Work, field: "ok", data: w.set("owner", q(`a\ufffdb`)).String()},
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
