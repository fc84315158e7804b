package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestString(t *testing.T) {
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"tag", debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "false"}}}, "v1.2.0 rev 0123456789ab"},
		{"work tree, modified", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}, "(devel) rev 0123456789ab+modified"},
		{"no vcs", debug.BuildInfo{}, "(devel) rev unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := From(&tc.bi).String(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestReadRunningBinary(t *testing.T) {
	if in := Read(); in.Module == "" {
		t.Errorf("Read() has no module version: %+v", in)
	}
}

// TestLinked: the version and revision set at link time fill in what the
// build info lacks, never replace what it has.
func TestLinked(t *testing.T) {
	bare := From(&debug.BuildInfo{})
	if got := bare.linked("0.1.0", "0123456789abcdef").String(); got != "0.1.0 rev 0123456789ab" {
		t.Errorf("linked into a bare build: %q", got)
	}
	tagged := From(&debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "fedcba9876543210"}}})
	if got := tagged.linked("0.1.0", "0123456789abcdef").String(); got != "v1.2.0 rev fedcba987654" {
		t.Errorf("linked into a stamped build: %q", got)
	}
	if got := bare.linked("", "").String(); got != "(devel) rev unknown" {
		t.Errorf("nothing linked: %q", got)
	}
}
