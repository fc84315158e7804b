package server

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"lbdns/configs"
	"lbdns/internal/atomicfile"
)

// SerialFile is the name of the SOA serial's file in the state directory.
const SerialFile = "gslb-serial.json"

// serialVersion is the version of SerialFile's format. Version 1 kept
// the serial itself; a version 1 file loads as the configuration version
// it held (the serial served next is then no lower).
const serialVersion = 2

// serialState is SerialFile's content.
type serialState struct {
	Version int    `json:"version"`
	Hash    string `json:"hash"`
	// ConfigVersion counts the served data's changes (version 2).
	ConfigVersion uint32 `json:"config_version,omitempty"`
	// Serial is a version 1 file's serial.
	Serial uint32 `json:"serial,omitempty"`
}

// SerialStore keeps the configuration version from which the zones' SOA
// serial follows: a counter that moves by one each time the hash of the
// served data changes, and never goes backwards, also across restarts:
// it is persisted (atomically) before it is used, and a version that
// cannot be saved is not used. The serial served is the configuration
// version plus the operator intent's revision (Serial), so it grows with
// every change of either, and two hosts that saw the same configurations
// and share the same intent revision answer the same serial. It is safe
// for concurrent use.
type SerialStore struct {
	path string

	mu      sync.Mutex
	hash    string
	version uint32
}

// NewSerialStore returns the store of SerialFile in stateDir. Call Load
// before Version.
func NewSerialStore(stateDir string) *SerialStore {
	return &SerialStore{path: filepath.Join(stateDir, SerialFile)}
}

// Path returns the file the version is kept in.
func (s *SerialStore) Path() string { return s.path }

// Load reads the last configuration version and hash from the file. A
// missing file is no error (a first start: the first version is 1); a
// file that cannot be read or parsed is, and the store must then not be
// used: a version counted from nothing could go backwards.
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
	switch st.Version {
	case 1:
		st.ConfigVersion = st.Serial // a clock-based serial: the next ones stay above it
	case serialVersion:
	default:
		return fmt.Errorf("gslb serial: %s: unknown version %d (want %d)", s.path, st.Version, serialVersion)
	}
	s.mu.Lock()
	s.hash, s.version = st.Hash, st.ConfigVersion
	s.mu.Unlock()
	return nil
}

// Version returns the configuration version of the served data whose
// hash is hash: the last version when hash is the last hash, else the
// next one, saved first. When it cannot be saved, Version returns the
// last version and the error: the caller must not serve the new data.
func (s *SerialStore) Version(hash string) (uint32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if hash == s.hash && s.version != 0 {
		return s.version, nil
	}
	next := s.version + 1
	data, err := json.Marshal(serialState{Version: serialVersion, Hash: hash, ConfigVersion: next})
	if err == nil {
		err = atomicfile.Write(s.path, data)
	}
	var ds *atomicfile.DirSyncError
	if err != nil && !errors.As(err, &ds) { // after a failed directory sync the file is in place
		return s.version, fmt.Errorf("gslb serial: save %s: %w", s.path, err)
	}
	s.hash, s.version = hash, next
	return next, nil
}

// Serial is the SOA serial of configuration version version under the
// intent revision rev: their sum, in serial number arithmetic (RFC 1982).
func Serial(version uint32, rev uint64) uint32 { return version + uint32(rev) }

// ConfigHash is the hash of the served data of cfg: its whole [gslb]
// table (zones, names, pools and members, topology sources) as JSON,
// without [gslb.server] (where it is served is not what). Member health
// is not part of it: the serial is the configuration version. The JSON
// is json.Marshal's of the table, hashed as it is written: the names,
// 100,000 of them a 20 MB document, one at a time (configHashJSON).
func ConfigHash(cfg *configs.Config) string {
	h := sha256.New()
	if err := configHashJSON(h, cfg); err != nil {
		h.Reset()
		g := cfg.GSLB
		g.Server = configs.GSLBServer{}
		fmt.Fprintf(h, "%#v", g) // cannot happen for a decoded config
	}
	return hex.EncodeToString(h.Sum(nil))
}

// namesNull is how json.Marshal writes the GSLB table's Names when nil:
// outside a string (where every '"' is escaped), after the key before.
const namesNull = `,"Names":null`

// configHashJSON writes to w the bytes json.Marshal gives for cfg's
// [gslb] table without [gslb.server]: the table without its names, the
// names spliced in where json.Marshal puts them, each marshalled alone
// (as json.Marshal writes an element of an array).
func configHashJSON(w io.Writer, cfg *configs.Config) error {
	g := cfg.GSLB
	g.Server = configs.GSLBServer{}
	names := g.Names
	g.Names = nil
	data, err := json.Marshal(g)
	if err != nil {
		return err
	}
	at := bytes.Index(data, []byte(namesNull))
	if names == nil || at < 0 {
		if at < 0 && names != nil {
			return errors.New("gslb serial: no names in the JSON of [gslb]")
		}
		_, err := w.Write(data)
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.Write(data[:at])
	bw.WriteString(`,"Names":[`)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i := range names {
		if i > 0 {
			bw.WriteByte(',')
		}
		buf.Reset()
		if err := enc.Encode(&names[i]); err != nil {
			return err
		}
		bw.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	}
	bw.WriteByte(']')
	bw.Write(data[at+len(namesNull):])
	return bw.Flush()
}
