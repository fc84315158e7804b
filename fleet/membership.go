package fleet

import "slices"

// Membership compares two fleet views by node name: the nodes of after
// that before did not have (joined) and those of before that after has
// lost (left), each in name order. A node whose heartbeat went and came
// back between the two views is in neither.
func Membership(before, after []Node) (joined, left []string) {
	had := make(map[string]bool, len(before))
	for _, n := range before {
		had[n.Name] = true
	}
	has := make(map[string]bool, len(after))
	for _, n := range after {
		has[n.Name] = true
		if !had[n.Name] {
			joined = append(joined, n.Name)
		}
	}
	for _, n := range before {
		if !has[n.Name] {
			left = append(left, n.Name)
		}
	}
	slices.Sort(joined)
	slices.Sort(left)
	return slices.Compact(joined), slices.Compact(left)
}
