//go:build !linux

package commands_test

import "testing"

// coreImmutable needs Linux's FS_IOC_SETFLAGS (core_linux_test.go).
func coreImmutable(t *testing.T, dir string) {
	t.Helper()
	t.Skip("making a directory immutable to inject an I/O error needs Linux")
}
