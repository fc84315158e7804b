package topology

import (
	"fmt"

	"github.com/oschwald/maxminddb-golang/v2"

	"lbdns/configs"
)

// AddMaxMind adds every network of the MaxMind-format database at path
// (GeoIP2/GeoLite2 Country or City layout): the country's ISO code as
// the label "country" and the first subdivision's ISO code as the label
// "province", each only when it is one of the Builder's levels. Codes are
// lower-cased. Networks with neither are left out.
func (b *Builder) AddMaxMind(path string) error {
	db, err := maxminddb.Open(path)
	if err != nil {
		return fmt.Errorf("maxmind %s: %w", path, err)
	}
	defer db.Close()
	country, province := b.known[configs.LevelCountry], b.known[configs.LevelProvince]
	if !country && !province {
		return fmt.Errorf("maxmind %s: neither %q nor %q is a level", path, configs.LevelCountry, configs.LevelProvince)
	}
	// Networks share data records: decode each record once.
	ids := map[uintptr]uint32{}
	skip := map[uintptr]bool{}
	for r := range db.Networks() {
		if err := r.Err(); err != nil {
			return fmt.Errorf("maxmind %s: %w", path, err)
		}
		off := r.Offset()
		if skip[off] {
			continue
		}
		id, ok := ids[off]
		if !ok {
			labels := map[string]string{}
			if country {
				var cc string
				if err := r.DecodePath(&cc, "country", "iso_code"); err != nil {
					return fmt.Errorf("maxmind %s: %s: %w", path, r.Prefix(), err)
				}
				if cc != "" {
					labels[configs.LevelCountry] = lower(cc)
				}
			}
			if province {
				var sub string
				if err := r.DecodePath(&sub, "subdivisions", 0, "iso_code"); err != nil {
					return fmt.Errorf("maxmind %s: %s: %w", path, r.Prefix(), err)
				}
				if sub != "" {
					labels[configs.LevelProvince] = lower(sub)
				}
			}
			if len(labels) == 0 {
				skip[off] = true
				continue
			}
			if id, err = b.Labels(labels); err != nil {
				return fmt.Errorf("maxmind %s: %s: %w", path, r.Prefix(), err)
			}
			ids[off] = id
		}
		if err := b.AddID(r.Prefix(), id); err != nil {
			return fmt.Errorf("maxmind %s: %w", path, err)
		}
	}
	return nil
}

// lower returns s in ASCII lower case.
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; c >= 'A' && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
