package leasefmt

// The failure fields of work records (docs/lease-format.md): "attempts",
// the runs of an item that ended in failure; and, from the last failed
// run, "exit_status" and "stderr_tail", a bounded, escaped end of its
// standard error. A record that carries the largest tail still fits in
// 4 KiB: the tail is at most MaxTail bytes and its only control
// characters are newline and tab, so it encodes in at most 2*MaxTail.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxTail bounds the stderr_tail of a record, in bytes of UTF-8.
const MaxTail = 1024

// MaxExitStatus is the largest exit status a record keeps: a shell's
// statuses are 0 to 255, 128+n for a command killed by signal n.
const MaxExitStatus = 255

// CheckTail validates a stderr_tail: at most MaxTail bytes of valid UTF-8
// without control characters other than newline and tab.
func CheckTail(s string) error {
	if len(s) > MaxTail {
		return fmt.Errorf("is %d bytes, more than %d", len(s), MaxTail)
	}
	if !utf8.ValidString(s) {
		return errors.New("is not valid UTF-8")
	}
	for _, r := range s {
		if r != '\n' && r != '\t' && unicode.IsControl(r) {
			return fmt.Errorf("holds the control character %U", r)
		}
	}
	return nil
}

// Tail makes the stderr_tail of the output b of a failed run: its last
// MaxTail bytes at most, invalid UTF-8 replaced by U+FFFD, carriage
// returns turned into newlines (a progress line's last state stays
// readable) and every other control character but newline and tab left
// out (terminal escape sequences cannot reach an operator's terminal
// through lease status), and with them the rest of each escape sequence
// (a fuzzer's colours: CSI "ESC [ ... m"; OSC "ESC ] ... BEL"; see
// skipEscape). Leading and trailing blank space is trimmed.
func Tail(b []byte) string {
	if len(b) > 4*MaxTail {
		b = b[len(b)-4*MaxTail:]
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	var out strings.Builder
	for i := 0; i < len(s); {
		if n := skipEscape(s[i:]); n > 0 {
			i += n
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch {
		case r == '\r':
			out.WriteByte('\n')
		case r == '\n' || r == '\t' || !unicode.IsControl(r):
			out.WriteRune(r)
		}
	}
	t := strings.TrimSpace(out.String())
	for len(t) > MaxTail {
		_, n := utf8.DecodeRuneInString(t)
		t = t[n:]
	}
	return t
}

// skipEscape is the length of the terminal escape sequence s starts
// with (ECMA-48), 0 if none: CSI (ESC [ or U+009B, parameter and
// intermediate bytes, a final byte), OSC, DCS, SOS, PM and APC strings
// (ESC ] P X ^ _, or U+009D..., up to BEL or ST), and the other escape
// sequences (ESC, intermediate bytes, a final byte). One cut off by the
// end of the output goes to its end.
func skipEscape(s string) int {
	var i int
	var kind byte
	switch {
	case strings.HasPrefix(s, "\x1b"):
		if len(s) == 1 {
			return 1
		}
		kind, i = s[1], 2
	case strings.HasPrefix(s, "\u009b"):
		kind, i = '[', len("\u009b")
	case strings.HasPrefix(s, "\u009d"):
		kind, i = ']', len("\u009d")
	default:
		return 0
	}
	switch kind {
	case '[':
		for i < len(s) && s[i] >= 0x20 && s[i] <= 0x3f {
			i++
		}
		if i < len(s) && s[i] >= 0x40 && s[i] <= 0x7e {
			i++
		}
		return i
	case ']', 'P', 'X', '^', '_':
		for i < len(s) {
			switch {
			case s[i] == '\a':
				return i + 1
			case strings.HasPrefix(s[i:], "\x1b\\"):
				return i + 2
			case strings.HasPrefix(s[i:], "\u009c"):
				return i + len("\u009c")
			}
			i++
		}
		return i
	}
	switch {
	case kind >= 0x30 && kind <= 0x7e:
		return 2 // ESC and a final byte (ESC c, ESC 7, ESC =)
	case kind < 0x20 || kind > 0x2f:
		return 1 // no sequence: only the ESC goes
	}
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
		i++
	}
	if i < len(s) && s[i] >= 0x30 && s[i] <= 0x7e {
		i++
	}
	return i
}

// FitTail shortens r's stderr_tail, keeping its end, until r encodes
// within MaxRecordSize (a record whose unknown keys leave less room than
// the largest tail); it reports whether r fits.
func FitTail(r *Record) bool {
	for {
		_, err := Encode(r)
		if err == nil {
			return true
		}
		var fe *FormatError
		if !errors.As(err, &fe) || fe.Field != "" || r.StderrTail == "" {
			return false
		}
		cut := (len(r.StderrTail) + 1) / 2
		for cut < len(r.StderrTail) && !utf8.RuneStart(r.StderrTail[cut]) {
			cut++
		}
		r.StderrTail = r.StderrTail[cut:]
	}
}

// failure reads the optional failure fields of a work record.
func (o *object) failure() (attempts int64, exit int, tail string, err error) {
	if raw, ok := o.vals["attempts"]; ok {
		if attempts, err = count(string(raw)); err != nil {
			return 0, 0, "", bad("attempts", "%v", err)
		}
	}
	if raw, ok := o.vals["exit_status"]; ok {
		n, err := count(string(raw))
		if err != nil || n < 1 || n > MaxExitStatus {
			return 0, 0, "", bad("exit_status", "%s is not an integer in [1, %d]", Quote(string(raw)), MaxExitStatus)
		}
		exit = int(n)
	}
	if _, ok := o.vals["stderr_tail"]; ok {
		if tail, err = o.str("stderr_tail"); err != nil {
			return 0, 0, "", err
		}
		if err := CheckTail(tail); err != nil {
			return 0, 0, "", bad("stderr_tail", "%v", err)
		}
	}
	return attempts, exit, tail, nil
}

// count parses a plain decimal integer in [0, 2^53-1]: no sign, exponent,
// fraction or leading zero.
func count(s string) (int64, error) {
	if s == "0" {
		return 0, nil
	}
	if len(s) == 0 || len(s) > 16 || s[0] < '1' || s[0] > '9' {
		return 0, fmt.Errorf("%s is not an integer in [0, 2^53-1]", Quote(s))
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%s is not an integer in [0, 2^53-1]", Quote(s))
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > MaxToken {
		return 0, fmt.Errorf("%s is not an integer in [0, 2^53-1]", Quote(s))
	}
	return n, nil
}
