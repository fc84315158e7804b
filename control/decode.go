package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"unicode"
)

// MaxRequestBody is the largest request body the control server reads.
const MaxRequestBody = 64 << 10

// MaxReasonLen is the longest override reason accepted, in bytes.
const MaxReasonLen = 1024

// readStrict reads r's body (at most MaxRequestBody) and decodes it
// strictly into v: one JSON object, no unknown fields, no trailing data.
// An empty body is accepted when emptyOK and leaves v alone. Every
// failure is a Malformed *Error naming what is wrong.
func readStrict(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return Errorf(Malformed, "request body larger than %d bytes", MaxRequestBody)
		}
		return Errorf(Malformed, "read request body: %v", err)
	}
	return decodeStrict(body, v, emptyOK)
}

// decodeStrict is readStrict's decoder, over bytes.
func decodeStrict(body []byte, v any, emptyOK bool) error {
	if len(bytes.TrimSpace(body)) == 0 {
		if emptyOK {
			return nil
		}
		return Errorf(Malformed, "empty request body: want a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return Errorf(Malformed, "%s", describeJSONError(err))
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Errorf(Malformed, "trailing data after the JSON object (byte %d on)", end)
	}
	return nil
}

// describeJSONError turns a decoding error into a message that names the
// field or the byte offset and what was wrong there.
func describeJSONError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d: %s", syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ):
		if typ.Field == "" {
			return fmt.Sprintf("request body: want a JSON object, not %s", typ.Value)
		}
		return fmt.Sprintf("%s: want %s, not %s", typ.Field, jsonKind(typ.Type), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "invalid JSON: the body ends inside the object"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// jsonKind names the JSON value a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return t.String()
}

// validateOverride checks what decoding cannot: the action, the required
// resolver, the scope and the reason. Whether the names exist is the
// Backend's to say.
func validateOverride(req OverrideRequest) error {
	var probs []string
	switch req.Action {
	case ActionDrain, ActionDisable, ActionEnable:
	case "":
		probs = append(probs, "action: missing (want drain, disable or enable)")
	default:
		probs = append(probs, fmt.Sprintf("action: want drain, disable or enable, not %q", req.Action))
	}
	if strings.TrimSpace(req.Resolver) == "" {
		probs = append(probs, "resolver: missing")
	}
	if req.Pool != "" && req.VIP != "" {
		probs = append(probs, "pool and vip: give at most one")
	}
	return badRequest(append(probs, reasonProblems(req.Reason)...))
}

// Scope names what an override with pool and vip applies to: "pool P",
// "vip V" or "all pools". The daemon's messages, the logs, lbctl and the
// status page all use it.
func Scope(pool, vip string) string {
	switch {
	case pool != "":
		return "pool " + pool
	case vip != "":
		return "vip " + vip
	}
	return "all pools"
}

// validateGSLB checks what decoding cannot: the action, the scope, the
// seconds and the reason. Whether the names exist is the Backend's to
// say.
func validateGSLB(req GSLBRequest) error {
	var probs []string
	switch req.Action {
	case GSLBOff, GSLBOn, GSLBTTL:
	case "":
		probs = append(probs, "action: missing (want off, on or ttl)")
	default:
		probs = append(probs, fmt.Sprintf("action: want off, on or ttl, not %q", req.Action))
	}
	if req.Name != "" && req.Zone != "" {
		probs = append(probs, "name and zone: give at most one")
	}
	if req.Action != GSLBTTL && (req.Seconds != 0 || req.Clear) {
		probs = append(probs, "seconds and clear: only with ttl")
	}
	if req.Action == GSLBTTL && req.Clear && req.Seconds != 0 {
		probs = append(probs, "seconds and clear: give one")
	}
	return badRequest(append(probs, reasonProblems(req.Reason)...))
}

// GSLBScope describes a GSLB request's scope: "name N", "zone Z" or "all
// names" (intent.GSLBScope's wording: a test pins both).
func GSLBScope(name, zone string) string {
	switch {
	case name != "":
		return "name " + name
	case zone != "":
		return "zone " + zone
	}
	return "all names"
}

// reasonProblems checks an operator's reason text (every request kind
// takes one): bounded, no control characters.
func reasonProblems(reason string) []string {
	var probs []string
	if len(reason) > MaxReasonLen {
		probs = append(probs, fmt.Sprintf("reason: %d bytes, at most %d", len(reason), MaxReasonLen))
	}
	if strings.ContainsFunc(reason, unicode.IsControl) {
		probs = append(probs, "reason: no control characters (newlines, tabs) allowed")
	}
	return probs
}

// badRequest is a 400 listing probs, or nil when there are none.
func badRequest(probs []string) error {
	if len(probs) == 0 {
		return nil
	}
	return Errorf(Malformed, "%s", strings.Join(probs, "; "))
}
