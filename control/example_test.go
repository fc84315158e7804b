package control_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"lbdns/control"
)

func ExampleEventLog() {
	events := control.NewEventLog(100, nil)
	events.Append(control.Event{Kind: control.EventState, Subject: "bind-1/recursive", Message: "up → down"})
	events.Append(control.Event{Kind: control.EventOverride, Subject: "bind-1", Message: "drained by uid 0"})

	evs, next, _ := events.Since(1)
	for _, ev := range evs {
		fmt.Println(ev.Seq, ev.Kind, ev.Subject, ev.Message)
	}
	fmt.Println("next:", next)
	// Output:
	// 2 override bind-1 drained by uid 0
	// next: 2
}

// The daemon runs both servers over the same Backend until it stops.
func ExampleServer() {
	var backend control.Backend // the daemon
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	events := control.NewEventLog(0, nil)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	ln, err := control.ListenUnix("/run/lbdns/control.sock")
	if err != nil {
		log.Error("control socket", "err", err)
		return
	}
	go func() {
		srv := control.NewServer(control.ServerOptions{Backend: backend, Events: events, Logger: log})
		if err := srv.Serve(ctx, ln); err != nil {
			log.Error("control socket", "err", err)
		}
	}()

	sl, err := net.Listen("tcp", "127.0.0.1:9053")
	if err != nil {
		log.Error("status listener", "err", err)
		return
	}
	st := control.NewStatusServer(control.StatusOptions{
		Backend: backend, Gatherer: prometheus.NewRegistry(), Logger: log, Refresh: 5 * time.Second,
	})
	if err := st.Serve(ctx, sl); err != nil {
		log.Error("status server", "err", err)
	}
}
