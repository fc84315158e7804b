package control

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricFamilies: the families the status endpoint exports, with
// their type, labels and help, are testdata/metrics.txt (read by the
// dashboard and alert tests of package monitoring);
// LBDNS_UPDATE_GOLDEN=1 rewrites it.
func TestMetricFamilies(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewStatusServer(StatusOptions{Backend: &fakeBackend{}, Gatherer: reg, Registerer: reg})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, mf := range mfs {
		lines = append(lines, mf.GetName()+" "+mf.GetType().String()+" []: "+mf.GetHelp())
	}
	slices.Sort(lines)
	text := strings.Join(lines, "\n") + "\n"
	golden := filepath.Join("testdata", "metrics.txt")
	if os.Getenv("LBDNS_UPDATE_GOLDEN") != "" {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != text || len(lines) == 0 {
		t.Errorf("the status endpoint's metric families changed; the dashboard depends on them:\ngot:\n%s\nwant:\n%s", text, b)
	}
}
