package seam_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/leasetool/lease/commit/seam"
)

// TestOSReadFile: ReadFile returns a file's exact bytes whatever its length
// relative to the bound and whether or not it ends in a newline, refuses
// what is longer than the bound with max+1 bytes, and refuses non-regular
// files without reading them.
func TestOSReadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o, err := seam.OS(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	const max = 64
	long := bytes.Repeat([]byte("x"), 9000)
	for name, data := range map[string][]byte{
		"empty":             {},
		"newline":           []byte("{\"a\":1}\n"),
		"no-newline":        []byte("{\"a\":1}"),
		"after-newline":     []byte("{\"a\":1}\n{\"b\":2}\n"),
		"exactly-max":       append(bytes.Repeat([]byte("y"), max-1), '\n'),
		"max-plus-one":      append(bytes.Repeat([]byte("y"), max), '\n'),
		"newline-at-max":    append(bytes.Repeat([]byte("z"), max), '\n', 'q'),
		"longer-than-pool":  long,
		"only-newlines":     []byte("\n\n\n"),
		"newline-then-tail": []byte("\nabc"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := o.ReadFile(name, max)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		want := data
		if len(want) > max+1 {
			want = want[:max+1]
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: ReadFile = %q, want %q", name, got, want)
		}
		big, err := o.ReadFile(name, 10000) // the unpooled buffer
		if err != nil || !bytes.Equal(big, data) {
			t.Errorf("%s: ReadFile(max 10000) = %q, %v; want the whole file", name, big, err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.Symlink("newline", filepath.Join(dir, "link"))
	for _, name := range []string{"fifo", "link"} {
		if _, err := o.ReadFile(name, max); !errors.Is(err, seam.ErrNotRegular) {
			t.Errorf("%s: ReadFile error %v, want ErrNotRegular", name, err)
		}
	}
	if _, err := o.ReadFile("sub", max); err == nil {
		t.Error("sub: ReadFile of a directory succeeded")
	}
}
