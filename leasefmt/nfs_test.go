package leasefmt

import "testing"

func TestIsNFSSillyRename(t *testing.T) {
	for name, want := range map[string]bool{
		".nfs000000000123abcd00000001": true, // Linux: file ID, counter
		".nfs1":                        true,
		".nfs":                         false,
		"nfs000000000123abcd00000001":  false,
		".nfs000000000123ABCD00000001": false,
		".nfs0000x":                    false,
		".nfs" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef":               true,
		".nfs" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0":              false,
		".0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.json.tmp.0a1b2c3d4e5f": false,
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.json":                   false,
		".lock": false,
	} {
		if got := IsNFSSillyRename(name); got != want {
			t.Errorf("IsNFSSillyRename(%q) = %v, want %v", name, got, want)
		}
	}
}
