package restart

import (
	"fmt"
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

// The range kubelet accepts for crashLoopBackOff.maxContainerRestartPeriod
// (KubeletCrashLoopBackOffMax, beta and on in 1.36: its config validation).
const (
	MinMaxContainerRestartPeriod = time.Second
	MaxMaxContainerRestartPeriod = 300 * time.Second
)

// crashLoopExpiry is how long a container's restart back-off is kept
// after its last update: kubelet replaces flowcontrol's 2×max with a fixed
// 600 s (kubelet.go, crashLoopBackOff.HasExpiredFunc), whatever the
// maximum.
const crashLoopExpiry = 600 * time.Second

// NewCrashLoopBackoff returns kubelet's restart back-off for a maximum
// delay of max (its newCrashLoopBackOff): 10 s doubling up to max, or max
// from the start when max is shorter; entries expire 600 s after their
// last update.
func NewCrashLoopBackoff[K comparable](max time.Duration) (*Backoff[K], error) {
	if max < MinMaxContainerRestartPeriod || max > MaxMaxContainerRestartPeriod {
		return nil, fmt.Errorf("maximum container restart period %s: want %s to %s (kubelet's crashLoopBackOff.maxContainerRestartPeriod)",
			max, MinMaxContainerRestartPeriod, MaxMaxContainerRestartPeriod)
	}
	b := NewBackoff[K](min(DefaultInitialBackoff, max), max)
	b.expiry = crashLoopExpiry
	return b, nil
}

// Backoff is kubelet's per-key back-off (client-go's flowcontrol.Backoff as
// kubelet configures it, without jitter): per container for restarts
// (containerKey), per pod and image for pulls (kubelet's backOffKey). A
// key's delay starts at initial and doubles at each Next up to max. The
// caller passes the times: the event the delay is measured from and the
// current time.
//
// An entry expires (flowcontrol's hasExpired) when it was last updated
// more than its expiry before the event it is asked about, or before now:
// kubelet garbage-collects expired entries at every housekeeping tick
// (HandlePodCleanups → crashLoopBackOff.GC, every 2 s), so an entry is
// gone once that long has passed, even when the event a decision is
// measured from is older than the entry (a liveness kill is decided from
// the exit before it). A container that ran 10 minutes without needing a
// restart starts over at initial. Reads never delete: an entry expired by
// now counts as gone, and GC, an explicit step of its owner, drops it.
type Backoff[K comparable] struct {
	initial, max time.Duration
	// expiry: flowcontrol's default 2×max (image pulls), or kubelet's
	// fixed 600 s for restarts (NewCrashLoopBackoff).
	expiry time.Duration

	mu      sync.Mutex
	entries map[K]*backoffEntry
}

// backoffEntry is one key's back-off: its delay and when it was last
// updated.
type backoffEntry struct {
	delay      time.Duration
	lastUpdate time.Time
}

// live reports whether the entry counts for an event at eventTime asked
// about at now: expired by neither (kubelet's GC would have collected it
// by now).
func (e backoffEntry) live(expiry time.Duration, eventTime, now time.Time) bool {
	return now.Sub(e.lastUpdate) <= expiry && eventTime.Sub(e.lastUpdate) <= expiry
}

// wait is how much longer a restart must wait given that the last instance
// finished at finishedAt (flowcontrol's IsInBackOffSince, with the time
// left): 0 when it may restart now.
func (e backoffEntry) wait(expiry time.Duration, finishedAt, now time.Time) time.Duration {
	if !e.live(expiry, finishedAt, now) {
		return 0
	}
	return max(e.delay-now.Sub(finishedAt), 0)
}

// NewBackoff returns a back-off with the given initial and maximum delays.
// Entries expire 2×max after their last update (flowcontrol's default).
func NewBackoff[K comparable](initial, max time.Duration) *Backoff[K] {
	return &Backoff[K]{initial: initial, max: max, expiry: 2 * max, entries: map[K]*backoffEntry{}}
}

// Wait returns how much longer a restart of key must wait given that its
// last instance finished at finishedAt; 0 means it may restart now
// (flowcontrol's IsInBackOffSince, with the time left).
func (b *Backoff[K]) Wait(key K, finishedAt, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok {
		return 0
	}
	return e.wait(b.expiry, finishedAt, now)
}

// WaitSinceUpdate returns how much longer key must wait counted from its
// last Next; 0 means it may go on now (flowcontrol's
// IsInBackOffSinceUpdate, with the time left: kubelet's image pulls).
func (b *Backoff[K]) WaitSinceUpdate(key K, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || !e.live(b.expiry, now, now) {
		return 0
	}
	return max(e.delay-now.Sub(e.lastUpdate), 0)
}

// Next records a restart of key, or a failed pull: the next one waits
// twice as long (or initial for a new or expired entry).
func (b *Backoff[K]) Next(key K, finishedAt, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || !e.live(b.expiry, finishedAt, now) {
		b.entries[key] = &backoffEntry{delay: b.initial, lastUpdate: now}
		return
	}
	e.delay = min(2*e.delay, b.max)
	e.lastUpdate = now
}

// Delay returns key's current delay (0 if none; an expired entry's until
// GC drops it).
func (b *Backoff[K]) Delay(key K) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.entries[key]; ok {
		return e.delay
	}
	return 0
}

// GC drops the entries that expired by now (flowcontrol's GC, which
// kubelet runs after each successful pull and at every housekeeping tick
// for restarts). Reads already count an expired entry as gone: this only
// bounds the memory of keys no longer asked about.
func (b *Backoff[K]) GC(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, e := range b.entries {
		if now.Sub(e.lastUpdate) > b.expiry {
			delete(b.entries, k)
		}
	}
}

// backoffSnapshot is the restart back-off of one pod's containers, by
// name, as a plan reads it: a value, taken once per plan.
type backoffSnapshot struct {
	expiry  time.Duration
	entries map[string]backoffEntry
}

// snapshot returns the entries of keys, each under its name.
func (b *Backoff[K]) snapshot(keys map[string]K) backoffSnapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := backoffSnapshot{expiry: b.expiry, entries: map[string]backoffEntry{}}
	for name, key := range keys {
		if e, ok := b.entries[key]; ok {
			s.entries[name] = *e
		}
	}
	return s
}

// wait is Backoff.Wait of container name; delay its current delay.
func (s backoffSnapshot) wait(name string, finishedAt, now time.Time) (wait, delay time.Duration) {
	e, ok := s.entries[name]
	if !ok {
		return 0, 0
	}
	return e.wait(s.expiry, finishedAt, now), e.delay
}
