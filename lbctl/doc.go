// Command lbctl is the operator's tool for lbdnsd: it talks to the daemon
// over its local control socket (JSON over HTTP on a Unix socket) and checks
// configuration files offline.
//
// Usage:
//
//	lbctl [-socket PATH] [-o table|json] [-timeout DUR] COMMAND [ARGS] [FLAGS]
//
// Global flags come before the command; -o may also follow it. Command flags
// may come before or after the command's arguments, with one or two dashes
// (lbctl drain bind-1 --reason "disk full").
//
//	-socket PATH   the control socket (default $LBDNS_SOCKET, else /run/lbdns/lbdns.sock)
//	-o FORMAT      table (for people, the default) or json (for scripts)
//	-timeout DUR   deadline of each request (default 10s; not for events -f)
//
// Commands:
//
//	status
//	    The daemon (config file, up since, DRY RUN and warm-up warnings,
//	    last reload and its error), the VIPs, every pool (diagnosis,
//	    healthy/enabled/total members, FAIL-OPEN with the members held in
//	    traffic and those kept out, per-vendor counts) with a row per
//	    member (declared and identified vendor, state and since when, last
//	    probe result and RTT, flaps, override and reason, why it is in or
//	    out of traffic, IPVS weight, connections and packets per second),
//	    a GSLB summary (per GSLB pool: combine rule, members up/total and
//	    the members that are not up with their reason), the operator
//	    overrides (orphaned ones marked), the client actions and a prefetch
//	    summary. With -o json: the daemon's status document
//	    (control.Status), indented.
//	drain RESOLVER [--pool P | --vip V] [--reason TEXT]
//	    Keep the resolver's destinations with weight 0: existing flows
//	    finish, new ones go elsewhere.
//	disable RESOLVER [--pool P | --vip V] [--reason TEXT]
//	    Remove the resolver's destinations from the IPVS table.
//	enable RESOLVER [--pool P | --vip V] [--reason TEXT]
//	    Remove the matching overrides: the resolver returns to
//	    health-driven control. No override puts a failing resolver into
//	    traffic.
//	events [-f] [-n N]
//	    Recent state changes, overrides, IPVS operations and reloads, newest
//	    last (failures marked ERROR); -n keeps the last N, -f follows new
//	    events until interrupted. With -o json: one JSON object per line.
//	gslb members [--pool P]
//	    The GSLB pools ("gslb status" is an alias): per pool its combine
//	    rule (all, or at least N monitors) and members up/total; a row per
//	    member (answer address, and the probe address when it differs,
//	    weight, priority, state, since when, the reason it is not up); a
//	    row per member and monitor (check, kind, state, since, last
//	    result, RTT, certificate days left for https, loss and socket for
//	    icmp). --pool keeps one pool; an unknown pool exits 1. With -o
//	    json: the status document's gslb list, indented. "gslb status"
//	    first shows a banner and the audit of every emergency switch and
//	    TTL raise in force. In a fleet ([fleet]), a row per member with
//	    the fleet's verdict (held when the votes decide nothing), where
//	    the answers take it from (fleet, or own probes), its probers and
//	    their votes by location ("lb2@ams down").
//	gslb off [--name N | --zone Z] --reason TEXT
//	gslb on [--name N | --zone Z]
//	gslb ttl SECONDS|--clear [--name N | --zone Z] --reason TEXT
//	    The GSLB emergency switch: off makes the names (one, a zone's, or
//	    all) answer their static set (else every member of their pools,
//	    whatever their health) with ECS scope 0; on returns them to
//	    dynamic answers; ttl raises their answers' TTL to at least
//	    SECONDS, --clear restores it. Persisted before it takes effect,
//	    in force on every listener when the command returns. With -o
//	    json: the daemon's reply (message, changed, intent in force).
//	prefetch [--resolver R] [--name NAME]
//	    The names kept warm in every resolver's cache (name x type x
//	    resolver x ECS partition): refresh mode, state (ok, failing,
//	    parked while the resolver is unhealthy, pending), last refresh, TTL
//	    and what is left of it, next run, failures and the last error.
//	top [clients|prefixes|names|suffixes|nametypes] [--window 10s]
//	    The heaviest keys of the queries the daemon counted ([flood]) over
//	    the last window (default its flood.short_window, at most its
//	    flood.long_window): clients (addresses), prefixes (/24, /56),
//	    names, suffixes, or names and types, each with its estimated
//	    queries, the error of the estimate (the true count lies between
//	    the estimate less the error and the estimate), its rate and its
//	    share; the window's queries by reply code. With -o json: the
//	    /v1/top document.
//	fleet status
//	    The fleet of LB hosts sharing intent through etcd ([fleet]), as
//	    the daemon's node reads it: every node whose heartbeat lease is
//	    alive, with the heartbeat's age, location, cluster, configuration
//	    hash, the intent revision applied (applied/in force when behind),
//	    SOA serial, version and start; the odd one out is marked ! with
//	    why. It says where the GSLB verdicts come from (the fleet's
//	    probers, or, loudly, this node's own probes while etcd is
//	    unreachable), whether this node withdrew its votes (most of its
//	    canaries fail), and how many members and canaries it probes;
//	    the canary it advertises, the canaries it leaves out as its own,
//	    and loudly what is wrong with the fleet's canaries (several
//	    nodes advertising one address, a node advertising none, a node
//	    probing fewer than two). With -o json: the /v1/fleet document.
//	block CLIENT --for DURATION --reason TEXT [--force]
//	    Drop every packet of the client address or prefix before IPVS
//	    (lbdnsd's nftables table) until the duration has passed. A client
//	    of an actions.shared prefix needs --force; the back ends, VIPs and
//	    other protected networks are refused.
//	limit CLIENT [--rate N] --for DURATION --reason TEXT
//	    Drop the client's packets above N per second per source address
//	    (default actions.default_limit_qps) until the duration has
//	    passed: the choice for NAT gateways and shared resolvers.
//	unblock CLIENT
//	    Remove the client's block or limit.
//	clients
//	    The client actions in force: client, action, rate, time left,
//	    expiry, reason, set, by, and whether the kernel enforces it. With
//	    -o json: the clients section of /status.
//	reload
//	    Validate the daemon's configuration file and apply it. A bad file
//	    is rejected whole, every problem is printed and the running
//	    configuration stays.
//	check-config FILE
//	    Validate a configuration file offline, with the same rules as the
//	    daemon, and print its summary (and every warning: a key without
//	    effect) or every problem.
//	help [COMMAND]
//	    Print the usage of lbctl or of one command.
//
// Exit status, the same for every command (lbctl help prints the table):
//
//	0  success
//	1  the daemon refused the request (its message is printed), the
//	   configuration is invalid, the reply was bad, or lbctl was
//	   interrupted before sending
//	2  usage error: a missing, extra or bad argument or flag (a required
//	   --reason or --for missing, a negative duration, -timeout 0); the
//	   problem in one line, then the command's usage line; nothing sent
//	3  the daemon is unreachable (the message names the socket and why), or
//	   a command that changes nothing got no answer within -timeout
//	4  outcome unknown: a change was sent whole but no reply came (the
//	   connection was cut, -timeout passed or lbctl was interrupted), or,
//	   in a fleet, etcd did not confirm it in time; check with lbctl status
//	   and lbctl events before sending it again
//	5  etcd unavailable: the daemon, in a fleet, refused a change because
//	   it cannot reach the fleet's etcd (nothing was changed)
package main
