package fleet

import (
	"fmt"
	"testing"
)

// TestMembership: joins and departures by name, whatever the order, and
// nothing for an unchanged view.
func TestMembership(t *testing.T) {
	for _, tc := range []struct {
		before, after []Node
		want          string
	}{
		{nil, nodes("a", "b"), "[a b] []"},
		{nodes("a", "b", "c"), nodes("c", "a"), "[] [b]"},
		{nodes("a", "b"), nodes("b", "d"), "[d] [a]"},
		{nodes("a", "b"), nodes("b", "a"), "[] []"},
		{nodes("a"), nil, "[] [a]"},
	} {
		j, l := Membership(tc.before, tc.after)
		if got := fmt.Sprint(fmt.Sprint(j), " ", fmt.Sprint(l)); got != tc.want {
			t.Errorf("Membership(%v, %v) = %s, want %s", names(tc.before), names(tc.after), got, tc.want)
		}
	}
}

func names(ns []Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Name)
	}
	return out
}
