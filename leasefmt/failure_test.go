package leasefmt

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTail(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"Segmentation fault\n", "Segmentation fault"},
		// Terminal escape sequences go whole, not only their ESC: the
		// colours of a fuzzer (CSI), a window title (OSC, ended by BEL or
		// ST), a charset switch, the one-byte CSI of C1.
		{"\x1b[31mred\x1b[0m\n", "red"},
		{"\x1b[1;38;5;196mbold\x1b[K end", "bold end"},
		{"\x1b]0;afl-fuzz\x07title\x1b]8;;http://x\x1b\\link", "titlelink"},
		{"\x1b(Bascii \u009b1mc1", "ascii c1"},
		{"cut \x1b[31", "cut"},
		{"\x1bcreset \x1b7saved", "reset saved"},
		{"10%\r20%\r30%", "10%\n20%\n30%"},
		{"a\x00b\x7fc\u0085d", "abcd"},
		{"bad \xff\xfe utf-8", "bad \uFFFD utf-8"},
		{"tab\there", "tab\there"},
	} {
		if got := Tail([]byte(tc.in)); got != tc.want {
			t.Errorf("Tail(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// The end is kept, at a rune boundary, within MaxTail.
	long := strings.Repeat("é", 2*MaxTail) + "the end"
	got := Tail([]byte(long))
	if len(got) > MaxTail || !strings.HasSuffix(got, "the end") || !utf8.ValidString(got) {
		t.Errorf("Tail of %d bytes = %d bytes ending %q", len(long), len(got), got[max(0, len(got)-10):])
	}
	if err := CheckTail(got); err != nil {
		t.Errorf("CheckTail(Tail(...)): %v", err)
	}
	// Whatever the output, the tail is valid and a record with it encodes.
	for _, in := range []string{strings.Repeat("\x00\n\"\\\u2028", 5000), strings.Repeat("\xff", 9000), strings.Repeat("\r\t", 3000)} {
		tail := Tail([]byte(in))
		if err := CheckTail(tail); err != nil {
			t.Errorf("CheckTail(Tail(%.20q...)): %v", in, err)
		}
		r := &Record{Kind: Work, ID: idA, Status: Failed, Owner: strings.Repeat("\u2028", 85), Token: MaxToken,
			ClaimedAt: 1e9, RenewedAt: 1e9, ExpiresAt: 1e9, Publish: strings.Repeat(`"`, 255), Attempts: MaxToken, ExitStatus: 255, StderrTail: tail}
		data, err := Encode(r)
		if err != nil {
			t.Fatalf("Encode with the tail of %.20q...: %v", in, err)
		}
		if _, err := Decode(data, Work, idA); err != nil {
			t.Errorf("Decode: %v", err)
		}
	}
}

// TestFitTail: a record whose unknown keys leave less room than the
// largest tail keeps the end of its tail and still fits in 4 KiB.
func TestFitTail(t *testing.T) {
	r := &Record{Kind: Work, ID: idA, Status: Released, Owner: "o", Token: 1, ClaimedAt: 1, RenewedAt: 1, ExpiresAt: 1,
		Extra: []Field{{"x_pad", []byte(`"` + strings.Repeat("p", 3300) + `"`)}}}
	r.StderrTail = strings.Repeat("\"", MaxTail-3) + "end"
	if _, err := Encode(r); err == nil {
		t.Fatal("the test record fits without shortening")
	}
	if !FitTail(r) {
		t.Fatal("FitTail: does not fit")
	}
	if !strings.HasSuffix(r.StderrTail, "end") {
		t.Errorf("FitTail dropped the end: %q", r.StderrTail)
	}
	if _, err := Encode(r); err != nil {
		t.Errorf("Encode after FitTail: %v", err)
	}
	// Too big without any tail: FitTail says so.
	r.Extra = []Field{{"x_pad", []byte(`"` + strings.Repeat("p", 4100) + `"`)}}
	if FitTail(r) {
		t.Error("FitTail of a record too big without its tail reported a fit")
	}
}

func TestCheckPublish(t *testing.T) {
	for _, ok := range []string{".", "a", "id:000000,sig:11,src:000000"} {
		if err := CheckPublish(ok); err != nil {
			t.Errorf("CheckPublish(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "..", "./", "a/b", "/"} {
		if err := CheckPublish(bad); err == nil {
			t.Errorf("CheckPublish(%q) accepted it", bad)
		}
	}
}
