package main

import "testing"

func TestMinScope(t *testing.T) {
	for _, tc := range []struct {
		name              string
		regions, prefixes int
		addr              uint32
		want              int
	}{
		{"a /24 of the interleaved map", 8, 10000, 0x01000500, 24},
		{"outside the interleaved map: 2.0.0.0/7", 8, 10000, 0x02000000, 7},
		{"a region's /16", 8, 0, 0x0a030100, 16},
		{"10.8/13, outside the /16s", 8, 0, 0x0a080000, 13},
		{"10.200/9, outside the /16s", 8, 0, 0x0ac80000, 9},
		{"one region: the whole interleaved map is one pool", 1, 256, 0x01000000, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := newNetMap(tc.regions, tc.prefixes).minScope(tc.addr); got != tc.want {
				t.Errorf("minScope(%08x) = %d, want %d", tc.addr, got, tc.want)
			}
		})
	}
}

func TestMixQueries(t *testing.T) {
	for _, mix := range []string{"friendly", "realistic", "hostile"} {
		t.Run(mix, func(t *testing.T) {
			const n = 20000
			qs, err := mixQueries(mix, n, 100, 100, 8, 1000, 1)
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[uint64]int{}
			seen := map[uint64]bool{}
			for _, q := range qs {
				kinds[q.kind]++
				if mix == "hostile" && seen[q.key()] {
					t.Fatalf("hostile: %+v twice", q)
				}
				seen[q.key()] = true
			}
			if kinds[kindDyn] != n*70/100 || kinds[kindStatic] != n*20/100 || kinds[kindNX] != n-n*90/100 {
				t.Errorf("kinds %v, want exactly 70/20/10 %%", kinds)
			}
			// Shuffled: the first tenth holds about a tenth of each kind.
			first := map[uint64]int{}
			for _, q := range qs[:n/10] {
				first[q.kind]++
			}
			if d := first[kindNX] - n/100; d < -n/250 || d > n/250 {
				t.Errorf("NXDOMAIN queries in the first tenth: %d, want about %d", first[kindNX], n/100)
			}
		})
	}
}
