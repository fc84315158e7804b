package responder

import (
	"bufio"
	"bytes"
	"context"
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
	"time"

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
	// Serial is the last serial served (version 2), or a version 1
	// file's serial.
	Serial uint32 `json:"serial,omitempty"`
}

// VersionRegister is the register of configuration versions a fleet of
// LB hosts shares (fleet/etcdfleet.SerialVersions): one version per hash
// of the served data, so that every host serving the same data under the
// same intent revision answers the same SOA serial, a host that joined
// late or lost its state directory too.
type VersionRegister interface {
	// Version returns the version registered for hash when it is at
	// least floor; else it registers for hash, and returns, a version
	// at least floor and above every version registered before (see
	// fleet.Versions.Assign). Calls for the same hash at once, from
	// several hosts, end with one version.
	Version(ctx context.Context, hash string, floor uint32) (uint32, error)
	// Watch calls changed each time the register may have changed (and
	// after each watch error), until ctx is done; then it returns.
	Watch(ctx context.Context, changed func())
}

// registerTimeout bounds each call to the VersionRegister: past it the
// store keeps to the local rule and converges later (Resync).
const registerTimeout = 3 * time.Second

// SerialStore keeps the configuration version from which the zones' SOA
// serial follows, and never lets it go backwards, also across restarts:
// it is persisted (atomically) before it is used, and a version that
// cannot be saved is not used. The serial served is the configuration
// version plus the operator intent's revision (Serve), so it grows with
// every change of either. The last serial served is kept too: should the
// revision ever go back (a state file moved aside or replaced by hand),
// the version is moved up so that the serial still only grows. It is
// safe for concurrent use.
//
// Alone (no VersionRegister), the version is a counter that moves by one
// each time the hash of the served data changes. In a fleet, it is the
// version the fleet's register gave the hash (at least the host's last
// version, one more for new data), so that hosts serving the same data
// under the same intent revision answer the same serial, whatever their
// history. When the register cannot be reached, the store keeps to the
// local rule (the last version for the same data, one more for new
// data, also at a first start with an empty state directory: version 1)
// and Resync, called until it succeeds, moves it up to the fleet's (or
// raises the fleet's to it): the serial then differs from the fleet's
// for a while, and never goes back.
type SerialStore struct {
	path     string
	register VersionRegister // nil: the local rule alone

	// rmu makes register calls one at a time (held across the network;
	// mu is not, so that Serve and readers never wait on the register).
	rmu sync.Mutex

	mu      sync.Mutex
	hash    string
	version uint32
	served  uint32 // the last serial Serve returned (0: none)
	synced  bool   // version is the register's for hash
	regErr  error  // the last register call's error (nil: it worked)
}

// NewSerialStore returns the store of SerialFile in stateDir, which
// counts versions by the local rule. Call Load before Version.
func NewSerialStore(stateDir string) *SerialStore {
	return &SerialStore{path: filepath.Join(stateDir, SerialFile)}
}

// NewFleetSerialStore returns the store of SerialFile in stateDir whose
// versions come from register (nil: NewSerialStore's). Call Load before
// Version.
func NewFleetSerialStore(stateDir string, register VersionRegister) *SerialStore {
	return &SerialStore{path: filepath.Join(stateDir, SerialFile), register: register}
}

// Path returns the file the version is kept in.
func (s *SerialStore) Path() string { return s.path }

// Load reads the last configuration version, hash and serial from the
// file. A missing file is no error (a first start: the first version is
// 1, or the fleet's); a file that cannot be read or parsed is, and the
// store must then not be used: a version counted from nothing could go
// backwards.
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
	s.hash, s.version, s.served, s.synced = st.Hash, st.ConfigVersion, st.Serial, false
	s.mu.Unlock()
	return nil
}

// Version returns the configuration version of the served data whose
// hash is hash: the last version when hash is the last hash; else the
// next one (alone), or the fleet register's for hash (in a fleet; when
// the register cannot be reached, the next one, and RegisterError says
// why), saved first. When it cannot be saved, Version returns the last
// version and the error: the caller must not serve the new data.
func (s *SerialStore) Version(hash string) (uint32, error) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	s.mu.Lock()
	if hash == s.hash && s.version != 0 {
		v := s.version
		s.mu.Unlock()
		return v, nil
	}
	floor := s.version + 1
	s.mu.Unlock()
	version, synced := floor, false
	var regErr error
	if s.register != nil {
		if v, err := s.ask(hash, floor); err != nil {
			regErr = err
		} else {
			version, synced = v, true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.register != nil {
		s.regErr = regErr
	}
	if version <= s.version { // Serve moved it up meanwhile
		version, synced = s.version+1, false
	}
	if err := s.saveLocked(hash, version, s.served); err != nil {
		return s.version, err
	}
	s.synced = synced
	return s.version, nil
}

// ask asks the register for hash's version at least floor.
func (s *SerialStore) ask(hash string, floor uint32) (uint32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), registerTimeout)
	defer cancel()
	v, err := s.register.Version(ctx, hash, floor)
	if err != nil {
		return 0, fmt.Errorf("gslb serial: fleet version of %.12s: %w", hash, err)
	}
	if v < floor {
		return 0, fmt.Errorf("gslb serial: fleet version of %.12s is %d, below %d", hash, v, floor)
	}
	return v, nil
}

// Resync brings the version of the served data to the fleet register's
// (nothing alone, or before the first Version): up when the register
// holds a higher one for the hash (another host raised it, or this host
// kept to the local rule while the register could not be reached), or
// the register's up to the host's when the host's is higher. It reports
// whether the version moved (the serial must then be served again) and
// the register's error (the store is then unchanged: call it again
// later).
func (s *SerialStore) Resync() (bool, error) {
	if s.register == nil {
		return false, nil
	}
	s.rmu.Lock()
	defer s.rmu.Unlock()
	s.mu.Lock()
	hash, floor := s.hash, s.version
	s.mu.Unlock()
	if hash == "" || floor == 0 {
		return false, nil
	}
	v, err := s.ask(hash, floor)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.regErr = err
	if err != nil {
		return false, err
	}
	if v <= s.version {
		s.synced = v == s.version // below: Serve moved it up meanwhile; the next Resync raises the register's
		return false, nil
	}
	if err := s.saveLocked(hash, v, s.served); err != nil {
		return false, err
	}
	s.synced = true
	return true, nil
}

// Synced reports whether the version is the one the fleet register
// holds for the served data (always false alone).
func (s *SerialStore) Synced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.synced
}

// RegisterError returns the error of the last call to the fleet
// register (nil when it worked, and alone).
func (s *SerialStore) RegisterError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.regErr
}

// Current returns the configuration version in force (0: none yet).
func (s *SerialStore) Current() uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// Serve returns the SOA serial to serve under the intent revision rev:
// the configuration version plus rev, in serial number arithmetic (RFC
// 1982), saved before it is returned. A serial that would not be above
// the last one served (the revision went back) moves the version up
// instead, so that the serial is the last one plus 1. When it cannot be
// saved, Serve returns the last serial served and the error: the caller
// must not serve the new one.
func (s *SerialStore) Serve(rev uint64) (uint32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	version := s.version
	serial := Serial(version, rev)
	if s.served != 0 && serial != s.served && !serialAfter(serial, s.served) {
		serial = s.served + 1
		version = serial - uint32(rev)
	}
	if serial == s.served && version == s.version {
		return serial, nil
	}
	moved := version != s.version
	if err := s.saveLocked(s.hash, version, serial); err != nil {
		return s.served, err
	}
	if moved {
		s.synced = false // above the register's: Resync raises it
	}
	return serial, nil
}

// saveLocked writes hash, version and serial, then makes them the
// store's; s.mu held. After a failed directory sync the file is in place:
// that is no error.
func (s *SerialStore) saveLocked(hash string, version, serial uint32) error {
	data, err := json.Marshal(serialState{Version: serialVersion, Hash: hash, ConfigVersion: version, Serial: serial})
	if err == nil {
		err = atomicfile.Write(s.path, data)
	}
	var ds *atomicfile.DirSyncError
	if err != nil && !errors.As(err, &ds) {
		return fmt.Errorf("gslb serial: save %s: %w", s.path, err)
	}
	s.hash, s.version, s.served = hash, version, serial
	return nil
}

// Serial is the SOA serial of configuration version version under the
// intent revision rev: their sum, in serial number arithmetic (RFC 1982).
func Serial(version uint32, rev uint64) uint32 { return version + uint32(rev) }

// serialAfter reports whether a is after b in serial number arithmetic
// (RFC 1982 section 3.2).
func serialAfter(a, b uint32) bool { return a != b && a-b < 1<<31 }

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
