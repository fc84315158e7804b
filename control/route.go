package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
)

// routes is the exact-path table of a server: path → method → handler.
// Unlike http.ServeMux it answers an unknown path with 404 and a wrong
// method with 405 and an Allow header, both with a JSON ErrorReply.
type routes struct {
	paths map[string]map[string]http.HandlerFunc
	// notAllowed, when set, is the message of a 405 reply instead of the
	// default one.
	notAllowed func(r *http.Request) string
}

// handle registers h for method on path.
func (rt *routes) handle(method, path string, h http.HandlerFunc) {
	if rt.paths == nil {
		rt.paths = map[string]map[string]http.HandlerFunc{}
	}
	if rt.paths[path] == nil {
		rt.paths[path] = map[string]http.HandlerFunc{}
	}
	rt.paths[path][method] = h
}

// ServeHTTP dispatches r to the handler of its path and method.
func (rt *routes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	methods, ok := rt.paths[r.URL.Path]
	if !ok {
		writeError(w, Errorf(NotFound, "no such endpoint: %s", r.URL.Path))
		return
	}
	h, ok := methods[r.Method]
	if !ok {
		allow := make([]string, 0, len(methods))
		for m := range methods {
			allow = append(allow, m)
		}
		slices.Sort(allow)
		w.Header().Set("Allow", strings.Join(allow, ", "))
		msg := fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", "))
		if rt.notAllowed != nil {
			msg = rt.notAllowed(r)
		}
		writeError(w, Errorf(NotAllowed, "%s", msg))
		return
	}
	h(w, r)
}

// writeJSON writes v as indented JSON with status code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(ErrorReply{Error: fmt.Sprintf("encode reply: %v", err)})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// writeError writes err as an ErrorReply with the status httpStatus gives;
// an *Error's Problems pass through.
func writeError(w http.ResponseWriter, err error) {
	rep := ErrorReply{Error: err.Error()}
	var e *Error
	if errors.As(err, &e) {
		rep.Problems, rep.Unavailable = e.Problems, e.Unavailable
	}
	writeJSON(w, httpStatus(err), rep)
}

// logBackendError logs an error a Backend returned that the client sees
// as a 500: it is the daemon's fault, not the requester's.
func logBackendError(log *slog.Logger, r *http.Request, err error) {
	if httpStatus(err) >= 500 {
		log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
}
