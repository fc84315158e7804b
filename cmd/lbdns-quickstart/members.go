package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"

	"lbdns/configs"
)

// memberBanner starts the line a member listener writes to every
// connection: the quick start's tcp monitor expects it, so a member whose
// process is stopped (kill -STOP) fails its check by timeout while the
// kernel still accepts the connection.
const memberBanner = "lbdns-quickstart member "

// member is a GSLB member the quick start runs itself: a process of this
// program listening on the member's loopback probe address at the ports
// of its tcp monitors.
type member struct {
	pool, name string
	listen     []netip.AddrPort
}

// planMembers lists the GSLB members of cfg that the quick start can run:
// those probed on a loopback address by at least one tcp monitor with a
// port.
func planMembers(cfg *configs.Config) []member {
	var out []member
	for _, p := range cfg.GSLB.Pools {
		for _, m := range p.Members {
			if !m.ProbeAddr.IsLoopback() {
				continue
			}
			mons := m.Monitors
			if len(mons) == 0 {
				mons = p.Monitors
			}
			mb := member{pool: p.Name, name: m.Name}
			for _, name := range mons {
				c := cfg.Checks[name]
				if c == nil || c.Kind != "tcp" || c.TCP == nil || c.TCP.Port == 0 {
					continue
				}
				ap := netip.AddrPortFrom(m.ProbeAddr, uint16(c.TCP.Port))
				if !slices.Contains(mb.listen, ap) {
					mb.listen = append(mb.listen, ap)
				}
			}
			if len(mb.listen) > 0 {
				out = append(out, mb)
			}
		}
	}
	return out
}

// memberProc is a running member process.
type memberProc struct {
	member
	cmd *exec.Cmd
}

// startMember runs m as a process of this program (-serve-member) and
// waits until it listens.
func startMember(m member, stderr io.Writer) (*memberProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("gslb member %s: %w", m.name, err)
	}
	args := []string{"-serve-member", m.pool + "/" + m.name}
	for _, a := range m.listen {
		args = append(args, "-listen", a.String())
	}
	cmd := exec.Command(exe, args...)
	cmd.Stderr = stderr
	// Its own process group: a Ctrl-C in the terminal reaches this
	// program, which kills the members itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("gslb member %s: %w", m.name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("gslb member %s: %w", m.name, err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "listening\n" {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("gslb member %s on %v: did not start (%q, %v)", m.name, m.listen, line, err)
	}
	return &memberProc{member: m, cmd: cmd}, nil
}

// stop kills the member process (also when it is stopped: SIGKILL needs no
// SIGCONT) and waits for it.
func (p *memberProc) stop() {
	p.cmd.Process.Kill()
	p.cmd.Wait()
}

// serveMember is the member process: it listens on every address of
// -listen, says "listening" on stdout, and writes the banner line to every
// connection until it is killed or its parent exits.
func serveMember(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lbdns-quickstart -serve-member", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("serve-member", "", "run as the GSLB member POOL/NAME")
	var listen []string
	fs.Func("listen", "`ADDR:PORT` to listen on (repeatable)", func(s string) error {
		listen = append(listen, s)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return 2
	}
	// A stopped member (kill -STOP) must still die with the quick start:
	// SIGKILL, which a stopped process cannot hold back.
	dieWithParentSignal(syscall.SIGKILL)
	var lns []net.Listener
	for _, a := range listen {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			fmt.Fprintf(stderr, "lbdns-quickstart: gslb member %s: %v\n", *name, err)
			return 1
		}
		lns = append(lns, ln)
	}
	fmt.Fprintln(stdout, "listening")
	errc := make(chan error, len(lns))
	for _, ln := range lns {
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					errc <- err
					return
				}
				go func() {
					defer c.Close()
					fmt.Fprintf(c, "%s%s ok\n", memberBanner, *name)
				}()
			}
		}()
	}
	err := <-errc
	if !errors.Is(err, net.ErrClosed) {
		fmt.Fprintf(stderr, "lbdns-quickstart: gslb member %s: %v\n", *name, err)
	}
	return 1
}

// isMemberArgs reports whether args make this program a member process.
func isMemberArgs(args []string) bool {
	return len(args) > 0 && strings.TrimLeft(args[0], "-") == "serve-member"
}
