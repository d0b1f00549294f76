package restart

import (
	"sync"
	"time"
)

// kubelet's CrashLoopBackOff: 10 s, doubling, at most 300 s, no jitter.
// Its image pull back-off has the same values (imageBackOffPeriod,
// MaxImageBackOff in pkg/kubelet/kubelet.go).
const (
	DefaultInitialBackoff = 10 * time.Second
	DefaultMaxBackoff     = 300 * time.Second
)

// Backoff is kubelet's per-key back-off (client-go's flowcontrol.Backoff as
// kubelet configures it, without jitter): per container for restarts
// (containerKey), per pod and image for pulls (kubelet's backOffKey). A
// key's delay starts at initial and doubles at each Next up to max. The
// caller passes the times: the event the delay is measured from and the
// current time.
//
// An entry expires when the event it is asked about came more than 2×max
// after its last update: a container that ran that long without needing a
// restart starts over at initial (after 10 minutes with kubelet's values).
type Backoff[K comparable] struct {
	initial, max time.Duration

	mu      sync.Mutex
	entries map[K]*backoffEntry
}

type backoffEntry struct {
	delay      time.Duration
	lastUpdate time.Time
}

// NewBackoff returns a back-off with the given initial and maximum delays.
func NewBackoff[K comparable](initial, max time.Duration) *Backoff[K] {
	return &Backoff[K]{initial: initial, max: max, entries: map[K]*backoffEntry{}}
}

func (b *Backoff[K]) expired(e *backoffEntry, eventTime time.Time) bool {
	return eventTime.Sub(e.lastUpdate) > 2*b.max
}

// Wait returns how much longer a restart of key must wait given that its
// last instance finished at finishedAt; 0 means it may restart now
// (flowcontrol's IsInBackOffSince, with the time left).
func (b *Backoff[K]) Wait(key K, finishedAt, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || b.expired(e, finishedAt) {
		return 0
	}
	if left := e.delay - now.Sub(finishedAt); left > 0 {
		return left
	}
	return 0
}

// WaitSinceUpdate returns how much longer key must wait counted from its
// last Next; 0 means it may go on now (flowcontrol's
// IsInBackOffSinceUpdate, with the time left: kubelet's image pulls).
func (b *Backoff[K]) WaitSinceUpdate(key K, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || b.expired(e, now) {
		return 0
	}
	if left := e.delay - now.Sub(e.lastUpdate); left > 0 {
		return left
	}
	return 0
}

// Next records a restart of key, or a failed pull: the next one waits
// twice as long (or initial for a new or expired entry).
func (b *Backoff[K]) Next(key K, finishedAt, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || b.expired(e, finishedAt) {
		b.entries[key] = &backoffEntry{delay: b.initial, lastUpdate: now}
		return
	}
	e.delay = min(2*e.delay, b.max)
	e.lastUpdate = now
}

// Delay returns key's current delay (0 if none).
func (b *Backoff[K]) Delay(key K) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.entries[key]; ok {
		return e.delay
	}
	return 0
}

// GC drops the entries that expired by now (flowcontrol's GC, which
// kubelet runs after each successful pull).
func (b *Backoff[K]) GC(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, e := range b.entries {
		if b.expired(e, now) {
			delete(b.entries, k)
		}
	}
}
