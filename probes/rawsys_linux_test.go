package probes

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestEpollWaiter: the engine's epoll instance waits in the runtime's
// poller: a wait times out after its duration with nothing ready, and
// returns the event of a descriptor that becomes ready meanwhile.
func TestEpollWaiter(t *testing.T) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	w := newEpollWaiter(epfd)
	defer w.close()
	if w.rc == nil {
		t.Fatal("epoll instance not pollable: the engine would block a thread in epoll_wait")
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(p[0])}
	if err := rawEpollAdd(epfd, p[0], &ev); err != nil {
		t.Fatal(err)
	}
	events := make([]unix.EpollEvent, 4)
	start := time.Now()
	if n := w.wait(events, 30*time.Millisecond); n != 0 {
		t.Fatalf("wait with nothing ready = %d events", n)
	}
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Errorf("wait with nothing ready returned after %v, want 30ms", took)
	}
	if n := w.wait(events, 0); n != 0 {
		t.Fatalf("poll with nothing ready = %d events", n)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		unix.Write(p[1], []byte{1})
	}()
	if n := w.wait(events, 5*time.Second); n != 1 || events[0].Fd != int32(p[0]) {
		t.Fatalf("wait = %d events %+v, want the pipe's", n, events[:n])
	}
	if n := w.wait(events, 0); n != 1 {
		t.Fatalf("poll with the pipe still readable = %d events, want 1", n)
	}
}
