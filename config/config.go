// Package config resolves the settings of one lease invocation (docs/design.md#clocks):
// flags over environment over a TOML file over defaults, in one function
// ([Load]), from one table of settings ([All]) that gives each setting its
// TOML key, environment variable, flag, type, help text and default,
// written once. The command line builds its flags and their help from the
// same table, and `lease config` prints every value with where it came
// from.
//
// Every error is a usage error ([ErrUsage]) that names the file, line and
// key, the variable or the flag involved.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/internal/suggest"
	"github.com/leasetool/lease/internal/userfile"
	"github.com/leasetool/lease/leasefmt"
)

// ErrUsage is wrapped by every error of the package: a setting that cannot
// be used (exit 2 for the commands).
var ErrUsage = errors.New("usage")

// usage is an error wrapping ErrUsage with the message alone.
type usage struct{ msg string }

func (e *usage) Error() string { return e.msg }
func (e *usage) Unwrap() error { return ErrUsage }

func usagef(format string, args ...any) error {
	return &usage{leasefmt.Bound(fmt.Sprintf(format, args...))}
}

// Kind is the type of a setting's value.
type Kind int

// The kinds of settings.
const (
	String Kind = iota
	Float
	Int
)

// Setting describes one setting.
type Setting struct {
	// Key is the TOML key; Env the environment variable; Flag the flag
	// (without dashes).
	Key, Env, Flag string
	Kind           Kind
	// Usage says what it is, for the flag help and lease config.
	Usage string
	// Default is the default as the help shows it ("10", "USER@HOST",
	// "max(120, 4*target_timeout)").
	Default string
}

// The defaults that do not derive from other settings. Those of the
// table's engine (shards, lock timeout, writers, clock skew, the least
// TTL) are the storage engine's, written once in package commit; the
// others are the command line's own.
const (
	DefaultRoot          = "./lease-table"
	DefaultShards        = commit.DefaultShards
	DefaultTargetTimeout = 30.0
	DefaultLockTimeout   = float64(commit.DefaultLockTimeout) / float64(time.Second)
	DefaultWriters       = commit.DefaultWriters
	DefaultMPITimeout    = 60.0
	DefaultGrace         = 10.0
	// DefaultMaxAttempts: an item whose runs fail this many times becomes
	// failed. Three lets a run that failed for its node's sake (out of
	// memory, a full disk, a killed worker) be tried twice more elsewhere,
	// while a poison item that fails every time costs at most three runs.
	DefaultMaxAttempts = 3
	// MaxMaxAttempts bounds max_attempts.
	MaxMaxAttempts   = 1000000
	DefaultClockSkew = float64(commit.DefaultClockSkew) / float64(time.Second)
	// DefaultMinTTL is the least default TTL, in seconds: the default is
	// max(DefaultMinTTL, 4*target_timeout).
	DefaultMinTTL = float64(commit.DefaultTTL) / float64(time.Second)
)

// All is the table of settings, in the order lease config prints them.
var All = []Setting{
	{"root", "LEASE_ROOT", "root", String, "table root directory", DefaultRoot},
	{"owner", "LEASE_OWNER", "owner", String, "owner name written into leases", "USER@HOST; USER@HOST/PID for lease run and lease work"},
	{"ttl", "LEASE_TTL", "ttl", Float, "lease time to live in seconds", "max(" + ftoa(DefaultMinTTL) + ", 4*target_timeout)"},
	{"target_timeout", "LEASE_TARGET_TIMEOUT", "target-timeout", Float, "target timeout in seconds, from which the default TTL follows", ftoa(DefaultTargetTimeout)},
	{"renew_interval", "LEASE_RENEW_INTERVAL", "renew-interval", Float, "renewal interval in seconds, less than ttl - clock_skew", "max(0.1, min(30, ttl/3))"},
	{"shards", "LEASE_SHARDS", "shards", Int, "work shard count when the table is created", strconv.Itoa(DefaultShards)},
	{"target_shards", "LEASE_TARGET_SHARDS", "target-shards", Int, "target and group shard count when the table is created", strconv.Itoa(DefaultShards)},
	{"lock_timeout", "LEASE_LOCK_TIMEOUT", "lock-timeout", Float, "longest wait for a record lock in seconds; exit 5 past it", ftoa(DefaultLockTimeout)},
	{"writers", "LEASE_WRITERS", "writers", Int, "concurrent record writers of a batch", strconv.Itoa(DefaultWriters)},
	{"sync", "LEASE_SYNC", "sync", String, "how a batch makes its records durable: record (fsync each record and each directory), auto (on ext4, XFS and btrfs while the machine has little dirty data: a batch of 8 records or more writes its temp files, makes them durable with one syncfs(2) per 256 records (the first 64 of a larger batch), renames them into place and makes the renames durable with one more syncfs; per record elsewhere; the default), syncfs (the same wherever the filesystem has syncfs)", "auto"},
	{"mpi_timeout", "LEASE_MPI_TIMEOUT", "mpi-timeout", Float, "under mpirun, longest wait in seconds for one collective before every rank aborts", ftoa(DefaultMPITimeout)},
	{"grace", "LEASE_GRACE", "grace", Float, "lease run: seconds between SIGTERM and SIGKILL when the lease is lost", ftoa(DefaultGrace)},
	{"clock_skew", "LEASE_CLOCK_SKEW", "clock-skew", Float, "bound on the clock difference between nodes in seconds: a claim takes over from expires_at + clock_skew, a holder counts its lease lost from expires_at - clock_skew", ftoa(DefaultClockSkew)},
	{"max_attempts", "LEASE_MAX_ATTEMPTS", "max-attempts", Int, "failed runs after which an item becomes failed (lease retry puts it back); 0: never", strconv.Itoa(DefaultMaxAttempts)},
	{"max_wait", "LEASE_MAX_WAIT", "max-wait", Float, "lease work, lease run (its finish; its claim with --next --wait), lease claim --next --wait: longest wait in seconds for a table that cannot be written (full, read-only, I/O error, stale NFS handle) before the table's error ends it (exit 4; lease run 125); 0: no limit", "0, no limit"},
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// FlagAliases are other names of the flags of settings, by flag: names
// the flags had before they were named after their keys (--interval was
// the flag of renew_interval), still accepted.
var FlagAliases = map[string][]string{"renew-interval": {"interval"}}

// Lookup returns the setting whose flag (or one of its FlagAliases) is
// flag.
func Lookup(flag string) (Setting, bool) {
	for _, s := range All {
		if s.Flag == flag {
			return s, true
		}
		for _, a := range FlagAliases[s.Flag] {
			if a == flag {
				return s, true
			}
		}
	}
	return Setting{}, false
}

// Settings are the effective configuration of one invocation.
type Settings struct {
	Root          string
	Owner         string
	TTL           float64
	TargetTimeout float64
	RenewInterval float64
	Shards        int
	TargetShards  int
	LockTimeout   float64
	Writers       int
	Sync          durable.Strategy
	MPITimeout    float64
	Grace         float64
	ClockSkew     float64
	MaxAttempts   int
	MaxWait       float64

	// File is the TOML file read, "" when none.
	File string
	// origin says where each key's value came from.
	origin map[string]string
	// explicit records keys given by flag, environment or file.
	explicit map[string]bool
}

// MaxFileSize is the largest configuration file read: a file of a few
// dozen keys is a few KiB, and a bigger one (or /dev/zero, or a FIFO, which
// is no regular file) is refused with a usage error naming it.
const MaxFileSize = 1 << 20

// Flags is where flag values come from; *cli.Context has these methods.
type Flags interface {
	IsSet(name string) bool
	String(name string) string
	Float64(name string) float64
	Int(name string) int
}

// Load resolves the settings: flags (of the settings of All and --config)
// over the environment read with getenv over the TOML file (--config, else
// LEASE_CONFIG, else ./lease.toml, else $XDG_CONFIG_HOME/lease/config.toml)
// over the defaults.
func Load(flags Flags, getenv func(string) string) (*Settings, error) {
	s := &Settings{origin: map[string]string{}, explicit: map[string]bool{}}
	vals := map[string]any{}
	file, explicitFile := "", false
	if flags.IsSet("config") {
		file, explicitFile = flags.String("config"), true
	} else if v := getenv("LEASE_CONFIG"); v != "" {
		file, explicitFile = v, true
	} else if _, err := os.Stat("lease.toml"); err == nil {
		file = "lease.toml"
	} else {
		xdg := getenv("XDG_CONFIG_HOME")
		if xdg == "" {
			if home, err := os.UserHomeDir(); err == nil {
				xdg = filepath.Join(home, ".config")
			}
		}
		if xdg != "" {
			p := filepath.Join(xdg, "lease", "config.toml")
			if _, err := os.Stat(p); err == nil {
				file = p
			}
		}
	}
	if file != "" {
		data, err := userfile.Read(file, MaxFileSize)
		if err != nil {
			if explicitFile || !errors.Is(err, os.ErrNotExist) {
				var pe *fs.PathError
				if errors.As(err, &pe) {
					err = pe.Err // the message names the file already
				}
				return nil, usagef("config %s: %v", file, err)
			}
		} else {
			fv, err := ParseFile(file, data)
			if err != nil {
				return nil, err
			}
			s.File = file
			for k, v := range fv {
				vals[k] = v.Value
				s.origin[k] = fmt.Sprintf("%s:%d", file, v.Line)
				s.explicit[k] = true
			}
		}
	}
	for _, d := range All {
		raw := getenv(d.Env)
		if raw == "" {
			continue
		}
		v, err := parseValue(d, raw)
		if err != nil {
			return nil, usagef("environment %s: %v", d.Env, err)
		}
		vals[d.Key], s.origin[d.Key], s.explicit[d.Key] = v, "env "+d.Env, true
	}
	for _, d := range All {
		if !flags.IsSet(d.Flag) {
			continue
		}
		var v any
		switch d.Kind {
		case String:
			v = flags.String(d.Flag)
		case Float:
			v = flags.Float64(d.Flag)
		case Int:
			v = int64(flags.Int(d.Flag))
		}
		if err := checkValue(d, v); err != nil {
			return nil, usagef("--%s: %v", d.Flag, err)
		}
		vals[d.Key], s.origin[d.Key], s.explicit[d.Key] = v, "flag --"+d.Flag, true
	}
	return s, s.resolve(vals)
}

// resolve applies defaults, derived defaults and cross-checks.
func (s *Settings) resolve(vals map[string]any) error {
	str := func(key, def string) string {
		if v, ok := vals[key]; ok {
			return v.(string)
		}
		s.origin[key] = "default"
		return def
	}
	num := func(key string, def float64) float64 {
		if v, ok := vals[key]; ok {
			return toFloat(v)
		}
		s.origin[key] = "default"
		return def
	}
	integer := func(key string, def int) int {
		if v, ok := vals[key]; ok {
			return int(v.(int64))
		}
		s.origin[key] = "default"
		return def
	}
	s.Root = str("root", DefaultRoot)
	s.Owner = str("owner", "")
	if _, given := vals["owner"]; !given { // an explicit empty owner is refused below
		s.Owner = DefaultOwner()
		s.origin["owner"] = "default (USER@HOST)"
	}
	s.TargetTimeout = num("target_timeout", DefaultTargetTimeout)
	s.TTL = num("ttl", math.Max(DefaultMinTTL, 4*s.TargetTimeout))
	if _, ok := vals["ttl"]; !ok {
		s.origin["ttl"] = "default (max(" + ftoa(DefaultMinTTL) + ", 4*target_timeout))"
	}
	s.RenewInterval = num("renew_interval", RenewInterval(s.TTL))
	if _, ok := vals["renew_interval"]; !ok {
		s.origin["renew_interval"] = "default (max(0.1, min(30, ttl/3)))"
	}
	s.Shards = integer("shards", DefaultShards)
	s.TargetShards = integer("target_shards", DefaultShards)
	s.LockTimeout = num("lock_timeout", DefaultLockTimeout)
	s.Writers = integer("writers", DefaultWriters)
	s.Sync, _ = durable.ParseStrategy(str("sync", "record")) // checked with the value
	s.MPITimeout = num("mpi_timeout", DefaultMPITimeout)
	s.Grace = num("grace", DefaultGrace)
	s.ClockSkew = num("clock_skew", DefaultClockSkew)
	s.MaxAttempts = integer("max_attempts", DefaultMaxAttempts)
	s.MaxWait = num("max_wait", 0)

	if err := leasefmt.CheckOwner(s.Owner); err != nil {
		return usagef("owner (%s): %v", s.origin["owner"], err)
	}
	if s.TTL <= s.ClockSkew {
		return usagef("ttl %g (%s) must be more than clock_skew %g (%s): a holder counts its lease as lost from expires_at - clock_skew",
			s.TTL, s.origin["ttl"], s.ClockSkew, s.origin["clock_skew"])
	}
	if s.explicit["renew_interval"] {
		if err := s.CheckRenewInterval(); err != nil {
			return err
		}
	}
	if s.Root == "" {
		return usagef("root (%s) is empty", s.origin["root"])
	}
	return nil
}

// RenewInterval is the default time between renewals of a lease of ttl
// seconds: a third of it, at least 0.1 s and at most 30 s (renew_interval;
// leases.WorkOptions.Interval 0).
func RenewInterval(ttl float64) float64 { return math.Max(0.1, math.Min(30, ttl/3)) }

// CheckRenewInterval refuses a renewal interval under which a renewal could
// not arrive before the lease counts as lost: the commands that renew on an
// interval (lease run, renew-batch --watch) call it, and Load does when the
// interval was given explicitly.
func (s *Settings) CheckRenewInterval() error {
	if s.RenewInterval <= 0 || s.RenewInterval >= s.TTL-s.ClockSkew {
		return usagef("renew_interval %g (%s) must be more than 0 and less than ttl - clock_skew = %g (ttl %s, clock_skew %s): a renewal could not arrive before the lease counts as lost",
			s.RenewInterval, s.origin["renew_interval"], s.TTL-s.ClockSkew, s.origin["ttl"], s.origin["clock_skew"])
	}
	return nil
}

// Explicit reports whether key was given by flag, environment or file.
func (s *Settings) Explicit(key string) bool { return s.explicit[key] }

// Origin says where key's value came from: "flag --ttl", "env LEASE_TTL",
// "FILE:LINE" or "default ...".
func (s *Settings) Origin(key string) string { return s.origin[key] }

// FromCommandLine reports whether key was given by flag or environment
// (the command line of this invocation), not by a file or default.
func (s *Settings) FromCommandLine(key string) bool {
	o := s.origin[key]
	return strings.HasPrefix(o, "flag ") || strings.HasPrefix(o, "env ")
}

// Value returns the value of key as lease config prints it.
func (s *Settings) Value(key string) any {
	switch key {
	case "root":
		return s.Root
	case "owner":
		return s.Owner
	case "ttl":
		return s.TTL
	case "target_timeout":
		return s.TargetTimeout
	case "renew_interval":
		return s.RenewInterval
	case "shards":
		return s.Shards
	case "target_shards":
		return s.TargetShards
	case "lock_timeout":
		return s.LockTimeout
	case "writers":
		return s.Writers
	case "sync":
		return s.Sync.String()
	case "mpi_timeout":
		return s.MPITimeout
	case "grace":
		return s.Grace
	case "clock_skew":
		return s.ClockSkew
	case "max_attempts":
		return s.MaxAttempts
	case "max_wait":
		return s.MaxWait
	}
	return nil
}

// DefaultOwner is the owner of leases when none is given: USER@HOST.
func DefaultOwner() string {
	name := os.Getenv("USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	if name == "" {
		name = "unknown"
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return name + "@" + host
}

// WorkerOwner is the default owner of a worker's leases (lease run, lease
// work): DefaultOwner with the worker's process ID, USER@HOST/PID, and the
// rank of a launcher's task when one started it (USER@HOST/rank-N/PID,
// from OMPI_COMM_WORLD_RANK, PMIX_RANK, SLURM_PROCID or PMI_RANK, the
// first set), so that the many workers of one host, or of one job, are
// told apart in the records and in lease status --summary.
func WorkerOwner(getenv func(string) string) string {
	owner := DefaultOwner()
	for _, v := range []string{"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "PMI_RANK"} {
		if r := getenv(v); r != "" {
			if n, err := strconv.Atoi(r); err == nil && n >= 0 {
				owner += "/rank-" + strconv.Itoa(n)
				break
			}
		}
	}
	return owner + "/" + strconv.Itoa(os.Getpid())
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int64:
		return float64(x)
	}
	return math.NaN()
}

// parseValue parses an environment value of setting d.
func parseValue(d Setting, raw string) (any, error) {
	var v any
	switch d.Kind {
	case String:
		v = raw
	case Float:
		f, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
		if err != nil {
			return nil, fmt.Errorf("%s is not a number", leasefmt.Quote(raw))
		}
		v = f
	case Int:
		n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s is not an integer", leasefmt.Quote(raw))
		}
		v = n
	}
	return v, checkValue(d, v)
}

// checkValue enforces the range of setting d.
func checkValue(d Setting, v any) error {
	switch d.Kind {
	case Float:
		f := toFloat(v)
		if err := leasefmt.CheckTime(d.Key, f); err != nil {
			return err
		}
		if f > 1e9 {
			return fmt.Errorf("%s %g is too large", d.Key, f)
		}
	case Int:
		n := v.(int64)
		switch d.Key {
		case "shards", "target_shards":
			if n < 1 || n > leasefmt.MaxShards {
				return fmt.Errorf("%s %d is not in [1, %d]", d.Key, n, leasefmt.MaxShards)
			}
		case "writers":
			if n < 1 || n > 4096 {
				return fmt.Errorf("writers %d is not in [1, 4096]", n)
			}
		case "max_attempts":
			if n < 0 || n > MaxMaxAttempts {
				return fmt.Errorf("max_attempts %d is not in [0, %d]", n, MaxMaxAttempts)
			}
		}
	case String:
		s := v.(string)
		if len(s) > 4096 || strings.ContainsRune(s, 0) {
			return fmt.Errorf("%s value is not usable", d.Key)
		}
		if d.Key == "sync" {
			if _, err := durable.ParseStrategy(s); err != nil {
				return err
			}
		}
	}
	return nil
}

// Value is a value read from a file, with its line.
type Value struct {
	Value any // string, float64 or int64
	Line  int
}

// keyLine finds the line of a top-level key: `key =`, or the first part of a
// dotted key (`work.shards = 4` defines the table work).
var keyLine = regexp.MustCompile(`^\s*("?)([A-Za-z0-9_-]+)("?)\s*[=.]`)

// ParseFile reads a TOML configuration file: only the keys of All, at top
// level, with the right types and ranges. Every error names the file, the
// line and the key, and wraps ErrUsage.
func ParseFile(file string, data []byte) (map[string]Value, error) {
	var raw map[string]any
	md, err := toml.Decode(string(data), &raw)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			if pe.LastKey == "" {
				return nil, usagef("config %s:%d: TOML syntax error: %s", file, pe.Position.Line, pe.Message)
			}
			return nil, usagef("config %s:%d: %s: TOML syntax error: %s", file, pe.Position.Line, pe.LastKey, pe.Message)
		}
		return nil, usagef("config %s: %v", file, err)
	}
	lines := map[string]int{}
	for i, l := range strings.Split(string(data), "\n") {
		if m := keyLine.FindStringSubmatch(l); m != nil {
			if _, seen := lines[m[2]]; !seen {
				lines[m[2]] = i + 1
			}
		}
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "[") {
			name := strings.Trim(t, "[] ")
			if _, seen := lines[name]; !seen {
				lines[name] = i + 1
			}
		}
	}
	defs := map[string]Setting{}
	for _, d := range All {
		defs[d.Key] = d
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return lines[keys[a]] < lines[keys[b]] })
	out := map[string]Value{}
	for _, k := range keys {
		v := raw[k]
		line := lines[k]
		d, ok := defs[k]
		if !ok {
			known := make([]string, len(All))
			for i, d := range All {
				known[i] = d.Key
			}
			hint := " (lease config lists the keys)"
			if s := suggest.Closest(k, known); s != "" {
				hint = "; did you mean " + s + "?"
			}
			return nil, usagef("config %s:%d: %s: unknown key%s", file, line, leasefmt.Quote(k), hint)
		}
		switch d.Kind {
		case String:
			if _, ok := v.(string); !ok {
				return nil, usagef("config %s:%d: %s: want a string, got %s", file, line, k, md.Type(k))
			}
		case Float:
			if _, ok := v.(float64); !ok {
				if _, ok := v.(int64); !ok {
					return nil, usagef("config %s:%d: %s: want a number, got %s", file, line, k, md.Type(k))
				}
			}
		case Int:
			if _, ok := v.(int64); !ok {
				return nil, usagef("config %s:%d: %s: want an integer, got %s", file, line, k, md.Type(k))
			}
		}
		if err := checkValue(d, v); err != nil {
			return nil, usagef("config %s:%d: %s: %v", file, line, k, err)
		}
		out[k] = Value{v, line}
	}
	return out, nil
}
