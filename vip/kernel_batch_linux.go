package vip

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
)

// Limits of one sendmsg of a batch. Every request gets its own
// acknowledgement, and the kernel queues them all on the socket before
// sendmsg returns; an acknowledgement that does not fit the socket's receive
// buffer is dropped, so a chunk holds few enough requests for their
// acknowledgements to fit the default buffer (about 200 KiB, under 1 KiB
// each).
const (
	batchMaxMsgs  = 128
	batchMaxBytes = 64 << 10
	// batchAckWait bounds the wait for the acknowledgements of one chunk.
	batchAckWait = 10 * time.Second
)

// batchConn is a generic netlink socket of its own for the writes: single
// requests, and pipelined ones that go out many to a sendmsg; the
// acknowledgements are read back raw, matched by sequence number.
type batchConn struct {
	c      *netlink.Conn
	rc     syscall.RawConn
	family uint16
	seq    uint32
	sends  uint64
	buf    []byte
	// exchange writes one chunk of requests in one sendmsg and reads
	// their acknowledgements, setting errs[index[j]] for message j:
	// (*batchConn).send, or a recorder in tests.
	exchange func(chunk []netlink.Message, index []int, errs []error)
}

// dialBatch opens the batch socket and looks up the IPVS family.
func dialBatch() (*batchConn, error) {
	c, err := netlink.Dial(syscall.NETLINK_GENERIC, nil)
	if err != nil {
		return nil, fmt.Errorf("dial generic netlink: %w", err)
	}
	f, err := genetlink.NewConn(c).GetFamily(ipvsFamilyName)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: %w; %s", ErrIPVSUnavailable, err, unavailableHint)
	}
	// Error acknowledgements then echo only the request's header, not the
	// whole request. Old kernels lack the option; that costs only space.
	_ = c.SetOption(netlink.CapAcknowledge, true)
	rc, err := c.SyscallConn()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("generic netlink raw conn: %w", err)
	}
	b := &batchConn{c: c, rc: rc, family: f.ID, buf: make([]byte, 32<<10)}
	b.exchange = b.send
	return b, nil
}

// conn returns the batch socket, opening it at its first use.
func (k *KernelClient) conn() (*batchConn, error) {
	if k.batch == nil {
		b, err := dialBatch()
		if err != nil {
			return nil, err
		}
		k.batch = b
	}
	return k.batch, nil
}

// write performs op as a request of its own and waits for its
// acknowledgement: the single-request path of the Client methods, on the
// batch socket and through the same encoder (encodeOp) as ApplyBatch.
func (k *KernelClient) write(op Op) error {
	b, err := k.conn()
	if err != nil {
		return err
	}
	if b.seq > 1<<31 {
		b.seq = 0
	}
	b.seq++
	m, err := batchRequest(b.family, b.seq, op)
	if err != nil {
		return err
	}
	errs := make([]error, 1)
	b.exchange([]netlink.Message{m}, []int{0}, errs)
	return errs[0]
}

// ApplyBatch implements BatchClient: the requests go to the kernel up to
// 128 per sendmsg, and each gets its own acknowledgement.
func (k *KernelClient) ApplyBatch(ops []Op) []error {
	errs := make([]error, len(ops))
	if len(ops) == 0 {
		return errs
	}
	b, err := k.conn()
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	var (
		chunk []netlink.Message
		index []int // position in ops of each message of chunk
		size  int
	)
	if b.seq > 1<<31 {
		b.seq = 0 // keep every batch clear of the wrap to 0
	}
	for i, op := range ops {
		b.seq++
		m, err := batchRequest(b.family, b.seq, op)
		if err != nil {
			errs[i] = err
			continue
		}
		n := nlmsgHeaderLen + len(m.Data)
		if len(chunk) == batchMaxMsgs || (len(chunk) > 0 && size+n > batchMaxBytes) {
			b.sends++
			b.exchange(chunk, index, errs)
			chunk, index, size = chunk[:0], index[:0], 0
		}
		chunk = append(chunk, m)
		index = append(index, i)
		size += n
	}
	if len(chunk) > 0 {
		b.sends++
		b.exchange(chunk, index, errs)
	}
	return errs
}

// BatchSends returns the number of sendmsg calls ApplyBatch has made (the
// single requests of the Client methods are not counted).
func (k *KernelClient) BatchSends() uint64 {
	if k.batch == nil {
		return 0
	}
	return k.batch.sends
}

// send writes one chunk in one sendmsg and reads its acknowledgements,
// setting errs[index[j]] for message j.
func (b *batchConn) send(chunk []netlink.Message, index []int, errs []error) {
	if _, err := b.c.SendMessages(chunk); err != nil {
		for _, i := range index {
			errs[i] = fmt.Errorf("netlink batch send: %w", err)
		}
		return
	}
	first := chunk[0].Header.Sequence
	acked := make([]bool, len(chunk))
	left := len(chunk)
	fail := func(err error) {
		for j, i := range index {
			if !acked[j] {
				errs[i] = err
			}
		}
	}
	if err := b.c.SetReadDeadline(time.Now().Add(batchAckWait)); err != nil {
		fail(fmt.Errorf("netlink batch: %w", err))
		return
	}
	lost := false // the kernel dropped acknowledgements (ENOBUFS)
	for left > 0 {
		var (
			n    int
			rerr error
		)
		err := b.rc.Read(func(fd uintptr) bool {
			n, _, rerr = syscall.Recvfrom(int(fd), b.buf, 0)
			// The kernel answers while sendmsg runs: once some answers
			// were dropped, an empty queue means the rest never come.
			return rerr != syscall.EAGAIN || lost
		})
		switch {
		case err != nil:
			fail(fmt.Errorf("netlink batch: waiting for acknowledgement: %w", err))
			return
		case errors.Is(rerr, syscall.ENOBUFS):
			lost = true
			continue
		case lost && errors.Is(rerr, syscall.EAGAIN):
			fail(fmt.Errorf("netlink batch: acknowledgement lost: %w", syscall.ENOBUFS))
			return
		case rerr != nil:
			fail(fmt.Errorf("netlink batch receive: %w", rerr))
			return
		}
		perr := parseAcks(b.buf[:n], func(seq uint32, errno syscall.Errno) {
			j := int(seq - first)
			if j < 0 || j >= len(chunk) || acked[j] {
				return // not an answer to this chunk
			}
			acked[j] = true
			left--
			errs[index[j]] = ackErr(errno)
		})
		if perr != nil {
			fail(fmt.Errorf("netlink batch receive: %w", perr))
			return
		}
	}
}

// closeBatch closes the batch socket, if open.
func (k *KernelClient) closeBatch() error {
	if k.batch == nil {
		return nil
	}
	err := k.batch.c.Close()
	k.batch = nil
	return err
}
