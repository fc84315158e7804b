package vendors

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
)

// spec says how to run one vendor: its binary, the files to write into the
// process's directory, and its command line.
type spec struct {
	binary string
	// files maps a file name inside dir to its content.
	files map[string]string
	args  []string
}

// specFor builds the configuration of vendor v listening on listen,
// forwarding everything to upstream, with its files in dir.
// Every product listens on listen and on opts.Listen at listen's port,
// and answers 127.0.0.0/8 and opts.Allow.
func specFor(v Vendor, dir string, listen, upstream netip.AddrPort, opts Options) (spec, error) {
	la, lp := listen.Addr().String(), listen.Port()
	ua, up := upstream.Addr().String(), upstream.Port()
	if err := checkNetworks(opts); err != nil {
		return spec{}, err
	}
	// Every address the product listens on, and every network it answers.
	las := []string{la}
	for _, a := range opts.Listen {
		las = append(las, a.String())
	}
	allow := []string{"127.0.0.0/8"}
	for _, p := range opts.Allow {
		allow = append(allow, p.Masked().String())
	}
	switch v {
	case Unbound:
		conf := filepath.Join(dir, "unbound.conf")
		prefetch := "no"
		if opts.Prefetch {
			prefetch = "yes"
		}
		modules := "module-config: \"iterator\""
		if opts.SubnetCache {
			modules = fmt.Sprintf("module-config: \"subnetcache iterator\"\n\tsend-client-subnet: %s\n\tclient-subnet-always-forward: yes\n\tmax-client-subnet-ipv4: 32\n\tmax-client-subnet-ipv6: 128", ua)
		}
		verbosity, ede := 1, ""
		if opts.EDE {
			verbosity, ede = 2, "ede: yes\n\tlog-servfail: yes\n\tval-log-level: 2"
		}
		dnstap := ""
		if d := opts.Dnstap; d != nil {
			dnstap = "dnstap:\n\tdnstap-enable: yes\n\tdnstap-bidirectional: yes\n"
			if d.TCP.IsValid() {
				dnstap += fmt.Sprintf("\tdnstap-ip: %s@%d\n\tdnstap-tls: no\n", d.TCP.Addr(), d.TCP.Port())
			} else {
				dnstap += fmt.Sprintf("\tdnstap-socket-path: %q\n", d.Unix)
			}
			if d.Identity != "" {
				dnstap += fmt.Sprintf("\tdnstap-identity: %q\n", d.Identity)
			}
			dnstap += "\tdnstap-send-identity: yes\n\tdnstap-send-version: yes\n" +
				"\tdnstap-log-client-query-messages: yes\n\tdnstap-log-client-response-messages: yes\n"
		}
		return spec{
			binary: "unbound",
			files: map[string]string{"unbound.conf": fmt.Sprintf(`server:
	do-daemonize: no
	username: ""
	chroot: ""
	directory: %q
	pidfile: ""
	use-syslog: no
	logfile: ""
	verbosity: %d
	%s
	%s
	port: %d
	do-ip6: no
	so-reuseport: no
	num-threads: 1
	%s
	do-not-query-localhost: no
	infra-keep-probing: yes
	%s
	local-zone: "test." nodefault
	prefetch: %s
	msg-cache-size: 4m
	rrset-cache-size: 8m
remote-control:
	control-enable: no
forward-zone:
	name: "."
	forward-addr: %s@%d
%s`, dir, verbosity, ede, each(las, "interface: %s@"+strconv.Itoa(int(lp)), "\n\t"), lp, each(allow, "access-control: %s allow", "\n\t"), modules, prefetch, ua, up, dnstap)},
			args: []string{"-d", "-p", "-c", conf},
		}, nil

	case BIND:
		conf := filepath.Join(dir, "named.conf")
		prefetch := "0"
		if opts.Prefetch {
			prefetch = "2 9"
		}
		dnstap := ""
		if d := opts.Dnstap; d != nil {
			if d.TCP.IsValid() {
				return spec{}, fmt.Errorf("vendors: %s sends dnstap to a Unix socket or a file only, not TCP", v)
			}
			dnstap = fmt.Sprintf("\tdnstap { client; };\n\tdnstap-output unix %q;\n", d.Unix)
			if d.Identity != "" {
				dnstap += fmt.Sprintf("\tdnstap-identity %q;\n", d.Identity)
			}
		}
		return spec{
			binary: "named",
			files: map[string]string{"named.conf": fmt.Sprintf(`options {
	directory %q;
	pid-file none;
	session-keyfile none;
	managed-keys-directory %q;
	listen-on port %d { %s };
	listen-on-v6 { none; };
	recursion yes;
	allow-query { %s };
	allow-recursion { %s };
	dnssec-validation no;
	forward only;
	forwarders { %s port %d; };
	max-cache-size 32m;
	prefetch %s;
	querylog no;
%s};
controls { };
`, dir, dir, lp, each(las, "%s;", " "), each(allow, "%s;", " "), each(allow, "%s;", " "), ua, up, prefetch, dnstap)},
			args: []string{"-g", "-4", "-n", "1", "-c", conf},
		}, nil

	case Knot:
		conf := filepath.Join(dir, "kresd.conf")
		var extra string
		if opts.Prefetch {
			extra = "modules.load('predict')\n"
		}
		if d := opts.Dnstap; d != nil {
			if d.TCP.IsValid() {
				return spec{}, fmt.Errorf("vendors: %s sends dnstap to a Unix socket only, not TCP", v)
			}
			identity := ""
			if d.Identity != "" {
				identity = fmt.Sprintf("\tidentity = %q,\n", d.Identity)
			}
			extra += fmt.Sprintf("modules.load('dnstap')\ndnstap.config({\n\tsocket_path = %q,\n%s\tversion = 'Knot Resolver ' .. package_version(),\n\tclient = { log_queries = true, log_responses = true },\n})\n", d.Unix, identity)
		}
		return spec{
			binary: "kresd",
			files: map[string]string{"kresd.conf": fmt.Sprintf(`-- lbdns test fixture: forward everything to a loopback upstream.
net.ipv6 = false
%s
cache.size = 16 * MB
trust_anchors.remove('.')
modules.unload('priming')
modules.unload('detect_time_skew')
modules.unload('detect_time_jump')
modules.unload('ta_signal_query')
modules.unload('ta_sentinel')
%spolicy.add(policy.all(policy.FORWARD({'%s@%d'})))
`, each(las, "net.listen('%s', "+strconv.Itoa(int(lp))+", { kind = 'dns' })", "\n"), extra, ua, up)},
			args: []string{"-n", "-c", conf, dir},
		}, nil

	case PowerDNS:
		if opts.Dnstap != nil {
			return spec{}, fmt.Errorf("vendors: %s sends no dnstap of its clients (its protobuf logging is another format)", v)
		}
		refresh := "0"
		if opts.Prefetch {
			refresh = "50"
		}
		// forward-zones (not forward-zones-recurse): the upstream is an
		// authoritative server, so queries go out with RD=0. ADDR:PORT
		// selects a non-53 port.
		return spec{
			binary: "pdns_recursor",
			files: map[string]string{"recursor.conf": fmt.Sprintf(`daemon=no
write-pid=no
socket-dir=%s
disable-syslog=yes
log-timestamp=no
loglevel=4
local-address=%s
local-port=%d
allow-from=%s
threads=1
pdns-distributes-queries=no
dnssec=process-no-validate
forward-zones=.=%s:%d
security-poll-suffix=
max-cache-entries=100000
refresh-on-ttl-perc=%s
`, dir, strings.Join(las, ","), lp, strings.Join(allow, ","), ua, up, refresh)},
			args: []string{"--config-dir=" + dir},
		}, nil

	case Dnsmasq:
		if opts.Dnstap != nil {
			return spec{}, fmt.Errorf("vendors: %s sends no dnstap", v)
		}
		conf := filepath.Join(dir, "dnsmasq.conf")
		// dnsmasq has no prefetch; opts.Prefetch is ignored.
		return spec{
			binary: "dnsmasq",
			files: map[string]string{"dnsmasq.conf": fmt.Sprintf(`keep-in-foreground
no-resolv
no-hosts
no-poll
bind-interfaces
listen-address=%s
port=%d
server=%s#%d
pid-file=
log-facility=-
user=root
cache-size=1000
`, strings.Join(las, ","), lp, ua, up)},
			args: []string{"-C", conf},
		}, nil
	}
	return spec{}, fmt.Errorf("vendors: unknown vendor %q (want one of %s)", v, strings.Join(names(), ", "))
}

// checkNetworks refuses what the IPv4-only products cannot take in
// opts.Listen and opts.Allow.
func checkNetworks(opts Options) error {
	for _, a := range opts.Listen {
		if !a.Is4() {
			return fmt.Errorf("vendors: listen address %q: want an IPv4 address (the products run IPv4-only)", a)
		}
	}
	for _, p := range opts.Allow {
		if !p.IsValid() || !p.Addr().Is4() {
			return fmt.Errorf("vendors: allowed network %q: want an IPv4 prefix (the products run IPv4-only)", p)
		}
	}
	return nil
}

// each formats every item with format (one %s) and joins the results
// with sep.
func each(items []string, format, sep string) string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = fmt.Sprintf(format, it)
	}
	return strings.Join(out, sep)
}

func names() []string {
	var s []string
	for _, v := range All() {
		s = append(s, string(v))
	}
	return s
}
