package report

import (
	"context"
	"errors"

	"lbdns/configs"
	"lbdns/control"
)

// ReloadRejected turns the error of a reload of the configuration file at
// path into the control API's: an invalid configuration is an
// InvalidConfig refusal that lists every problem (configs.Problems), a
// cancelled or timed-out request is returned as it is, and any other
// error is an InvalidConfig refusal with its text. A nil
// err gives nil.
func ReloadRejected(path string, err error) error {
	if err == nil {
		return nil
	}
	if ps := configs.Problems(err); len(ps) > 0 {
		e := control.Errorf(control.InvalidConfig, "reload rejected, running config unchanged: %d problems in %s", len(ps), path)
		for _, p := range ps {
			e.Problems = append(e.Problems, control.Problem{File: p.File, Line: p.Line, Key: p.Key, Value: p.Value, Message: p.Msg, Text: p.Error()})
		}
		return e
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return control.Errorf(control.InvalidConfig, "reload rejected, running config unchanged: %s", err)
}
