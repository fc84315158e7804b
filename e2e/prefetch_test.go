package e2e

import (
	"fmt"
	"os"
	"testing"
)

// TestPrefetchPartitionAddresses: a reload whose ECS partitions repeat an
// address or name one that locates no client (unspecified, multicast) is
// rejected whole, each problem with its file, line, key and value, and
// lbdnsd -check-config finds the same problems.
func TestPrefetchPartitionAddresses(t *testing.T) {
	t.Parallel()
	w := newWorld(t, onePool(2))
	w.startReady()
	partitions := func(addrs ...string) string {
		s := "\n[[prefetch.domain]]\nname = \"www.example.\"\necs = [\"p0\"]\n"
		for i, a := range addrs {
			s += fmt.Sprintf("\n[[prefetch.partition]]\nname = \"p%d\"\naddress = %q\n", i, a)
		}
		return s
	}
	write := func(extra string) {
		t.Helper()
		if err := os.WriteFile(w.cfgPath, []byte(w.render(w.layout)+extra), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(partitions("192.0.2.1", "2001:db8::1"))
	w.mustLbctl("reload")

	write(partitions("192.0.2.1", "192.0.2.1", "0.0.0.0", "224.0.0.1"))
	want := []string{
		fmt.Sprintf(`%s:%d: prefetch.partition[1].address: value "192.0.2.1": duplicate address (also prefetch.partition[0], line %d)`,
			w.cfgPath, w.lineOf(`name = "p1"`)+1, w.lineOf(`name = "p0"`)+1),
		fmt.Sprintf(`%s:%d: prefetch.partition[2].address: value "0.0.0.0": the unspecified address locates no client`, w.cfgPath, w.lineOf(`"0.0.0.0"`)),
		fmt.Sprintf(`%s:%d: prefetch.partition[3].address: value "224.0.0.1": a multicast address locates no client`, w.cfgPath, w.lineOf(`"224.0.0.1"`)),
	}
	r := w.lbctl("reload")
	if r.code != 1 {
		t.Errorf("reload with bad partitions: exit %d, want 1\n%s", r.code, r)
	}
	problemLines(t, "lbctl reload", r.stderr, "reload rejected; running config unchanged:", want)
	r = run(t, binaries.lbdnsd, "-check-config", w.cfgPath)
	if r.code == 0 {
		t.Errorf("lbdnsd -check-config of bad partitions: exit 0\n%s", r)
	}
	problemLines(t, "lbdnsd -check-config", r.stderr, "", want)
}
