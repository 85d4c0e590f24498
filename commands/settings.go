package commands

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/urfave/cli/v2"

	"github.com/leasetool/lease/leasefmt"
)

// Settings are the effective configuration of one invocation: flags over
// environment over TOML file over defaults (SPEC §6).
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
	MPITimeout    float64
	Grace         float64
	ClockSkew     float64

	// ConfigFile is the TOML file read, "" when none.
	ConfigFile string
	// origin says where each key's value came from.
	origin map[string]string
	// explicit records keys given by flag, environment or file (not defaults).
	explicit map[string]bool
}

// settingDef describes one setting: its TOML key, environment variable,
// flag and type.
type settingDef struct {
	key, env, flag, kind, usage string
}

var settingDefs = []settingDef{
	{"root", "LEASE_ROOT", "root", "string", "table root directory"},
	{"owner", "LEASE_OWNER", "owner", "string", "owner name written into leases (default USER@HOST)"},
	{"ttl", "LEASE_TTL", "ttl", "float", "lease time to live in seconds (default max(120, 4*target_timeout))"},
	{"target_timeout", "LEASE_TARGET_TIMEOUT", "target-timeout", "float", "target timeout in seconds, from which the default TTL follows"},
	{"renew_interval", "LEASE_RENEW_INTERVAL", "interval", "float", "renewal interval in seconds (default max(0.1, min(30, ttl/3)))"},
	{"shards", "LEASE_SHARDS", "shards", "int", "work shard count when the table is created"},
	{"target_shards", "LEASE_TARGET_SHARDS", "target-shards", "int", "target and group shard count when the table is created"},
	{"lock_timeout", "LEASE_LOCK_TIMEOUT", "lock-timeout", "float", "longest wait for a record lock in seconds (exit 5 past it)"},
	{"writers", "LEASE_WRITERS", "writers", "int", "concurrent record writers of a batch"},
	{"mpi_timeout", "LEASE_MPI_TIMEOUT", "mpi-timeout", "float", "under mpirun, longest wait for one collective before aborting"},
	{"grace", "LEASE_GRACE", "grace", "float", "lease run: seconds between SIGTERM and SIGKILL when the lease is lost"},
	{"clock_skew", "LEASE_CLOCK_SKEW", "clock-skew", "float", "bound on the clock difference between nodes in seconds: claims take over from expires_at + clock_skew, holders count a lease lost from expires_at - clock_skew"},
}

// Defaults that do not derive from other settings.
const (
	defaultRoot          = "./lease-table"
	defaultShards        = 16
	defaultTargetTimeout = 30
	defaultLockTimeout   = 10
	defaultMPITimeout    = 60
	defaultGrace         = 10
	defaultClockSkew     = 1
)

// usageErr is an error that exits 2: usage, configuration or input.
func usageErr(format string, args ...any) error {
	return cli.Exit(leasefmt.Bound(fmt.Sprintf(format, args...)), 2)
}

// getenv is os.Getenv, replaced in tests.
var getenv = os.Getenv

// LoadSettings resolves the settings of c's invocation.
func LoadSettings(c *cli.Context) (*Settings, error) {
	s := &Settings{origin: map[string]string{}, explicit: map[string]bool{}}
	vals := map[string]any{}
	// File: --config, else LEASE_CONFIG, else ./lease.toml, else XDG.
	file, explicitFile := "", false
	if c.IsSet("config") {
		file, explicitFile = c.String("config"), true
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
		data, err := os.ReadFile(file)
		if err != nil {
			if explicitFile || !errors.Is(err, os.ErrNotExist) {
				return nil, usageErr("config %s: %v", file, err)
			}
		} else {
			fv, err := ParseConfig(file, data)
			if err != nil {
				return nil, cli.Exit(leasefmt.Bound(err.Error()), 2)
			}
			s.ConfigFile = file
			for k, v := range fv {
				vals[k] = v.value
				s.origin[k] = fmt.Sprintf("%s:%d", file, v.line)
				s.explicit[k] = true
			}
		}
	}
	// Environment over file.
	for _, d := range settingDefs {
		raw := getenv(d.env)
		if raw == "" {
			continue
		}
		v, err := parseValue(d, raw)
		if err != nil {
			return nil, usageErr("environment %s: %v", d.env, err)
		}
		vals[d.key], s.origin[d.key], s.explicit[d.key] = v, "env "+d.env, true
	}
	// Flags over environment.
	for _, d := range settingDefs {
		if !c.IsSet(d.flag) {
			continue
		}
		var v any
		switch d.kind {
		case "string":
			v = c.String(d.flag)
		case "float":
			v = c.Float64(d.flag)
		case "int":
			v = int64(c.Int(d.flag))
		}
		if err := checkValue(d, v); err != nil {
			return nil, usageErr("--%s: %v", d.flag, err)
		}
		vals[d.key], s.origin[d.key], s.explicit[d.key] = v, "flag --"+d.flag, true
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
	s.Root = str("root", defaultRoot)
	s.Owner = str("owner", "")
	if _, given := vals["owner"]; !given { // an explicit empty owner is refused below
		s.Owner = defaultOwner()
		s.origin["owner"] = "default (USER@HOST)"
	}
	s.TargetTimeout = num("target_timeout", defaultTargetTimeout)
	s.TTL = num("ttl", math.Max(120, 4*s.TargetTimeout))
	if _, ok := vals["ttl"]; !ok {
		s.origin["ttl"] = "default (max(120, 4*target_timeout))"
	}
	s.RenewInterval = num("renew_interval", math.Max(0.1, math.Min(30, s.TTL/3)))
	if _, ok := vals["renew_interval"]; !ok {
		s.origin["renew_interval"] = "default (max(0.1, min(30, ttl/3)))"
	}
	s.Shards = integer("shards", defaultShards)
	s.TargetShards = integer("target_shards", defaultShards)
	s.LockTimeout = num("lock_timeout", defaultLockTimeout)
	s.Writers = integer("writers", 64)
	s.MPITimeout = num("mpi_timeout", defaultMPITimeout)
	s.Grace = num("grace", defaultGrace)
	s.ClockSkew = num("clock_skew", defaultClockSkew)

	if err := leasefmt.CheckOwner(s.Owner); err != nil {
		return usageErr("owner (%s): %v", s.origin["owner"], err)
	}
	if s.TTL <= s.ClockSkew {
		return usageErr("ttl %g (%s) must be more than clock_skew %g (%s): a holder counts its lease as lost from expires_at - clock_skew",
			s.TTL, s.origin["ttl"], s.ClockSkew, s.origin["clock_skew"])
	}
	if s.explicit["renew_interval"] {
		if err := s.CheckRenewInterval(); err != nil {
			return err
		}
	}
	if s.Root == "" {
		return usageErr("root (%s) is empty", s.origin["root"])
	}
	return nil
}

// CheckRenewInterval refuses a renewal interval under which a renewal could
// not arrive before the lease counts as lost: the commands that renew on an
// interval (lease run, renew-batch --watch) call it, and resolve does when
// the interval was given explicitly.
func (s *Settings) CheckRenewInterval() error {
	if s.RenewInterval <= 0 || s.RenewInterval >= s.TTL-s.ClockSkew {
		return usageErr("renew_interval %g (%s) must be more than 0 and less than ttl - clock_skew = %g (ttl %s, clock_skew %s): a renewal could not arrive before the lease counts as lost",
			s.RenewInterval, s.origin["renew_interval"], s.TTL-s.ClockSkew, s.origin["ttl"], s.origin["clock_skew"])
	}
	return nil
}

// Explicit reports whether key was given by flag, environment or file.
func (s *Settings) Explicit(key string) bool { return s.explicit[key] }

// Origin says where key's value came from.
func (s *Settings) Origin(key string) string { return s.origin[key] }

func defaultOwner() string {
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
func parseValue(d settingDef, raw string) (any, error) {
	var v any
	switch d.kind {
	case "string":
		v = raw
	case "float":
		f, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
		if err != nil {
			return nil, fmt.Errorf("%s is not a number", leasefmt.Quote(raw))
		}
		v = f
	case "int":
		n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s is not an integer", leasefmt.Quote(raw))
		}
		v = n
	}
	return v, checkValue(d, v)
}

// checkValue enforces the range of setting d.
func checkValue(d settingDef, v any) error {
	switch d.kind {
	case "float":
		f := toFloat(v)
		if err := leasefmt.CheckTime(d.key, f); err != nil {
			return err
		}
		if f > 1e9 {
			return fmt.Errorf("%s %g is too large", d.key, f)
		}
	case "int":
		n := v.(int64)
		switch d.key {
		case "shards", "target_shards":
			if n < 1 || n > leasefmt.MaxShards {
				return fmt.Errorf("%s %d is not in [1, %d]", d.key, n, leasefmt.MaxShards)
			}
		case "writers":
			if n < 1 || n > 4096 {
				return fmt.Errorf("writers %d is not in [1, 4096]", n)
			}
		}
	case "string":
		s := v.(string)
		if len(s) > 4096 || strings.ContainsRune(s, 0) {
			return fmt.Errorf("%s value is not usable", d.key)
		}
	}
	return nil
}

type fileValue struct {
	value any
	line  int
}

// keyLine finds the line of a top-level key: `key =`, or the first part of a
// dotted key (`work.shards = 4` defines the table work).
var keyLine = regexp.MustCompile(`^\s*("?)([A-Za-z0-9_-]+)("?)\s*[=.]`)

// ParseConfig reads a TOML configuration file: only the keys of
// settingDefs, at top level, with the right types and ranges. Every error
// names the file, the line and the key.
func ParseConfig(file string, data []byte) (map[string]fileValue, error) {
	var raw map[string]any
	md, err := toml.Decode(string(data), &raw)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			key := pe.LastKey
			if key == "" {
				key = "-"
			}
			return nil, fmt.Errorf("config %s:%d: %s: %s", file, pe.Position.Line, key, pe.Message)
		}
		return nil, fmt.Errorf("config %s: %v", file, err)
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
	defs := map[string]settingDef{}
	for _, d := range settingDefs {
		defs[d.key] = d
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return lines[keys[a]] < lines[keys[b]] })
	out := map[string]fileValue{}
	for _, k := range keys {
		v := raw[k]
		line := lines[k]
		d, ok := defs[k]
		if !ok {
			return nil, fmt.Errorf("config %s:%d: %s: unknown key", file, line, leasefmt.Quote(k))
		}
		switch d.kind {
		case "string":
			if _, ok := v.(string); !ok {
				return nil, fmt.Errorf("config %s:%d: %s: want a string, got %s", file, line, k, md.Type(k))
			}
		case "float":
			if _, ok := v.(float64); !ok {
				if _, ok := v.(int64); !ok {
					return nil, fmt.Errorf("config %s:%d: %s: want a number, got %s", file, line, k, md.Type(k))
				}
			}
		case "int":
			if _, ok := v.(int64); !ok {
				return nil, fmt.Errorf("config %s:%d: %s: want an integer, got %s", file, line, k, md.Type(k))
			}
		}
		if err := checkValue(d, v); err != nil {
			return nil, fmt.Errorf("config %s:%d: %s: %v", file, line, k, err)
		}
		out[k] = fileValue{v, line}
	}
	return out, nil
}
