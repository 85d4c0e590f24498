package commit_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// tree is every name under a root with what it holds: file bytes, a
// symbolic link's target, or that it is a directory.
type tree map[string]string

func snapshotTree(t *testing.T, root string) tree {
	t.Helper()
	out := tree{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link " + target
		case d.IsDir():
			out[rel] = "dir"
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = "file " + string(data)
		default:
			out[rel] = "other " + d.Type().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (a tree) equal(b tree) bool { return a.diff(b) == "" }

// diff describes how a differs from b, "" when they are the same.
func (a tree) diff(b tree) string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			out = append(out, "+"+k)
		} else if v != w {
			out = append(out, fmt.Sprintf("~%s: %.120q -> %.120q", k, w, v))
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, "-"+k)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}
