package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"lbdns/control"
)

// usageError is a command line the command cannot run: a missing, extra or
// conflicting argument or flag.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// usageErrorf returns a *usageError with a formatted message.
func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// exitError ends the command with status code; whatever needed saying
// was already printed.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// fail prints err as the operator should see it and returns the exit
// status (exitStatuses): 2 for a usage error (the problem in one line,
// then the command's usage wrapped at helpWidth and where its help is), 3 when the daemon cannot be reached or does
// not answer in time, 4 when a change was sent but no reply came or the
// fleet's etcd did not confirm it (whether it was applied is unknown), 5 when the daemon refused a change because
// it cannot reach the fleet's etcd, 1 when it refused, the operator interrupted
// the request before it was sent, or anything else went wrong.
func (e *env) fail(c *command, fs *flag.FlagSet, err error) int {
	var (
		ue *usageError
		xe *exitError
		re *control.UnreachableError
		ce *control.Error
		nr *control.NoReplyError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "lbctl %s: %s\n", c.name, ue.msg)
		fmt.Fprintf(e.stderr, "%s\nRun 'lbctl help %s' for its flags and examples.\n", usageLine(c, "Usage: lbctl [global flags] "), c.name)
		return exitUsage
	case errors.As(err, &xe):
		return xe.code
	case errors.As(err, &nr) && nr.Change:
		why := fmt.Sprintf("the connection was cut before a reply (%v)", nr.Err)
		switch {
		case e.ctx.Err() != nil:
			why = "interrupted before a reply"
		case errors.Is(nr.Err, context.DeadlineExceeded):
			why = fmt.Sprintf("no reply within %s (see -timeout)", e.timeout)
		}
		fmt.Fprintf(e.stderr, "lbctl: the %s request was sent to lbdnsd at %s, but %s: whether it was applied is unknown\n", c.name, e.socket, why)
		fmt.Fprintf(e.stderr, "lbctl: check with lbctl status (overrides, GSLB switches, last reload) and lbctl events before trying again\n")
		return exitUnknown
	case e.ctx.Err() != nil:
		fmt.Fprintf(e.stderr, "lbctl: interrupted: %v\n", err)
		return exitRefused
	case errors.As(err, &re):
		fmt.Fprintf(e.stderr, "lbctl: %v\n", re)
		return exitUnreachable
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(e.stderr, "lbctl: lbdnsd at %s did not answer within %s (see -timeout)\n", e.socket, e.timeout)
		return exitUnreachable
	case errors.As(err, &nr):
		fmt.Fprintf(e.stderr, "lbctl: lbdnsd at %s closed the connection without a reply (%v)\n", e.socket, nr.Err)
		return exitUnreachable
	case errors.As(err, &ce):
		e.refused(ce)
		switch ce.Unavailable {
		case control.UnavailableEtcd:
			return exitNoEtcd
		case control.UnconfirmedEtcd:
			return exitUnknown
		}
		return exitRefused
	}
	fmt.Fprintf(e.stderr, "lbctl: %v\n", err)
	return exitRefused
}

// refused prints the daemon's refusal: with -o json the ErrorReply on
// stdout, else its message and every problem on stderr.
func (e *env) refused(ce *control.Error) {
	if e.json() {
		if err := e.writeJSON(control.ErrorReply{Error: ce.Message, Problems: ce.Problems, Unavailable: ce.Unavailable}); err != nil {
			fmt.Fprintf(e.stderr, "lbctl: %v\n", err)
		}
		return
	}
	fmt.Fprintf(e.stderr, "lbctl: %s\n", ce.Message)
	for _, p := range ce.Problems {
		fmt.Fprintln(e.stderr, p.Text)
	}
}
