package control

import (
	"errors"
	"fmt"
	"net/http"
)

// Kind is why a request is refused, in the words of the part that
// refuses it: the servers answer each kind with its HTTP status
// (httpStatus), so that no other package chooses one.
type Kind uint8

const (
	// Internal: the daemon failed, not the request (HTTP 500). It is the
	// zero Kind, and the kind of an error that is no *Error.
	Internal Kind = iota
	// Malformed: the request itself is wrong (HTTP 400).
	Malformed
	// Forbidden: the requester may not use the control socket (HTTP
	// 403).
	Forbidden
	// NotFound: what the request names does not exist (HTTP 404).
	NotFound
	// NotAllowed: the path does not take the request's method (HTTP 405).
	NotAllowed
	// Conflict: the request is ambiguous or conflicts with the state in
	// force, or the state changed meanwhile (HTTP 409).
	Conflict
	// InvalidConfig: the configuration is invalid; Error.Problems lists
	// why (HTTP 422).
	InvalidConfig
	// Unavailable: the daemon cannot do it now (HTTP 503);
	// Error.Unavailable names what it could not reach, when that is why.
	Unavailable

	// lastKind is the last Kind, for kindOf.
	lastKind = Unavailable
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case Internal:
		return "internal"
	case Malformed:
		return "malformed"
	case Forbidden:
		return "forbidden"
	case NotFound:
		return "not found"
	case NotAllowed:
		return "not allowed"
	case Conflict:
		return "conflict"
	case InvalidConfig:
		return "invalid configuration"
	case Unavailable:
		return "unavailable"
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// httpStatus is the one mapping of a Kind to the HTTP status the servers
// reply with.
func (k Kind) httpStatus() int {
	switch k {
	case Malformed:
		return http.StatusBadRequest
	case Forbidden:
		return http.StatusForbidden
	case NotFound:
		return http.StatusNotFound
	case NotAllowed:
		return http.StatusMethodNotAllowed
	case Conflict:
		return http.StatusConflict
	case InvalidConfig:
		return http.StatusUnprocessableEntity
	case Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// kindOf is the Kind whose HTTP status is code: the reverse of
// httpStatus, for the client; Internal for a status no kind has.
func kindOf(code int) Kind {
	for k := Internal; k <= lastKind; k++ {
		if k.httpStatus() == code {
			return k
		}
	}
	return Internal
}

// Error is a refusal of a request: its kind, its message and what goes
// with it. Backend methods return it for requests they refuse (any other
// error is Internal), and the Client returns it for a reply that is not
// 2xx. Build it with Errorf.
type Error struct {
	// Kind is why the request was refused.
	Kind Kind
	// Code is the HTTP status of Kind, set by Errorf; in an error the
	// Client returns, the reply's status (which may be one no Kind has:
	// its Kind is then Internal). Outside this package, read Kind.
	Code int
	// Message says what is wrong in one line.
	Message string
	// Problems lists every configuration problem of an InvalidConfig
	// refusal of a reload.
	Problems []Problem
	// Unavailable is ErrorReply.Unavailable: what an Unavailable refusal
	// could not reach (UnavailableEtcd, UnconfirmedEtcd), "" otherwise.
	Unavailable string
	// cause is what the message wraps (%w in Errorf), for errors.As.
	cause error
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Unwrap returns the error the message wraps (nil when none).
func (e *Error) Unwrap() error { return e.cause }

// Errorf returns an *Error of kind with a formatted message; a %w verb
// wraps its error, as fmt.Errorf does, so that the refusal keeps its
// cause in the chain.
func Errorf(kind Kind, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Kind: kind, Code: kind.httpStatus(), Message: err.Error(), cause: errors.Unwrap(err)}
}

// httpStatus maps err to the HTTP status a server replies with: its
// Kind's when it is an *Error, else 500.
func httpStatus(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind.httpStatus()
	}
	return Internal.httpStatus()
}

// replyError is the *Error the Client returns for a reply with status
// code and body er.
func replyError(code int, er ErrorReply) *Error {
	return &Error{Kind: kindOf(code), Code: code, Message: er.Error, Problems: er.Problems, Unavailable: er.Unavailable}
}
