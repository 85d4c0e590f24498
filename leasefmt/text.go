package leasefmt

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxErrorText bounds every error text lease prints (docs/design.md#cli).
const MaxErrorText = 512

// Quote renders untrusted text (an input line, a file name, an owner) for an
// error message: quoted, control characters and invalid UTF-8 escaped, and cut
// to at most 80 bytes of the original so that a hostile input cannot flood a
// terminal or a log.
func Quote(s string) string {
	const max = 80
	cut := false
	if len(s) > max {
		s = s[:max] // a rune cut in half is escaped as \x.. by QuoteToGraphic
		cut = true
	}
	q := strconv.QuoteToGraphic(s)
	if cut {
		q += "..."
	}
	return q
}

// Bound escapes control characters in msg and cuts it to MaxErrorText bytes.
func Bound(msg string) string {
	var b strings.Builder
	for _, r := range msg {
		switch {
		case r == utf8.RuneError:
			b.WriteString(`\ufffd`)
		case unicode.IsControl(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
		if b.Len() > MaxErrorText {
			break
		}
	}
	out := b.String()
	if len(out) > MaxErrorText {
		out = out[:MaxErrorText-3]
		for !utf8.ValidString(out) {
			out = out[:len(out)-1]
		}
		out += "..."
	}
	return out
}
