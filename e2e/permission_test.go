package e2e

import (
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// nobody is the uid and gid lbctl runs as to be refused.
const nobody = "65534"

// TestNonRootRefused: the daemon creates the socket's directory 0750 and
// the socket 0600, so lbctl run as nobody is refused by the kernel (exit
// 3, "permission denied", the socket named): first by the directory, then,
// with the directory opened up by hand, by the socket itself. With the
// socket opened up too, the daemon still refuses the peer by its uid.
func TestNonRootRefused(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it checks that a non-root lbctl (run with setpriv) is refused")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux) is needed to run lbctl as nobody: %v", err)
	}
	// Directories nobody may enter: outside t.TempDir, which is 0700.
	base := openTempDir(t)
	lbctl := filepath.Join(openTempDir(t), "lbctl")
	copyFile(t, binaries.lbctl, lbctl, 0o755)

	w := newWorldIn(t, base, onePool(2))
	w.startReady()

	sock, err := os.Stat(w.socket)
	if err != nil {
		t.Fatal(err)
	}
	if sock.Mode().Type() != fs.ModeSocket || sock.Mode().Perm() != 0o600 {
		t.Errorf("control socket %s has mode %s, want a socket with 0600", w.socket, sock.Mode())
	}
	dir, err := os.Stat(filepath.Dir(w.socket))
	if err != nil {
		t.Fatal(err)
	}
	if !dir.IsDir() || dir.Mode().Perm() != 0o750 {
		t.Errorf("control socket directory has mode %s, want a directory with 0750", dir.Mode())
	}

	asNobody := func() result {
		return run(t, setpriv, "--reuid="+nobody, "--regid="+nobody, "--clear-groups", lbctl, "-socket", w.socket, "status")
	}
	for _, stage := range []string{"directory 0750", "directory opened to 0755, socket 0600"} {
		r := asNobody()
		if r.code != 3 || !strings.Contains(r.stderr, "permission denied") || !strings.Contains(r.stderr, w.socket) {
			t.Errorf("%s: lbctl as nobody: want exit 3 saying permission denied and naming %s; %s", stage, w.socket, r)
		}
		if err := os.Chmod(filepath.Dir(w.socket), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// Past the file modes, the daemon refuses the peer itself (and this
	// shows the copied lbctl runs as nobody at all).
	if err := os.Chmod(w.socket, 0o666); err != nil {
		t.Fatal(err)
	}
	if r := asNobody(); r.code != 1 || !strings.Contains(r.stderr, "permission denied: uid 65534") {
		t.Errorf("socket opened to 0666: lbctl as nobody: want exit 1, refused by the daemon for uid 65534; %s", r)
	}
	w.mustLbctl("status")
}

// openTempDir returns a new temporary directory with mode 0755, removed at
// the end of the test.
func openTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "lbdns-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// copyFile copies src to a new file dst with mode.
func copyFile(t *testing.T, src, dst string, mode fs.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
