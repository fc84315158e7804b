package topology

import "errors"

// AddMaxMind adds every network of the MaxMind-format database at path.
func (b *Builder) AddMaxMind(path string) error {
	return errors.New("maxmind: not yet supported: " + path)
}
