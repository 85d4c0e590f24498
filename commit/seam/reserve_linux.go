//go:build linux

package seam

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Exchange implements Overwriter with renameat2(RENAME_EXCHANGE).
func (o *OSFS) Exchange(a, b string) error {
	afd, abase, err := o.at(a)
	if err != nil {
		return err
	}
	defer afd.done()
	bfd, bbase, err := o.at(b)
	if err != nil {
		return err
	}
	defer bfd.done()
	err = unix.Renameat2(afd.fd, abase, bfd.fd, bbase, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.ENOTSUP) {
		err = fmt.Errorf("%w: %w", errors.ErrUnsupported, err)
	}
	if err != nil {
		return o.perr("exchange", b, err)
	}
	return nil
}

// Overwrite implements Overwriter: pwrite(2) at offset 0, ftruncate(2) to
// the data's length, fdatasync(2). It checks first, on the open file, that
// name is a regular file with one link and at least len(data) bytes of
// blocks (st_blocks): writing inside allocated blocks of a filesystem that
// updates in place (ext4, XFS) allocates nothing, so it cannot fail for
// want of space, and a file with another name may be a record, which must
// never be written in place.
func (o *OSFS) Overwrite(name string, data []byte) error {
	dfd, base, err := o.at(name)
	if err != nil {
		return err
	}
	defer dfd.done()
	fd, err := unix.Openat(dfd.fd, base, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return o.perr("open", name, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return o.perr("fstat", name, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return o.perr("open", name, ErrNotRegular)
	case st.Nlink != 1:
		return o.perr("overwrite", name, fmt.Errorf("%w: %d links", ErrUnfit, st.Nlink))
	case st.Blocks*512 < int64(len(data)):
		return o.perr("overwrite", name, fmt.Errorf("%w: %d bytes allocated, %d needed", ErrUnfit, st.Blocks*512, len(data)))
	}
	for off := 0; off < len(data); {
		n, err := unix.Pwrite(fd, data[off:], int64(off))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return o.perr("write", name, err)
		}
		off += n
	}
	if err := unix.Ftruncate(fd, int64(len(data))); err != nil {
		return o.perr("truncate", name, err)
	}
	for {
		err = unix.Fdatasync(fd)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return o.perr("fsync", name, err)
	}
	return nil
}
