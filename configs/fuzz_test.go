package configs

import "testing"

// FuzzParse checks that Parse never panics, and that what it accepts keeps
// the promises of Load. The corpus is testdata/fuzz/FuzzParse plus every
// example and golden input.
func FuzzParse(f *testing.F) {
	for _, data := range tomlFixtures(f) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "fuzz.toml")
		if err != nil {
			if cfg != nil {
				t.Fatal("config returned with an error")
			}
			if len(Problems(err)) == 0 {
				t.Fatalf("error without problems: %v", err)
			}
			return
		}
		assertLoaded(t, cfg)
		_ = cfg.Summary()
	})
}
