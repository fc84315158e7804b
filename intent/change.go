package intent

import "context"

// Change is one change of the operator intent in force, as a Changer
// runs it: Apply decides on the intent in force, the store persists
// what it returns, and only then is it in force and published.
type Change struct {
	// What names the change in errors ("override", "client request").
	What string
	// Apply returns the next intent and what the change did, from the
	// intent in force; an error refuses the change (nothing is saved).
	// It runs where the Changer serializes its changes: it may read
	// what the Changer's owner keeps there, and must not block.
	Apply func(State) (State, Result, error)
	// Applied, when set, is told once the change is saved and in force
	// (not when Apply changed nothing), before the Changer's own
	// effects of a new intent (a reconcile, say): where a change is
	// journaled, so that it comes before what it caused.
	Applied func(Changed)
}

// Changed is what a change left: the intent in force after it, its
// store revision, and what Apply said.
type Changed struct {
	State    State
	Revision Revision
	Result   Result
}

// Changer runs changes of the operator intent in force, one at a time:
// apply, save, publish. A change whose context is done before it runs
// changes nothing; a store that another writer changed meanwhile makes
// its intent the one in force, and the change fails (a
// *ConflictError in the error's chain) so that a retry is decided on it.
type Changer interface {
	Change(ctx context.Context, c Change) (Changed, error)
}
