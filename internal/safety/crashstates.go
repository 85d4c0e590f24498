package safety

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sort"
)

// crashSpace is every choice a crash after a given call leaves open.
type crashSpace struct {
	ents  []entDim
	files []fileDim
	fixed map[entKey]*inode // entries with one possible value
	data  map[*inode][]byte // files with one possible content
	names map[*inode][]string
	cons  []renameCons
}

type entDim struct {
	key   entKey
	cands []entCand
}

type entCand struct {
	seq int // log index of the event that set it; -1 for the starting state
	val *inode
}

type fileDim struct {
	n     *inode
	cands [][]byte
}

// renameCons: if entry src takes a value set at or after srcSeq, entry dst
// must take a value set at or after dstSeq.
type renameCons struct {
	src, dst       int // indexes into ents
	srcSeq, dstSeq int
}

// space computes the choices a crash right after call c (the first c calls
// done) leaves.
func (r *Recorder) space(c int) *crashSpace {
	r.mu.Lock()
	defer r.mu.Unlock()
	type hist struct {
		h       []entCand
		durable int
	}
	ents := map[entKey]*hist{}
	var order []entKey
	names := map[*inode][]string{}
	for d, ns := range r.baseDir {
		names[d] = append(names[d], ns...)
	}
	get := func(k entKey) *hist {
		h, ok := ents[k]
		if !ok {
			v, inBase := r.baseEnt[k]
			if !inBase {
				names[k.dir] = append(names[k.dir], k.name)
			}
			h = &hist{h: []entCand{{-1, v}}}
			ents[k] = h
			order = append(order, k)
		}
		return h
	}
	type fhist struct {
		durable []byte
		since   [][]byte
	}
	files := map[*inode]*fhist{}
	fget := func(n *inode) *fhist {
		f, ok := files[n]
		if !ok {
			f = &fhist{durable: r.baseData[n]}
			files[n] = f
		}
		return f
	}
	lastSync := map[*inode]int{}
	for seq, e := range r.log {
		if e.call >= c {
			break
		}
		switch e.kind {
		case evEntry:
			h := get(e.key)
			h.h = append(h.h, entCand{seq, e.val})
		case evData:
			f := fget(e.node)
			f.since = append(f.since, e.data)
		case evFsync:
			f := fget(e.node)
			if len(f.since) > 0 {
				f.durable = f.since[len(f.since)-1]
				f.since = nil
			}
		case evSyncDir:
			lastSync[e.node] = seq
		}
	}
	sp := &crashSpace{fixed: map[entKey]*inode{}, data: map[*inode][]byte{}, names: names}
	for k, v := range r.baseEnt {
		sp.fixed[k] = v
	}
	for n, d := range r.baseData {
		sp.data[n] = d
	}
	idx := map[entKey]int{}
	for _, k := range order {
		h := ents[k]
		durable := 0
		if s, ok := lastSync[k.dir]; ok {
			for i, cand := range h.h {
				if cand.seq < s {
					durable = i
				}
			}
		}
		cands := h.h[durable:]
		if len(cands) == 1 {
			sp.fixed[k] = cands[0].val
			continue
		}
		delete(sp.fixed, k)
		idx[k] = len(sp.ents)
		sp.ents = append(sp.ents, entDim{key: k, cands: cands})
	}
	for n, f := range files {
		cands := fileVersions(f.durable, f.since)
		if len(cands) == 1 {
			sp.data[n] = cands[0]
			continue
		}
		sp.files = append(sp.files, fileDim{n: n, cands: cands})
	}
	sort.Slice(sp.files, func(a, b int) bool { return sp.files[a].n.ino < sp.files[b].n.ino })
	// Rename constraints between entries that still have a choice; an
	// entry whose source half is durable has a durable destination too
	// unless the destination directory was not synced, which the
	// constraint must then force.
	for seq, e := range r.log {
		if e.call >= c {
			break
		}
		if e.kind != evEntry || e.rename == 0 || e.dst {
			continue
		}
		d := r.log[seq+1] // the destination half follows its source half
		si, sok := idx[e.key]
		di, dok := idx[d.key]
		switch {
		case !dok:
			continue // destination fixed: at or after its half, or overwritten later (fine)
		case !sok:
			// the source is fixed; if it is fixed at or after its removal the
			// destination must be at or after its half: drop earlier candidates.
			if sp.fixedSeq(r, e.key, c) >= seq {
				dim := &sp.ents[di]
				var keep []entCand
				for _, cand := range dim.cands {
					if cand.seq >= seq+1 {
						keep = append(keep, cand)
					}
				}
				dim.cands = keep
			}
		default:
			sp.cons = append(sp.cons, renameCons{src: si, dst: di, srcSeq: seq, dstSeq: seq + 1})
		}
	}
	return sp
}

// fixedSeq is the log index of the last event on key before call c (-1
// when none): the seq of a fixed entry's only value.
func (sp *crashSpace) fixedSeq(r *Recorder, k entKey, c int) int {
	s := -1
	for seq, e := range r.log {
		if e.call >= c {
			break
		}
		if e.kind == evEntry && e.key == k {
			s = seq
		}
	}
	return s
}

// fileVersions is what a file may hold after a crash: its durable content,
// each complete version written since, and torn versions of the last.
func fileVersions(durable []byte, since [][]byte) [][]byte {
	out := [][]byte{durable}
	add := func(b []byte) {
		for _, o := range out {
			if bytes.Equal(o, b) {
				return
			}
		}
		out = append(out, b)
	}
	for _, s := range since {
		add(s)
	}
	if len(since) > 0 {
		last := since[len(since)-1]
		n := len(last)
		if n > 0 {
			add(last[:1])
			add(last[:n/2])
			add(last[:n-1])
			add(make([]byte, n))
			add(append(bytes.Clone(last[:n/2]), make([]byte, n-n/2)...))
		}
	}
	return out
}

// size is the number of combinations, capped at limit+1.
func (sp *crashSpace) size(limit int) int {
	n := 1
	for _, d := range sp.ents {
		n *= len(d.cands)
		if n > limit {
			return limit + 1
		}
	}
	for _, f := range sp.files {
		n *= len(f.cands)
		if n > limit {
			return limit + 1
		}
	}
	return n
}

// choice picks one candidate per dimension: entries first, then files.
type choice []int

func (sp *crashSpace) dims() []int {
	out := make([]int, 0, len(sp.ents)+len(sp.files))
	for _, d := range sp.ents {
		out = append(out, len(d.cands))
	}
	for _, f := range sp.files {
		out = append(out, len(f.cands))
	}
	return out
}

func (sp *crashSpace) valid(ch choice) bool {
	for _, c := range sp.cons {
		if sp.ents[c.src].cands[ch[c.src]].seq >= c.srcSeq && sp.ents[c.dst].cands[ch[c.dst]].seq < c.dstSeq {
			return false
		}
	}
	return true
}

// choices enumerates every combination when there are at most budget,
// else the all-durable and all-newest states, each single step away from
// them, and random combinations until budget.
func (sp *crashSpace) choices(budget int, rng *rand.Rand) []choice {
	dims := sp.dims()
	var out []choice
	if sp.size(budget) <= budget {
		ch := make(choice, len(dims))
		var rec func(i int)
		rec = func(i int) {
			if i == len(dims) {
				if sp.valid(ch) {
					out = append(out, append(choice(nil), ch...))
				}
				return
			}
			for v := 0; v < dims[i]; v++ {
				ch[i] = v
				rec(i + 1)
			}
		}
		rec(0)
		return out
	}
	seen := map[string]bool{}
	add := func(ch choice) {
		k := fmt.Sprint([]int(ch))
		if !seen[k] && sp.valid(ch) {
			seen[k] = true
			out = append(out, ch)
		}
	}
	oldest := make(choice, len(dims))
	newest := make(choice, len(dims))
	for i, d := range dims {
		newest[i] = d - 1
	}
	add(oldest)
	add(newest)
	for i, d := range dims {
		for v := 0; v < d; v++ {
			a := append(choice(nil), oldest...)
			a[i] = v
			add(a)
			b := append(choice(nil), newest...)
			b[i] = v
			add(b)
		}
	}
	for tries := 0; len(out) < budget && tries < 4*budget; tries++ {
		ch := make(choice, len(dims))
		for i, d := range dims {
			ch[i] = rng.IntN(d)
		}
		add(ch)
	}
	return out
}

// materialize builds the tree of one combination.
func (sp *crashSpace) materialize(r *Recorder, ch choice) *Tree {
	ent := make(map[entKey]*inode, len(sp.fixed)+len(sp.ents))
	for k, v := range sp.fixed {
		ent[k] = v
	}
	for i, d := range sp.ents {
		ent[d.key] = d.cands[ch[i]].val
	}
	data := make(map[*inode][]byte, len(sp.data)+len(sp.files))
	for n, d := range sp.data {
		data[n] = d
	}
	for i, f := range sp.files {
		data[f.n] = f.cands[ch[len(sp.ents)+i]]
	}
	onPath := map[*inode]bool{}
	files := map[*inode]*tnode{}
	var conv func(n *inode) *tnode
	conv = func(n *inode) *tnode {
		if !n.dir {
			if f, ok := files[n]; ok {
				return f
			}
			f := &tnode{data: data[n]}
			files[n] = f
			return f
		}
		t := &tnode{dir: true, kids: map[string]*tnode{}}
		if onPath[n] {
			return t // a directory inside itself: can only come from undone directory renames
		}
		onPath[n] = true
		for _, name := range sp.names[n] {
			if c := ent[entKey{n, name}]; c != nil {
				t.kids[name] = conv(c)
			}
		}
		onPath[n] = false
		return t
	}
	return &Tree{root: conv(r.root)}
}

// CrashStates returns the distinct states a crash right after the first c
// calls may leave: all of them when there are at most budget combinations,
// else a systematic sample (see choices). rng drives the random part.
func (r *Recorder) CrashStates(c, budget int, rng *rand.Rand) []*Tree {
	sp := r.space(c)
	seen := map[[32]byte]bool{}
	var out []*Tree
	for _, ch := range sp.choices(budget, rng) {
		t := sp.materialize(r, ch)
		h := t.Hash()
		if !seen[h] {
			seen[h] = true
			out = append(out, t)
		}
	}
	return out
}

// Durable returns the state a crash right now leaves when nothing unsynced
// survives: only what was made durable.
func (r *Recorder) Durable() *Tree {
	sp := r.space(r.NumCalls())
	return sp.materialize(r, make(choice, len(sp.ents)+len(sp.files)))
}

// Killed returns the state a kill of the process right after the first c
// calls leaves: every call's effect survives (the kernel keeps what a
// process wrote, synced or not), the newest value of every entry and file.
func (r *Recorder) Killed(c int) *Tree {
	sp := r.space(c)
	dims := sp.dims()
	newest := make(choice, len(dims))
	for i, d := range dims {
		newest[i] = d - 1
	}
	return sp.materialize(r, newest)
}
