//go:build !linux

package worker

import "github.com/leasetool/lease/commit"

// waker: without inotify, the backoff's poll is the only wake-up.
type waker struct{ c chan struct{} }

func newWaker(*commit.Store) *waker { return nil }

func (w *waker) close() {}
