package vip

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// faultClient wraps a Client and fails chosen calls. Calls are numbered from
// 1 across all methods; fail maps a call number to the error it returns
// instead of passing the call on. failKind fails every call of one method.
type faultClient struct {
	Client
	mu       sync.Mutex
	n        int
	fail     map[int]error
	failKind map[string]error
	calls    []string
	onCall   func(n int) // if set, called with each call's number
}

func (f *faultClient) check(method string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	f.calls = append(f.calls, method)
	if f.onCall != nil {
		f.onCall(f.n)
	}
	if err, ok := f.fail[f.n]; ok {
		return err
	}
	return f.failKind[method]
}

func (f *faultClient) Services() ([]Service, error) {
	if err := f.check("Services"); err != nil {
		return nil, err
	}
	return f.Client.Services()
}

func (f *faultClient) Destinations(k ServiceKey) ([]Destination, error) {
	if err := f.check("Destinations"); err != nil {
		return nil, err
	}
	return f.Client.Destinations(k)
}

func (f *faultClient) CreateService(s Service) error {
	if err := f.check("CreateService"); err != nil {
		return err
	}
	return f.Client.CreateService(s)
}

func (f *faultClient) UpdateService(s Service) error {
	if err := f.check("UpdateService"); err != nil {
		return err
	}
	return f.Client.UpdateService(s)
}

func (f *faultClient) DeleteService(k ServiceKey) error {
	if err := f.check("DeleteService"); err != nil {
		return err
	}
	return f.Client.DeleteService(k)
}

func (f *faultClient) CreateDestination(k ServiceKey, d Destination) error {
	if err := f.check("CreateDestination"); err != nil {
		return err
	}
	return f.Client.CreateDestination(k, d)
}

func (f *faultClient) UpdateDestination(k ServiceKey, d Destination) error {
	if err := f.check("UpdateDestination"); err != nil {
		return err
	}
	return f.Client.UpdateDestination(k, d)
}

func (f *faultClient) DeleteDestination(k ServiceKey, a netip.AddrPort) error {
	if err := f.check("DeleteDestination"); err != nil {
		return err
	}
	return f.Client.DeleteDestination(k, a)
}

// newTestReconciler returns a reconciler whose waits are recorded instead of
// slept.
func newTestReconciler(c Client, owned func(ServiceKey) bool) (*Reconciler, *[]time.Duration) {
	r := NewReconciler(c, owned)
	var waits []time.Duration
	r.sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	return r, &waits
}

// fill creates t in m directly.
func fill(t *testing.T, m *MemClient, tb Table) {
	t.Helper()
	for _, k := range tb.Keys() {
		s := tb[k]
		if err := m.CreateService(s); err != nil {
			t.Fatal(err)
		}
		for _, d := range s.Dests {
			if err := m.CreateDestination(k, d); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func desiredTable() Table {
	return table(
		svc(kU, "wrr", dest("10.0.0.1:53", 100, DirectRoute), dest("10.0.0.2:53", 100, DirectRoute)),
		svc(kT, "wrr", dest("10.0.0.1:53", 100, DirectRoute), dest("10.0.0.2:53", 100, DirectRoute)),
	)
}

func TestReconcilerRetry(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name        string
		failAt      []int // call numbers (1: Services of the first resync)
		wantErr     bool
		wantRetries uint64
		wantErrors  uint64
		wantDirty   bool
	}{
		{name: "no faults"},
		// Calls: 1 Services, 2 CreateService (kU tcp first: kT), 3..
		{name: "one failure is retried", failAt: []int{2}, wantRetries: 1, wantErrors: 1},
		{name: "two failures are retried", failAt: []int{2, 3}, wantRetries: 2, wantErrors: 2},
		{name: "three failures give up", failAt: []int{2, 3, 4}, wantErr: true, wantRetries: 2, wantErrors: 3, wantDirty: true},
		{name: "dump failure is retried", failAt: []int{1}, wantRetries: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMemClient()
			f := &faultClient{Client: m, fail: map[int]error{}}
			for _, n := range tc.failAt {
				f.fail[n] = boom
			}
			r, waits := newTestReconciler(f, nil)
			_, err := r.Resync(context.Background(), desiredTable())
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				if !errors.Is(err, boom) || !strings.Contains(err.Error(), "vip: create-service tcp/192.0.2.1:53 sched=wrr: boom") {
					t.Errorf("error %q does not name the op and wrap the cause", err)
				}
			}
			st := r.Stats()
			if st.Retries != tc.wantRetries || st.OpErrors != tc.wantErrors {
				t.Errorf("stats %+v, want retries %d op errors %d", st, tc.wantRetries, tc.wantErrors)
			}
			if want := []time.Duration{50 * time.Millisecond, 200 * time.Millisecond}[:tc.wantRetries]; !slices.Equal(*waits, want) {
				t.Errorf("waits %v, want %v", *waits, want)
			}
			if r.Dirty() != tc.wantDirty {
				t.Errorf("dirty %v, want %v", r.Dirty(), tc.wantDirty)
			}
			if !tc.wantErr && !tablesEqual(m.Table(), desiredTable()) {
				t.Errorf("kernel %v, want %v", m.Table(), desiredTable())
			}
		})
	}
}

func TestReconcilerGivesUpRetriesAfterFirstFailure(t *testing.T) {
	boom := errors.New("boom")
	m := NewMemClient()
	f := &faultClient{Client: m, failKind: map[string]error{"CreateService": boom}}
	r, waits := newTestReconciler(f, nil)
	_, err := r.Resync(context.Background(), desiredTable())
	if err == nil {
		t.Fatal("no error")
	}
	// First create-service: 3 tries; second: 1 try; their dests skipped.
	if st := r.Stats(); st.OpsFailed != 2 || st.OpErrors != 4 || st.OpsApplied != 0 || len(*waits) != 2 {
		t.Errorf("stats %+v waits %v", st, *waits)
	}
	if got := strings.Count(err.Error(), "\n") + 1; got != 2 {
		t.Errorf("joined %d errors, want 2: %v", got, err)
	}
	if got := f.calls[1:]; len(got) != 4 || slices.ContainsFunc(got, func(c string) bool { return c != "CreateService" }) {
		t.Errorf("calls after the dump %q, want 4 CreateService", got)
	}
}

func TestReconcilerSurprises(t *testing.T) {
	ctx := context.Background()
	t.Run("create finds it there: update", func(t *testing.T) {
		m := NewMemClient()
		r, _ := newTestReconciler(m, nil)
		if _, err := r.Resync(ctx, Table{}); err != nil {
			t.Fatal(err)
		}
		fill(t, m, table(svc(kU, "rr", dest("10.0.0.1:53", 7, NAT)))) // by hand
		want := table(svc(kU, "wrr", dest("10.0.0.1:53", 1, DirectRoute)))
		if _, err := r.Sync(ctx, want); err != nil {
			t.Fatal(err)
		}
		if !tablesEqual(m.Table(), want) {
			t.Errorf("kernel %v, want %v", m.Table(), want)
		}
		if !r.Dirty() {
			t.Error("surprise did not mark the cache dirty")
		}
	})
	t.Run("delete finds it gone: fine", func(t *testing.T) {
		m := NewMemClient()
		fill(t, m, desiredTable())
		r, _ := newTestReconciler(m, nil)
		if _, err := r.Resync(ctx, desiredTable()); err != nil {
			t.Fatal(err)
		}
		if err := m.DeleteService(kU); err != nil { // by hand
			t.Fatal(err)
		}
		want := desiredTable()
		delete(want, kU)
		if _, err := r.Sync(ctx, want); err != nil {
			t.Fatal(err)
		}
		if !tablesEqual(m.Table(), want) {
			t.Errorf("kernel %v, want %v", m.Table(), want)
		}
	})
	t.Run("update finds it gone: create", func(t *testing.T) {
		m := NewMemClient()
		fill(t, m, desiredTable())
		r, _ := newTestReconciler(m, nil)
		if _, err := r.Resync(ctx, desiredTable()); err != nil {
			t.Fatal(err)
		}
		a := netip.MustParseAddrPort("10.0.0.1:53")
		if err := m.DeleteDestination(kU, a); err != nil { // by hand
			t.Fatal(err)
		}
		want := desiredTable()
		want[kU].Dests[a] = dest("10.0.0.1:53", 3, DirectRoute)
		if _, err := r.Sync(ctx, want); err != nil {
			t.Fatal(err)
		}
		if !tablesEqual(m.Table(), want) {
			t.Errorf("kernel %v, want %v", m.Table(), want)
		}
	})
}

func TestReconcilerResyncRepairsDrift(t *testing.T) {
	ctx := context.Background()
	m := NewMemClient()
	owned := func(k ServiceKey) bool { return k != kX }
	r, _ := newTestReconciler(m, owned)
	if _, err := r.Sync(ctx, desiredTable()); err != nil {
		t.Fatal(err)
	}
	// Drift by hand: re-weight, delete, add a stray, add an unowned service.
	if err := m.UpdateDestination(kU, dest("10.0.0.1:53", 9, NAT)); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteDestination(kT, netip.MustParseAddrPort("10.0.0.2:53")); err != nil {
		t.Fatal(err)
	}
	if err := m.CreateDestination(kT, dest("10.0.0.66:53", 1, DirectRoute)); err != nil {
		t.Fatal(err)
	}
	fill(t, m, table(svc(kX, "rr")))
	ops, err := r.Resync(ctx, desiredTable())
	if err != nil {
		t.Fatal(err)
	}
	wantOps := []string{
		"create-dest tcp/192.0.2.1:53 -> 10.0.0.2:53 w=100 dr",
		"delete-dest tcp/192.0.2.1:53 -> 10.0.0.66:53",
		"update-dest udp/192.0.2.1:53 -> 10.0.0.1:53 w=100 dr",
	}
	if !slices.Equal(opStrings(ops), wantOps) {
		t.Errorf("ops %q, want %q", opStrings(ops), wantOps)
	}
	got := m.Table()
	if _, ok := got[kX]; !ok {
		t.Error("unowned service deleted")
	}
	delete(got, kX)
	if !tablesEqual(got, desiredTable()) {
		t.Errorf("kernel %v, want %v", got, desiredTable())
	}
}

func TestReconcilerContextCancelled(t *testing.T) {
	m := NewMemClient()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The second call (the first create) fails, and the context is cancelled
	// as it happens: the hour-long real wait must be cut short.
	f := &faultClient{Client: m, fail: map[int]error{2: errors.New("boom")}}
	f.onCall = func(n int) {
		if n == 2 {
			cancel()
		}
	}
	r := NewReconciler(f, nil)
	r.Backoff = []time.Duration{time.Hour}
	ops, err := r.Resync(ctx, desiredTable())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if len(ops) != 0 || len(f.calls) != 2 {
		t.Errorf("after cancellation: applied %q, calls %q", opStrings(ops), f.calls)
	}
	if !r.Dirty() {
		t.Error("not dirty after cancellation")
	}
}

func TestMemClient(t *testing.T) {
	m := NewMemClient()
	if s, err := m.Services(); err != nil || s == nil || len(s) != 0 {
		t.Fatalf("empty Services = %v, %v; want empty slice", s, err)
	}
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"create", func() error { return m.CreateService(Service{Key: kU, Scheduler: "wrr"}) }, nil},
		{"create again", func() error { return m.CreateService(Service{Key: kU}) }, os.ErrExist},
		{"update missing", func() error { return m.UpdateService(Service{Key: kT}) }, os.ErrNotExist},
		{"delete missing", func() error { return m.DeleteService(kT) }, os.ErrNotExist},
		{"dest on missing service", func() error { return m.CreateDestination(kT, dest("10.0.0.1:53", 1, NAT)) }, os.ErrNotExist},
		{"create dest", func() error { return m.CreateDestination(kU, dest("10.0.0.1:53", 1, NAT)) }, nil},
		{"create dest again", func() error { return m.CreateDestination(kU, dest("10.0.0.1:53", 2, NAT)) }, os.ErrExist},
		{"update missing dest", func() error { return m.UpdateDestination(kU, dest("10.0.0.2:53", 2, NAT)) }, os.ErrNotExist},
		{"delete missing dest", func() error { return m.DeleteDestination(kU, netip.MustParseAddrPort("10.0.0.2:53")) }, os.ErrNotExist},
		{"destinations of missing", func() error { _, err := m.Destinations(kT); return err }, os.ErrNotExist},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("err %v, want %v", err, tc.want)
			}
		})
	}
	snap := m.Table()
	snap[kU].Dests[netip.MustParseAddrPort("10.0.0.1:53")] = Destination{}
	if ds, _ := m.Destinations(kU); len(ds) != 1 || ds[0].Weight != 1 {
		t.Errorf("Table snapshot aliases the client: %v", ds)
	}
}
