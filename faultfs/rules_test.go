package faultfs

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseRule(t *testing.T) {
	good := []struct {
		spec string
		want Rule
	}{
		{"op=fsyncdir,glob=work/*,errno=EIO,after=3,times=1",
			Rule{Op: OpFsyncDir, PathGlob: "work/*", Errno: syscall.EIO, After: 3, Times: 1}},
		{"op=fsync,delay=2ms", Rule{Op: OpFsync, Delay: 2 * time.Millisecond}},
		{" op = RENAME , delay=500us , fail=einval ", Rule{Op: OpRename, Delay: 500 * time.Microsecond, Errno: syscall.EINVAL}},
		{"op=write,errno=28", Rule{Op: OpWrite, Errno: syscall.ENOSPC}},
		{"op=open,path=a/b,errno=ENOTSUP", Rule{Op: OpOpen, PathGlob: "a/b", Errno: syscall.EOPNOTSUPP}},
		{"op=create", Rule{Op: OpCreate}},
	}
	for _, g := range good {
		got, err := ParseRule(g.spec)
		if err != nil {
			t.Errorf("ParseRule(%q): %v", g.spec, err)
			continue
		}
		if got != g.want {
			t.Errorf("ParseRule(%q) = %+v, want %+v", g.spec, got, g.want)
		}
		again, err := ParseRule(got.String())
		if err != nil || again != got {
			t.Errorf("ParseRule(%q.String() = %q) = %+v, %v; want %+v", g.spec, got.String(), again, err, got)
		}
	}
	bad := map[string]string{
		"":                          "op is required",
		"delay=2ms":                 "op is required",
		"op=unlink":                 "unknown op",
		"op=fsync,errno=EWHAT":      "unknown errno",
		"op=fsync,errno=ENOSYS":     "ENOSYS is refused",
		"op=fsync,errno=0":          "out of range",
		"op=fsync,errno=600":        "out of range",
		"op=fsync,delay=-1ms":       "negative delay",
		"op=fsync,delay=soon":       "invalid duration",
		"op=fsync,after=-1":         "must be >= 0",
		"op=fsync,times=x":          "invalid syntax",
		"op=fsync,glob=[":           "bad glob",
		"op=fsync,color=red":        "unknown key",
		"op=fsync,op=rename":        "given twice",
		"op=fsync,delay":            "not key=value",
		"op=fsync,glob=a,path=b":    "given twice",
		"op=fsync,errno=EIO,fail=1": "given twice",
	}
	for spec, want := range bad {
		_, err := ParseRule(spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRule(%q) error = %v, want one containing %q", spec, err, want)
		}
	}
}

func TestRuleMatches(t *testing.T) {
	r := Rule{Op: OpRename, PathGlob: "work/*/*.json"}
	if !r.matches([]string{"work/00/.x.json.tmp.1", "work/00/x.json"}) {
		t.Error("destination path should match")
	}
	if r.matches([]string{"work/00/a", "work/00/b"}) || r.matches([]string{"work/00/sub/x.json"}) {
		t.Error("unexpected match")
	}
	if !(Rule{Op: OpFsync}).matches([]string{"anything"}) {
		t.Error("empty glob must match anything")
	}
}

func TestParseLockModeAndOps(t *testing.T) {
	for _, m := range []LockMode{LocksForward, LocksKernel, LocksBroken} {
		got, err := ParseLockMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseLockMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseLockMode("maybe"); err == nil {
		t.Error("ParseLockMode(maybe) succeeded")
	}
	if len(Ops()) != 6 {
		t.Errorf("Ops() = %v", Ops())
	}
	for _, o := range Ops() {
		if p, err := ParseOp(string(o)); err != nil || p != o {
			t.Errorf("ParseOp(%q) = %v, %v", o, p, err)
		}
	}
	if ErrnoName(syscall.EIO) != "EIO" {
		t.Errorf("ErrnoName(EIO) = %q", ErrnoName(syscall.EIO))
	}
}
