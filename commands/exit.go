package commands

import "github.com/leasetool/lease/commit"

// ExitStatus is the exit status an outcome calls for (SPEC §7): 0 success,
// 1 a negative answer, 3 corrupt, 4 I/O error, 5 lock timeout.
func ExitStatus(o commit.Outcome) int {
	switch o {
	case commit.OK:
		return 0
	case commit.Corrupt:
		return 3
	case commit.LockTimeout:
		return 5
	case commit.IOError:
		return 4
	}
	return 1
}

// severity orders exit statuses: 4 over 3 over 5 over 1 over 0, and a usage
// error (or anything else) over all of them.
func severity(code int) int {
	switch code {
	case 0:
		return 0
	case 1:
		return 1
	case 5:
		return 2
	case 3:
		return 3
	case 4:
		return 4
	}
	return 5
}

// Worse returns the more serious of two exit statuses: a batch exits with
// the most serious outcome it met.
func Worse(a, b int) int {
	if severity(b) > severity(a) {
		return b
	}
	return a
}
