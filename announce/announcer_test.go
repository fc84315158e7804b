package announce

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"lbdns/configs"
	"lbdns/hub"
	"lbdns/intent"
)

// fakeSpeaker records what the Announcer asks of it.
type fakeSpeaker struct {
	mu         sync.Mutex
	configured []configs.BGP
	paths      []Path
	closed     int
	changes    chan struct{}
}

func newFake() *fakeSpeaker { return &fakeSpeaker{changes: make(chan struct{}, 1)} }

func (f *fakeSpeaker) Configure(_ context.Context, b configs.BGP) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.configured = append(f.configured, b)
	return nil
}

func (f *fakeSpeaker) Announce(_ context.Context, paths []Path) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paths = slices.Clone(paths)
	return nil
}

func (f *fakeSpeaker) Peers() []PeerStatus          { return nil }
func (f *fakeSpeaker) PeerChanges() <-chan struct{} { return f.changes }

func (f *fakeSpeaker) Close(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed++
	f.paths = nil
	return nil
}

func (f *fakeSpeaker) state() ([]Path, int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.paths), len(f.configured), f.closed
}

// run runs a until cancel, then done is closed once it has stopped.
func run(a *Announcer) (cancel context.CancelFunc, done <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	d := make(chan struct{})
	go func() {
		defer close(d)
		a.Run(ctx, func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) })
	}()
	return cancel, d
}

// TestAnnouncerRun follows the hub with a fake speaker on a fake clock:
// serving VIPs are announced, a drain marks them then withdraws them
// when its delay is over (by the timer alone), enable announces again, a
// reload without [bgp] closes the speaker, and stopping withdraws.
func TestAnnouncerRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := hub.New(func() hub.Facts { return nil })
		cfg := testConfig()
		h.Config.Publish(cfg)
		spk := newFake()
		var changes []Change
		a := New(Options{Hub: h, Speaker: spk, OnChange: func(c Change) { changes = append(changes, c) }})
		cancel, done := run(a)
		synctest.Wait()
		if paths, configured, _ := spk.state(); len(paths) != 0 || configured != 1 {
			t.Fatalf("before verdicts: paths %v, configured %d", paths, configured)
		}
		h.VIPs.Publish([]hub.Verdict{serving("v4", "192.0.2.53")})
		synctest.Wait()
		up := Path{Prefix: netip.MustParsePrefix("192.0.2.53/32"), MED: 100, Communities: []configs.Community{65001<<16 | 100}}
		if paths, _, _ := spk.state(); len(paths) != 1 || !paths[0].Equal(up) {
			t.Fatalf("serving: paths %v", paths)
		}
		h.Intent.Publish(hub.Intent{State: intent.State{Host: &intent.HostDrain{Set: time.Now(), By: "uid 0"}}, Revision: 1})
		synctest.Wait()
		if paths, _, _ := spk.state(); len(paths) != 1 || !slices.Contains(paths[0].Communities, configs.GracefulShutdown) {
			t.Fatalf("draining: paths %v", paths)
		}
		time.Sleep(29 * time.Second)
		synctest.Wait()
		if paths, _, _ := spk.state(); len(paths) != 1 {
			t.Fatalf("before the drain delay: paths %v", paths)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if paths, _, _ := spk.state(); len(paths) != 0 {
			t.Fatalf("after the drain delay: paths %v", paths)
		}
		if st := a.Status(); !st.Enabled || st.Drain == nil || st.Routes[0].Announce {
			t.Errorf("status = %+v", st)
		}
		h.Intent.Publish(hub.Intent{Revision: 2})
		synctest.Wait()
		if paths, _, _ := spk.state(); len(paths) != 1 || !paths[0].Equal(up) {
			t.Fatalf("enabled: paths %v", paths)
		}
		off := *cfg
		off.BGP = configs.BGP{}
		h.Config.Publish(&off)
		synctest.Wait()
		if paths, _, closed := spk.state(); len(paths) != 0 || closed != 1 {
			t.Fatalf("[bgp] removed: paths %v, closed %d", paths, closed)
		}
		h.Config.Publish(cfg)
		synctest.Wait()
		if paths, configured, _ := spk.state(); len(paths) != 1 || configured != 2 {
			t.Fatalf("[bgp] back: paths %v, configured %d", paths, configured)
		}
		cancel()
		<-done
		if paths, _, closed := spk.state(); len(paths) != 0 || closed != 2 {
			t.Fatalf("stopped: paths %v, closed %d", paths, closed)
		}
		if len(changes) == 0 {
			t.Errorf("no changes told")
		}
	})
}

// failingSpeaker refuses every configuration.
type failingSpeaker struct{ fakeSpeaker }

func (f *failingSpeaker) Configure(context.Context, configs.BGP) error {
	return errors.New("bgp: start the speaker: listen tcp :179: bind: address already in use")
}

// TestAnnouncerErrorToldOnce: a speaker that keeps failing is retried
// every second, and its error is told once, in the status too.
func TestAnnouncerErrorToldOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := hub.New(func() hub.Facts { return nil })
		h.Config.Publish(testConfig())
		spk := &failingSpeaker{fakeSpeaker{changes: make(chan struct{}, 1)}}
		var changes []Change
		a := New(Options{Hub: h, Speaker: spk, OnChange: func(c Change) { changes = append(changes, c) }})
		cancel, done := run(a)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if st := a.Status(); !strings.Contains(st.Error, "address already in use") {
			t.Errorf("status error = %q", st.Error)
		}
		cancel()
		<-done
		n := 0
		for _, c := range changes {
			if c.Error && strings.Contains(c.Message, "address already in use") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("error told %d times: %+v", n, changes)
		}
	})
}
