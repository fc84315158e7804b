package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// Client talks to the daemon's control socket.
type Client struct {
	socket string
	hc     *http.Client
}

// NewClient returns a client of the control socket at path.
func NewClient(path string) *Client {
	c := &Client{socket: path}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(ctx, "unix", path)
			if err != nil {
				return nil, &UnreachableError{Socket: path, Err: err}
			}
			return conn, nil
		},
		DisableKeepAlives: true,
	}
	c.hc = &http.Client{Transport: tr}
	return c
}

// UnreachableError is returned when the control socket cannot be reached.
type UnreachableError struct {
	Socket string
	Err    error
}

// Error says which socket and why, with a hint for the common causes.
func (e *UnreachableError) Error() string {
	why := e.Err.Error()
	switch {
	case errors.Is(e.Err, fs.ErrNotExist):
		why = "no such socket (is lbdnsd running, and is this its daemon.control_socket?)"
	case errors.Is(e.Err, fs.ErrPermission):
		why = "permission denied (the socket is mode 0600: run lbctl as the daemon's user)"
	case errors.Is(e.Err, syscall.ECONNREFUSED):
		why = "connection refused (a stale socket: lbdnsd is not running)"
	}
	return fmt.Sprintf("cannot reach lbdnsd at %s: %s", e.Socket, why)
}

// Unwrap returns the dial error.
func (e *UnreachableError) Unwrap() error { return e.Err }

// NoReplyError is returned when a request was sent whole on the control
// socket but no reply came: the connection was cut, or the context ended,
// after the daemon could have read it. For a request that changes state
// (Change), whether it was applied is unknown: the daemon may have
// applied it before the connection went.
type NoReplyError struct {
	Method, Path string
	// Change is true for a request that changes state: an override, a
	// GSLB switch or TTL raise, a reload.
	Change bool
	// Err is what ended the exchange (io.EOF, a reset, the context's
	// error).
	Err error
}

// Error says what was sent and what ended the exchange.
func (e *NoReplyError) Error() string {
	return fmt.Sprintf("control: %s %s: no reply after the request was sent: %v", e.Method, e.Path, e.Err)
}

// Unwrap returns what ended the exchange.
func (e *NoReplyError) Unwrap() error { return e.Err }

// changes reports whether the request method path makes changes: every
// POST but explain, which only asks.
func changes(method, path string) bool {
	return method == http.MethodPost && path != "/gslb/explain"
}

// Status returns the daemon's status.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var st Status
	return &st, c.do(ctx, http.MethodGet, "/status", nil, &st)
}

// SetOverride asks the daemon to drain, disable or enable a resolver.
func (c *Client) SetOverride(ctx context.Context, req OverrideRequest) (*OverrideReply, error) {
	var rep OverrideReply
	return &rep, c.do(ctx, http.MethodPost, "/overrides", req, &rep)
}

// SetGSLB asks the daemon to switch GSLB names off or on, or to raise
// (or restore) their answers' TTL.
func (c *Client) SetGSLB(ctx context.Context, req GSLBRequest) (*GSLBReply, error) {
	var rep GSLBReply
	return &rep, c.do(ctx, http.MethodPost, "/gslb", req, &rep)
}

// Reload asks the daemon to load its configuration file again. A rejected
// configuration returns an *Error with every Problem.
func (c *Client) Reload(ctx context.Context) (*ReloadReply, error) {
	var rep ReloadReply
	return &rep, c.do(ctx, http.MethodPost, "/reload", struct{}{}, &rep)
}

// Explain asks the GSLB responder how it answers req, and why.
func (c *Client) Explain(ctx context.Context, req GSLBExplainRequest) (*GSLBExplainReply, error) {
	var rep GSLBExplainReply
	return &rep, c.do(ctx, http.MethodPost, "/gslb/explain", req, &rep)
}

// Events returns the events after sequence number after (0: all kept).
func (c *Client) Events(ctx context.Context, after uint64) (*EventsReply, error) {
	var rep EventsReply
	return &rep, c.do(ctx, http.MethodGet, "/events?after="+strconv.FormatUint(after, 10), nil, &rep)
}

// Follow calls fn for every event after sequence number after, as they
// happen, until ctx is done (it then returns nil), the daemon closes the
// stream, or fn returns an error.
func (c *Client) Follow(ctx context.Context, after uint64, fn func(Event) error) error {
	resp, err := c.send(ctx, http.MethodGet, "/events?follow=1&after="+strconv.FormatUint(after, 10), nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("control: bad event from daemon: %w", err)
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("control: event stream: %w", err)
	}
	return errors.New("control: the daemon closed the event stream")
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.send(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out); err != nil {
		return fmt.Errorf("control: bad reply to %s %s: %w", method, path, err)
	}
	return nil
}

// send makes a request and returns the response when its status is 2xx;
// otherwise it returns an *Error built from the ErrorReply.
func (c *Client) send(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("control: encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://lbdnsd"+APIPrefix+path, rd)
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if d, ok := ctx.Deadline(); ok {
		req.Header.Set(DeadlineHeader, d.UTC().Format(time.RFC3339Nano)) // taken after it, the request changes nothing
	}
	// Whether the request left whole: after that, a cut connection leaves
	// its outcome unknown.
	var wrote atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) { wrote.Store(i.Err == nil) },
	}))
	resp, err := c.hc.Do(req)
	if err != nil {
		var ue *UnreachableError
		if errors.As(err, &ue) {
			return nil, ue
		}
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		if wrote.Load() {
			return nil, &NoReplyError{Method: method, Path: path, Change: changes(method, path), Err: err}
		}
		return nil, fmt.Errorf("control: %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var er ErrorReply
	if json.Unmarshal(b, &er) != nil || er.Error == "" {
		er.Error = fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(b))
	}
	return nil, replyError(resp.StatusCode, er)
}
