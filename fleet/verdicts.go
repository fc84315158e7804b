package fleet

import (
	"slices"
	"strings"
	"time"
)

// MemberView is one member as the fleet judges it: who probes it, the
// votes that counted and the decision they made.
type MemberView struct {
	// Probers are the member's assigned probers (Probers over the live
	// probers), in the order of choice.
	Probers []Prober
	// Votes are the votes that counted: those of live probers, by
	// prober name. Votes of probers that are not live (behind on
	// intent, withdrawn, gone) are left out.
	Votes []Vote
	// Decision is the fleet's verdict.
	Decision Decision
}

// Quorum is how many fresh votes a member with n assigned probers needs
// for a verdict: a majority of them (1 of 1, 2 of 2 or 3, 3 of 4 or 5).
func Quorum(n int) int { return max(n/2+1, 1) }

// Judge returns the fleet's view of every member at now: its k probers
// among live (Probers), the votes of live probers on it (votes, by
// member), and the decision Count makes of them under r, needing a Quorum
// of its assigned probers' number (r.MinVotes is set here), with prev (by
// member; missing: none before) as the last decision. Votes never go
// stale by age: a vote kept under its prober's lease is fresh while it
// exists (r.MaxAge is not used).
func Judge(members []string, live []Prober, k int, votes map[string][]Vote, prev map[string]Decision, r Rules, now time.Time) map[string]MemberView {
	names := make(map[string]bool, len(live))
	for _, p := range live {
		names[p.Name] = true
	}
	out := make(map[string]MemberView, len(members))
	for _, m := range members {
		v := MemberView{Probers: Probers(m, live, k)}
		for _, x := range votes[m] {
			if names[x.Prober] {
				v.Votes = append(v.Votes, x)
			}
		}
		slices.SortFunc(v.Votes, func(a, b Vote) int { return strings.Compare(a.Prober, b.Prober) })
		mr := Rules{MinVotes: Quorum(len(v.Probers)), Hold: r.Hold, UpPercent: r.UpPercent}
		v.Decision = Count(v.Votes, prev[m], mr, now)
		out[m] = v
	}
	return out
}

// Assigned returns the members among members whose probers (Probers over
// live, k of them) include self: what the node self probes for the
// fleet.
func Assigned(members []string, live []Prober, k int, self string) []string {
	var out []string
	for _, m := range members {
		if slices.ContainsFunc(Probers(m, live, k), func(p Prober) bool { return p.Name == self }) {
			out = append(out, m)
		}
	}
	return out
}

// DownConfirmed reports whether a prober may publish a down vote on a
// member that went down at since: most of its canaries answered after
// since (canaryOK holds each canary's last success, the zero time for
// none), so that the failure is likelier the member's than the prober's
// own network's. A prober whose network fails sees its members fail
// before most of its canaries do (CutOff): it must not vote them down
// meanwhile. Without canaries it may.
func DownConfirmed(canaryOK []time.Time, since time.Time) bool {
	ok := 0
	for _, t := range canaryOK {
		if t.After(since) {
			ok++
		}
	}
	return !CutOff(ok, len(canaryOK))
}

// Probing returns the members among members that self probes: those
// assigned to it (Assigned), and those it probed before (probed reports
// it) that are not assigned to it any more while their assigned probers
// have not all voted yet. A member that moves to other probers is
// handed over: the node it leaves keeps probing (and voting on) it
// until the new probers' votes are in, so that the fleet's verdict does
// not lapse meanwhile.
func Probing(members []string, live []Prober, k int, self string, votes map[string][]Vote, probed func(member string) bool) []string {
	var out []string
	for _, m := range members {
		ps := Probers(m, live, k)
		if slices.ContainsFunc(ps, func(p Prober) bool { return p.Name == self }) {
			out = append(out, m)
			continue
		}
		if !probed(m) {
			continue
		}
		for _, p := range ps {
			if !slices.ContainsFunc(votes[m], func(v Vote) bool { return v.Prober == p.Name }) {
				out = append(out, m) // a new prober has not voted yet
				break
			}
		}
	}
	return out
}
