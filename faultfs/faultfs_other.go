//go:build !linux

package faultfs

import "errors"

var errNotLinux = errors.New("faultfs: FUSE mounts are only supported on Linux")

// Options configure a mount. See the Linux documentation.
type Options struct {
	Rules []Rule
	Locks LockMode
	Debug bool
}

// FS is a mounted faultfs. It cannot be created on this system.
type FS struct{}

// Available always reports that faultfs cannot mount on this system.
func Available() error { return errNotLinux }

// Mount always fails on this system.
func Mount(mountpoint, backing string, opts Options) (*FS, error) { return nil, errNotLinux }

// Mountpoint returns "".
func (f *FS) Mountpoint() string { return "" }

// Backing returns "".
func (f *FS) Backing() string { return "" }

// SetRules fails on this system.
func (f *FS) SetRules(rules []Rule) error { return errNotLinux }

// Rules returns nil.
func (f *FS) Rules() []Rule { return nil }

// Counts returns zero counts.
func (f *FS) Counts() map[Op]int64 { return zeroCounts() }

// Injected returns zero counts.
func (f *FS) Injected() map[Op]int64 { return zeroCounts() }

// ResetCounts does nothing.
func (f *FS) ResetCounts() {}

// LockMode returns LocksForward.
func (f *FS) LockMode() LockMode { return LocksForward }

// SetLockMode fails on this system.
func (f *FS) SetLockMode(m LockMode) error { return errNotLinux }

// Wait returns at once.
func (f *FS) Wait() {}

// Unmount does nothing.
func (f *FS) Unmount() error { return nil }

func zeroCounts() map[Op]int64 {
	out := make(map[Op]int64, numOps)
	for _, o := range allOps {
		out[o] = 0
	}
	return out
}
