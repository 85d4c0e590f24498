package leasefmt

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// sum is the ID of s: the lowercase hex SHA-256 of s.
func sum(s string) ID {
	h := sha256.Sum256([]byte(s))
	return ID(hex.EncodeToString(h[:]))
}

func TestParseID(t *testing.T) {
	good := []string{
		strings.Repeat("0", 64),
		strings.Repeat("f", 64),
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		string(sum("")),
	}
	for _, s := range good {
		id, err := ParseID(s)
		if err != nil || string(id) != s {
			t.Errorf("ParseID(%q) = %q, %v; want it accepted", s, id, err)
		}
	}
	bad := map[string]string{
		"empty":          "",
		"63 chars":       strings.Repeat("a", 63),
		"65 chars":       strings.Repeat("a", 65),
		"upper case":     strings.Repeat("A", 64),
		"one upper":      strings.Repeat("a", 63) + "F",
		"not hex":        strings.Repeat("a", 63) + "g",
		"dot dot":        "../" + strings.Repeat("a", 61),
		"slash":          strings.Repeat("a", 32) + "/" + strings.Repeat("a", 31),
		"space":          strings.Repeat("a", 63) + " ",
		"NUL":            strings.Repeat("a", 63) + "\x00",
		"non-ASCII":      strings.Repeat("a", 62) + "é",
		"0x prefix":      "0x" + strings.Repeat("a", 62),
		"json suffix":    strings.Repeat("a", 59) + ".json",
		"leading space":  " " + strings.Repeat("a", 63),
		"full-width hex": strings.Repeat("a", 61) + "ａ",
	}
	for name, s := range bad {
		if id, err := ParseID(s); err == nil || !errors.Is(err, ErrBadID) || id != "" {
			t.Errorf("%s: ParseID(%q) = %q, %v; want ErrBadID", name, s, id, err)
		}
	}
}

func TestShardDirName(t *testing.T) {
	for _, tc := range []struct {
		n           int
		first, last string
	}{
		{1, "00", "00"},
		{2, "00", "01"},
		{16, "00", "0f"},
		{17, "00", "10"},
		{255, "00", "fe"},
		{256, "00", "ff"},
		{257, "000", "100"},
		{4096, "000", "fff"},
		{4097, "0000", "1000"},
		{MaxShards, "0000", "ffff"},
	} {
		if got := ShardDirName(0, tc.n); got != tc.first {
			t.Errorf("ShardDirName(0, %d) = %q, want %q", tc.n, got, tc.first)
		}
		if got := ShardDirName(tc.n-1, tc.n); got != tc.last {
			t.Errorf("ShardDirName(%d, %d) = %q, want %q", tc.n-1, tc.n, got, tc.last)
		}
		seen := map[string]bool{}
		width := len(tc.first)
		for s := 0; s < tc.n; s++ {
			name := ShardDirName(s, tc.n)
			if len(name) != width || strings.ToLower(name) != name || seen[name] {
				t.Fatalf("ShardDirName(%d, %d) = %q: want %d lowercase digits, unique", s, tc.n, name, width)
			}
			seen[name] = true
			if back, ok := ParseShardDirName(name, tc.n); !ok || back != s {
				t.Fatalf("ParseShardDirName(%q, %d) = %d, %v; want %d", name, tc.n, back, ok, s)
			}
		}
	}
	// The full list for 16 shards, spelled out.
	var got []string
	for s := 0; s < 16; s++ {
		got = append(got, ShardDirName(s, 16))
	}
	if want := "00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f"; strings.Join(got, " ") != want {
		t.Errorf("16 shards: %s, want %s", strings.Join(got, " "), want)
	}
	for _, tc := range []struct {
		name string
		n    int
	}{
		{"0", 16}, {"000", 16}, {"10", 16}, {"0F", 16}, {"ff", 255}, {"00", 257}, {"-1", 16}, {"", 16}, {"+1", 16}, {"0x1", 16},
	} {
		if s, ok := ParseShardDirName(tc.name, tc.n); ok {
			t.Errorf("ParseShardDirName(%q, %d) = %d, true; want refused", tc.name, tc.n, s)
		}
	}
}

func TestShardAndLockOffset(t *testing.T) {
	for _, tc := range []struct {
		id     ID
		n      int
		shard  int
		offset int64
	}{
		{ID(strings.Repeat("0", 64)), 16, 0, 0},
		{ID(strings.Repeat("f", 64)), 16, 15, 1<<60 - 1},
		{ID(strings.Repeat("f", 64)), 256, 255, 1<<60 - 1},
		{ID(strings.Repeat("f", 64)), 4096, 4095, 1<<60 - 1},
		{ID(strings.Repeat("f", 64)), 1000, 4294967295 % 1000, 1<<60 - 1},
		{ID(strings.Repeat("f", 64)), 1, 0, 1<<60 - 1},
		{"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", 16, 0x01234567 % 16, 0x0123456789abcde},
		{"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", 256, 0x67, 0x0123456789abcde},
		{"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", 7, 0x01234567 % 7, 0x0123456789abcde},
		// SHA-256 of the empty string.
		{sum(""), 16, 0xe3b0c442 % 16, 0xe3b0c44298fc1c1},
		{sum(""), 256, 0x42, 0xe3b0c44298fc1c1},
		{sum(""), 4096, 0x442, 0xe3b0c44298fc1c1},
		// Only the first 8 digits choose the shard, only the first 15 the byte.
		{"0000000f" + ID(strings.Repeat("f", 56)), 16, 15, 0x0000000ffffffff},
		{"00000010" + ID(strings.Repeat("f", 56)), 16, 0, 0x00000010fffffff},
	} {
		if got := tc.id.Shard(tc.n); got != tc.shard {
			t.Errorf("%s.Shard(%d) = %d, want %d", tc.id, tc.n, got, tc.shard)
		}
		if got := tc.id.LockOffset(); got != tc.offset {
			t.Errorf("%s.LockOffset() = %#x, want %#x", tc.id, got, tc.offset)
		}
	}
	id := sum("x")
	if id.FileName() != string(id)+".json" || id.Short() != string(id[:12]) {
		t.Errorf("FileName %q, Short %q", id.FileName(), id.Short())
	}
}
