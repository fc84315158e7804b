// Package flood finds who and what is behind a burst of DNS queries:
// heavy hitters with a known error bound over short windows, and the
// alarms raised from them.
//
// Queries come in as Query values (or, from the GSLB responder's
// readers, as raw query and reply bytes through a Producer, which costs
// a lock and a copy of the name). A Tracker counts them, per 1 s epoch,
// in one Space-Saving summary per key kind (client address, client
// prefix, query name, suffix, name and type). Views over the last 10 s
// and 60 s merge the epochs' summaries; each entry of a view carries its
// estimate and its error, with estimate - error <= true count <=
// estimate, and the error of an entry is at most N/m, N the queries of
// the view and m the counters of a summary (see Summary and Merge).
//
// Memory is bounded whatever the rate: a summary keeps at most m
// counters, a kind keeps 10 epoch summaries and 6 of 10 epochs each
// (Tracker), and a Producer keeps at most three batches of fixed size.
//
// The package is pure: the clock is passed in (Tracker, Alarms), and
// the only goroutine is the one a caller runs Pipeline.Run in.
package flood
