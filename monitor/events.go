package monitor

import (
	"context"
)

// eventBuffer is the number of events that may wait in the channel for
// OnEvent; more wait in an overflow list, so that no check ever blocks on
// delivery.
const eventBuffer = 256

// queuedEvent is an event waiting for delivery, with the target it came
// from so that delivery can tell whether the target is still current.
type queuedEvent struct {
	t  *target
	ev Event
}

// handleEvent delivers one event if its target is still current.
func (m *Monitor) handleEvent(qe queuedEvent) {
	m.mu.Lock()
	current := m.targets[qe.t.key] == qe.t
	m.mu.Unlock()
	if !current || m.opts.OnEvent == nil {
		return
	}
	m.opts.OnEvent(qe.ev)
}

// drainOverflow delivers the events in the channel, then those in
// overflow, in order, unless ctx is done.
func (m *Monitor) drainOverflow(ctx context.Context) {
	for {
		select {
		case qe := <-m.events:
			m.handleEvent(qe)
			continue
		default:
		}
		m.mu.Lock()
		evs := m.overflow
		m.overflow = nil
		m.mu.Unlock()
		if len(evs) == 0 {
			return
		}
		for _, qe := range evs {
			if ctx.Err() != nil {
				return
			}
			m.handleEvent(qe)
		}
	}
}

// queueEvent queues qe for Run without blocking.
func (m *Monitor) queueEvent(qe queuedEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.overflow) == 0 {
		select {
		case m.events <- qe:
			return
		default:
		}
	}
	m.overflow = append(m.overflow, qe)
	select {
	case m.evKick <- struct{}{}:
	default:
	}
}
