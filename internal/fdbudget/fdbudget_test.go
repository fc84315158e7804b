package fdbudget

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// TestListenerCap: beyond max open connections a new one is closed at
// once and counted as limit; closing one frees its place.
func TestListenerCap(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	refused := map[string]int{}
	l := NewListener(inner, 2, Budget{}, func(r string) { mu.Lock(); refused[r]++; mu.Unlock() })
	defer l.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	dial()
	a1, a2 := <-accepted, <-accepted
	third := dial()
	_ = third.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := third.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("third connection beyond the cap of 2: read %v, want EOF (closed)", err)
	}
	mu.Lock()
	if refused[ReasonLimit] != 1 {
		t.Errorf("refused %v, want one limit", refused)
	}
	mu.Unlock()
	if l.Open() != 2 {
		t.Errorf("Open() = %d, want 2", l.Open())
	}
	a1.Close()
	a1.Close() // twice frees one place only
	dial()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(2 * time.Second):
		t.Fatal("a connection after one closed was not accepted")
	}
	a2.Close()
	if l.Open() != 0 {
		t.Errorf("Open() = %d after all closed, want 0", l.Open())
	}
}

// TestBudget: a budget whose ceiling is below the descriptors open
// refuses, the zero one admits everything, New reserves at most half the
// limit.
func TestBudget(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if !(Budget{}).Admits(a) {
		t.Error("zero budget refused a connection")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fd := FD(c)
	if fd < 0 {
		t.Fatal("no descriptor for a TCP connection")
	}
	if (Budget{ceiling: fd}).Admits(c) || !(Budget{ceiling: fd + 1}).Admits(c) {
		t.Errorf("ceiling %d / %d: want refused at its own number, admitted below", fd, fd+1)
	}
	if got := New(1 << 30).Ceiling(); got != 0 && got < 1 {
		t.Errorf("New with a huge reserve: ceiling %d", got)
	}
}
