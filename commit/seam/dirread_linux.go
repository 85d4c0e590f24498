//go:build linux

package seam

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// osDir reads an open directory with getdents(2) into a buffer sized by
// the first request: about as many entries as asked for, not os.File's
// fixed 8 KiB. The kernel reads directory blocks only as far as it fills
// the buffer, so in a queue shard that most entries have left (ext4 does
// not shrink a directory: at 99% of a million-item queue done, a shard's
// few live names are spread over hundreds of mostly empty blocks) a claim
// that wants a few dozen candidates reads that many, not ~90.
type osDir struct {
	f        *os.File
	buf      []byte
	pos, end int
	eof      bool // getdents returned 0: a later call would too
}

// nameBufs keeps ReadNames' largest buffers between directories. A worker
// lists a few directories an item (its queue shard, held/), and a new
// 32 KiB buffer each time, zeroed and soon collected, was about 2% of
// lease work's CPU (perf, docs/performance.md#worker-floor). Close puts
// the buffer back: ReadNames returns copies of the names, never the buffer.
var nameBufs = sync.Pool{New: func() any { return new([maxNameBuf]byte) }}

// maxNameBuf is the largest buffer ReadNames sizes for a request.
const maxNameBuf = 32 << 10

// direntBytes is the size of one linux_dirent64 of a 64-character name
// (19 bytes of header, the name and its NUL, rounded up to 8).
const direntBytes = 88

// ReadNames implements DirReader.
func (d *osDir) ReadNames(n int) ([]string, error) {
	if d.buf == nil {
		size := maxNameBuf
		if n > 0 {
			size = min(max(n*direntBytes, 1<<10), maxNameBuf)
		}
		if size == maxNameBuf {
			d.buf = nameBufs.Get().(*[maxNameBuf]byte)[:]
		} else {
			d.buf = make([]byte, size)
		}
	}
	fd := int(d.f.Fd())
	var names []string
	for n <= 0 || len(names) < n {
		if d.pos >= d.end {
			if d.eof {
				break
			}
			nb, err := unix.Getdents(fd, d.buf)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return names, &os.PathError{Op: "readdirent", Path: d.f.Name(), Err: err}
			}
			if nb <= 0 {
				d.eof = true // the listing's last call asks no more
				break
			}
			d.pos, d.end = 0, nb
		}
		left := -1
		if n > 0 {
			left = n - len(names)
		}
		used, _, more := unix.ParseDirent(d.buf[d.pos:d.end], left, names)
		names = more
		d.pos += used
	}
	if len(names) == 0 && n > 0 {
		return nil, io.EOF
	}
	return names, nil
}

// ScanDirents implements DirentScanner: linux_dirent64 records parsed by
// hand, since unix.ParseDirent drops d_ino and allocates each name. A
// whole-directory scan reads with a large buffer (fewer system calls; on
// FUSE, fewer round trips where the kernel allows more than a page).
func (d *osDir) ScanDirents(fn func(name []byte, ino uint64)) error {
	if d.buf == nil || len(d.buf) < 256<<10 {
		if d.pos < d.end {
			// Names left in a smaller buffer are handed out first.
			d.scan(fn)
		}
		d.buf, d.pos, d.end = make([]byte, 256<<10), 0, 0
	}
	fd := int(d.f.Fd())
	for {
		if d.pos >= d.end {
			nb, err := unix.Getdents(fd, d.buf)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return &os.PathError{Op: "readdirent", Path: d.f.Name(), Err: err}
			}
			if nb <= 0 {
				return nil
			}
			d.pos, d.end = 0, nb
		}
		d.scan(fn)
	}
}

// scan hands out the records of d.buf[d.pos:d.end].
func (d *osDir) scan(fn func(name []byte, ino uint64)) {
	for d.pos < d.end {
		rec := d.buf[d.pos:d.end]
		// d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name.
		if len(rec) < 19 {
			break
		}
		reclen := int(binary.NativeEndian.Uint16(rec[16:18]))
		if reclen < 19 || reclen > len(rec) {
			break
		}
		ino := binary.NativeEndian.Uint64(rec[0:8])
		name := rec[19:reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		d.pos += reclen
		if ino == 0 || string(name) == "." || string(name) == ".." {
			continue // a deleted entry, or the directory itself
		}
		fn(name, ino)
	}
	d.pos = d.end
}

// Close implements DirReader.
func (d *osDir) Close() error {
	if len(d.buf) == maxNameBuf {
		nameBufs.Put((*[maxNameBuf]byte)(d.buf))
	}
	d.buf, d.pos, d.end = nil, 0, 0
	return d.f.Close()
}
