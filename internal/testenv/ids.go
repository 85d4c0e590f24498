package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/leasetool/lease/leasefmt"
)

// ID is a realistic work ID for tests: the SHA-256 of name, in hex.
func ID(name string) leasefmt.ID {
	sum := sha256.Sum256([]byte(name))
	return leasefmt.ID(hex.EncodeToString(sum[:]))
}

// IDs is n IDs: ID("prefix-0") to ID("prefix-(n-1)").
func IDs(prefix string, n int) []leasefmt.ID {
	out := make([]leasefmt.ID, n)
	for i := range out {
		out[i] = ID(fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}
