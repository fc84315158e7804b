package topology

import (
	"fmt"
	"os"

	"lbdns/configs"
)

// Load builds the Map of c's [gslb.topology]: the MaxMind database first
// (when set), then the prefix files in order, then the inline nets, a
// later source winning per level for a prefix given twice. Relative paths
// are taken from the config file's directory. An error names the file
// (and the line) at fault.
func Load(c *configs.Config) (*Map, error) {
	t := &c.GSLB.Topology
	b := NewBuilder(t.Levels)
	if t.MaxMindDB != "" {
		if err := b.AddMaxMind(c.TopologyPath(t.MaxMindDB)); err != nil {
			return nil, fmt.Errorf("load topology: %w", err)
		}
	}
	for i := range t.Files {
		if err := b.addFile(c.TopologyPath(t.Files[i].Path), t.Files[i].Labels); err != nil {
			return nil, fmt.Errorf("load topology: %w", err)
		}
	}
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

// addFile adds the prefix list at path.
func (b *Builder) addFile(path string, labels map[string]string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("prefix list: %w", err)
	}
	defer f.Close()
	return b.AddList(f, path, labels)
}
