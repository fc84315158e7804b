package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"lbdns/configs"
	"lbdns/internal/atomicfile"
)

// SerialFile is the name of the SOA serial's file in the state directory.
const SerialFile = "gslb-serial.json"

// serialVersion is the version of SerialFile's format.
const serialVersion = 1

// serialState is SerialFile's content.
type serialState struct {
	Version int    `json:"version"`
	Hash    string `json:"hash"`
	Serial  uint32 `json:"serial"`
}

// SerialStore keeps the zones' SOA serial: the version of the served
// data. It moves when the hash of the served data changes and never goes
// backwards, also across restarts: it is persisted (atomically) before it
// is served. A new serial is the larger of the last one plus 1 and the
// Unix time in seconds, so that it does not go backwards either when the
// file is lost, as long as the clock does not. It is safe for concurrent
// use.
type SerialStore struct {
	path string
	now  func() time.Time

	mu     sync.Mutex
	hash   string
	serial uint32
}

// NewSerialStore returns the store of SerialFile in stateDir, with clock
// now (time.Now when nil). Call Load before Next.
func NewSerialStore(stateDir string, now func() time.Time) *SerialStore {
	if now == nil {
		now = time.Now
	}
	return &SerialStore{path: filepath.Join(stateDir, SerialFile), now: now}
}

// Path returns the file the serial is kept in.
func (s *SerialStore) Path() string { return s.path }

// Load reads the last serial and hash from the file. A missing file is
// no error (a first start); a file that cannot be read or parsed is, and
// the store then starts from the clock.
func (s *SerialStore) Load() error {
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("gslb serial: %w", err)
	}
	var st serialState
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("gslb serial: %s: %w", s.path, err)
	}
	if st.Version != serialVersion {
		return fmt.Errorf("gslb serial: %s: unknown version %d (want %d)", s.path, st.Version, serialVersion)
	}
	s.mu.Lock()
	s.hash, s.serial = st.Hash, st.Serial
	s.mu.Unlock()
	return nil
}

// Next returns the serial of the served data whose hash is hash: the last
// serial when hash is the last hash, else a larger one, persisted first.
// When the file cannot be written the new serial is returned all the
// same, with the error.
func (s *SerialStore) Next(hash string) (uint32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if hash == s.hash && s.serial != 0 {
		return s.serial, nil
	}
	serial := max(s.serial+1, uint32(s.now().Unix()))
	if s.serial == ^uint32(0) {
		serial = s.serial // the end of uint32 (year 2106): stay
	}
	s.hash, s.serial = hash, serial
	data, err := json.Marshal(serialState{Version: serialVersion, Hash: hash, Serial: serial})
	if err == nil {
		err = atomicfile.Write(s.path, data)
	}
	if err != nil {
		return serial, fmt.Errorf("gslb serial: save %s: %w", s.path, err)
	}
	return serial, nil
}

// Serial returns the last serial (0 before the first Next without a
// file).
func (s *SerialStore) Serial() uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.serial
}

// ConfigHash is the hash of the served data of cfg: its whole [gslb]
// table (zones, names, pools and members, topology sources) as JSON,
// without [gslb.server] (where it is served is not what). Member health
// is not part of it: the serial is the configuration version.
func ConfigHash(cfg *configs.Config) string {
	g := cfg.GSLB
	g.Server = configs.GSLBServer{}
	data, err := json.Marshal(g)
	if err != nil {
		data = fmt.Appendf(nil, "%#v", g) // cannot happen for a decoded config
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
