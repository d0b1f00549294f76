// Package pubsub hands values from one writer to any number of readers
// without ever blocking the writer: what a reader has not read yet
// coalesces (how is the reader's Pending) until it calls Next.
//
// The poller's relists (pkg/cri), the pod views (pkg/pods) and the probe
// results (pkg/results) are handed on this way. It imports only the
// standard library: a leaf every layer may use.
package pubsub

import "sync"

// Pending gathers what one subscriber has not read yet. It is only used
// under its subscription's lock.
type Pending[T, B any] interface {
	// Add takes one published value and reports whether it is news a
	// reader waits for (Ready) rather than only a newer publication
	// (Listed).
	Add(v T) (news bool)
	// Take returns what was gathered since the previous Take and starts
	// again.
	Take() B
}

// Topic publishes values of type T; its subscribers read batches of type
// B. The zero Topic is ready to use.
type Topic[T, B any] struct {
	mu        sync.Mutex
	last      T
	published bool
	subs      map[*Subscription[T, B]]struct{}
}

// Publish hands v to every subscriber and keeps it as the latest value.
// It never waits for a reader.
func (t *Topic[T, B]) Publish(v T) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last, t.published = v, true
	for s := range t.subs {
		s.push(v)
	}
}

// Latest returns the last value published (false before the first).
func (t *Topic[T, B]) Latest() (T, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last, t.published
}

// Subscribe returns a subscription whose values p gathers. If a value was
// published already and replay is not nil, the subscription's first value
// is replay(latest): for a reader that joins late, the past as one value.
// A concurrent Publish is seen either after that value or in it, never
// lost. Close the subscription when done.
func (t *Topic[T, B]) Subscribe(p Pending[T, B], replay func(latest T) T) *Subscription[T, B] {
	s := &Subscription[T, B]{topic: t, pending: p, ready: make(chan struct{}, 1), listed: make(chan struct{}, 1)}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.subs == nil {
		t.subs = map[*Subscription[T, B]]struct{}{}
	}
	t.subs[s] = struct{}{}
	if t.published && replay != nil {
		s.push(replay(t.last))
	}
	return s
}

// Subscription receives a topic's values; see Topic.
type Subscription[T, B any] struct {
	topic  *Topic[T, B]
	ready  chan struct{}
	listed chan struct{}

	mu      sync.Mutex
	pending Pending[T, B]
}

func (s *Subscription[T, B]) push(v T) {
	s.mu.Lock()
	news := s.pending.Add(v)
	s.mu.Unlock()
	select {
	case s.listed <- struct{}{}:
	default:
	}
	if !news {
		return
	}
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Ready is signalled when news is waiting.
func (s *Subscription[T, B]) Ready() <-chan struct{} { return s.ready }

// Listed is signalled whenever a value is published, news or not (then
// Ready is not): for a reader that waits for a newer publication rather
// than for a change.
func (s *Subscription[T, B]) Listed() <-chan struct{} { return s.listed }

// Next returns what was gathered since the previous call.
func (s *Subscription[T, B]) Next() B {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending.Take()
}

// Latest returns the topic's last value, news or not (false before the
// first).
func (s *Subscription[T, B]) Latest() (T, bool) { return s.topic.Latest() }

// Close stops delivery to this subscription. What it gathered can still
// be read with Next.
func (s *Subscription[T, B]) Close() {
	s.topic.mu.Lock()
	delete(s.topic.subs, s)
	s.topic.mu.Unlock()
}
