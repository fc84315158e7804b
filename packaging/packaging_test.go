package packaging

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"lbdns/configs"
)

const unitFile = "systemd/lbdnsd.service"

// requireTool returns the path of tool, skipping the test when it is
// missing unless LBDNS_REQUIRE_PACKAGING=1 (scripts/test.sh) makes that a
// failure.
func requireTool(t *testing.T, tool, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		if os.Getenv("LBDNS_REQUIRE_PACKAGING") == "1" {
			t.Fatalf("%s not found (Debian package %s; scripts/install-test-deps.sh installs it)", tool, pkg)
		}
		t.Skipf("%s not found (Debian package %s); set LBDNS_REQUIRE_PACKAGING=1 to fail instead", tool, pkg)
	}
	return p
}

// directives reads a unit file: key to its values, in order.
func directives(t *testing.T, unit []byte) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(unit))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("unit line %q is not KEY=VALUE", line)
		}
		out[k] = append(out[k], v)
	}
	return out
}

// verifyUnit runs systemd-analyze verify on a copy of unit whose program
// paths are replaced by paths under bin (verify requires every Exec
// program to exist and be executable, and the packaged paths exist only
// on a host that installed the package). It returns the copy's path.
func verifyUnit(t *testing.T, unit []byte, lbdnsd, lbctl string) string {
	t.Helper()
	analyze := requireTool(t, "systemd-analyze", "systemd")
	copyText := strings.NewReplacer("/usr/sbin/lbdnsd", lbdnsd, "/usr/bin/lbctl", lbctl).Replace(string(unit))
	path := filepath.Join(t.TempDir(), "lbdnsd.service")
	if err := os.WriteFile(path, []byte(copyText), 0o644); err != nil {
		t.Fatal(err)
	}
	// --man=no: the man pages are in the package, not on this host.
	out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	return path
}

// TestSystemdUnit: the unit passes systemd-analyze verify without a
// warning, its sandbox scores at most 2.5 on systemd-analyze security
// (0 is best, 10 worst), and it agrees with the daemon: Type=notify with a
// watchdog, the paths the package installs, the state directory and the
// control socket of the configuration's defaults.
func TestSystemdUnit(t *testing.T) {
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	d := directives(t, unit)
	want := map[string]string{
		"Type":                "notify",
		"NotifyAccess":        "main",
		"WatchdogSec":         "30s",
		"ExecStart":           "/usr/sbin/lbdnsd -config /etc/lbdns/lbdns.toml -log-format text",
		"ExecReload":          "/usr/bin/lbctl -socket " + configs.DefaultControlSocket + " reload",
		"StateDirectory":      strings.TrimPrefix(configs.DefaultStateDir, "/var/lib/"),
		"RuntimeDirectory":    strings.TrimPrefix(filepath.Dir(configs.DefaultControlSocket), "/run/"),
		"DynamicUser":         "yes",
		"AmbientCapabilities": "CAP_NET_ADMIN CAP_NET_RAW",
		"NoNewPrivileges":     "yes",
		// /proc/sys must stay writable: the daemon writes
		// net.ipv4.vs.expire_nodest_conn.
		"ProtectKernelTunables": "no",
	}
	for k, v := range want {
		if !slices.Contains(d[k], v) {
			t.Errorf("%s = %q, want %q", k, d[k], v)
		}
	}
	// A stop drains the BGP routes (drain_on_stop_delay at most), then
	// withdraws them (BGPStopTimeout at most), then stops the rest:
	// systemd must not kill lbdnsd before, and leaves 10 s for the rest.
	if stop, err := time.ParseDuration(strings.Join(d["TimeoutStopSec"], "")); err != nil || stop < configs.MaxBGPDrainOnStopDelay+configs.BGPStopTimeout+10*time.Second {
		t.Errorf("TimeoutStopSec = %q (%v): want at least drain_on_stop_delay's maximum %v, the withdrawal's %v and 10s for the rest",
			d["TimeoutStopSec"], err, configs.MaxBGPDrainOnStopDelay, configs.BGPStopTimeout)
	}
	for _, k := range []string{"PrivateNetwork", "PrivateUsers", "ProcSubset"} {
		if len(d[k]) > 0 {
			t.Errorf("%s = %q would cut the daemon off IPVS or /proc/sys", k, d[k])
		}
	}

	dir := t.TempDir()
	stub := filepath.Join(dir, "stub")
	if err := os.WriteFile(stub, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := verifyUnit(t, unit, stub, stub)

	out, err := exec.Command("systemd-analyze", "security", "--offline=true", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for lbdnsd.service: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no exposure level in:\n%s", out)
	}
	exposure, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("systemd-analyze security --offline=true: exposure %.1f", exposure)
	if exposure > 2.5 {
		t.Errorf("exposure %.1f > 2.5: a hardening option was lost\n%s", exposure, out)
	}
}

// TestDebianPackage builds the package with build-deb.sh, checks what it
// holds (dpkg-deb -c, -f, conffiles), installs it into a temporary root
// (dpkg -x), runs the installed lbdnsd -check-config on the installed
// example, verifies the installed unit against the installed binaries,
// checks that the copyright file lists every Go module in the binaries,
// and runs lintian (every remaining tag must be in lintian-overrides).
func TestDebianPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and the package: not in -short")
	}
	for _, tool := range []struct{ name, pkg string }{{"dpkg-deb", "dpkg"}, {"dpkg", "dpkg"}, {"go", "golang"}} {
		requireTool(t, tool.name, tool.pkg)
	}
	out := t.TempDir()
	cmd := exec.Command("./build-deb.sh", out)
	cmd.Env = append(os.Environ(), "LBDNS_VERSION=0.0.0~test")
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("build-deb.sh: %v\n%s", err, stderrOf(err))
	}
	deb := strings.TrimSpace(string(raw))
	if filepath.Base(deb) != "lbdns_0.0.0~test_"+debArch(t)+".deb" {
		t.Fatalf("build-deb.sh printed %q", deb)
	}

	contents := run(t, "dpkg-deb", "-c", deb)
	for _, want := range []string{
		"-rwxr-xr-x root/root .* ./usr/sbin/lbdnsd$",
		"-rwxr-xr-x root/root .* ./usr/bin/lbctl$",
		"-rw-r--r-- root/root .* ./etc/lbdns/lbdns.toml$",
		"-rw-r--r-- root/root .* ./lib/systemd/system/lbdnsd.service$",
		"-rw-r--r-- root/root .* ./usr/lib/modules-load.d/lbdns.conf$",
		"-rw-r--r-- root/root .* ./usr/share/doc/lbdns/copyright$",
		"-rw-r--r-- root/root .* ./usr/share/doc/lbdns/changelog.gz$",
		"-rw-r--r-- root/root .* ./usr/share/doc/lbdns/README.md.gz$",
		"-rw-r--r-- root/root .* ./usr/share/doc/lbdns/CONFIGURATION.md.gz$",
		"-rw-r--r-- root/root .* ./usr/share/doc/lbdns/RUNBOOK.md.gz$",
		"-rw-r--r-- root/root .* ./usr/share/doc/lbdns/docs/lbctl.md.gz$",
		"-rw-r--r-- root/root .* ./usr/share/doc/lbdns/docs/running-as-a-service.md.gz$",
		"-rw-r--r-- root/root .* ./usr/share/doc/lbdns/examples/monitoring/alerts.yml$",
		"-rw-r--r-- root/root .* ./usr/share/doc/lbdns/examples/monitoring/grafana-lbdns.json$",
		"-rw-r--r-- root/root .* ./usr/share/man/man8/lbdnsd.8.gz$",
		"-rw-r--r-- root/root .* ./usr/share/man/man1/lbctl.1.gz$",
		"-rw-r--r-- root/root .* ./usr/share/lintian/overrides/lbdns$",
	} {
		if !regexp.MustCompile("(?m)^" + want).MatchString(contents) {
			t.Errorf("dpkg-deb -c: no line matching %q in:\n%s", want, contents)
		}
	}
	if got := run(t, "dpkg-deb", "-f", deb, "Package", "Version", "Architecture"); got != "Package: lbdns\nVersion: 0.0.0~test\nArchitecture: "+debArch(t)+"\n" {
		t.Errorf("dpkg-deb -f: %q", got)
	}
	if got := run(t, "dpkg-deb", "-I", deb, "conffiles"); got != "/etc/lbdns/lbdns.toml\n" {
		t.Errorf("conffiles = %q, want /etc/lbdns/lbdns.toml", got)
	}

	root := t.TempDir()
	run(t, "dpkg", "-x", deb, root)
	lbdnsd, lbctl := filepath.Join(root, "usr/sbin/lbdnsd"), filepath.Join(root, "usr/bin/lbctl")
	if got := run(t, lbdnsd, "-check-config", filepath.Join(root, "etc/lbdns/lbdns.toml")); !strings.HasPrefix(got, "config ok: ") {
		t.Errorf("installed lbdnsd -check-config on the installed example: %q", got)
	}
	if got := run(t, lbctl, "help", "reload"); !strings.Contains(got, "reload") {
		t.Errorf("installed lbctl help reload: %q", got)
	}
	// -version names the package version and, from a git checkout, the
	// commit.
	rev := ""
	if b, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		rev = strings.TrimSpace(string(b))[:12]
	}
	for _, bin := range []string{lbdnsd, lbctl} {
		got := run(t, bin, "-version")
		if !strings.HasPrefix(got, filepath.Base(bin)+" 0.0.0~test rev ") || (rev != "" && !strings.Contains(got, rev)) {
			t.Errorf("installed %s -version: %q, want the package version 0.0.0~test and revision %q", filepath.Base(bin), got, rev)
		}
	}
	unit, err := os.ReadFile(filepath.Join(root, "lib/systemd/system/lbdnsd.service"))
	if err != nil {
		t.Fatal(err)
	}
	if src, _ := os.ReadFile(unitFile); !bytes.Equal(unit, src) {
		t.Error("installed unit differs from packaging/systemd/lbdnsd.service")
	}
	verifyUnit(t, unit, lbdnsd, lbctl)

	copyright, err := os.ReadFile(filepath.Join(root, "usr/share/doc/lbdns/copyright"))
	if err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{lbdnsd, lbctl} {
		for _, line := range strings.Split(run(t, "go", "version", "-m", bin), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && f[0] == "dep" && !bytes.Contains(copyright, []byte(" "+f[1]+"\n")) && !bytes.Contains(copyright, []byte(" "+f[1]+" ")) {
				t.Errorf("%s embeds module %s, which the copyright file does not list", filepath.Base(bin), f[1])
			}
		}
	}

	lintian, err := exec.LookPath("lintian")
	if err != nil {
		requireTool(t, "lintian", "lintian") // skips or fails
	}
	// --pedantic --info: every tag lintian knows; --fail-on all of them.
	// Overridden tags (lintian-overrides) are not shown and do not fail.
	lout, err := exec.Command(lintian, "--pedantic", "--info", "--fail-on", "error,warning,info,pedantic", deb).CombinedOutput()
	var tags []string
	for _, l := range strings.Split(string(lout), "\n") {
		if l != "" && !strings.Contains(l, "running with root privileges") {
			tags = append(tags, l)
		}
	}
	if err != nil || len(tags) > 0 {
		t.Errorf("lintian: %v\n%s", err, strings.Join(tags, "\n"))
	}
}

// run runs a command and returns its standard output, failing the test
// when it fails.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderrOf(err))
	}
	return string(out)
}

func stderrOf(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}

// debArch is the Debian architecture build-deb.sh builds for.
func debArch(t *testing.T) string {
	t.Helper()
	return strings.TrimSpace(run(t, "dpkg", "--print-architecture"))
}
