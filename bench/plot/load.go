package main

// Reading the raw samples of bench/matrix into data.

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

func load(path string) (*data, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d := &data{
		renew:   map[cell]map[string][]sample{},
		syncs:   map[cell]map[string]string{},
		writers: map[cell]map[string][]sample{},
		ops:     map[string]map[string][]sample{},
		fsck:    map[cell][]sample{},
	}
	seenFS := map[string]bool{}
	addFS := func(fs string) {
		if !seenFS[fs] {
			seenFS[fs] = true
			d.fsOrder = append(d.fsOrder, fs)
		}
	}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if strings.HasPrefix(text, "# skipped") {
			d.skipped = append(d.skipped, strings.TrimPrefix(text, "# skipped "))
		}
		fl := strings.Fields(text)
		if len(fl) == 0 || strings.HasPrefix(fl[0], "#") {
			continue
		}
		bad := fmt.Errorf("%s:%d: malformed line %q", path, line, text)
		num := func(s string) float64 {
			v, e := strconv.ParseFloat(s, 64)
			if e != nil {
				err = bad
			}
			return v
		}
		switch {
		case fl[0] == "R" && len(fl) == 9, fl[0] == "W" && len(fl) == 9:
			c := cell{fl[1], int(num(fl[2])), int(num(fl[3]))}
			s := sample{num(fl[5]), num(fl[6]), int64(num(fl[7])), fl[8]}
			addFS(c.fs)
			if fl[0] == "R" {
				if d.renew[c] == nil {
					d.renew[c] = map[string][]sample{}
					d.cells = append(d.cells, c)
				}
				d.renew[c][fl[4]] = append(d.renew[c][fl[4]], s)
			} else {
				if d.writers[c] == nil {
					d.writers[c] = map[string][]sample{}
				}
				d.writers[c][fl[4]] = append(d.writers[c][fl[4]], s)
			}
		case fl[0] == "C" && len(fl) == 7:
			c := cell{fl[1], int(num(fl[2])), int(num(fl[3]))}
			if d.syncs[c] == nil {
				d.syncs[c] = map[string]string{}
			}
			d.syncs[c][fl[4]] = fl[5] + " / " + fl[6]
		case fl[0] == "P" && len(fl) == 6:
			addFS(fl[1])
			if d.ops[fl[1]] == nil {
				d.ops[fl[1]] = map[string][]sample{}
			}
			if !contains(d.opOrder, fl[2]) {
				d.opOrder = append(d.opOrder, fl[2])
			}
			d.ops[fl[1]][fl[2]] = append(d.ops[fl[1]][fl[2]], sample{num(fl[3]), num(fl[4]), int64(num(fl[5])), ""})
		case fl[0] == "F" && len(fl) == 8:
			c := cell{fl[1], int(num(fl[2])), int(num(fl[3]))}
			d.fsck[c] = append(d.fsck[c], sample{num(fl[4]), num(fl[5]), int64(num(fl[6])), fl[7]})
		default:
			return nil, bad
		}
		if err != nil {
			return nil, err
		}
	}
	sort.SliceStable(d.cells, func(i, j int) bool {
		a, b := d.cells[i], d.cells[j]
		if a.fs != b.fs {
			return indexOf(d.fsOrder, a.fs) < indexOf(d.fsOrder, b.fs)
		}
		if a.n != b.n {
			return a.n < b.n
		}
		return a.k < b.k
	})
	return d, sc.Err()
}

func contains(xs []string, x string) bool { return indexOf(xs, x) >= 0 }

func indexOf(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}
