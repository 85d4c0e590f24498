//go:build linux

// Command nfsrace is the reproducer of lease's double grant on NFSv4.2 (see
// docs/safety.md, NFS), run by scripts/nfs-race.sh in NFS client kernels. It
// does what lease does to a record, without lease:
//
//	nfsrace ofd DIR TAG ROUNDS: lock byte 0 of DIR/lock (OFD lock), create
//	    DIR/holder with O_CREAT|O_EXCL, sleep 2 ms, remove it, unlock; an
//	    EEXIST means that two processes held the lock at once.
//	nfsrace rec DIR TAG ROUNDS: lock byte 0 of DIR/lock, read the token in
//	    DIR/rec, write token+1 to a temporary file, fsync, rename it over
//	    DIR/rec, fsync DIR, unlock. Each write is printed as "W TOKEN TAG":
//	    a token written twice (by any two processes) is a double grant. A
//	    record opened under the lock whose fstat shows nlink == 0 (a stale
//	    open of a renamed-over record) is printed as STALE.
//
//	nfsrace seam DIR TAG ROUNDS: the same through lease's own filesystem
//	    seam (commit/seam: its lock of the byte, which on NFS revalidates
//	    the directory, and its read of the record), a fresh seam.OS per
//	    round as a lease process has: no token may be written twice.
//
// NFSRACE_FRESH=1 reopens DIR and the lock file every round (as every lease
// process does); NFSRACE_PAUSE_MS pauses up to that many milliseconds
// between rounds.
package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit/seam"
)

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "nfsrace: "+format+"\n", a...)
	os.Exit(1)
}

func lock(fd int, typ int16) {
	lk := unix.Flock_t{Type: typ, Len: 1}
	for {
		err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLKW, &lk)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			fail("lock: %v", err)
		}
		return
	}
}

func open(dir string) (lfd, dfd int) {
	lfd, err := unix.Open(dir+"/lock", unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		fail("open %s/lock: %v", dir, err)
	}
	dfd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		fail("open %s: %v", dir, err)
	}
	return lfd, dfd
}

// readToken reads the token of dfd's rec (0 when there is none yet) and
// whether the open was stale (nlink == 0).
func readToken(dfd int) (int, bool) {
	fd, err := unix.Openat(dfd, "rec", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		return 0, false
	}
	if err != nil {
		fail("open rec: %v", err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		fail("fstat rec: %v", err)
	}
	b := make([]byte, 32)
	n, err := unix.Read(fd, b)
	if err != nil {
		fail("read rec: %v", err)
	}
	tok, err := strconv.Atoi(string(b[:n]))
	if err != nil {
		fail("rec holds %q", b[:n])
	}
	return tok, st.Nlink == 0
}

func writeToken(dfd int, tag string, tok int) {
	tmp := "tmp." + tag
	fd, err := unix.Openat(dfd, tmp, unix.O_CREAT|unix.O_TRUNC|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		fail("create %s: %v", tmp, err)
	}
	if _, err := unix.Write(fd, []byte(strconv.Itoa(tok))); err != nil {
		fail("write %s: %v", tmp, err)
	}
	if err := unix.Fsync(fd); err != nil {
		fail("fsync %s: %v", tmp, err)
	}
	unix.Close(fd)
	if err := unix.Renameat(dfd, tmp, dfd, "rec"); err != nil {
		fail("rename %s: %v", tmp, err)
	}
	if err := unix.Fsync(dfd); err != nil {
		fail("fsync the directory: %v", err)
	}
}

func main() {
	if len(os.Args) != 5 || (os.Args[1] != "ofd" && os.Args[1] != "rec" && os.Args[1] != "seam") {
		fail("usage: nfsrace ofd|rec|seam DIR TAG ROUNDS")
	}
	mode, dir, tag := os.Args[1], os.Args[2], os.Args[3]
	rounds, err := strconv.Atoi(os.Args[4])
	if err != nil || rounds < 1 {
		fail("ROUNDS %q: a positive number", os.Args[4])
	}
	fresh := os.Getenv("NFSRACE_FRESH") == "1"
	pause, _ := strconv.Atoi(os.Getenv("NFSRACE_PAUSE_MS"))
	if mode == "seam" {
		viaSeam(dir, tag, rounds, pause)
		return
	}
	lfd, dfd := open(dir)
	eexist, stale := 0, 0
	for i := 0; i < rounds; i++ {
		if fresh && i > 0 {
			unix.Close(lfd)
			unix.Close(dfd)
			lfd, dfd = open(dir)
		}
		lock(lfd, unix.F_WRLCK)
		if mode == "ofd" {
			fd, err := unix.Open(dir+"/holder", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
			switch {
			case err == unix.EEXIST:
				eexist++
				fmt.Printf("EEXIST %s %d\n", tag, i)
			case err != nil:
				fail("create holder: %v", err)
			default:
				unix.Close(fd)
				time.Sleep(2 * time.Millisecond)
				unix.Unlink(dir + "/holder")
			}
		} else {
			tok, st := readToken(dfd)
			if st {
				stale++
				fmt.Printf("STALE %s %d read %d\n", tag, i, tok)
			}
			writeToken(dfd, tag, tok+1)
			fmt.Printf("W %d %s\n", tok+1, tag)
		}
		lock(lfd, unix.F_UNLCK)
		time.Sleep(time.Millisecond + time.Duration(rand.Intn(pause+1))*time.Millisecond)
	}
	fmt.Printf("END %s eexist=%d stale=%d\n", tag, eexist, stale)
}

// viaSeam is mode seam: lock, read and write the record as lease does,
// through a fresh seam.OS of dir each round.
func viaSeam(dir, tag string, rounds, pause int) {
	for i := 0; i < rounds; i++ {
		o, err := seam.OS(dir)
		if err != nil {
			fail("open %s: %v", dir, err)
		}
		unlock, err := o.Lock(context.Background(), "lock", 0, time.Hour)
		if err != nil {
			fail("lock: %v", err)
		}
		tok := 0
		data, err := o.ReadFile("rec", 32)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			fail("read rec: %v", err)
		default:
			if tok, err = strconv.Atoi(string(data)); err != nil {
				fail("rec holds %q", data)
			}
		}
		dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			fail("open %s: %v", dir, err)
		}
		writeToken(dfd, tag, tok+1)
		unix.Close(dfd)
		fmt.Printf("W %d %s\n", tok+1, tag)
		unlock()
		o.Close()
		time.Sleep(time.Millisecond + time.Duration(rand.Intn(pause+1))*time.Millisecond)
	}
	fmt.Printf("END %s eexist=0 stale=0\n", tag)
}
