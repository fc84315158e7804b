package etcdfleet

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Failing over to another member. An etcd member cut off from its peers
// while the quorum holds still answers its clients: a linearizable
// request waits for a leader it cannot reach (until it notices, about an
// election timeout later), then fails. Every request of this package
// therefore requires a leader (clientv3.WithRequireLeader: a member
// without one answers ErrNoLeader at once instead of hanging or serving
// stale), and each is retried, within the caller's bound, after an
// unreachable, no-leader or timeout failure. The client spreads
// requests over the endpoints round robin (its balancer picks the next
// ready member for every call, and for every new stream), so a retry
// lands on another member; an attempt gets only a share of what remains
// of the bound, so that one member that hangs leaves time for the
// others.

const (
	// attemptShare is the share of the remaining bound one attempt may
	// take (1/attemptShare), at least minAttempt.
	attemptShare = 3
	minAttempt   = 300 * time.Millisecond
	// noDeadlineAttempt bounds an attempt whose caller set no deadline.
	noDeadlineAttempt = 2 * time.Second
	// retryPause is the pause after the first failed attempt, growing
	// by as much after each up to maxRetryPause.
	retryPause    = 25 * time.Millisecond
	maxRetryPause = 200 * time.Millisecond
)

// leaderCtx returns ctx requiring a leader, bounded as one attempt
// within ctx's deadline.
func leaderCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	d := noDeadlineAttempt
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		d = min(max(left/attemptShare, minAttempt), left)
	}
	return context.WithTimeout(clientv3.WithRequireLeader(ctx), d)
}

// retrying calls op (attempt counts from 0) with leaderCtx(ctx) until
// it succeeds, fails for a reason other than reachability
// (IsUnreachable), or ctx is done; it returns op's last error.
func retrying(ctx context.Context, op func(ctx context.Context, attempt int) error) error {
	for attempt := 0; ; attempt++ {
		actx, cancel := leaderCtx(ctx)
		err := op(actx, attempt)
		cancel()
		if err == nil || !IsUnreachable(err) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(min(retryPause*time.Duration(attempt+1), maxRetryPause))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// retried is retrying for an op that returns a value.
func retried[T any](ctx context.Context, op func(ctx context.Context) (T, error)) (T, error) {
	var out T
	err := retrying(ctx, func(ctx context.Context, _ int) error {
		v, err := op(ctx)
		if err == nil {
			out = v
		}
		return err
	})
	return out, err
}

// attemptsError wraps err, from the last of several attempts.
func attemptsError(err error, attempts int) error {
	if attempts <= 1 {
		return err
	}
	return fmt.Errorf("%d attempts, the last: %w", attempts, err)
}

// put writes key under lease (none: 0), retrying: the same put again
// leaves the same value.
func put(ctx context.Context, cli *clientv3.Client, key, value string, lease clientv3.LeaseID) error {
	return retrying(ctx, func(ctx context.Context, _ int) error {
		_, err := cli.Put(ctx, key, value, clientv3.WithLease(lease))
		return err
	})
}

// del deletes key, retrying: a delete again deletes nothing more.
func del(ctx context.Context, cli *clientv3.Client, key string) error {
	return retrying(ctx, func(ctx context.Context, _ int) error {
		_, err := cli.Delete(ctx, key)
		return err
	})
}
