package vip

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
)

// batchFaultClient is a BatchClient over a faultClient. ApplyBatch passes
// each op through the faultClient (so its failKind applies and the call is
// recorded), except the positions in failBatch, which fail without a call.
type batchFaultClient struct {
	*faultClient
	failBatch map[int]error
	batches   [][]Op
}

func (b *batchFaultClient) ApplyBatch(ops []Op) []error {
	b.batches = append(b.batches, slices.Clone(ops))
	errs := make([]error, len(ops))
	for i, op := range ops {
		if err, ok := b.failBatch[i]; ok {
			errs[i] = err
			continue
		}
		errs[i] = ApplyEach(b.faultClient, []Op{op})[0]
	}
	return errs
}

// writes counts the write calls the faultClient recorded.
func (f *faultClient) writes() int {
	n := 0
	for _, c := range f.calls {
		if c != "Services" && c != "Destinations" {
			n++
		}
	}
	return n
}

// outcome is what a Sync did, for comparing the batch path with the plain
// one.
type outcome struct {
	ops   []string
	err   string
	stats ReconcilerStats
	dirty bool
	table Table
}

// syncOutcome runs one Sync of want over c (which wraps m) and records it.
func syncOutcome(t *testing.T, c Client, m *MemClient, want Table) outcome {
	t.Helper()
	r, _ := newTestReconciler(c, nil)
	ops, err := r.Sync(context.Background(), want)
	o := outcome{stats: r.Stats(), dirty: r.Dirty(), table: m.Table()}
	for _, op := range ops {
		o.ops = append(o.ops, op.String())
	}
	if err != nil {
		o.err = err.Error()
	}
	return o
}

func TestReconcilerBatchFallback(t *testing.T) {
	transient := errors.New("transient")
	tests := []struct {
		name      string
		before    Table            // in the kernel at the start
		failKind  map[string]error // on every call, batch or not
		failBatch map[int]error    // batch positions that fail once
		wantErr   bool
	}{
		{name: "all succeed"},
		{name: "one in the middle fails once", failBatch: map[int]error{2: transient}},
		{name: "service fails in batch, its dests too", failBatch: map[int]error{0: transient, 1: transient, 2: transient}},
		{name: "service create fails for good", failKind: map[string]error{"CreateService": transient}, wantErr: true},
		{name: "service already there", before: table(svc(kU, "rr", dest("10.0.0.9:53", 1, NAT)))},
		{name: "dest create fails for good", failKind: map[string]error{"CreateDestination": transient}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run := func(batch bool) (outcome, *faultClient, *batchFaultClient) {
				m := NewMemClient()
				if tc.before != nil {
					fill(t, m, tc.before)
				}
				f := &faultClient{Client: m, failKind: tc.failKind}
				if !batch {
					return syncOutcome(t, f, m, desiredTable()), f, nil
				}
				b := &batchFaultClient{faultClient: f, failBatch: tc.failBatch}
				return syncOutcome(t, b, m, desiredTable()), f, b
			}
			plain, _, _ := run(false)
			got, f, b := run(true)
			if len(b.batches) != 1 {
				t.Fatalf("%d batches, want 1", len(b.batches))
			}
			if (got.err != "") != tc.wantErr {
				t.Fatalf("error %q, want error %v", got.err, tc.wantErr)
			}
			if fmt.Sprint(got.ops) != fmt.Sprint(plain.ops) || got.err != plain.err ||
				got.stats != plain.stats || got.dirty != plain.dirty || !tablesEqual(got.table, plain.table) {
				t.Errorf("batch path differs from the plain one:\n got %+v\nwant %+v", got, plain)
			}
			if tc.failKind == nil && tc.before == nil {
				// Every op reached the client exactly once: the ones that
				// failed in the batch only through the fallback.
				if n := f.writes(); n != 6 {
					t.Errorf("%d write calls, want 6: %v", n, f.calls)
				}
				if !tablesEqual(got.table, desiredTable()) {
					t.Errorf("table %v, want %v", got.table, desiredTable())
				}
			}
		})
	}
}

func TestApplyEachErrors(t *testing.T) {
	m := NewMemClient()
	ops := []Op{
		{Kind: CreateService, Service: Service{Key: kU, Scheduler: "wrr"}},
		{Kind: CreateService, Service: Service{Key: kU, Scheduler: "wrr"}},
		{Kind: CreateDest, Service: Service{Key: kT}, Dest: dest("10.0.0.1:53", 1, NAT)},
		{Kind: CreateDest, Service: Service{Key: kU}, Dest: dest("10.0.0.1:53", 1, NAT)},
		{Kind: OpKind(42), Service: Service{Key: kU}},
	}
	errs := m.ApplyBatch(ops)
	want := []error{nil, os.ErrExist, os.ErrNotExist, nil, nil}
	for i, err := range errs {
		switch {
		case i == 4:
			if err == nil {
				t.Errorf("op %d: unknown kind succeeded", i)
			}
		case want[i] == nil && err != nil, want[i] != nil && !errors.Is(err, want[i]):
			t.Errorf("op %d: error %v, want %v", i, err, want[i])
		}
	}
}
