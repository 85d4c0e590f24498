package suggest

import "testing"

func TestClosest(t *testing.T) {
	flags := []string{"root", "config", "owner", "ttl", "first", "lock-timeout", "interval", "renew-interval", "json", "verbose"}
	for _, tc := range []struct{ word, want string }{
		{"frist", "first"}, // a swap
		{"firts", "first"}, // a swap
		{"fist", "first"},  // a deletion
		{"roots", "root"},  // an insertion
		{"lock_timeout", "lock-timeout"},
		{"locktimeout", "lock-timeout"},
		{"inter", "interval"}, // a prefix
		{"jsno", "json"},
		{"x", ""}, // nothing near
		{"publish", ""},
		{"", ""},
	} {
		if got := Closest(tc.word, flags); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
	keys := []string{"root", "renew_interval", "target_timeout", "shards", "target_shards"}
	if got := Closest("renew-interval", keys); got != "renew_interval" {
		t.Errorf("renew-interval: got %q", got)
	}
	if got := Closest("target-shard", keys); got != "target_shards" {
		t.Errorf("target-shard: got %q", got)
	}
}

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"ab", "ba", 1}, {"kitten", "sitting", 3}, {"abc", "abc", 0}} {
		if got := distance(tc.a, tc.b); got != tc.d {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}
