package fsck

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand"
	"reflect"
	"regexp"
	"sort"
	"testing"

	"github.com/leasetool/lease/leasefmt"
)

func testID(s string) leasefmt.ID {
	sum := sha256.Sum256([]byte(s))
	return leasefmt.ID(hex.EncodeToString(sum[:]))
}

// randomRecord is a valid record of a random kind with awkward values:
// owners with quotes, backslashes, control characters and non-ASCII
// text, times with many digits, tokens at the edges.
func randomRecord(rng *rand.Rand, i int) *leasefmt.Record {
	kinds := []leasefmt.Kind{leasefmt.Work, leasefmt.Target, leasefmt.Group}
	k := kinds[rng.Intn(3)]
	owners := []string{"host-a/fuzz-3", `we"ird`, `back\slash`, "ünïcødé/工作", "a\u2028b", "<&>", "x"}
	statuses := map[leasefmt.Kind][]leasefmt.Status{
		leasefmt.Work:   {leasefmt.Leased, leasefmt.Committing, leasefmt.Released, leasefmt.Done},
		leasefmt.Target: {leasefmt.Leased, leasefmt.Released},
		leasefmt.Group:  {leasefmt.Leased, leasefmt.Released},
	}
	times := []float64{0, 1, 1764450000.5, 1764450150.125, 1e15 + 0.25, 123.000001, 99999999999.999999}
	tokens := []int64{1, 7, 1000, leasefmt.MaxToken}
	r := &leasefmt.Record{Kind: k, ID: testID(fmt.Sprint("r", i)), Status: statuses[k][rng.Intn(len(statuses[k]))],
		Owner: owners[rng.Intn(len(owners))], Token: tokens[rng.Intn(len(tokens))],
		ClaimedAt: times[rng.Intn(len(times))], RenewedAt: times[rng.Intn(len(times))], ExpiresAt: times[rng.Intn(len(times))]}
	switch k {
	case leasefmt.Work:
		if rng.Intn(2) == 0 {
			r.Publish = []string{"result.tar", "a b", "ünï", `q"uote`}[rng.Intn(4)]
		}
	case leasefmt.Target:
		r.Group = testID(fmt.Sprint("g", i))
	case leasefmt.Group:
		for j := 0; j <= rng.Intn(4); j++ {
			r.Targets = append(r.Targets, testID(fmt.Sprint("t", i, j)))
		}
		sort.Slice(r.Targets, func(a, b int) bool { return r.Targets[a] < r.Targets[b] })
	}
	if rng.Intn(5) == 0 {
		r.Extra = []leasefmt.Field{{Key: "note", Value: []byte(`"x"`)}}
	}
	return r
}

// checkAgrees fails when the fast path accepts data that Decode refuses or
// reads differently.
func checkAgrees(t *testing.T, data []byte, k leasefmt.Kind, id leasefmt.ID) bool {
	fast := parseCanonical(data, k, id)
	slow, err := leasefmt.Decode(data, k, id)
	if fast == nil {
		return false
	}
	if err != nil {
		t.Fatalf("fast path accepted what Decode refuses (%v): %q", err, data)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("fast path read %+v, Decode %+v from %q", fast, slow, data)
	}
	return true
}

// TestCanonicalAgreesWithDecode: the fast path reads every canonical
// record exactly as Decode does (and most of them at all), and accepts no
// mutation of one that Decode refuses.
func TestCanonicalAgreesWithDecode(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	fast := 0
	const n = 3000
	for i := 0; i < n; i++ {
		r := randomRecord(rng, i)
		data, err := leasefmt.Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		plain := !bytes.ContainsRune(data, '\\') && r.Extra == nil
		if checkAgrees(t, data, r.Kind, r.ID) {
			fast++
		} else if plain {
			t.Errorf("the fast path refused a canonical record without escapes: %q", data)
		}
		for m := 0; m < 20; m++ {
			d := append([]byte(nil), data...)
			switch rng.Intn(4) {
			case 0:
				d[rng.Intn(len(d))] = "0123456789abcdef\",:{}[] .-eNx\\"[rng.Intn(30)]
			case 1:
				d = d[:rng.Intn(len(d))]
			case 2:
				i := rng.Intn(len(d))
				d = append(d[:i], d[i+1:]...)
			case 3:
				i := rng.Intn(len(d))
				d = append(d[:i], append([]byte{"0 ,\"}"[rng.Intn(5)]}, d[i:]...)...)
			}
			checkAgrees(t, d, r.Kind, r.ID)
			checkAgrees(t, d, r.Kind, testID("other"))
		}
	}
	t.Logf("the fast path read %d of %d canonical records", fast, n)
}

var idField = regexp.MustCompile(`"id":"([0-9a-f]{64})"`)

// FuzzCanonical: whatever the bytes, the fast path never accepts what
// Decode refuses, nor reads it differently.
func FuzzCanonical(f *testing.F) {
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 20; i++ {
		r := randomRecord(rng, i)
		data, _ := leasefmt.Encode(r)
		f.Add(data, uint8(r.Kind))
	}
	f.Add([]byte(`{"schema":"lease.work/v1","id":"`+string(testID("x"))+`","status":"leased","owner":"o","token":1,"claimed_at":NaN,"renewed_at":1,"expires_at":1}`+"\n"), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, kind uint8) {
		k := leasefmt.Kind(kind % 3)
		id := testID("fuzz")
		if m := idField.FindSubmatch(data); m != nil {
			id = leasefmt.ID(m[1])
		}
		checkAgrees(t, data, k, id)
	})
}
