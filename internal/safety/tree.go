package safety

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"path"
	"sort"
	"strings"
)

// Tree is a filesystem state: a starting point, the current state of a
// Recorder, or a state a crash left. Trees are not modified once built.
type Tree struct {
	root *tnode
}

type tnode struct {
	dir  bool
	data []byte
	kids map[string]*tnode
}

// Snapshot returns the current state, as if everything were durable.
func (r *Recorder) Snapshot() *Tree {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[*inode]bool{}
	files := map[*inode]*tnode{}
	var conv func(n *inode) *tnode
	conv = func(n *inode) *tnode {
		if !n.dir {
			if f, ok := files[n]; ok {
				return f
			}
			f := &tnode{data: bytes.Clone(n.data)}
			files[n] = f
			return f
		}
		t := &tnode{dir: true, kids: map[string]*tnode{}}
		if seen[n] {
			return t
		}
		seen[n] = true
		for name, c := range n.kids {
			t.kids[name] = conv(c)
		}
		return t
	}
	return &Tree{root: conv(r.root)}
}

// Hash identifies the tree's contents.
func (t *Tree) Hash() [32]byte {
	h := sha256.New()
	var n [8]byte
	first := map[*tnode]string{}
	t.walk(func(p string, node *tnode) {
		if !node.dir {
			if q, ok := first[node]; ok {
				h.Write([]byte{'l'})
				h.Write([]byte(p + "\x00" + q + "\x00"))
				return
			}
			first[node] = p
		}
		dir, data := node.dir, node.data
		if dir {
			h.Write([]byte{'d'})
		} else {
			h.Write([]byte{'f'})
		}
		binary.LittleEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
		binary.LittleEndian.PutUint64(n[:], uint64(len(data)))
		h.Write(n[:])
		h.Write(data)
	})
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// Walk calls fn for every name below the root in lexical order.
func (t *Tree) Walk(fn func(p string, dir bool, data []byte)) {
	t.walk(func(p string, n *tnode) { fn(p, n.dir, n.data) })
}

func (t *Tree) walk(fn func(p string, n *tnode)) {
	var walk func(prefix string, n *tnode)
	walk = func(prefix string, n *tnode) {
		names := make([]string, 0, len(n.kids))
		for k := range n.kids {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			c := n.kids[k]
			p := path.Join(prefix, k)
			fn(p, c)
			if c.dir {
				walk(p, c)
			}
		}
	}
	walk("", t.root)
}

// Get returns the node at p.
func (t *Tree) Get(p string) (data []byte, dir, ok bool) {
	parts, err := splitName(p)
	if err != nil {
		return nil, false, false
	}
	n := t.root
	for _, c := range parts {
		if !n.dir {
			return nil, false, false
		}
		k, found := n.kids[c]
		if !found {
			return nil, false, false
		}
		n = k
	}
	return n.data, n.dir, true
}

// String lists the tree, for failure messages.
func (t *Tree) String() string {
	var b strings.Builder
	t.Walk(func(p string, dir bool, data []byte) {
		if dir {
			fmt.Fprintf(&b, "%s/\n", p)
		} else {
			fmt.Fprintf(&b, "%s %d %q\n", p, len(data), trunc(data, 160))
		}
	})
	return b.String()
}

// trunc returns at most the first n bytes of b, for messages.
func trunc(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// node returns the node at p, creating directories when mk is set.
func (t *Tree) node(p string, mk bool) *tnode {
	parts, err := splitName(p)
	if err != nil {
		return nil
	}
	n := t.root
	for _, c := range parts {
		k, ok := n.kids[c]
		if !ok {
			if !mk {
				return nil
			}
			k = &tnode{dir: true, kids: map[string]*tnode{}}
			n.kids[c] = k
		}
		n = k
	}
	return n
}

// Put returns a copy of t with the file p holding data (directories made
// as needed). Starting states are damaged with it.
func (t *Tree) Put(p string, data []byte) *Tree {
	c := t.clone()
	d, base := path.Split(p)
	c.node(d, true).kids[base] = &tnode{data: bytes.Clone(data)}
	return c
}

// Link returns a copy of t in which newname is a second name of the file
// oldname.
func (t *Tree) Link(oldname, newname string) *Tree {
	c := t.clone()
	d, base := path.Split(newname)
	c.node(d, true).kids[base] = c.node(oldname, false)
	return c
}

// Remove returns a copy of t without p.
func (t *Tree) Remove(p string) *Tree {
	c := t.clone()
	d, base := path.Split(p)
	if n := c.node(d, false); n != nil {
		delete(n.kids, base)
	}
	return c
}

func (t *Tree) clone() *Tree {
	files := map[*tnode]*tnode{}
	var cp func(n *tnode) *tnode
	cp = func(n *tnode) *tnode {
		if !n.dir {
			if f, ok := files[n]; ok {
				return f
			}
			f := &tnode{data: n.data}
			files[n] = f
			return f
		}
		out := &tnode{dir: true, kids: make(map[string]*tnode, len(n.kids))}
		for k, v := range n.kids {
			out.kids[k] = cp(v)
		}
		return out
	}
	return &Tree{root: cp(t.root)}
}
