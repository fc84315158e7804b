package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/internal/buildinfo"
)

// Exit statuses, the same for every command (exitStatuses documents
// them).
const (
	exitOK          = 0
	exitRefused     = 1 // the daemon refused, the config is invalid, or a bad reply
	exitUsage       = 2 // a missing or bad argument or flag: nothing was sent
	exitUnreachable = 3
	exitUnknown     = 4 // a change was sent, no reply came: applied or not is unknown
	// exitNoEtcd: the daemon, in a fleet, refused a change because it
	// cannot reach the fleet's etcd (nothing changed).
	exitNoEtcd = 5
)

// exitStatus is one row of the exit status table.
type exitStatus struct {
	code int
	text string
}

// exitStatuses is the exit status table lbctl help prints, one row a
// status; docs/lbctl.md and lbctl.1 (EXIT STATUS) say the same.
func exitStatuses() []exitStatus {
	return []exitStatus{
		{exitOK, "success"},
		{exitRefused, "the daemon refused the request (its message on stderr), the configuration is invalid (reload, check-config), the reply was bad, or lbctl was interrupted before sending"},
		{exitUsage, "usage: a missing, extra or bad argument or flag (the problem in one line on stderr, then the usage line); nothing was sent"},
		{exitUnreachable, "the daemon is unreachable (the message names the socket and why), or a command that changes nothing got no reply within -timeout"},
		{exitUnknown, "outcome unknown: a change was sent but no reply came (or etcd did not confirm it); check lbctl status and lbctl events before sending it again"},
		{exitNoEtcd, "the daemon, in a fleet, cannot reach the fleet's etcd and refused the change: nothing was changed"},
	}
}

// defaultTimeout is the default deadline of one request to the daemon.
const defaultTimeout = 10 * time.Second

// env is what a command runs with: the global flags and the process's
// context and output.
type env struct {
	ctx     context.Context
	stdout  io.Writer
	stderr  io.Writer
	socket  string
	format  format
	timeout time.Duration
	version bool
	cmds    []*command
	// global is the flag set of the global flags (for usage).
	global *flag.FlagSet
}

// client returns a client of the control socket.
func (e *env) client() *control.Client { return control.NewClient(e.socket) }

// request returns the context of one request to the daemon.
func (e *env) request() (context.Context, context.CancelFunc) {
	return context.WithTimeout(e.ctx, e.timeout)
}

// json reports whether -o json was given.
func (e *env) json() bool { return e.format == formatJSON }

// run is lbctl: it parses the global flags, runs the command and returns
// the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	e := &env{ctx: ctx, stdout: stdout, stderr: stderr, format: formatTable, cmds: commands()}
	fs := globalFlags(e, getenv)
	e.global = fs
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout, e.cmds, fs)
			return exitOK
		}
		fmt.Fprintf(stderr, "lbctl: %s\n%s", flagError(fs, err), shortUsage)
		return exitUsage
	}
	if e.version {
		fmt.Fprintf(stdout, "lbctl %s\n", buildinfo.Version())
		return exitOK
	}
	if err := e.checkGlobal(); err != nil {
		fmt.Fprintf(stderr, "lbctl: %s\n%s", err, shortUsage)
		return exitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprintf(stderr, "lbctl: no command given\n%s", shortUsage)
		return exitUsage
	}
	cmd := findCommand(e.cmds, fs.Arg(0))
	if cmd == nil {
		fmt.Fprintf(stderr, "lbctl: unknown command %q%s\n%s", fs.Arg(0), configs.Suggest(fs.Arg(0), commandNames(e.cmds)), shortUsage)
		return exitUsage
	}
	return e.exec(cmd, fs.Args()[1:])
}

// globalFlags returns the flag set of the flags before the command, bound
// to e's fields.
func globalFlags(e *env, getenv func(string) string) *flag.FlagSet {
	socket := getenv("LBDNS_SOCKET")
	if socket == "" {
		socket = configs.DefaultControlSocket
	}
	fs := flag.NewFlagSet("lbctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&e.socket, "socket", socket, "control `socket` of lbdnsd ($LBDNS_SOCKET overrides the default)")
	fs.Var(&e.format, "o", "output `format`: table or json")
	fs.DurationVar(&e.timeout, "timeout", defaultTimeout, "deadline of each request (not for events -f)")
	fs.BoolVar(&e.version, "version", false, "print lbctl's version (module version and VCS revision) and exit")
	return fs
}

// shortUsage is the usage line printed after a mistyped command.
const shortUsage = "Usage: lbctl [-socket PATH] [-o table|json] [-timeout DUR] COMMAND [ARGS]\nRun 'lbctl help' for the commands.\n"

// flagError is the message of a flag parsing error, with the closest flag
// of fs suggested for an unknown one.
func flagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	const unknown = "flag provided but not defined: -"
	name, ok := strings.CutPrefix(msg, unknown)
	if !ok {
		return msg
	}
	var known []string
	fs.VisitAll(func(f *flag.Flag) { known = append(known, "-"+f.Name) })
	return msg + configs.Suggest("-"+name, known)
}

// checkGlobal checks the values of the global flags, given before the
// command or after it: a usage error when one cannot be used.
func (e *env) checkGlobal() error {
	switch {
	case e.timeout <= 0:
		return usageErrorf("-timeout must be positive, such as 10s, not %s", e.timeout)
	case e.socket == "":
		return usageErrorf("-socket must name the control socket, not be empty")
	}
	return nil
}

// exec parses the command's flags and arguments, runs it and turns its
// error into output and an exit status.
func (e *env) exec(c *command, args []string) int {
	fs := c.flagSet(e)
	act := c.setup(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.printUsage(e.stdout, fs)
			return exitOK
		}
		return e.fail(c, fs, usageErrorf("%s", flagError(fs, err)))
	}
	if err := e.checkGlobal(); err != nil {
		return e.fail(c, fs, err)
	}
	return e.fail(c, fs, act(e, pos))
}
