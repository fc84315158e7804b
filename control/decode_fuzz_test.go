package control

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
)

// FuzzDecodeOverride feeds operator-made bodies to the override decoder:
// it never panics, refuses with a 400 *Error, and what it accepts
// survives a round trip unchanged.
func FuzzDecodeOverride(f *testing.F) {
	for _, s := range []string{
		`{"action":"drain","resolver":"bind-1"}`,
		`{"action":"disable","resolver":"bind-1","vip":"dns-v4","reason":"disk"}`,
		`{"action":"enable","resolver":"bind-1","pool":"main"}`,
		`{"acton":"drain"}`, `[]`, `null`, `{"action":5}`, `{} {}`, `{"action":"drain",}`, "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req OverrideRequest
		err := decodeStrict(body, &req, false)
		if err == nil {
			err = validateOverride(req)
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code != http.StatusBadRequest || e.Message == "" {
				t.Fatalf("refusal %#v is not a 400 *Error with a message", err)
			}
			return
		}
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		var again OverrideRequest
		if err := decodeStrict(b, &again, false); err != nil || again != req {
			t.Fatalf("accepted %q, but its re-encoding %s decodes to %+v, %v", body, b, again, err)
		}
	})
}
