package control

import (
	"context"
	"net/http"
)

// handleFleet answers GET /v1/fleet.
func (s *Server) handleFleet(w http.ResponseWriter, r *http.Request) {
	fb, ok := route[FleetBackend](s.parts, s.backend)
	if !ok {
		writeJSON(w, http.StatusOK, &FleetStatus{Nodes: []FleetNode{}})
		return
	}
	st, err := fb.Fleet(r.Context())
	if err != nil {
		writeError(w, s.backendError(r, err))
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// Fleet returns the fleet view of the daemon's node.
func (c *Client) Fleet(ctx context.Context) (*FleetStatus, error) {
	var st FleetStatus
	return &st, c.do(ctx, http.MethodGet, "/fleet", nil, &st)
}
