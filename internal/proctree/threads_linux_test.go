package proctree_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestNoGoroutineEndsLocked: lease work forks CMD, with its parent-death
// signal, from whatever thread runs Start (inline_linux.go, start). A
// parent-death signal is the death of the forking thread, and the Go
// runtime ends a thread only when a goroutine locked to it ends without
// unlocking, so CMD lives as long as its holder only while no goroutine
// of the lease binary ever does. Every package compiled into the binary
// is read:
//   - in this module, each runtime.LockOSThread must be undone by a
//     deferred runtime.UnlockOSThread in the same function, but the
//     supervisor's, which keeps its main goroutine (whose thread the
//     runtime never ends) on the main thread for its process's life;
//   - a dependency outside the standard library may not call it at all
//     (none does; one that starts to must be read first);
//   - in the standard library only the runtime may (its signal mask
//     thread, which never ends).
func TestNoGoroutineEndsLocked(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Dir,GoFiles,Standard,Module", "github.com/leasetool/lease")
	cmd.Env = append(os.Environ(), "GOOS=linux")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	type pkg struct {
		ImportPath, Dir string
		GoFiles         []string
		Standard        bool
		Module          *struct{ Path string }
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	ours, checked := 0, 0
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		checked++
		own := p.Module != nil && p.Module.Path == "github.com/leasetool/lease"
		for _, name := range p.GoFiles {
			file := filepath.Join(p.Dir, name)
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(src, []byte("LockOSThread")) {
				continue
			}
			for _, l := range lockCalls(t, file, src) {
				switch {
				case p.Standard && p.ImportPath == "runtime":
				case p.Standard || !own:
					t.Errorf("%s: %s calls runtime.LockOSThread: read it (does the goroutine end locked?) before it is compiled into lease", l.pos, p.ImportPath)
				case l.deferredUnlock:
					ours++
				case p.ImportPath == "github.com/leasetool/lease/internal/proctree" && l.fn == "supervise":
					ours++
				default:
					t.Errorf("%s: runtime.LockOSThread in %s without a deferred runtime.UnlockOSThread: a goroutine that ends locked ends its thread, and a CMD forked from that thread gets its parent-death signal", l.pos, l.fn)
				}
			}
		}
	}
	if checked < 20 || ours < 2 {
		t.Fatalf("read %d packages and %d locks of this module: go list did not list the binary's packages", checked, ours)
	}
}

// lock is one call of runtime.LockOSThread.
type lock struct {
	pos            token.Position
	fn             string // the enclosing function declaration's name
	deferredUnlock bool   // its function (or literal) defers runtime.UnlockOSThread
}

// lockCalls finds the calls of runtime.LockOSThread in a file (in
// package runtime itself, of LockOSThread).
func lockCalls(t *testing.T, file string, src []byte) []lock {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	rt := ""
	if f.Name.Name == "runtime" {
		rt = "."
	}
	for _, imp := range f.Imports {
		if path, _ := strconv.Unquote(imp.Path.Value); path == "runtime" {
			rt = "runtime"
			if imp.Name != nil {
				rt = imp.Name.Name
			}
		}
	}
	if rt == "" {
		return nil
	}
	is := func(call *ast.CallExpr, name string) bool {
		switch fun := call.Fun.(type) {
		case *ast.SelectorExpr:
			x, ok := fun.X.(*ast.Ident)
			return ok && x.Name == rt && fun.Sel.Name == name
		case *ast.Ident:
			return rt == "." && fun.Name == name
		}
		return false
	}
	var found []lock
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		// The innermost function (declaration or literal) around each call.
		var walk func(body *ast.BlockStmt)
		walk = func(body *ast.BlockStmt) {
			deferred := false
			var calls []*ast.CallExpr
			ast.Inspect(body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.FuncLit:
					walk(n.Body)
					return false
				case *ast.DeferStmt:
					if is(n.Call, "UnlockOSThread") {
						deferred = true
					}
				case *ast.CallExpr:
					if is(n, "LockOSThread") {
						calls = append(calls, n)
					}
				}
				return true
			})
			for _, c := range calls {
				found = append(found, lock{pos: fset.Position(c.Pos()), fn: fd.Name.Name, deferredUnlock: deferred})
			}
		}
		walk(fd.Body)
	}
	return found
}
