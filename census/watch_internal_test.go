package census

// The bounded list of the items that failed most, fed in every order: it
// is always the first MostFailedK of the plain sort, whether an item comes
// from a marker's name (noteMarked, which passes most over without making
// its ID) or from a record read.

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"

	"github.com/leasetool/lease/leasefmt"
)

func TestMostFailedKeepsTheTopInAnyOrder(t *testing.T) {
	t.Parallel()
	var all []FailedItem
	for i := range 40 {
		id := leasefmt.ID(fmt.Sprintf("%064x", (i*7919)%1000))
		all = append(all, FailedItem{ID: id, Attempts: int64(i % 5), State: string(leasefmt.Failed)})
	}
	want := append([]FailedItem(nil), all...)
	sort.Slice(want, func(i, j int) bool {
		if want[i].Attempts != want[j].Attempts {
			return want[i].Attempts > want[j].Attempts
		}
		return want[i].ID < want[j].ID
	})
	want = want[:MostFailedK]
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		var c Census
		for i, it := range all {
			if i%2 == 0 {
				var k idKey
				hex.Decode(k[:], []byte(it.ID))
				c.noteMarked(k, true, it.Attempts)
			} else {
				c.noteRead(&leasefmt.Record{ID: it.ID, Status: leasefmt.Failed, Attempts: it.Attempts}, false)
			}
		}
		if !reflect.DeepEqual(c.MostFailed, want) {
			t.Fatalf("round %d:\n got %v\nwant %v", round, c.MostFailed, want)
		}
	}
}
