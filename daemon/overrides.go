package daemon

import (
	"errors"
	"net/http"
	"time"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/intent"
	"lbdns/resolvers"
)

// StateFileError is returned by New when the persisted operator intent
// cannot be read or parsed (intent.StateFileError).
type StateFileError = intent.StateFileError

// intentView is the running daemon as intent.Apply sees it (loop only).
type intentView struct{ d *Daemon }

func (v intentView) Config() *configs.Config { return v.d.cfg }

// Impact compares the plans the current facts give under before and after.
func (v intentView) Impact(before, after intent.State) (lost, added []string) {
	now := v.d.now()
	facts, _ := v.d.facts(now)
	b, a := v.d.planWith(facts, now, before.Overrides).Table, v.d.planWith(facts, now, after.Overrides).Table
	return resolvers.LostTakers(v.d.cfg, b, a), resolvers.NewTakers(b, a)
}

// planWith computes the plan the current facts give under other overrides.
func (d *Daemon) planWith(facts map[string]resolvers.Fact, now time.Time, list []intent.Override) resolvers.Plan {
	return resolvers.Compute(resolvers.Input{Config: d.cfg, Facts: facts, Overrides: resolvers.RulesFrom(list), Now: now, Prev: d.plan.Pools})
}

// controlError maps intent's refusals to the control API's status codes.
func controlError(err error) error {
	var ie *intent.Error
	if !errors.As(err, &ie) {
		return err
	}
	code := http.StatusBadRequest
	switch ie.Kind {
	case intent.NotFound:
		code = http.StatusNotFound
	case intent.Conflict:
		code = http.StatusConflict
	}
	return control.Errorf(code, "%s", ie.Msg)
}
