package userfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/leasetool/lease/internal/userfile"
)

func TestRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(dir, "small")
	exact := filepath.Join(dir, "exact")
	big := filepath.Join(dir, "big")
	for name, n := range map[string]int{small: 10, exact: 100, big: 101} {
		if err := os.WriteFile(name, make([]byte, n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		want error // nil: read whole
	}{
		{small, nil},
		{exact, nil},
		{big, userfile.ErrTooLarge},
		{fifo, userfile.ErrNotRegular}, // a FIFO with no writer: the open must not block
		{"/dev/zero", userfile.ErrNotRegular},
		{dir, userfile.ErrNotRegular},
		{filepath.Join(dir, "missing"), os.ErrNotExist},
	} {
		data, err := userfile.Read(c.name, 100)
		if c.want == nil {
			if err != nil {
				t.Errorf("Read(%s): %v", c.name, err)
			}
			continue
		}
		if !errors.Is(err, c.want) {
			t.Errorf("Read(%s) = %d bytes, %v; want %v", c.name, len(data), err, c.want)
		}
	}
}
