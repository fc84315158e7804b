// Package browser runs Debian's Chromium headless for tests: it renders a
// page (scripts included) and returns its DOM, or takes a screenshot of it.
//
// Every run gets a fresh profile directory and the flags that a closed
// network and a root sandbox need (see Flags). Chromium forks helper
// processes, so each run is started in a process group of its own, and
// the whole group is killed when the run returns or its context is done:
// no browser process outlives a call.
//
// Tests call Require, which skips them where Chromium is not installed
// (or fails them when LBDNS_REQUIRE_BROWSER=1, as in CI), and keep their
// screenshots in ArtifactDir.
package browser
