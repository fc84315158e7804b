package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

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
	// examples are command lines with what each does, for lbctl help
	// COMMAND.
	examples []example
	// setup registers the command's flags on fs and returns the action
	// that runs it with the positional arguments.
	setup func(fs *flag.FlagSet) action
}

// example is one command line of a command's help and what it does.
type example struct{ line, does string }

// action runs a command with its positional arguments.
type action func(e *env, args []string) error

// commands returns the command table, in the order usage lists it.
func commands() []*command {
	cmds := []*command{
		{name: "status", summary: "show the daemon, VIPs, pools, members, overrides", setup: statusCmd},
		{name: "drain", args: "RESOLVER [--pool P | --vip V] [--reason TEXT]", summary: "keep a resolver with weight 0 (existing flows finish)", setup: overrideCmd(control.ActionDrain)},
		{name: "disable", args: "RESOLVER [--pool P | --vip V] [--reason TEXT]", summary: "take a resolver out of the IPVS table", setup: overrideCmd(control.ActionDisable)},
		{name: "enable", args: "RESOLVER [--pool P | --vip V] [--reason TEXT]", summary: "return a resolver to health-driven control", setup: overrideCmd(control.ActionEnable)},
		{name: "events", args: "[-f] [-n N] [--kind K[,K...]] [--all]", summary: eventsSummary, setup: eventsCmd},
		{name: "gslb", args: "members [--pool P] | status | explain NAME [--via udp|tcp|dot|doh|json] [--client IP | --peer IP] [--ecs PREFIX] [--forwarded-for LIST] [--proxy-source IP] [--ip IP] [--type A|AAAA] | off|on [--name N | --zone Z] --reason R | ttl SECONDS|--clear [--name N | --zone Z] --reason R", summary: "show the GSLB pools' members (status: with the emergency switches); explain how the responder answers NAME (over which front, where it located the client, location, policies tried, pools and members, choice, ECS scope, TTL); switch intelligent resolution off or on, raise or restore TTLs", setup: gslbCmd},
		{name: "prefetch", args: "[--resolver R] [--name NAME]", summary: "list the names kept warm in each resolver's cache: last refresh, TTL left, next run", setup: prefetchCmd},
		{name: "top", args: "[clients|prefixes|names|suffixes|nametypes] [--window 10s] [--limit 20] [--source responder|dnstap|all]", summary: "show the heaviest clients, prefixes, names or suffixes of the queries counted (estimated queries, error bound, rate, share) over a recent window", setup: topCmd},
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
	ex := examples()
	for _, c := range cmds {
		c.examples = ex[c.name]
	}
	return cmds
}

// examples are each command's examples, by command name.
func examples() map[string][]example {
	return map[string][]example{
		"status": {{"lbctl status", "the summary of what is broken first, then every VIP, pool and member"},
			{"lbctl status -o json | jq .summary", "the summary as JSON"}},
		"drain": {{`lbctl drain bind-1 --reason "disk full"`, "weight 0 in every pool: its flows finish, no new ones"},
			{"lbctl drain bind-1 --pool edge --reason upgrade", "only in pool edge"}},
		"disable": {{`lbctl disable unbound-2 --reason "bad upstream"`, "out of the IPVS table at once"}},
		"enable":  {{"lbctl enable bind-1", "every override of bind-1 removed: health decides again"}},
		"events": {{"lbctl events", "the events for people, routine work folded, newest at the bottom"},
			{"lbctl events -f --kind pool,state", "follow the pools' and back ends' verdicts"},
			{"lbctl events --all -n 50", "the last 50 lines, routine work included"}},
		"gslb": {{"lbctl gslb status", "each GSLB pool's members, their monitors and why one is not up"},
			{"lbctl gslb explain www.example.com --ecs 198.51.100.0/24", "how the responder answers that client now"},
			{"lbctl gslb explain www.example.com --via json --peer 10.0.0.5 \\\n      --forwarded-for 203.0.113.7", "how the JSON API answers a request through a proxy, and whether it believes the X-Forwarded-For"},
			{`lbctl gslb off --name www.example.com --reason "steering broken"`, "static answers for one name (the emergency switch)"},
			{`lbctl gslb ttl 300 --zone example.com --reason "authoritative load"`, "raise the TTL of a zone's dynamic answers"},
			{"lbctl gslb ttl --clear --zone example.com --reason done", "restore it"}},
		"prefetch": {{"lbctl prefetch --resolver unbound-1", "the names kept warm in one resolver"}},
		"top": {{"lbctl top", "the heaviest clients of the last 10 s"},
			{"lbctl top names --window 1m --limit 5", "the five heaviest names of the last minute"}},
		"fleet": {{"lbctl fleet status", "every node of the fleet; the odd one out flagged"}},
		"host": {{`lbctl host drain --reason "kernel upgrade"`, "withdraw this host's BGP routes gracefully"},
			{"lbctl host enable", "announce them again"}},
		"bgp": {{"lbctl bgp status", "the sessions and every prefix, announced or not, and why"}},
		"block": {{`lbctl block 203.0.113.7 --for 1h --reason "query flood"`, "drop one client for an hour"},
			{`lbctl block 203.0.113.0/24 --for 30m --reason flood --force`, "a whole prefix, even one that holds a resolver"}},
		"limit":        {{`lbctl limit 198.51.100.0/24 --rate 200 --for 2h --reason "NAT gateway"`, "at most 200 packets/s per source address"}},
		"unblock":      {{"lbctl unblock 203.0.113.7", "remove its block or limit"}},
		"clients":      {{"lbctl clients", "the blocks and limits in force and whether the kernel enforces them"}},
		"reload":       {{"lbctl reload", "apply the edited configuration file, or list every problem and change nothing"}},
		"check-config": {{"lbctl check-config /etc/lbdns/lbdns.toml", "validate a file before it is installed"}},
		"help":         {{"lbctl help gslb", "a command's usage, flags and examples"}},
		"version":      {{"lbctl version", "lbctl's module version and VCS revision"}},
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

// helpWidth is the width lbctl's help is wrapped to.
const helpWidth = 80

// printUsage writes the command's usage, flags and examples to w, wrapped
// at helpWidth columns.
func (c *command) printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "%s\n\n%s\n\nFlags:\n", usageLine(c, "Usage: lbctl [global flags] "),
		wrap(strings.ToUpper(c.summary[:1])+c.summary[1:]+".", helpWidth, "", ""))
	printFlags(w, fs, "--")
	if len(c.examples) > 0 {
		fmt.Fprintf(w, "\nExamples:\n")
		for _, x := range c.examples {
			fmt.Fprintf(w, "  %s\n%s\n", x.line, wrap(x.does, helpWidth, "      ", "      "))
		}
	}
	fmt.Fprintln(w)
	printExitStatuses(w)
}

// usageLine is the command's usage after prefix: each of its
// alternatives ("members [--pool P] | status" is two) on a line of its
// own under the first, each wrapped at helpWidth between words and
// continued under its arguments.
func usageLine(c *command, prefix string) string {
	pad := strings.Repeat(" ", len(prefix))
	var lines []string
	for i, alt := range alternatives(c.args) {
		first := pad
		if i == 0 {
			first = prefix
		}
		lines = append(lines, wrap(strings.TrimSpace(c.name+" "+alt), helpWidth, first, pad+strings.Repeat(" ", len(c.name)+1)))
	}
	return strings.Join(lines, "\n")
}

// alternatives splits a usage's arguments at its top-level " | " (not
// one inside brackets: "[--pool P | --vip V]" is one alternative's).
func alternatives(args string) []string {
	var alts []string
	depth, start := 0, 0
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case '[', '(':
			depth++
		case ']', ')':
			depth--
		case '|':
			if depth == 0 && i > 0 && args[i-1] == ' ' && i+1 < len(args) && args[i+1] == ' ' {
				alts = append(alts, strings.TrimSpace(args[start:i]))
				start = i + 1
			}
		}
	}
	return append(alts, strings.TrimSpace(args[start:]))
}

// wrap folds text into lines of at most width columns at spaces (a word
// longer than a line is left whole), the first line starting with
// first, every other with rest.
func wrap(text string, width int, first, rest string) string {
	var b strings.Builder
	b.WriteString(first)
	line := utf8.RuneCountInString(first)
	for i, word := range strings.Fields(text) {
		n := utf8.RuneCountInString(word)
		switch {
		case i == 0:
		case line+1+n > width:
			b.WriteString("\n" + rest)
			line = utf8.RuneCountInString(rest)
		default:
			b.WriteByte(' ')
			line++
		}
		b.WriteString(word)
		line += n
	}
	return b.String()
}

// printFlags writes fs's flags as the usage lines write them, with
// dashes before each name ("--" for a command's: --pool; "-" for the
// global flags; one for a one-letter flag: -o), each with its default
// when it has one, its text wrapped at helpWidth.
func printFlags(w io.Writer, fs *flag.FlagSet, dashes string) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		line := "  " + dashes + f.Name
		if len(f.Name) == 1 {
			line = "  -" + f.Name // -o, as the usage writes it
		}
		if name != "" {
			line += " " + name
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "%s\n%s\n", line, wrap(usage, helpWidth, "        ", "        "))
	})
}

// printUsage writes lbctl's usage to w: every command and the global flags.
func printUsage(w io.Writer, cmds []*command, global *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: lbctl [-socket PATH] [-o table|json] [-timeout DUR] COMMAND [ARGS]\n\nCommands:\n")
	for _, c := range cmds {
		fmt.Fprintf(w, "%s\n%s\n", usageLine(c, "  "), wrap(c.summary, helpWidth, "        ", "        "))
	}
	fmt.Fprintf(w, "\nGlobal flags:\n")
	printFlags(w, global, "-")
	fmt.Fprintf(w, "\nRun 'lbctl help COMMAND' for a command's flags.\n\n")
	printExitStatuses(w)
}

// printExitStatuses writes the exit status table, the same for every
// command, wrapped at helpWidth.
func printExitStatuses(w io.Writer) {
	fmt.Fprintf(w, "Exit status (every command):\n")
	for _, s := range exitStatuses() {
		fmt.Fprintln(w, wrap(s.text, helpWidth, fmt.Sprintf("  %d  ", s.code), "     "))
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
