package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"lbdns/control"
	"lbdns/internal/buildinfo"
)

// command is one lbctl command.
type command struct {
	name string
	// args shows the command's arguments and flags in usage lines.
	args string
	// summary is the one-line help.
	summary string
	// setup registers the command's flags on fs and returns the action
	// that runs it with the positional arguments.
	setup func(fs *flag.FlagSet) action
}

// action runs a command with its positional arguments.
type action func(e *env, args []string) error

// commands returns the command table, in the order usage lists it.
func commands() []*command {
	return []*command{
		{name: "status", summary: "show the daemon, VIPs, pools, members, overrides", setup: statusCmd},
		{name: "drain", args: "RESOLVER [--pool P | --vip V] [--reason TEXT]", summary: "keep a resolver with weight 0 (existing flows finish)", setup: overrideCmd(control.ActionDrain)},
		{name: "disable", args: "RESOLVER [--pool P | --vip V] [--reason TEXT]", summary: "take a resolver out of the IPVS table", setup: overrideCmd(control.ActionDisable)},
		{name: "enable", args: "RESOLVER [--pool P | --vip V] [--reason TEXT]", summary: "return a resolver to health-driven control", setup: overrideCmd(control.ActionEnable)},
		{name: "events", args: "[-f] [-n N] [--kind K[,K...]] [--all]", summary: eventsSummary, setup: eventsCmd},
		{name: "gslb", args: "members [--pool P] | status | explain NAME [--client IP] [--ecs PREFIX] [--type A|AAAA] | off|on [--name N | --zone Z] --reason R | ttl SECONDS|--clear [--name N | --zone Z] --reason R", summary: "show the GSLB pools' members (status: with the emergency switches); explain how the responder answers NAME (location, policies tried, pools and members, choice, ECS scope, TTL); switch intelligent resolution off or on, raise or restore TTLs", setup: gslbCmd},
		{name: "prefetch", args: "[--resolver R] [--name NAME]", summary: "list the names kept warm in each resolver's cache: last refresh, TTL left, next run", setup: prefetchCmd},
		{name: "top", args: "[clients|prefixes|names|suffixes|nametypes] [--window 10s] [--limit 20]", summary: "show the heaviest clients, prefixes, names or suffixes of the queries counted (estimated queries, error bound, rate, share) over a recent window", setup: topCmd},
		{name: "fleet", args: "status", summary: "list the fleet's nodes (heartbeat age, config hash, intent revision, SOA serial) and flag the odd one out", setup: fleetCmd},
		{name: "host", args: "drain [--reason TEXT] | enable", summary: "drain this host's BGP announcements (marked GRACEFUL_SHUTDOWN, withdrawn after the drain delay; IPVS left as it is), or announce them again", setup: hostCmd},
		{name: "bgp", args: "status", summary: "show the BGP sessions and every prefix, announced or not, with its MED, communities and why", setup: bgpCmd},
		{name: "block", args: "CLIENT --for DURATION --reason TEXT [--force]", summary: "drop every packet of a client address or prefix before IPVS (nftables) until the duration ends", setup: clientActionCmd(control.ClientBlock)},
		{name: "limit", args: "CLIENT [--rate N] --for DURATION --reason TEXT", summary: "drop a client's packets above N per second per source address (the choice for NAT gateways and shared resolvers) until the duration ends", setup: clientActionCmd(control.ClientLimit)},
		{name: "unblock", args: "CLIENT", summary: "remove a client's block or limit", setup: unblockCmd},
		{name: "clients", summary: "list the client blocks and limits in force, with their expiry and whether the kernel enforces them", setup: clientsCmd},
		{name: "reload", summary: "validate and apply the daemon's configuration file", setup: reloadCmd},
		{name: "check-config", args: "FILE", summary: "validate a configuration file offline", setup: checkConfigCmd},
		{name: "help", args: "[COMMAND]", summary: "show this usage, or a command's", setup: helpCmd},
		{name: "version", summary: "print lbctl's version (module version and VCS revision; also -version)", setup: versionCmd},
	}
}

// findCommand returns the command called name, nil when there is none.
func findCommand(cmds []*command, name string) *command {
	for _, c := range cmds {
		if c.name == name {
			return c
		}
	}
	return nil
}

// commandNames returns the names of cmds, in order.
func commandNames(cmds []*command) []string {
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = c.name
	}
	return names
}

// flagSet returns the command's flag set with the flags every command
// takes: -o, and the global -socket and -timeout (so that they may follow
// the command and its arguments too; their defaults are the values given
// before the command), output discarded: lbctl prints the errors itself.
func (c *command) flagSet(e *env) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(&e.format, "o", "output `format`: table or json")
	fs.StringVar(&e.socket, "socket", e.socket, "control `socket` of lbdnsd (a global flag, also accepted here)")
	fs.DurationVar(&e.timeout, "timeout", e.timeout, "deadline of each request (a global flag, also accepted here)")
	return fs
}

// printUsage writes the command's usage and flags to w.
func (c *command) printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: lbctl [global flags] %s\n\n%s%s.\n\nFlags:\n", strings.TrimSpace(c.name+" "+c.args), strings.ToUpper(c.summary[:1]), c.summary[1:])
	printFlags(w, fs)
	fmt.Fprintln(w)
	printExitStatuses(w)
}

// printFlags writes fs's flags as the usage lines write them, with two
// dashes (--pool; one for a one-letter flag: -o), each with its default when it has one, as
// flag.PrintDefaults does.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if len(f.Name) == 1 {
			line = "  -" + f.Name // -o, as the usage writes it
		}
		if name != "" {
			line += " " + name
		}
		if len(line) <= 6 {
			line += "\t"
		} else {
			line += "\n    \t"
		}
		line += strings.ReplaceAll(usage, "\n", "\n    \t")
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			line += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintln(w, line)
	})
}

// printUsage writes lbctl's usage to w: every command and the global flags.
func printUsage(w io.Writer, cmds []*command, global *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: lbctl [-socket PATH] [-o table|json] [-timeout DUR] COMMAND [ARGS]\n\nCommands:\n")
	for _, c := range cmds {
		fmt.Fprintf(w, "  %s\n        %s\n", strings.TrimSpace(c.name+" "+c.args), c.summary)
	}
	fmt.Fprintf(w, "\nGlobal flags:\n")
	global.SetOutput(w)
	global.PrintDefaults()
	global.SetOutput(io.Discard)
	fmt.Fprintf(w, "\nRun 'lbctl help COMMAND' for a command's flags.\n\n")
	printExitStatuses(w)
}

// printExitStatuses writes the exit status table, the same for every
// command.
func printExitStatuses(w io.Writer) {
	fmt.Fprintf(w, "Exit status (every command):\n")
	for _, s := range exitStatuses() {
		fmt.Fprintf(w, "  %d  %s\n", s.code, s.text)
	}
}

// helpCmd prints the usage of lbctl or of one command.
func helpCmd(*flag.FlagSet) action {
	return func(e *env, args []string) error {
		switch len(args) {
		case 0:
			printUsage(e.stdout, e.cmds, e.global)
			return nil
		case 1:
			c := findCommand(e.cmds, args[0])
			if c == nil {
				return usageErrorf("unknown command %q", args[0])
			}
			fs := c.flagSet(e)
			c.setup(fs)
			c.printUsage(e.stdout, fs)
			return nil
		}
		return usageErrorf("too many arguments: %q", args[1:])
	}
}

// versionCmd prints lbctl's version.
func versionCmd(*flag.FlagSet) action {
	return func(e *env, args []string) error {
		if err := wantArgs(args); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "lbctl %s\n", buildinfo.Version())
		return nil
	}
}

// wantArgs checks that args are exactly one value per name.
func wantArgs(args []string, names ...string) error {
	switch {
	case len(args) < len(names):
		return usageErrorf("missing %s", names[len(args)])
	case len(args) > len(names):
		return usageErrorf("unexpected argument %q", args[len(names)])
	}
	return nil
}
