package safety

// The file handles of Mem and the fs.FileInfo it returns.

import (
	"io/fs"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

type memFile struct {
	f    vfs.File
	name string
}

func (f *memFile) Write(p []byte) (int, error) {
	n, err := f.f.Write(p)
	if err != nil {
		return n, memErr("write", f.name, err)
	}
	return n, nil
}

func (f *memFile) Sync() error {
	if err := f.f.Sync(); err != nil {
		return memErr("fsync", f.name, err)
	}
	return nil
}

func (f *memFile) Close() error {
	if err := f.f.Close(); err != nil {
		return memErr("close", f.name, err)
	}
	return nil
}

// memInfo gives a Pebble FileInfo its entry name and the modes the kernel
// FS would create (0666 files, 0777 directories, before any umask).
type memInfo struct {
	name string
	fi   vfs.FileInfo
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.fi.Size() }
func (i memInfo) Mode() fs.FileMode {
	if i.fi.IsDir() {
		return fs.ModeDir | 0o777
	}
	return 0o666
}
func (i memInfo) ModTime() time.Time { return i.fi.ModTime() }
func (i memInfo) IsDir() bool        { return i.fi.IsDir() }
func (i memInfo) Sys() any           { return nil }
