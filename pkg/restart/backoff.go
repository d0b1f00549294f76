package restart

import (
	"sync"
	"time"
)

// kubelet's CrashLoopBackOff: 10 s, doubling, at most 300 s, no jitter.
const (
	DefaultInitialBackoff = 10 * time.Second
	DefaultMaxBackoff     = 300 * time.Second
)

// Backoff is kubelet's per-container restart back-off (client-go's
// flowcontrol.Backoff as kubelet configures it). A key's delay starts at
// initial and doubles at each restart up to max. The caller passes the
// times: the exit the delay is measured from and the current time.
//
// An entry expires when the exit it is asked about came more than 2×max
// after its last update: a container that ran that long without needing a
// restart starts over at initial (after 10 minutes with kubelet's values).
type Backoff struct {
	initial, max time.Duration

	mu      sync.Mutex
	entries map[containerKey]*backoffEntry
}

type backoffEntry struct {
	delay      time.Duration
	lastUpdate time.Time
}

// NewBackoff returns a back-off with the given initial and maximum delays.
func NewBackoff(initial, max time.Duration) *Backoff {
	return &Backoff{initial: initial, max: max, entries: map[containerKey]*backoffEntry{}}
}

func (b *Backoff) expired(e *backoffEntry, finishedAt time.Time) bool {
	return finishedAt.Sub(e.lastUpdate) > 2*b.max
}

// Wait returns how much longer a restart of key must wait given that its
// last instance finished at finishedAt; 0 means it may restart now.
func (b *Backoff) Wait(key containerKey, finishedAt, now time.Time) time.Duration {
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

// Next records a restart of key: the next one waits twice as long (or
// initial for a new or expired entry).
func (b *Backoff) Next(key containerKey, finishedAt, now time.Time) {
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
func (b *Backoff) Delay(key containerKey) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.entries[key]; ok {
		return e.delay
	}
	return 0
}

// ForgetPod drops the history of every container of a pod (it is gone).
func (b *Backoff) ForgetPod(pod string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.entries {
		if k.pod == pod {
			delete(b.entries, k)
		}
	}
}
