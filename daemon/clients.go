package daemon

import (
	"context"
	"errors"
	"time"

	"lbdns/clientfw"
	"lbdns/configs"
	"lbdns/control"
	"lbdns/intent"
	"lbdns/internal/atomicfile"
)

// clientsPart enforces the client actions of the intent (lbctl block,
// limit) in lbdnsd's nftables table.
type clientsPart struct {
	enf *clientfw.Enforcer
	// failing is set while enforcement fails (loop only), so that the
	// journal tells a failure and a recovery once each.
	failing bool
	// retryAt is when expireClients may try the store again after it
	// failed (loop only): an unreachable store must not hold the loop
	// up on every tick.
	retryAt time.Time
}

// expireRetry is the pause after the store failed to take the removal
// of ended client actions.
const expireRetry = 30 * time.Second

// newClients builds the enforcer of cfg's table and registers its
// metrics.
func newClients(d *Daemon, cfg *configs.Config) *clientsPart {
	c := &clientsPart{enf: clientfw.New(clientfw.Options{Table: cfg.Actions.NftTable, NetNS: d.opts.ClientsNetNS, Now: d.now})}
	d.registry.MustRegister(clientfw.NewMetrics(c.enf, func() (block, limit int) {
		for _, a := range d.intentNow().ClientsAt(d.now()) {
			if a.Action == intent.ActionBlock {
				block++
			} else {
				limit++
			}
		}
		return block, limit
	}))
	return c
}

// SetClient applies a client request (lbctl block, limit, unblock):
// persisted before it takes effect, like every operator intent.
func (d *Daemon) SetClient(ctx context.Context, req control.ClientRequest, by string) (*control.ClientReply, error) {
	out, err := d.Change(ctx, d.clientChange(req, by))
	if err != nil {
		return nil, err
	}
	return &control.ClientReply{Message: out.Result.Message, Changed: out.Result.Changed, Clients: d.clientsStatus(d.Config(), out.State)}, nil
}

// clientChange is the change of a client request: journaled, then
// enforced in the kernel's table before the reply.
func (d *Daemon) clientChange(req control.ClientRequest, by string) intent.Change {
	return intent.Change{What: "client request",
		Apply: func(st intent.State) (intent.State, intent.Result, error) {
			return intent.ApplyClient(st, intent.ClientRequest{Action: req.Action, Client: req.Client, Rate: req.Rate,
				For: time.Duration(req.ForSeconds) * time.Second, Force: req.Force, Reason: req.Reason, By: by, At: d.now()}, intent.ClientPolicyOf(d.cfg))
		},
		Applied: func(c intent.Changed) {
			d.journal.Client(req, by, c.Result)
			d.enforceClients()
		},
	}
}

// SetClient is the daemon's (control.ClientsBackend).
func (b backend) SetClient(ctx context.Context, req control.ClientRequest, by string) (*control.ClientReply, error) {
	return b.d.SetClient(ctx, req, by)
}

var _ control.ClientsBackend = backend{}

// enforceClients brings the kernel's table to the client actions in
// force (loop only): at start, on every intent change, at every resync.
// A failure keeps the intent as it is: the actions are shown as not
// enforced.
func (d *Daemon) enforceClients() {
	_, err := d.clients.enf.Apply(d.intent.ClientsAt(d.now()))
	if (err != nil) != d.clients.failing {
		d.clients.failing = err != nil
		d.journal.ClientsEnforce(d.cfg.Actions.NftTable, err)
	}
}

// expireClients removes from the intent the client actions that ended
// (loop only, on every tick and at start): the kernel dropped their
// elements on its own; the store is told so that status and the fleet
// agree. A store that changed meanwhile is adopted and tried again at
// the next tick; one that fails, after expireRetry (the actions are out
// of force either way).
func (d *Daemon) expireClients(ctx context.Context) {
	now := d.now()
	next, gone := d.intent.Expire(now)
	if len(gone) == 0 || now.Before(d.clients.retryAt) {
		return
	}
	rev, err := d.store.Save(ctx, next, d.rev)
	var ds *atomicfile.DirSyncError
	var ce *intent.ConflictError
	switch {
	case errors.As(err, &ce):
		d.adoptIntent(ctx, intent.Stored{State: ce.Current, Revision: ce.Actual})
		return
	case err != nil && !errors.As(err, &ds):
		d.log.Warn("cannot remove the ended client actions from the stored intent; retrying later", "retry_in", expireRetry, "err", err)
		d.clients.retryAt = now.Add(expireRetry)
		return
	}
	d.setOverrides(next, rev)
	d.journal.ClientsExpired(gone)
	d.enforceClients()
}

// clientsStatus is the client actions of st as the control API shows
// them under cfg.
func (d *Daemon) clientsStatus(cfg *configs.Config, st intent.State) *control.ClientsStatus {
	es := d.clients.enf.Status()
	now := d.now()
	out := &control.ClientsStatus{Table: cfg.Actions.NftTable, Enforced: es.Enforced, Error: es.Error, Automatic: cfg.Actions.Enabled,
		MaxEntries: cfg.Actions.MaxEntries, Entries: []control.ClientEntry{}}
	for _, c := range st.ClientsAt(now) {
		out.Entries = append(out.Entries, control.ClientEntry{Client: intent.ClientText(c.Client), Action: c.Action, Rate: c.Rate,
			Until: c.Until, SecondsLeft: c.Until.Sub(now).Seconds(), Reason: c.Reason, Set: c.Set, By: c.By,
			Enforced: es.Enforced && !es.Applied.Before(c.Set)})
	}
	return out
}
