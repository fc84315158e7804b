// Package sdnotify tells systemd how lbdnsd is doing, over the sd_notify
// protocol (github.com/coreos/go-systemd/v22/daemon writes it): READY=1
// once the daemon's main loop runs, RELOADING=1 and READY=1 around a
// configuration reload, STOPPING=1 when it stops, and the watchdog pings
// (WATCHDOG=1) of a unit with WatchdogSec, sent only while the main loop
// proves itself alive.
//
// The loop proves itself by calling Alive on every tick: Alive only stamps
// the time. A pinger (Run) pings at a quarter of the watchdog interval, and
// only when the stamp is younger than half of it, so a loop that blocks
// (a netlink call that never returns, a deadlock) stops the pings and
// systemd restarts the daemon within about one and a half watchdog
// intervals. Outside systemd (no NOTIFY_SOCKET) New returns nil, and every
// method of a nil *Notifier does nothing.
package sdnotify

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
)

// Options configures a Notifier.
type Options struct {
	// Logger receives a warning when a message cannot be sent. Default:
	// discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Notifier sends lbdnsd's notifications to systemd. Its methods are safe
// for concurrent use and do nothing on a nil *Notifier.
type Notifier struct {
	log      *slog.Logger
	now      func() time.Time
	watchdog time.Duration // WATCHDOG_USEC for this process; 0: no watchdog
	alive    atomic.Int64  // Unix nanoseconds of the loop's last Alive; 0: never
	ready    atomic.Bool   // READY=1 sent after start
}

// New returns a Notifier for the NOTIFY_SOCKET (and WATCHDOG_USEC,
// WATCHDOG_PID) that systemd put in the environment, or nil when there is
// no NOTIFY_SOCKET: the daemon does not run under a Type=notify unit.
func New(opts Options) (*Notifier, error) {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return nil, nil
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	wd, err := sd.SdWatchdogEnabled(false)
	if err != nil {
		return nil, fmt.Errorf("sdnotify: watchdog: %w", err)
	}
	return &Notifier{log: opts.Logger, now: opts.Now, watchdog: wd}, nil
}

// Watchdog returns the watchdog interval systemd asked for (0: none).
func (n *Notifier) Watchdog() time.Duration {
	if n == nil {
		return 0
	}
	return n.watchdog
}

// Alive is called by the daemon's main loop on every tick: it stamps the
// loop as alive, and the first call (the listeners are up, the loop runs)
// sends READY=1.
func (n *Notifier) Alive() {
	if n == nil {
		return
	}
	if !n.ready.Swap(true) {
		n.send(sd.SdNotifyReady + "\nSTATUS=running")
	}
	// Stamped after READY=1 is sent: the pinger, which pings only on a
	// fresh stamp, can then never ping before READY.
	n.alive.Store(n.now().UnixNano())
}

// Reload runs reload (the loop's configuration reload) between
// RELOADING=1, stamped with the monotonic clock as systemd requires, and
// READY=1, which is sent whether or not the reload was applied: a rejected
// configuration leaves the running one in force. It returns reload's
// error.
func (n *Notifier) Reload(reload func() error) error {
	if n == nil {
		return reload()
	}
	n.send(sd.SdNotifyReloading + "\n" + sd.SdNotifyMonotonicUsec() + "STATUS=reloading")
	err := reload()
	status := "running"
	if err != nil {
		status = "running; last reload rejected, see the journal"
	}
	n.send(sd.SdNotifyReady + "\nSTATUS=" + status)
	return err
}

// Run pings the watchdog while the main loop is alive, until ctx is done;
// it then sends STOPPING=1. Without a watchdog it only waits for ctx.
func (n *Notifier) Run(ctx context.Context) {
	if n == nil {
		return
	}
	defer n.send(sd.SdNotifyStopping + "\nSTATUS=stopping")
	if n.watchdog <= 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(n.watchdog / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n.loopAlive() {
				n.send(sd.SdNotifyWatchdog)
			}
		}
	}
}

// loopAlive tells whether the loop's last Alive is younger than half the
// watchdog interval.
func (n *Notifier) loopAlive() bool {
	last := n.alive.Load()
	return last != 0 && n.now().Sub(time.Unix(0, last)) < n.watchdog/2
}

func (n *Notifier) send(state string) {
	if _, err := sd.SdNotify(false, state); err != nil {
		n.log.Warn("cannot notify systemd", "state", state, "err", err)
	}
}
