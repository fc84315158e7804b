package topology

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"sync"

	"lbdns/configs"
)

// Load builds the Map of c's [gslb.topology]: the MaxMind database first
// (when set), then the prefix files in order, then the inline nets, a
// later source winning per level for a prefix given twice. Relative paths
// are taken from the config file's directory. An error names the file
// (and the line) at fault. The prefix files are parsed in parallel.
func Load(c *configs.Config) (*Map, error) {
	return readSources(c, nil).build(c)
}

// Cache loads topologies and keeps the last Map loaded: a load whose
// sources are the same as the last one's (the same levels, inline nets
// and labels, and the same files: path, size, modification time and
// content hash) returns that Map without parsing anything, so a reload
// that leaves a million-line prefix list alone does not parse it again.
// A Cache is safe for concurrent use.
type Cache struct {
	mu   sync.Mutex
	seed maphash.Seed
	sum  uint64
	last *Map
}

// NewCache returns an empty Cache.
func NewCache() *Cache { return &Cache{seed: maphash.MakeSeed()} }

// Load returns the Map of c's [gslb.topology] as the function Load does,
// and whether it is the last one, reused because its sources are
// unchanged. A failed load keeps the last Map.
func (k *Cache) Load(c *configs.Config) (m *Map, reused bool, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	h := &maphash.Hash{}
	h.SetSeed(k.seed)
	src := readSources(c, h)
	sum := h.Sum64()
	if k.last != nil && sum == k.sum && !src.unread {
		return k.last, true, nil
	}
	if m, err = src.build(c); err != nil {
		return nil, false, err
	}
	k.last, k.sum = m, sum
	return m, false, nil
}

// sources are the contents of a topology's prefix files, read, or why
// each could not be read (reported in the order of the files when the
// Map is built).
type sources struct {
	paths []string
	data  [][]byte
	errs  []error
	// unread is set when a source could not be read.
	unread bool
}

// readSources reads every prefix file of c and, when h is set, writes
// into it all that the Map depends on: the levels, the MaxMind
// database's and each file's path, size, modification time and content
// (a source that cannot be read is noted for build to report),
// the files' and the inline nets' labels and the inline nets.
func readSources(c *configs.Config, h *maphash.Hash) *sources {
	t := &c.GSLB.Topology
	str := func(s string) {
		if h != nil {
			num(h, uint64(len(s)))
			h.WriteString(s)
		}
	}
	labels := func(l map[string]string) {
		num(h, uint64(len(l)))
		for _, k := range slices.Sorted(maps.Keys(l)) {
			str(k)
			str(l[k])
		}
	}
	unread := false
	if h != nil {
		num(h, uint64(len(t.Levels)))
		for _, l := range t.Levels {
			str(l)
		}
		str(t.MaxMindDB)
		if t.MaxMindDB != "" {
			// Unreadable: the Map's build says why.
			unread = hashFile(h, c.TopologyPath(t.MaxMindDB)) != nil
		}
	}
	n := len(t.Files)
	src := &sources{paths: make([]string, n), data: make([][]byte, n), errs: make([]error, n), unread: unread}
	for i := range t.Files {
		path := c.TopologyPath(t.Files[i].Path)
		src.paths[i] = path
		f, err := os.Open(path)
		if err != nil {
			src.errs[i], src.unread = fmt.Errorf("prefix list: %w", err), true
			continue
		}
		data, err := readFile(f)
		var fi os.FileInfo
		if err == nil {
			fi, err = f.Stat()
		}
		f.Close()
		if err != nil {
			src.errs[i], src.unread = fmt.Errorf("prefix list: %s: %w", path, err), true
			continue
		}
		src.data[i] = data
		if h != nil {
			str(path)
			num(h, uint64(fi.Size()))
			num(h, uint64(fi.ModTime().UnixNano()))
			num(h, uint64(len(data)))
			h.Write(data)
			labels(t.Files[i].Labels)
		}
	}
	if h != nil {
		num(h, uint64(len(t.Nets)))
		for i := range t.Nets {
			n := &t.Nets[i]
			str(n.Prefix)
			str(n.Net.String())
			labels(n.Labels)
		}
	}
	return src
}

// num writes v into h (nothing when h is nil).
func num(h *maphash.Hash, v uint64) {
	if h != nil {
		h.Write(binary.LittleEndian.AppendUint64(nil, v))
	}
}

// hashFile writes path's size, modification time and content into h.
func hashFile(h *maphash.Hash, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	num(h, uint64(fi.Size()))
	num(h, uint64(fi.ModTime().UnixNano()))
	_, err = io.Copy(h, f)
	return err
}

// build builds the Map of c's [gslb.topology] from the files read: the
// lists are parsed in parallel, and added in order.
func (src *sources) build(c *configs.Config) (*Map, error) {
	t := &c.GSLB.Topology
	b := NewBuilder(t.Levels)
	if t.MaxMindDB != "" {
		if err := b.AddMaxMind(c.TopologyPath(t.MaxMindDB)); err != nil {
			return nil, fmt.Errorf("load topology: %w", err)
		}
	}
	// Per file, in order, the first of: not read, bad labels, a bad
	// line.
	errs := src.errs
	ids := make([]uint32, len(t.Files))
	for i := range t.Files {
		if errs[i] != nil {
			continue
		}
		id, err := b.Labels(t.Files[i].Labels)
		if err != nil {
			errs[i] = fmt.Errorf("%s: %w", src.paths[i], err)
		}
		ids[i] = id
	}
	// The lists are parsed in place: each into its own stretch of the
	// builder's entries (room for one entry a line), then moved down
	// over the lines that held none, in order. No list is held twice:
	// a copy of a million-entry list is 32 MB more at the peak.
	starts, ends, counts := make([]int, len(t.Files)), make([]int, len(t.Files)), make([]int, len(t.Files))
	total := len(b.raw)
	for i := range t.Files {
		if errs[i] == nil {
			starts[i] = total
			total += bytes.Count(src.data[i], []byte{'\n'}) + 1
			ends[i] = total
		}
	}
	raw := slices.Grow(b.raw, total-len(b.raw))[:total]
	var wg sync.WaitGroup
	work := make(chan int)
	for range min(runtime.GOMAXPROCS(0), len(t.Files)) {
		wg.Go(func() {
			for i := range work {
				counts[i], errs[i] = parseInto(raw[starts[i]:ends[i]], src.data[i], src.paths[i], ids[i])
				src.data[i] = nil
			}
		})
	}
	for i := range t.Files {
		if errs[i] == nil {
			work <- i
		}
	}
	close(work)
	wg.Wait()
	at := len(b.raw)
	for i := range t.Files {
		if errs[i] != nil {
			return nil, fmt.Errorf("load topology: %w", errs[i])
		}
		if at+counts[i] > maxEntries {
			return nil, fmt.Errorf("load topology: %s: more than %d prefixes", src.paths[i], maxEntries)
		}
		copy(raw[at:], raw[starts[i]:starts[i]+counts[i]])
		for j := at; j < at+counts[i]; j++ {
			raw[j].kidStart = uint32(j) // the order of addition until Build
		}
		at += counts[i]
	}
	b.raw = raw[:at]
	for i := range t.Nets {
		n := &t.Nets[i]
		p := n.Net
		if !p.IsValid() {
			var err error
			if p, err = ParsePrefix(n.Prefix); err != nil {
				return nil, fmt.Errorf("load topology: gslb.topology.net[%d]: %w", i, err)
			}
		}
		if err := b.Add(p, n.Labels); err != nil {
			return nil, fmt.Errorf("load topology: gslb.topology.net[%d]: %w", i, err)
		}
	}
	return b.Build(), nil
}

// readFile reads f whole, into a buffer of its size as os.ReadFile does
// (io.ReadAll grows one by doubling: 38 MB of buffers for the 14 MB of
// 1,000,000 prefixes).
func readFile(f *os.File) ([]byte, error) {
	size := 512
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 && fi.Size() < 1<<40 {
		size = int(fi.Size()) + 1 // one more: EOF seen without growing
	}
	data := make([]byte, 0, size)
	for {
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)] // grown (the file grew)
		}
	}
}
