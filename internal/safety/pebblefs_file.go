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

// memInfo gives a Pebble FileInfo its entry name and its mode: what the
// kernel FS would create (0666 files, 0777 directories, before any umask),
// or what SetSharing and FixPerm made it.
type memInfo struct {
	name string
	fi   vfs.FileInfo
	mode uint32 // permission bits and setgid
}

// info describes the file at memfs path p under name. The caller may hold
// m.mu or not: the modes have their own lock.
func (m *Mem) info(name, p string, fi vfs.FileInfo) memInfo {
	mode := uint32(0o666)
	if fi.IsDir() {
		mode = 0o777
	}
	m.modeMu.Lock()
	if v, ok := m.modes[p]; ok {
		mode = v
	}
	m.modeMu.Unlock()
	return memInfo{name, fi, mode}
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.fi.Size() }
func (i memInfo) Mode() fs.FileMode {
	m := fs.FileMode(i.mode & 0o777)
	if i.mode&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if i.fi.IsDir() {
		m |= fs.ModeDir
	}
	return m
}
func (i memInfo) ModTime() time.Time { return i.fi.ModTime() }
func (i memInfo) IsDir() bool        { return i.fi.IsDir() }
func (i memInfo) Sys() any           { return nil }
