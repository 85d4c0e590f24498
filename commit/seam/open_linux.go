//go:build linux

package seam

import (
	"io"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// OpenRead implements FileOpener: the regular file name opened for
// reading, never through a symbolic link.
func (o *OSFS) OpenRead(name string) (io.ReadCloser, error) {
	dfd, base, err := o.at(name)
	if err != nil {
		return nil, err
	}
	defer dfd.done()
	fd, err := unix.Openat(dfd.fd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, o.perr("open", name, err)
	}
	if _, err := regular(fd); err != nil {
		unix.Close(fd)
		return nil, o.perr("open", name, err)
	}
	return os.NewFile(uintptr(fd), path.Join(o.root, name)), nil
}
