package packaging

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"lbdns/testkit/poll"
)

// TestRelease builds the release with release.sh (the Debian packages
// and the static binaries for amd64 and arm64), checks the sums, that
// each binary is a static ELF of its machine, and that the package's
// binaries serve in a root that holds nothing but the package (no Go, no
// C library, no shell): lbdnsd started there in a dry run answers lbctl
// status over its control socket.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries for two architectures: not in -short")
	}
	for _, tool := range []struct{ name, pkg string }{{"dpkg-deb", "dpkg"}, {"go", "golang"}, {"sha256sum", "coreutils"}} {
		requireTool(t, tool.name, tool.pkg)
	}
	out := t.TempDir()
	cmd := exec.Command("./release.sh", out)
	cmd.Env = append(os.Environ(), "LBDNS_VERSION=0.0.0~test")
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("release.sh: %v\n%s", err, stderrOf(err))
	}
	var names []string
	for _, f := range strings.Fields(string(raw)) {
		names = append(names, filepath.Base(f))
	}
	want := []string{"lbdns_0.0.0~test_amd64.deb", "lbdns-0.0.0~test-linux-amd64.tar.gz",
		"lbdns_0.0.0~test_arm64.deb", "lbdns-0.0.0~test-linux-arm64.tar.gz", "SHA256SUMS"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("release.sh printed %q, want %q", names, want)
	}
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			t.Fatalf("SHA256SUMS line %q", l)
		}
		b, err := os.ReadFile(filepath.Join(out, f[1]))
		if err != nil {
			t.Fatal(err)
		}
		if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != f[0] {
			t.Errorf("SHA256SUMS: %s does not match", f[1])
		}
	}
	for arch, machine := range map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64} {
		if got := run(t, "dpkg-deb", "-f", filepath.Join(out, "lbdns_0.0.0~test_"+arch+".deb"), "Architecture"); got != arch+"\n" {
			t.Errorf("%s package: %q", arch, got)
		}
		dir := untar(t, filepath.Join(out, "lbdns-0.0.0~test-linux-"+arch+".tar.gz"))
		top := filepath.Join(dir, "lbdns-0.0.0~test-linux-"+arch)
		for _, f := range []string{"lbdnsd", "lbctl", "systemd/lbdnsd.service", "man/lbctl.1.gz", "examples/quickstart.toml", "README.md", "RUNBOOK.md", "docs/lbctl.md"} {
			if _, err := os.Stat(filepath.Join(top, f)); err != nil {
				t.Errorf("%s archive: %v", arch, err)
			}
		}
		for _, bin := range []string{"lbdnsd", "lbctl"} {
			staticELF(t, filepath.Join(top, bin), machine)
		}
	}

	// The package's own binaries in a root of nothing else.
	if os.Geteuid() != 0 || runtime.GOARCH != "amd64" {
		t.Skip("serving from the package's root needs root (chroot) on amd64")
	}
	root := t.TempDir()
	run(t, "dpkg-deb", "-x", filepath.Join(out, "lbdns_0.0.0~test_amd64.deb"), root)
	for _, d := range []string{"run", "var/lib/lbdns", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	conf := `[daemon]
state_dir = "/var/lib/lbdns"
control_socket = "/run/lbdns.sock"
status_listen = ""

[[vip]]
name = "dns"
address = "192.0.2.53"
pool = "main"

[[pool]]
name = "main"
members = ["r1"]
check = "recursive"

[[resolver]]
name = "r1"
address = "127.0.0.1"
vendor = "unbound"

[check.recursive.dns]
zone = "probe.example.net"
`
	if err := os.WriteFile(filepath.Join(root, "etc/lbdns/release-test.toml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	d := exec.CommandContext(ctx, "chroot", root, "/usr/sbin/lbdnsd", "-dry-run", "-config", "/etc/lbdns/release-test.toml")
	logf, err := os.Create(filepath.Join(t.TempDir(), "lbdnsd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	d.Stdout, d.Stderr = logf, logf // a file: no copying goroutine
	d.Cancel = func() error { return d.Process.Signal(syscall.SIGTERM) }
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = d.Wait()
	}()
	poll.Until(t, 30*time.Second, "lbctl status from the package's root", func() (bool, string) {
		o, err := exec.Command("chroot", root, "/usr/bin/lbctl", "-socket", "/run/lbdns.sock", "status").CombinedOutput()
		ok := err == nil && strings.Contains(string(o), "pool main") && strings.Contains(string(o), "DRY RUN")
		logged, _ := os.ReadFile(logf.Name())
		return ok, string(o) + "\nlbdnsd:\n" + string(logged)
	})
}

// staticELF fails t unless path is an ELF executable for machine with
// no interpreter and no shared library needed.
func staticELF(t *testing.T, path string, machine elf.Machine) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != machine {
		t.Errorf("%s: machine %v, want %v", path, f.Machine, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s: has an interpreter: not static", path)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s: needs %v", path, libs)
	}
}

// untar extracts the gzipped tar file path into a new directory.
func untar(t *testing.T, path string) string {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(z)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			var w *os.File
			if w, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755|0o600); err == nil {
				_, err = io.Copy(w, tr)
				w.Close()
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
