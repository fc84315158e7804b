package etcdfleet

import (
	"context"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"lbdns/fleet"
)

// WatchOptions configure WatchNodes.
type WatchOptions struct {
	// Resync is how often the view is read even when no change was
	// watched (a bound on a watch that went silent). Default 5s.
	Resync time.Duration
	// Retry is the pause after a read or a watch that failed. Default 1s.
	Retry time.Duration
	// Logger receives the read failures. Default: discard.
	Logger *slog.Logger
	// Now is the clock of the nodes' ages. Default time.Now.
	Now func() time.Time
}

// WatchNodes delivers the fleet view under prefix (Nodes, one etcd
// revision) at once, then after every change of a heartbeat or of the
// intent (a node joining, leaving, saying something new, or the intent
// in force moving), and every Resync. Each delivery is a whole reread,
// so a compaction or a lost watch loses nothing. While etcd cannot be
// read nothing is delivered: the reader keeps the last view (a stale
// view is no reason to change anything). The channel is closed when ctx
// is done.
func WatchNodes(ctx context.Context, cli *clientv3.Client, prefix string, opts WatchOptions) <-chan []fleet.Node {
	if opts.Resync <= 0 {
		opts.Resync = 5 * time.Second
	}
	if opts.Retry <= 0 {
		opts.Retry = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	out := make(chan []fleet.Node)
	go func() {
		defer close(out)
		watchNodes(ctx, cli, prefix, opts, out)
	}()
	return out
}

func watchNodes(ctx context.Context, cli *clientv3.Client, prefix string, opts WatchOptions, out chan<- []fleet.Node) {
	resync := time.NewTicker(opts.Resync)
	defer resync.Stop()
	for ctx.Err() == nil {
		// The watches first, then the read: a change between the two is
		// in both, never in neither.
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		nodesW := cli.Watch(wctx, prefix+"nodes/", clientv3.WithPrefix())
		intentW := cli.Watch(wctx, prefix+"intent/", clientv3.WithPrefix())
		ok := follow(ctx, cli, prefix, opts, out, resync.C, nodesW, intentW)
		cancel()
		if !ok {
			select {
			case <-ctx.Done():
			case <-time.After(opts.Retry):
			}
		}
	}
}

// follow reads and delivers the view, then again after every watched
// change and every resync, until a watch fails or a read does (false)
// or ctx is done.
func follow(ctx context.Context, cli *clientv3.Client, prefix string, opts WatchOptions, out chan<- []fleet.Node, resync <-chan time.Time, nodesW, intentW clientv3.WatchChan) bool {
	for {
		rctx, cancel := context.WithTimeout(ctx, max(opts.Resync, time.Second))
		nodes, err := Nodes(rctx, cli, prefix, opts.Now())
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				opts.Logger.Warn("cannot read the fleet view; keeping the last one", "err", err)
			}
			return false
		}
		select {
		case out <- nodes:
		case <-ctx.Done():
			return true
		}
		select {
		case <-ctx.Done():
			return true
		case <-resync:
		case r, open := <-nodesW:
			if !open || r.Err() != nil {
				return false
			}
		case r, open := <-intentW:
			if !open || r.Err() != nil {
				return false
			}
		}
	}
}
