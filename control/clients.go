package control

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Client actions (lbctl block, limit, unblock). The strings are
// intent.ActionBlock's and its siblings'.
const (
	// ClientBlock drops every packet from the client before IPVS.
	ClientBlock = "block"
	// ClientLimit drops a source address's packets above a rate.
	ClientLimit = "limit"
	// ClientUnblock removes a client's block or limit.
	ClientUnblock = "unblock"
)

// ClientRequest is the body of POST /v1/clients.
type ClientRequest struct {
	// Action is ClientBlock, ClientLimit or ClientUnblock.
	Action string `json:"action"`
	// Client is an address or a prefix ("192.0.2.7", "192.0.2.0/24").
	Client string `json:"client"`
	// Rate is a limit's packets per second per source address (0: the
	// configured default_limit_qps).
	Rate int `json:"rate,omitempty"`
	// ForSeconds is how long a block or limit lasts.
	ForSeconds int64 `json:"for_seconds,omitempty"`
	// Force allows a block in a prefix of actions.shared.
	Force bool `json:"force,omitempty"`
	// Reason is the operator's text (required for block and limit).
	Reason string `json:"reason,omitempty"`
}

// ClientReply answers a ClientRequest.
type ClientReply struct {
	// Message says what changed, or why nothing did.
	Message string `json:"message"`
	// Changed is false when the request left the intent as it was.
	Changed bool `json:"changed"`
	// Clients are the client actions after the request.
	Clients *ClientsStatus `json:"clients"`
}

// ClientsStatus is the client actions in /status.
type ClientsStatus struct {
	// Table is the nftables table (family inet) that enforces them.
	Table string `json:"table"`
	// Enforced is set while the kernel's table holds the actions in
	// force; Error says why not.
	Enforced bool   `json:"enforced"`
	Error    string `json:"error,omitempty"`
	// Automatic says whether automatic actions may be taken
	// (actions.enabled).
	Automatic bool `json:"automatic"`
	// MaxEntries is actions.max_entries.
	MaxEntries int `json:"max_entries"`
	// Entries are the actions in force, in the order they were set,
	// then those ended (lbctl unblock) whose kernel elements could not
	// be removed (Unremoved), until each one's Until.
	Entries []ClientEntry `json:"entries"`
}

// ClientEntry is one client action in force.
type ClientEntry struct {
	// Client is the address or prefix; Action block or limit; Rate a
	// limit's packets per second per source address.
	Client string `json:"client"`
	Action string `json:"action"`
	Rate   int    `json:"rate,omitempty"`
	// Until is when the action ends on its own; SecondsLeft how long
	// from now.
	Until       time.Time `json:"until"`
	SecondsLeft float64   `json:"seconds_left"`
	// Reason, Set and By are the operator's.
	Reason string    `json:"reason"`
	Set    time.Time `json:"set"`
	By     string    `json:"by,omitempty"`
	// Enforced is set while the kernel drops or limits its packets.
	Enforced bool `json:"enforced"`
	// Unremoved is set for an action no longer in force whose kernel
	// element could not be removed (the table cannot be written): the
	// kernel may still drop or limit the client's packets until Until,
	// when the element times out.
	Unremoved bool `json:"unremoved,omitempty"`
}

// ClientsBackend answers client requests; a Backend that implements it
// gets POST /v1/clients (others answer 404).
type ClientsBackend interface {
	// SetClient applies a client request. by names the requester.
	SetClient(ctx context.Context, req ClientRequest, by string) (*ClientReply, error)
}

// MaxClientLen bounds a request's client text.
const MaxClientLen = 64

// maxForSeconds bounds for_seconds well below a time.Duration's range
// (the daemon refuses more than its own maximum, a week).
const maxForSeconds = 1 << 30

// clientRoutes adds the clients endpoint to rt when s's backend answers
// it.
func (s *Server) clientRoutes(rt *routes) {
	cb, ok := route[ClientsBackend](s.parts, s.backend)
	if !ok {
		return
	}
	rt.handle(http.MethodPost, APIPrefix+"/clients", s.bounded(func(w http.ResponseWriter, r *http.Request) {
		serveChange(s, w, r, validateClient, cb.SetClient,
			func(rep *ClientReply) string { return rep.Message },
			"client request", func(req ClientRequest) []any {
				return []any{"action", req.Action, "client", req.Client, "rate", req.Rate, "for_seconds", req.ForSeconds, "force", req.Force, "reason", req.Reason}
			})
	}))
}

// validateClient checks the shape of a ClientRequest; the daemon checks
// the client against its configuration.
func validateClient(req ClientRequest) error {
	var probs []string
	switch req.Action {
	case ClientBlock, ClientLimit, ClientUnblock:
	case "":
		probs = append(probs, "action: missing (want block, limit or unblock)")
	default:
		probs = append(probs, fmt.Sprintf("action: want block, limit or unblock, not %q", req.Action))
	}
	switch {
	case req.Client == "":
		probs = append(probs, "client: missing (an address or a prefix)")
	case len(req.Client) > MaxClientLen:
		probs = append(probs, fmt.Sprintf("client: %d bytes, at most %d", len(req.Client), MaxClientLen))
	}
	if req.Action == ClientUnblock && (req.Rate != 0 || req.ForSeconds != 0 || req.Force || req.Reason != "") {
		probs = append(probs, "rate, for_seconds, force and reason: not with unblock")
	}
	if req.ForSeconds < 0 || req.ForSeconds > maxForSeconds {
		probs = append(probs, fmt.Sprintf("for_seconds: want 0 to %d, not %d", maxForSeconds, req.ForSeconds))
	}
	return badRequest(append(probs, reasonProblems(req.Reason)...))
}

// SetClient asks the daemon to block, limit or unblock a client.
func (c *Client) SetClient(ctx context.Context, req ClientRequest) (*ClientReply, error) {
	var rep ClientReply
	return &rep, c.do(ctx, http.MethodPost, "/clients", req, &rep)
}

// clientsView is the client actions on the status page.
type clientsView struct {
	Table, Error string
	Enforced     bool
	Entries      []clientView
}

// clientView is one client action on the page.
type clientView struct {
	Client, Action, Reason, By string
	Rate                       int
	Until, Set                 timeCell
	Enforced, Unremoved        bool
}

// buildClients is c's view at now (nil for nil).
func buildClients(c *ClientsStatus, now time.Time) *clientsView {
	if c == nil {
		return nil
	}
	v := &clientsView{Table: c.Table, Error: c.Error, Enforced: c.Enforced}
	for _, e := range c.Entries {
		v.Entries = append(v.Entries, clientView{Client: e.Client, Action: e.Action, Reason: e.Reason, By: e.By, Rate: e.Rate,
			Until: cell(e.Until, now), Set: cell(e.Set, now), Enforced: e.Enforced, Unremoved: e.Unremoved})
	}
	return v
}
