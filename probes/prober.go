package probes

import (
	"errors"
	"fmt"
	"sync"
)

// DNSProber holds what the checks of kind "dns" of one Builder share: on
// Linux, the batch engines of IPv4 and IPv6 (StartCheck: queries sent
// with others in one sendmmsg on a shared socket, replies read with
// others in one recvmmsg), started on first use. Elsewhere, and for TCP
// checks, every probe opens its own socket, as DNS does.
//
// The zero value is ready to use; NewDNSProber is the usual constructor.
// DNSProber is safe for concurrent use.
type DNSProber struct {
	mu     sync.Mutex
	closed bool
	// engines are the batch engines of IPv4 and IPv6 (StartCheck),
	// started on first use.
	engines [2]*engine
	// okText holds the success Details of each rcode (judge.okText),
	// made once for all the checkers of the prober: at 5,000 targets a
	// table per checker was 1.6 MB.
	okText map[int]*[okTextMax]string
}

// okTexts returns the success Details of rcode, made on first use.
func (p *DNSProber) okTexts(rcode int) *[okTextMax]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := p.okText[rcode]; t != nil {
		return t
	}
	if p.okText == nil {
		p.okText = make(map[int]*[okTextMax]string)
	}
	t := newOKTexts(rcode)
	p.okText[rcode] = t
	return t
}

// NewDNSProber returns a DNSProber with no engine yet. Call Close when done
// with it.
func NewDNSProber() *DNSProber {
	return &DNSProber{}
}

// Close closes the batch engines (ending their probes in flight as
// "canceled"); the checks started after it fail ("prober closed").
func (p *DNSProber) Close() error {
	p.mu.Lock()
	p.closed = true
	engines := p.engines
	p.engines = [2]*engine{}
	p.mu.Unlock()
	var errs []error
	for _, e := range engines {
		if e != nil {
			if err := e.close(); err != nil {
				errs = append(errs, fmt.Errorf("close batch engine: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}
