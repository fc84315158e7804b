package responder

import (
	"context"
	"time"

	"lbdns/control"
	"lbdns/intent"
	"lbdns/report"
)

// RequestJournal is where the GSLB requests that changed the intent are
// told.
type RequestJournal interface {
	GSLB(req control.GSLBRequest, by string, res intent.Result)
}

// answersWait bounds how long a GSLB request waits for the responder to
// answer under the intent it changed.
const answersWait = 5 * time.Second

// SetGSLB applies a GSLB emergency request (lbctl gslb off, on, ttl):
// decided on the intent in force, persisted before it takes effect
// (through ResponderOptions.Changer), and answered once every listener
// answers under it (a responder that takes longer than answersWait is
// logged, and the reply goes out).
func (r *Responder) SetGSLB(ctx context.Context, req control.GSLBRequest, by string) (*control.GSLBReply, error) {
	if r.o.Changer == nil {
		return nil, control.Errorf(control.Unavailable, "this responder takes no GSLB requests")
	}
	out, err := r.o.Changer.Change(ctx, intent.Change{What: "gslb request",
		Apply: func(st intent.State) (intent.State, intent.Result, error) {
			return intent.ApplyGSLB(st, intent.GSLBRequest{Action: req.Action, Name: req.Name, Zone: req.Zone, Seconds: req.Seconds,
				Clear: req.Clear, Reason: req.Reason, By: by, At: r.o.Now()}, r.o.Config())
		},
		Applied: func(c intent.Changed) {
			if r.o.Journal != nil {
				r.o.Journal.GSLB(req, by, c.Result)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	if out.Result.Changed && r.o.Hub != nil {
		wctx, cancel := context.WithTimeout(ctx, answersWait)
		defer cancel()
		if err := r.WaitIntent(wctx, r.o.Hub.Intent.Version()); err != nil {
			r.log.Warn("the GSLB responder has not answered under the new intent yet; replying without waiting longer", "waited", answersWait, "err", err)
		}
	}
	return &control.GSLBReply{Message: out.Result.Message, Changed: out.Result.Changed, Intent: report.GSLBIntent(r.o.Config(), out.State)}, nil
}
