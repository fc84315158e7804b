package packaging

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// systemdRoot is the Debian 12 root with systemd that scripts/systemd-root.sh
// builds (scripts/install-test-deps.sh runs it).
func systemdRoot() string {
	if r := os.Getenv("LBDNS_SYSTEMD_ROOT"); r != "" {
		return r
	}
	return "/var/cache/lbdns-systemd-root"
}

// TestPackageUnderSystemd installs the Debian package on a Debian 12
// system that boots systemd (systemd-nspawn, its own network namespace,
// the root read-only under a throwaway overlay) and runs the README's
// install commands there: dpkg -i, lbdnsd -check-config on the installed
// configuration, systemctl enable --now lbdnsd, lbctl status. The unit
// runs as shipped (notify, watchdog, a dynamic user, every sandboxing
// directive) but for -dry-run in a drop-in, since this host's kernel has
// no IPVS; then systemctl reload (lbctl reload as the unit's ExecReload)
// and systemctl stop.
func TestPackageUnderSystemd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package and boots systemd: not in -short")
	}
	nspawn := requireTool(t, "systemd-nspawn", "systemd-container")
	requireTool(t, "dpkg-deb", "dpkg")
	requireTool(t, "go", "golang")
	root := systemdRoot()
	if os.Geteuid() != 0 {
		t.Skip("systemd-nspawn needs root")
	}
	if _, err := os.Stat(filepath.Join(root, ".lbdns-complete")); err != nil {
		if os.Getenv("LBDNS_REQUIRE_PACKAGING") == "1" {
			t.Fatalf("no systemd root at %s: run scripts/systemd-root.sh (scripts/install-test-deps.sh does)", root)
		}
		t.Skipf("no systemd root at %s (scripts/systemd-root.sh builds it); set LBDNS_REQUIRE_PACKAGING=1 to fail instead", root)
	}

	in, out := t.TempDir(), t.TempDir()
	cmd := exec.Command("./build-deb.sh", in)
	cmd.Env = append(os.Environ(), "LBDNS_VERSION=0.0.0~test")
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("build-deb.sh: %v\n%s", err, stderrOf(err))
	}
	if err := os.Rename(strings.TrimSpace(string(raw)), filepath.Join(in, "lbdns.deb")); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("testdata/install-under-systemd.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in, "install.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	unit := "[Unit]\nDescription=the package test\nAfter=multi-user.target\n\n[Service]\nType=oneshot\nExecStart=/lbdns-test/install.sh\n"
	if err := os.WriteFile(filepath.Join(in, "lbdns-install-test.service"), []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	boot := exec.CommandContext(ctx, nspawn, "--quiet", "--keep-unit", "--register=no",
		"--private-network", "--volatile=overlay", "--directory="+root,
		"--bind-ro="+in+":/lbdns-test", "--bind="+out+":/lbdns-out",
		"--bind-ro="+filepath.Join(in, "lbdns-install-test.service")+":/etc/systemd/system/lbdns-install-test.service",
		"--boot", "--console=pipe", "systemd.wants=lbdns-install-test.service")
	console, err := boot.CombinedOutput()
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(out, name))
		return string(b)
	}
	steps := read("steps")
	if err != nil || !strings.HasSuffix(steps, "done\n") {
		t.Fatalf("the container did not run the install to its end (%v); steps:\n%s\nconsole:\n%s\njournal:\n%s", err, steps, console, read("journal.out"))
	}
	rc := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(steps), "\n") {
		if name, code, ok := strings.Cut(l, " "); ok {
			rc[name] = code
		}
	}
	for _, name := range []string{"dpkg", "check-config", "enable", "status", "active", "reload", "status-after-reload", "stop"} {
		if rc[name] != "0" {
			t.Errorf("%s: exit %s:\n%s", name, rc[name], read(name+".out"))
		}
	}
	if got := read("check-config.out"); !strings.HasPrefix(got, "config ok: ") {
		t.Errorf("lbdnsd -check-config /etc/lbdns/lbdns.toml: %q", got)
	}
	if s := read("status.out"); !strings.Contains(s, "pool ") || !strings.Contains(s, "DRY RUN") {
		t.Errorf("lbctl status from the unit's daemon:\n%s", s)
	}
	if got := read("active.out"); got != "active\n" {
		t.Errorf("systemctl is-active after enable --now: %q", got)
	}
	show := read("show.out")
	for _, want := range []string{"Type=notify", "DynamicUser=yes", "WatchdogUSec=30s", "NRestarts=0"} {
		if !strings.Contains(show, want+"\n") {
			t.Errorf("systemctl show lbdnsd has no %s:\n%s", want, show)
		}
	}
	if u := strings.TrimSpace(read("ps.out")); u == "" || u == "root" {
		t.Errorf("lbdnsd runs as %q, want the unit's dynamic user", u)
	}
	if got := read("inactive.out"); got != "inactive\n" {
		t.Errorf("systemctl is-active after stop: %q (a stop that failed or restarted)", got)
	}
	journal := read("journal.out")
	for _, want := range []string{"reload", "Stopped"} {
		if !strings.Contains(journal, want) {
			t.Errorf("the unit's journal has no %q:\n%s", want, journal)
		}
	}
	if strings.Contains(journal, "level=ERROR") {
		t.Errorf("the unit's journal has errors:\n%s", journal)
	}
}
