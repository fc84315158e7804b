package daemon

import (
	"lbdns/configs"
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
	facts := v.d.facts(now)
	b := v.d.planner.WhatIf(facts, resolvers.RulesFrom(before.Overrides), now).Table
	a := v.d.planner.WhatIf(facts, resolvers.RulesFrom(after.Overrides), now).Table
	return resolvers.LostTakers(v.d.cfg, b, a), resolvers.NewTakers(v.d.cfg, b, a)
}
