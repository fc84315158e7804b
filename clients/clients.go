// Package clients is the client actions component (lbctl block, limit,
// unblock; [actions]): it turns client requests into changes of the
// operator intent, keeps lbdnsd's nftables table (package clientfw) as
// the intent in force says (at start, on every intent change, at every
// resync), removes the actions that ended from the intent, and says what
// is enforced in status and metrics.
package clients

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"lbdns/clientfw"
	"lbdns/configs"
	"lbdns/control"
	"lbdns/hub"
	"lbdns/intent"
)

// Journal is where the component says what happened.
type Journal interface {
	// Client: a client request changed the intent.
	Client(req control.ClientRequest, by string, res intent.Result)
	// ClientsEnforce: enforcement failed (err), or works again (nil).
	ClientsEnforce(table string, err error)
	// ClientsExpired: actions that ended were removed from the intent.
	ClientsExpired(gone []intent.ClientAction)
}

// Options configure a Part.
type Options struct {
	// Table is the nftables table (inet family) the actions are
	// enforced in ([actions] nft_table at start: a restart changes it).
	Table string
	// NetNS, when not 0, is an open network namespace whose ruleset is
	// written (tests); 0 is the daemon's own.
	NetNS int
	// Kernel, when set, is the netlink edge in place of the namespace's
	// (tests: one whose calls fail).
	Kernel clientfw.Kernel
	// Hub is where the intent in force and the configuration are read.
	Hub *hub.Hub
	// Changer runs the changes of the intent.
	Changer intent.Changer
	// Journal hears what happened.
	Journal Journal
	// Registerer receives the metrics. Nil: none.
	Registerer prometheus.Registerer
	// Logger receives the logs. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Part is the client actions component. Its methods may be called
// concurrently.
type Part struct {
	o   Options
	enf *clientfw.Enforcer

	mu sync.Mutex // serializes enforcement; guards failing and enforced
	// failing is set while enforcement fails, so that the journal tells
	// a failure and a recovery once each.
	failing bool
	// enforced is the version of Hub.Intent the last Enforce applied:
	// an intent change a request enforced already is not enforced again
	// when Run sees it.
	enforced uint64
	// retryAt is when expiry may try the intent again after it failed
	// (Run only): an unreachable store must not be asked every second.
	retryAt time.Time
}

// expireRetry is the pause after the intent failed to take the removal
// of ended client actions.
const expireRetry = 30 * time.Second

// FillEvery is how often the elements of the table's meters are
// counted for lbdns_client_set_elements: a count dumps every element
// over netlink (about half a second for a full meter of 65,535 sources),
// so it is not done per scrape. Only while a limit is in force.
const FillEvery = 30 * time.Second

// New returns the component, its metrics registered.
func New(o Options) (*Part, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	p := &Part{o: o, enf: clientfw.New(clientfw.Options{Table: o.Table, NetNS: o.NetNS, Kernel: o.Kernel, Now: o.Now})}
	if o.Registerer != nil {
		err := o.Registerer.Register(clientfw.NewMetrics(p.enf, func() clientfw.InForce {
			return inForce(p.intent().ClientsAt(o.Now()))
		}))
		if err != nil {
			return nil, err
		}
	}
	return p, nil
}

// inForce sums up the client actions in force for the metrics.
func inForce(actions []intent.ClientAction) clientfw.InForce {
	var in clientfw.InForce
	oldest := func(at *time.Time, set time.Time) {
		if !set.IsZero() && (at.IsZero() || set.Before(*at)) {
			*at = set
		}
	}
	for _, a := range actions {
		if a.Action == intent.ActionBlock {
			in.Block++
			oldest(&in.OldestBlock, a.Set)
		} else {
			in.Limit++
			oldest(&in.OldestLimit, a.Set)
		}
	}
	return in
}

// intent is the operator intent in force.
func (p *Part) intent() intent.State { in, _ := p.o.Hub.Intent.Load(); return in.State }

// config is the configuration in force.
func (p *Part) config() *configs.Config { c, _ := p.o.Hub.Config.Load(); return c }

// Run keeps the table as the intent says until ctx is done: at start
// (the actions that ended while lbdnsd was stopped removed first), on
// every new intent, every second for the actions that end, and at every
// [ipvs] resync_interval for a table changed by hand. The channel is
// closed when it has stopped.
func (p *Part) Run(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.expire(ctx)
		_, seen := p.o.Hub.Intent.Load()
		p.Enforce()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		last, counted := p.o.Now(), p.o.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-p.o.Hub.Intent.Changed(seen):
				_, seen = p.o.Hub.Intent.Load()
				p.enforceAfter(seen)
			case <-tick.C:
				p.expire(ctx)
				if cfg := p.config(); cfg != nil && p.o.Now().Sub(last) >= cfg.IPVS.ResyncInterval.Duration {
					last = p.o.Now()
					p.Enforce() // the resync: a table changed by hand is put back
				}
				if p.o.Now().Sub(counted) >= FillEvery {
					counted = p.o.Now()
					if err := p.enf.Measure(); err != nil {
						p.o.Logger.Debug("cannot count the client actions' set elements", "err", err)
					}
				}
			}
		}
	}()
	return done
}

// Enforce brings the kernel's table to the client actions of the intent
// in force. A failure keeps the intent as it is: the actions are shown
// as not enforced.
func (p *Part) Enforce() { p.enforceAfter(0) }

// enforceAfter is Enforce, unless the intent of version v or a later one
// was enforced already.
func (p *Part) enforceAfter(v uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	in, ver := p.o.Hub.Intent.Load()
	if v > 0 && p.enforced >= v {
		return
	}
	_, err := p.enf.Apply(in.State.ClientsAt(p.o.Now()))
	p.enforced = ver
	if (err != nil) != p.failing {
		p.failing = err != nil
		p.o.Journal.ClientsEnforce(p.o.Table, err)
	}
}

// expire removes from the intent the client actions that ended: the
// kernel dropped their elements on its own; the store is told so that
// status and the fleet agree. An intent that changed meanwhile is tried
// again at the next tick; one that fails, after expireRetry (the actions
// are out of force either way).
func (p *Part) expire(ctx context.Context) {
	now := p.o.Now()
	if _, gone := p.intent().Expire(now); len(gone) == 0 || now.Before(p.retryAt) {
		return
	}
	var gone []intent.ClientAction
	_, err := p.o.Changer.Change(ctx, intent.Change{What: "removal of the ended client actions",
		Apply: func(st intent.State) (intent.State, intent.Result, error) {
			var next intent.State
			next, gone = st.Expire(now)
			return next, intent.Result{Changed: len(gone) > 0}, nil
		},
		Applied: func(intent.Changed) { p.o.Journal.ClientsExpired(gone) },
	})
	var ce *intent.ConflictError
	switch {
	case err == nil:
		p.Enforce()
	case errors.As(err, &ce), ctx.Err() != nil:
	default:
		p.o.Logger.Warn("cannot remove the ended client actions from the stored intent; retrying later", "retry_in", expireRetry, "err", err)
		p.retryAt = now.Add(expireRetry)
	}
}

// SetClient applies a client request (lbctl block, limit, unblock):
// persisted before it takes effect, like every operator intent, and
// enforced before the reply (control.ClientsBackend).
func (p *Part) SetClient(ctx context.Context, req control.ClientRequest, by string) (*control.ClientReply, error) {
	out, err := p.o.Changer.Change(ctx, intent.Change{What: "client request",
		Apply: func(st intent.State) (intent.State, intent.Result, error) {
			return intent.ApplyClient(st, intent.ClientRequest{Action: req.Action, Client: req.Client, Rate: req.Rate,
				For: time.Duration(req.ForSeconds) * time.Second, Force: req.Force, Reason: req.Reason, By: by, At: p.o.Now()}, intent.ClientPolicyOf(p.config()))
		},
		Applied: func(c intent.Changed) { p.o.Journal.Client(req, by, c.Result) },
	})
	if err != nil {
		return nil, err
	}
	if out.Result.Changed {
		p.Enforce()
	}
	msg := out.Result.Message
	if req.Action == control.ClientUnblock && out.Result.Changed {
		msg = p.unremoved(req.Client, msg)
	}
	return &control.ClientReply{Message: msg, Changed: out.Result.Changed, Clients: p.Status(p.config(), out.State)}, nil
}

// unremoved is the reply to the unblock of client: msg, unless the
// kernel's element of the action could not be removed; then what the
// kernel still does, and until when.
func (p *Part) unremoved(client, msg string) string {
	c, err := configs.ParseClient(strings.TrimSpace(client))
	if err != nil {
		return msg
	}
	for _, a := range p.enf.Status().Unremoved {
		if a.Client != c {
			continue
		}
		does := "drop its packets"
		if a.Action == intent.ActionLimit {
			does = "limit it"
		}
		return fmt.Sprintf("%s is out of the intent, but its %s is NOT REMOVED from the kernel (the table cannot be written): the kernel may still %s until %s, when the element times out; lbctl clients lists it until then",
			intent.ClientText(c), a.Action, does, a.Until.UTC().Format(time.RFC3339))
	}
	return msg
}

// Status is the client actions of st as the control API shows them
// under cfg.
func (p *Part) Status(cfg *configs.Config, st intent.State) *control.ClientsStatus {
	es := p.enf.Status()
	now := p.o.Now()
	out := &control.ClientsStatus{Table: cfg.Actions.NftTable, Enforced: es.Enforced, Error: es.Error, Automatic: cfg.Actions.Enabled,
		MaxEntries: cfg.Actions.MaxEntries, Entries: []control.ClientEntry{}}
	for _, c := range st.ClientsAt(now) {
		out.Entries = append(out.Entries, control.ClientEntry{Client: intent.ClientText(c.Client), Action: c.Action, Rate: c.Rate,
			Until: c.Until, SecondsLeft: c.Until.Sub(now).Seconds(), Reason: c.Reason, Set: c.Set, By: c.By,
			Enforced: es.Enforced && !es.Applied.Before(c.Set)})
	}
	for _, c := range es.Unremoved {
		out.Entries = append(out.Entries, control.ClientEntry{Client: intent.ClientText(c.Client), Action: c.Action, Rate: c.Rate,
			Until: c.Until, SecondsLeft: c.Until.Sub(now).Seconds(), Reason: c.Reason, Set: c.Set, By: c.By, Unremoved: true})
	}
	return out
}
