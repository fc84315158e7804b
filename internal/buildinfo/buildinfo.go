// Package buildinfo says which build of lbdns is running: the module
// version and the version-control revision that the Go toolchain records in
// every binary (runtime/debug.ReadBuildInfo). Both binaries print it for
// -version, and the daemon reports it in /status and on the status page.
package buildinfo

import (
	"runtime/debug"
)

// linkVersion and linkRevision are set by the linker for builds that
// record no VCS information (packaging/build-deb.sh builds with
// -buildvcs=false, so that the package is reproducible):
//
//	-ldflags "-X lbdns/internal/buildinfo.linkVersion=0.1.0 -X lbdns/internal/buildinfo.linkRevision=$(git rev-parse HEAD)"
//
// They are never written at run time. Empty: nothing was set.
var linkVersion, linkRevision string

// Info is what the build recorded.
type Info struct {
	// Module is the main module's version: a tag such as "v1.2.0", or
	// "(devel)" for a build from a work tree.
	Module string
	// Revision is the VCS commit the binary was built from, empty when the
	// toolchain recorded none (go run, go test, -buildvcs=false).
	Revision string
	// Time is the commit time in RFC 3339, empty when unknown.
	Time string
	// Modified is true when the work tree had uncommitted changes.
	Modified bool
}

// Read returns the running binary's build information.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	in := Info{Module: "(unknown)"}
	if ok {
		in = From(bi)
	}
	return in.linked(linkVersion, linkRevision)
}

// linked is in with the version and revision the linker set (-X) where
// the build info has none: a module version of "(devel)" or unknown, no
// VCS revision.
func (in Info) linked(version, revision string) Info {
	if version != "" && (in.Module == "(devel)" || in.Module == "(unknown)") {
		in.Module = version
	}
	if revision != "" && in.Revision == "" {
		in.Revision = revision
	}
	return in
}

// From extracts the Info of bi.
func From(bi *debug.BuildInfo) Info {
	in := Info{Module: bi.Main.Version}
	if in.Module == "" {
		in.Module = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is the version in one line: "v1.2.0 rev 0123456789ab" (twelve
// digits of the commit), "(devel) rev 0123456789ab+modified", or
// "(devel) rev unknown" when no revision was recorded.
func (in Info) String() string {
	rev := in.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		rev = "unknown"
	}
	if in.Modified {
		rev += "+modified"
	}
	return in.Module + " rev " + rev
}

// Version is Read().String(): the running binary's version in one line.
func Version() string { return Read().String() }
