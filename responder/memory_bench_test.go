package responder

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"lbdns/configs"
	"lbdns/gslb"
	"lbdns/gslb/topology"
)

// writeMemoryConfig writes bench/responder/mem.sh's configuration (tool
// config) into dir: names dynamic names over 8 region pools and a
// global one, prefixes /24s from 1.0.0.0 in 8 interleaved region files;
// the names inline (each its 9 policies), with one service, or in the
// service's names list (form "inline", "service", "list").
func writeMemoryConfig(tb testing.TB, dir string, names, prefixes int, form string) string {
	tb.Helper()
	const regions = 8
	if err := os.MkdirAll(filepath.Join(dir, "nets"), 0o755); err != nil {
		tb.Fatal(err)
	}
	var files [regions]*bufio.Writer
	var fs [regions]*os.File
	for r := range regions {
		f, err := os.Create(filepath.Join(dir, "nets", "r"+strconv.Itoa(r)+".txt"))
		if err != nil {
			tb.Fatal(err)
		}
		fs[r], files[r] = f, bufio.NewWriter(f)
	}
	for i := range prefixes {
		p := 1<<24 + i*256
		fmt.Fprintf(files[i%regions], "%d.%d.%d.0/24\n", p>>24, p>>16&255, p>>8&255)
	}
	for r := range regions {
		if err := files[r].Flush(); err != nil {
			tb.Fatal(err)
		}
		fs[r].Close()
	}
	path := filepath.Join(dir, "lbdns.toml")
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "[daemon]\nstate_dir = %q\n\n[check.tcp]\nkind = \"tcp\"\n[check.tcp.tcp]\nport = 8053\n\n", dir)
	fmt.Fprintf(w, "[gslb]\npolicy_order = [\"region\", \"global\"]\n\n[gslb.server]\nlisten = [\"127.0.0.1:5301\"]\n\n[gslb.topology]\nlevels = [\"region\"]\n\n")
	for r := range regions {
		fmt.Fprintf(w, "[[gslb.topology.file]]\npath = \"nets/r%d.txt\"\nlabels = { region = \"r%d\" }\n\n", r, r)
	}
	pool := func(name string, b int, fallback string) {
		fmt.Fprintf(w, "[[gslb.pool]]\nname = %q\nmonitors = [\"tcp\"]\nalgorithm = \"all\"\n", name)
		if fallback != "" {
			fmt.Fprintf(w, "fallback = %q\n", fallback)
		}
		for i, a := range []string{"127.10.%d.1", "127.10.%d.2", "fd00::10:%d:1", "fd00::10:%d:2"} {
			fmt.Fprintf(w, "[[gslb.pool.member]]\nname = \"%c\"\naddress = %q\n", 'a'+i, fmt.Sprintf(a, b))
		}
	}
	for r := range regions {
		pool("r"+strconv.Itoa(r), r, "gl")
	}
	pool("gl", 200, "")
	fmt.Fprintf(w, "[[gslb.zone]]\nname = \"bench.test\"\nns = [\"ns1.bench.test.\"]\n\n")
	policies := func(table string) {
		for r := range regions {
			fmt.Fprintf(w, "[[%s]]\nmatch = { region = \"r%d\" }\npool = \"r%d\"\n", table, r, r)
		}
		fmt.Fprintf(w, "[[%s]]\npool = \"gl\"\n\n", table)
	}
	switch form {
	case "list":
		fmt.Fprintf(w, "[[gslb.service]]\nname = \"geo\"\necs = true\nnames = [\n")
		for n := range names {
			fmt.Fprintf(w, "\"dyn%d.bench.test\",\n", n)
		}
		fmt.Fprintf(w, "]\n")
		policies("gslb.service.policy")
	case "service":
		fmt.Fprintf(w, "[[gslb.service]]\nname = \"geo\"\necs = true\n")
		policies("gslb.service.policy")
		for n := range names {
			fmt.Fprintf(w, "[[gslb.name]]\nname = \"dyn%d.bench.test\"\nservice = \"geo\"\n\n", n)
		}
	default:
		for n := range names {
			fmt.Fprintf(w, "[[gslb.name]]\nname = \"dyn%d.bench.test\"\necs = true\n", n)
			policies("gslb.name.policy")
		}
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	return path
}

// liveHeap is the heap in use after two collections, in bytes.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkMemory builds what the responder holds for bench/responder/
// mem.sh's configuration (20,000 names, 100,000 prefixes; LBDNS_MEM_NAMES
// and LBDNS_MEM_PREFIXES set others) in each form of its names: the
// configuration loaded, the topology, the snapshot of every member
// unknown (the first one) and the configuration's hash. It reports the
// heap each keeps (live-MB, after a collection) beside what the whole
// allocates (B/op); -memprofile says where:
//
//	go test ./responder -run '^$' -bench Memory -benchtime 1x -benchmem -memprofile mem.prof
//	go tool pprof -sample_index=alloc_space -top mem.prof
func BenchmarkMemory(b *testing.B) {
	names, prefixes := 20_000, 100_000
	if s := os.Getenv("LBDNS_MEM_NAMES"); s != "" {
		names, _ = strconv.Atoi(s)
	}
	if s := os.Getenv("LBDNS_MEM_PREFIXES"); s != "" {
		prefixes, _ = strconv.Atoi(s)
	}
	for _, form := range []string{"inline", "service", "list"} {
		path := writeMemoryConfig(b, b.TempDir(), names, prefixes, form)
		b.Run(form, func(b *testing.B) {
			var cfgMB, topoMB, snapMB float64
			for b.Loop() {
				base := liveHeap()
				cfg, err := configs.Load(path)
				if err != nil {
					b.Fatal(err)
				}
				afterCfg := liveHeap()
				loc, err := topology.Load(cfg)
				if err != nil {
					b.Fatal(err)
				}
				afterTopo := liveHeap()
				snap := gslb.NewSnapshot(cfg, gslb.Evaluate(cfg, nil, time.Unix(1e9, 0)), loc, 1)
				ConfigHash(cfg)
				afterSnap := liveHeap()
				mb := func(a, b uint64) float64 { return float64(int64(a)-int64(b)) / 1e6 }
				cfgMB, topoMB, snapMB = mb(afterCfg, base), mb(afterTopo, afterCfg), mb(afterSnap, afterTopo)
				runtime.KeepAlive(snap)
				runtime.KeepAlive(cfg) // the responder keeps both
				runtime.KeepAlive(loc)
			}
			b.ReportMetric(cfgMB, "config-live-MB")
			b.ReportMetric(topoMB, "topology-live-MB")
			b.ReportMetric(snapMB, "snapshot-live-MB")
		})
	}
}
