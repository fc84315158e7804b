package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

// The configurations of one description, for both servers (run.sh's
// layout): zone bench.test with -static static names sK (A 198.18.x.y)
// and -names dynamic names dynK; -regions regions, region R's pool rR of
// 2 IPv4 (127.10.R.1-2) and 2 IPv6 (fd00::10:R:1-2) members with
// fallback gl (127.11.0.1-2, fd00::11:0:1-2), every pool's members
// answered all at once (lbdnsd "all", gdnsd multifo); a client in
// region R gets rR, every other gl. The network map: with -prefixes 0
// region R is 10.R.0.0/16; with -prefixes P it is every P/R-th /24 from
// 1.0.0.0 (prefix i is 1.0.0.0/24 + i*256, region i mod R: no two
// neighbours share a region, so neither server can merge them and every
// location's scope is /24). lbdnsd's names either repeat their policies
// (-form inline, the only form before [[gslb.service]]) or share them
// through one service, each a [[gslb.name]] with service (-form service)
// or all in the service's names list (-form list); gdnsd's names are
// DYNA records of one geoip resource either way.
type layout struct {
	dir                     string
	names, statics, regions int
	prefixes                int
	form                    string
	lbPort, gdPort, monPort int
	interval                int
}

func config(args []string) error {
	fs := flag.NewFlagSet("config", flag.ContinueOnError)
	var l layout
	fs.StringVar(&l.dir, "dir", "", "output directory (lbdns.toml, nets/, gdnsd/)")
	fs.IntVar(&l.names, "names", 100, "dynamic names dyn0..dynN-1")
	fs.IntVar(&l.statics, "static", 100, "static names s0..sN-1")
	fs.IntVar(&l.regions, "regions", 8, "regions (pools r0..rR-1)")
	fs.IntVar(&l.prefixes, "prefixes", 0, "network map of these many /24s from 1.0.0.0 (0: 10.R.0.0/16 per region)")
	fs.StringVar(&l.form, "form", "service", "lbdnsd's names: inline (each its own policies), service (one [[gslb.service]], a [[gslb.name]] each) or list (the service's names list)")
	fs.IntVar(&l.lbPort, "lb-port", 5301, "lbdnsd's port on 127.0.0.1")
	fs.IntVar(&l.gdPort, "gd-port", 5302, "gdnsd's port on 127.0.0.1")
	fs.IntVar(&l.monPort, "mon-port", 8053, "the members' tcp monitor port")
	fs.IntVar(&l.interval, "interval", 2, "both servers' tcp monitor interval, s")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case l.dir == "" || l.names < 1 || l.statics < 1 || l.regions < 1 || l.regions > 200 || l.prefixes < 0 || l.prefixes > 1<<24:
		return errors.New("config: -dir is required; -names, -static at least 1, -regions 1..200, -prefixes 0..16777216")
	case l.form != "inline" && l.form != "service" && l.form != "list":
		return fmt.Errorf("config: -form %q: want inline, service or list", l.form)
	}
	for _, d := range []string{"lbdns", "nets", "gdnsd/zones", "gdnsd/geoip"} {
		if err := os.MkdirAll(filepath.Join(l.dir, d), 0o755); err != nil {
			return fmt.Errorf("config: %w", err)
		}
	}
	for _, f := range []struct {
		name  string
		write func(w *bufio.Writer)
	}{
		{"lbdns.toml", l.lbdns},
		{"gdnsd/config", l.gdnsd},
		{"gdnsd/zones/bench.test", l.gdnsdZone},
	} {
		if err := writeFile(filepath.Join(l.dir, f.name), f.write); err != nil {
			return err
		}
	}
	if l.prefixes > 0 {
		return l.nets()
	}
	return nil
}

// writeFile writes path through a buffered writer.
func writeFile(path string, write func(w *bufio.Writer)) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<16)
	write(w)
	if err := w.Flush(); err != nil {
		_ = f.Close()
		return fmt.Errorf("config: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("config: close %s: %w", path, err)
	}
	return nil
}

// prefix is the /24 number i of the map, as text.
func prefix(i int) string {
	p := 0x01000000 + i<<8
	return fmt.Sprintf("%d.%d.%d.0/24", p>>24&255, p>>16&255, p>>8&255)
}

// nets writes lbdnsd's prefix files (nets/rR.txt) and gdnsd's nets file
// (gdnsd/geoip/nets), the same /24s.
func (l *layout) nets() error {
	files := make([]*os.File, l.regions)
	ws := make([]*bufio.Writer, l.regions)
	for r := range files {
		f, err := os.Create(filepath.Join(l.dir, "nets", fmt.Sprintf("r%d.txt", r)))
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		files[r], ws[r] = f, bufio.NewWriterSize(f, 1<<16)
	}
	err := writeFile(filepath.Join(l.dir, "gdnsd/geoip/nets"), func(g *bufio.Writer) {
		for i := range l.prefixes {
			p, r := prefix(i), i%l.regions
			fmt.Fprintln(ws[r], p)
			fmt.Fprintf(g, "%s => [ r%d, gl ]\n", p, r)
		}
	})
	for r, f := range files {
		if werr := ws[r].Flush(); werr != nil && err == nil {
			err = fmt.Errorf("config: %w", werr)
		}
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("config: %w", cerr)
		}
	}
	return err
}

func v4(a, b, c int) string { return fmt.Sprintf("127.%d.%d.%d", a, b, c) }
func v6(a, b, c int) string { return fmt.Sprintf("fd00::%d:%d:%d", a, b, c) }

// lbdns writes lbdnsd's configuration.
func (l *layout) lbdns(w *bufio.Writer) {
	state := filepath.Join(l.dir, "lbdns")
	fmt.Fprintf(w, `# Generated by bench/responder/tool config.
[daemon]
state_dir = %q
log_level = "info"
control_socket = %q
status_listen = ""

[check.tcp]
kind = "tcp"
interval = "%ds"
timeout = "1s"
rise = 1
fall = 3

[check.tcp.tcp]
port = %d

[gslb]
policy_order = ["region", "global"]

[gslb.server]
listen = ["127.0.0.1:%d"]

[gslb.topology]
levels = ["region"]

`, state, filepath.Join(state, "lbdns.sock"), l.interval, l.monPort, l.lbPort)
	for r := range l.regions {
		if l.prefixes > 0 {
			fmt.Fprintf(w, "[[gslb.topology.file]]\npath = \"nets/r%d.txt\"\nlabels = { region = \"r%d\" }\n\n", r, r)
		} else {
			fmt.Fprintf(w, "[[gslb.topology.net]]\nprefix = \"10.%d.0.0/16\"\nlabels = { region = \"r%d\" }\n\n", r, r)
		}
	}
	pool := func(name string, a, b int, fallback string) {
		fmt.Fprintf(w, "[[gslb.pool]]\nname = %q\nmonitors = [\"tcp\"]\nalgorithm = \"all\"\n", name)
		if fallback != "" {
			fmt.Fprintf(w, "fallback = %q\n", fallback)
		}
		for i, addr := range []string{v4(a, b, 1), v4(a, b, 2), v6(a, b, 1), v6(a, b, 2)} {
			fmt.Fprintf(w, "\n[[gslb.pool.member]]\nname = \"%c\"\naddress = %q\n", 'a'+i, addr)
		}
		fmt.Fprintln(w)
	}
	for r := range l.regions {
		pool(fmt.Sprintf("r%d", r), 10, r, "gl")
	}
	pool("gl", 11, 0, "")
	fmt.Fprintf(w, "[[gslb.zone]]\nname = \"bench.test\"\nns = [\"ns1.bench.test.\"]\n\n")
	fmt.Fprintf(w, "[[gslb.zone.record]]\nname = \"ns1\"\ntype = \"A\"\nvalue = \"127.0.0.1\"\n\n")
	for s := range l.statics {
		fmt.Fprintf(w, "[[gslb.zone.record]]\nname = \"s%d\"\ntype = \"A\"\nvalue = \"198.18.%d.%d\"\n\n", s, s/250, s%250+1)
	}
	policies := func(table string) {
		for r := range l.regions {
			fmt.Fprintf(w, "[[%s]]\nmatch = { region = \"r%d\" }\npool = \"r%d\"\n\n", table, r, r)
		}
		fmt.Fprintf(w, "[[%s]]\npool = \"gl\"\n\n", table)
	}
	if l.form == "list" {
		fmt.Fprintf(w, "[[gslb.service]]\nname = \"geo\"\nttl = 30\necs = true\nnames = [\n")
		for n := range l.names {
			fmt.Fprintf(w, "  \"dyn%d.bench.test\",\n", n)
		}
		fmt.Fprintf(w, "]\n\n")
		policies("gslb.service.policy")
		return
	}
	if l.form == "service" {
		fmt.Fprintf(w, "[[gslb.service]]\nname = \"geo\"\nttl = 30\necs = true\n\n")
		policies("gslb.service.policy")
		for n := range l.names {
			fmt.Fprintf(w, "[[gslb.name]]\nname = \"dyn%d.bench.test\"\nservice = \"geo\"\n\n", n)
		}
		return
	}
	for n := range l.names {
		fmt.Fprintf(w, "[[gslb.name]]\nname = \"dyn%d.bench.test\"\nttl = 30\necs = true\n\n", n)
		policies("gslb.name.policy")
	}
}

// gdnsd writes gdnsd's configuration: the same members as multifo
// resources, one geoip resource whose map sends region R to [rR, gl] and
// everything else to gl.
func (l *layout) gdnsd(w *bufio.Writer) {
	g := filepath.Join(l.dir, "gdnsd")
	fmt.Fprintf(w, `# Generated by bench/responder/tool config.
options => {
  listen => [ 127.0.0.1:%d ]
  run_dir => %s/run
  state_dir => %s/state
}
service_types => {
  tcpmon => { plugin => tcp_connect, port => %d, up_thresh => 1, ok_thresh => 1, down_thresh => 3, interval => %d, timeout => 1 }
}
plugins => {
  multifo => {
    service_types => [ tcpmon ]
`, l.gdPort, g, g, l.monPort, l.interval)
	mf := func(name string, a, b int) {
		fmt.Fprintf(w, "    %s => { addrs_v4 => { a => %s, b => %s }, addrs_v6 => { c => %s, d => %s } }\n",
			name, v4(a, b, 1), v4(a, b, 2), v6(a, b, 1), v6(a, b, 2))
	}
	for r := range l.regions {
		mf(fmt.Sprintf("r%d", r), 10, r)
	}
	mf("gl", 11, 0)
	fmt.Fprintf(w, "  }\n  geoip => {\n    maps => {\n      m => {\n        datacenters => [ gl")
	for r := range l.regions {
		fmt.Fprintf(w, ", r%d", r)
	}
	fmt.Fprintf(w, " ]\n")
	if l.prefixes > 0 {
		fmt.Fprintf(w, "        nets => %s/geoip/nets\n", g)
	} else {
		fmt.Fprintf(w, "        nets => {\n")
		for r := range l.regions {
			fmt.Fprintf(w, "          10.%d.0.0/16 => [ r%d, gl ]\n", r, r)
		}
		fmt.Fprintf(w, "        }\n")
	}
	fmt.Fprintf(w, "      }\n    }\n    resources => {\n      dyn => {\n        map => m\n        dcmap => {\n          gl => %%multifo!gl\n")
	for r := range l.regions {
		fmt.Fprintf(w, "          r%d => %%multifo!r%d\n", r, r)
	}
	fmt.Fprintf(w, "        }\n      }\n    }\n  }\n}\n")
}

// gdnsdZone writes gdnsd's zone file: the static names and every dynK a
// DYNA of the geoip resource.
func (l *layout) gdnsdZone(w *bufio.Writer) {
	fmt.Fprintf(w, "$TTL 3600\n@ SOA ns1 hostmaster ( 1 3600 600 604800 60 )\n@ NS ns1\nns1 A 127.0.0.1\n")
	for s := range l.statics {
		fmt.Fprintf(w, "s%d A 198.18.%d.%d\n", s, s/250, s%250+1)
	}
	for n := range l.names {
		fmt.Fprintf(w, "dyn%d 30 DYNA geoip!dyn\n", n)
	}
}
