package leasefmt

// The JSON scanner of records: one object read with its keys in order,
// duplicates refused, split by one scan when encoding/json says it is
// valid, and the typed accessors Decode reads the fields with.

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"strconv"
	"unicode/utf8"
)

// object is a JSON object read with its keys in order and duplicates refused.
type object struct {
	keys []string
	vals map[string]json.RawMessage
}

// parseObject reads exactly one JSON object from data, refusing duplicate
// keys, invalid UTF-8, a lone surrogate escape and anything but white
// space after it. The literals NaN and Infinity are not JSON and fail here.
//
// Records are read for every lease of every batch, so the common case is
// fast: data that json.Valid accepts is split into its top-level keys and
// raw values by one scan (splitObject). Anything else, and anything the
// scan does not expect, takes the decoder (parseObjectSlow), which says
// what is wrong. FuzzParseObject checks that both give the same answer.
func parseObject(data []byte) (*object, error) {
	if !utf8.Valid(data) {
		return nil, bad("", "not valid UTF-8")
	}
	if json.Valid(data) {
		if o, err, ok := splitObject(data); ok {
			if err == nil {
				err = checkText(data, o)
			}
			if err != nil {
				return nil, err
			}
			return o, nil
		}
	}
	return parseObjectSlow(data)
}

// checkText refuses data, parsed into o, when one of its strings holds a
// lone surrogate escape, naming the key whose value holds it.
func checkText(data []byte, o *object) error {
	esc := loneSurrogate(data)
	if esc == "" {
		return nil
	}
	field := ""
	for _, k := range o.keys {
		if loneSurrogate(o.vals[k]) != "" {
			field = k
			break
		}
	}
	return bad(field, "holds the lone surrogate escape %s: not text", esc)
}

// splitObject splits data, which json.Valid accepted, into the keys and raw
// values of its top-level object; ok is false when data is not an object.
func splitObject(data []byte) (o *object, err error, ok bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, nil, false
	}
	o = &object{vals: make(map[string]json.RawMessage, 10), keys: make([]string, 0, 10)}
	i = skipSpace(data, i+1)
	if data[i] == '}' {
		return o, nil, true
	}
	for {
		j := stringEnd(data, i)
		key, kok := unquote(data[i:j])
		if !kok {
			return nil, nil, false
		}
		i = skipSpace(data, j)
		i = skipSpace(data, i+1) // past ':'
		j = valueEnd(data, i)
		if _, dup := o.vals[key]; dup {
			return nil, bad(key, "duplicate key"), true
		}
		o.keys = append(o.keys, key)
		o.vals[key] = json.RawMessage(data[i:j])
		i = skipSpace(data, j)
		if data[i] == '}' {
			return o, nil, true
		}
		i = skipSpace(data, i+1) // past ','
	}
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the string that starts at data[i].
func stringEnd(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// valueEnd returns the index after the value that starts at data[i].
func valueEnd(data []byte, i int) int {
	switch data[i] {
	case '"':
		return stringEnd(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				i = stringEnd(data, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(data) {
		switch data[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// unquote is the value of a valid JSON string literal.
func unquote(lit []byte) (string, bool) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return "", false
	}
	if bytes.IndexByte(lit, '\\') < 0 {
		return string(lit[1 : len(lit)-1]), true
	}
	var s string
	if json.Unmarshal(lit, &s) != nil {
		return "", false
	}
	return s, true
}

// parseObjectSlow is parseObject with encoding/json's decoder: the
// reference, and the error path.
func parseObjectSlow(data []byte) (*object, error) {
	if !utf8.Valid(data) {
		return nil, bad("", "not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, bad("", "not JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, bad("", "not a JSON object")
	}
	o := &object{vals: map[string]json.RawMessage{}}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bad("", "not JSON: %v", err)
		}
		key := tok.(string) // inside an object the decoder only yields string keys
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, bad(key, "not JSON: %v", err)
		}
		if _, dup := o.vals[key]; dup {
			return nil, bad(key, "duplicate key")
		}
		o.keys = append(o.keys, key)
		o.vals[key] = raw
	}
	if _, err := dec.Token(); err != nil {
		return nil, bad("", "not JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad("", "data after the JSON object")
	}
	if err := checkText(data, o); err != nil {
		return nil, err
	}
	return o, nil
}

func (o *object) str(key string) (string, error) {
	raw, ok := o.vals[key]
	if !ok {
		return "", bad(key, "missing")
	}
	if len(raw) == 0 || raw[0] != '"' {
		return "", bad(key, "not a string")
	}
	if s, ok := unquote(raw); ok {
		return s, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", bad(key, "not a string: %v", err)
	}
	return s, nil
}

func (o *object) id(key string) (ID, error) {
	s, err := o.str(key)
	if err != nil {
		return "", err
	}
	id, err := ParseID(s)
	if err != nil {
		return "", bad(key, "not a canonical id (64 lowercase hex)")
	}
	return id, nil
}

func (o *object) token(key string) (int64, error) {
	raw, ok := o.vals[key]
	if !ok {
		return 0, bad(key, "missing")
	}
	t, err := ParseToken(string(raw))
	if err != nil {
		return 0, bad(key, "%v", err)
	}
	return t, nil
}

func (o *object) time(key string) (float64, error) {
	raw, ok := o.vals[key]
	if !ok {
		return 0, bad(key, "missing")
	}
	if len(raw) == 0 || !(raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
		return 0, bad(key, "not a number")
	}
	t, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsNaN(t) || math.IsInf(t, 0) {
		return 0, bad(key, "not a finite number")
	}
	if t < 0 {
		return 0, bad(key, "negative time")
	}
	// Keep the precision records are written with (microseconds), so that a
	// record read and written back is the record that was read.
	t, _ = strconv.ParseFloat(string(AppendTime(nil, t)), 64)
	return t, nil
}

func (o *object) targets(key string) ([]ID, error) {
	raw, ok := o.vals[key]
	if !ok {
		return nil, bad(key, "missing")
	}
	var list []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &list) != nil {
		return nil, bad(key, "not an array")
	}
	if len(list) == 0 {
		return nil, bad(key, "empty")
	}
	ids := make([]ID, len(list))
	for i, item := range list {
		var s string
		if len(item) == 0 || item[0] != '"' || json.Unmarshal(item, &s) != nil {
			return nil, bad(key, "item %d is not a string", i)
		}
		id, err := ParseID(s)
		if err != nil {
			return nil, bad(key, "item %d is not a canonical id", i)
		}
		if i > 0 && id <= ids[i-1] {
			return nil, bad(key, "not sorted and unique at item %d", i)
		}
		ids[i] = id
	}
	return ids, nil
}

// loneSurrogate returns the first \u escape of data that is a surrogate
// not in a pair (a high one, U+D800 to U+DBFF, followed at once by an
// escaped low one, U+DC00 to U+DFFF), or "". encoding/json would read it
// as U+FFFD, so that the next rewrite of the record would change the
// string with no one asking: such a record is not text, and is corrupt.
// Outside strings a backslash is not JSON, so every backslash of data is
// taken as an escape.
func loneSurrogate(data []byte) string {
	for i := bytes.IndexByte(data, '\\'); i >= 0 && i+1 < len(data); {
		if data[i+1] != 'u' {
			i += 2
		} else {
			r, ok := hex4(data, i+2)
			switch {
			case !ok:
				return "" // not JSON: the parser says so
			case r >= 0xdc00 && r <= 0xdfff:
				return string(data[i : i+6])
			case r >= 0xd800 && r <= 0xdbff:
				if lo, ok := hex4(data, i+8); !ok || data[i+6] != '\\' || data[i+7] != 'u' || lo < 0xdc00 || lo > 0xdfff {
					return string(data[i : i+6])
				}
				i += 12
			default:
				i += 6
			}
		}
		if i >= len(data) {
			break
		}
		j := bytes.IndexByte(data[i:], '\\')
		if j < 0 {
			break
		}
		i += j
	}
	return ""
}

// hex4 reads the 4 hex digits of a \u escape at data[i:].
func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(data[i:i+4]), 16, 16)
	return rune(v), err == nil
}
