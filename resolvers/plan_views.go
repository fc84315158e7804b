package resolvers

// HealthyResolvers returns the names of the resolvers that may be queried
// directly (by the prefetcher): up, with fresh facts, and not disabled by
// an operator, in at least one pool.
func (p Plan) HealthyResolvers() map[string]bool {
	out := map[string]bool{}
	for _, ps := range p.Pools {
		for i := range ps.Members {
			m := &ps.Members[i]
			if m.Healthy() && m.Override != Disable {
				out[m.Name] = true
			}
		}
	}
	return out
}
