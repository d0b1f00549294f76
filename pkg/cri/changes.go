package cri

import "sync"

// EventType names a change between two snapshots.
type EventType string

const (
	SandboxAdded     EventType = "SandboxAdded"
	SandboxStopped   EventType = "SandboxStopped"
	SandboxRemoved   EventType = "SandboxRemoved"
	ContainerCreated EventType = "ContainerCreated"
	ContainerStarted EventType = "ContainerStarted"
	ContainerExited  EventType = "ContainerExited"
	ContainerRemoved EventType = "ContainerRemoved"
)

// Event is one change seen by a relist. Pod is the sandbox concerned (for
// container events, the container's sandbox); Container is nil for sandbox
// events. Removal events carry the last values seen.
type Event struct {
	Type      EventType
	Pod       *Pod
	Container *Container
}

// diff returns the changes from prev (nil: nothing) to next as lifecycle
// events, in a stable order: sandboxes added, container lifecycle, containers
// removed, sandboxes stopped and removed. Something first seen in a later
// state gets the events of the states it went through (a container first
// seen exited is created, started and exited), so every subscriber sees the
// same lifecycle whenever it joined.
func diff(prev, next *Snapshot) []Event {
	if prev == nil {
		prev = NewSnapshot(next.Time, nil, nil)
	} else if prev.sameContents(next) {
		return nil // a relist that found nothing new
	}
	var added, lifecycle, removedContainers, stopped, removedPods []Event

	for _, pod := range next.Pods() {
		old, existed := prev.Pod(pod.ID)
		if !existed {
			added = append(added, Event{Type: SandboxAdded, Pod: pod})
		}
		if pod.State == SandboxNotReady && (!existed || old.State != SandboxNotReady) {
			stopped = append(stopped, Event{Type: SandboxStopped, Pod: pod})
		}
	}
	for _, ctr := range next.Containers() {
		pod, _ := next.Pod(ctr.SandboxID)
		emit := func(t EventType) { lifecycle = append(lifecycle, Event{Type: t, Pod: pod, Container: ctr}) }
		old, existed := prev.Container(ctr.ID)
		if !existed {
			emit(ContainerCreated)
		}
		wasStarted := existed && old.State != StateCreated && old.State != StateUnknown
		isStarted := ctr.State == StateRunning || (ctr.State == StateExited && !ctr.StartedAt.IsZero())
		if isStarted && !wasStarted {
			emit(ContainerStarted)
		}
		if ctr.State == StateExited && (!existed || old.State != StateExited) {
			emit(ContainerExited)
		}
	}
	for _, ctr := range prev.Containers() {
		if _, ok := next.Container(ctr.ID); !ok {
			pod, ok := next.Pod(ctr.SandboxID)
			if !ok {
				pod, _ = prev.Pod(ctr.SandboxID)
			}
			removedContainers = append(removedContainers, Event{Type: ContainerRemoved, Pod: pod, Container: ctr})
		}
	}
	for _, pod := range prev.Pods() {
		if _, ok := next.Pod(pod.ID); !ok {
			removedPods = append(removedPods, Event{Type: SandboxRemoved, Pod: pod})
		}
	}

	events := make([]Event, 0, len(added)+len(lifecycle)+len(removedContainers)+len(stopped)+len(removedPods))
	for _, group := range [][]Event{added, lifecycle, removedContainers, stopped, removedPods} {
		events = append(events, group...)
	}
	return events
}

// maxPendingEvents bounds what a subscriber that stopped reading can hold;
// past it the subscriber is told to resync from the snapshot.
const maxPendingEvents = 1 << 16

// Batch is what a subscriber receives: the latest snapshot and every event
// since its previous Next.
type Batch struct {
	Snapshot *Snapshot
	Events   []Event
	// Resync is set when events were dropped because the subscriber fell too
	// far behind: reconcile against Snapshot instead.
	Resync bool
}

// Subscription receives the poller's changes. The poller never blocks on a
// subscriber: batches coalesce until the subscriber calls Next.
type Subscription struct {
	poller *Poller
	ready  chan struct{}
	listed chan struct{}

	mu       sync.Mutex
	snapshot *Snapshot
	pending  []Event
	overflow bool
}

// Subscribe returns a subscription whose first batch (if the poller has a
// snapshot already) describes everything present as if it had just appeared.
func (p *Poller) Subscribe() *Subscription {
	s := &Subscription{poller: p, ready: make(chan struct{}, 1), listed: make(chan struct{}, 1)}
	p.subsMu.Lock()
	defer p.subsMu.Unlock()
	p.subs[s] = struct{}{}
	if snap := p.snapshot.Load(); snap != nil {
		s.push(snap, diff(nil, snap))
	}
	return s
}

// publish swaps in the new snapshot and hands its changes to every
// subscriber. The swap happens under subsMu so that a concurrent Subscribe
// sees either the old snapshot and then this batch, or only the new one.
func (p *Poller) publish(snap *Snapshot) {
	p.subsMu.Lock()
	defer p.subsMu.Unlock()
	prev := p.snapshot.Swap(snap)
	if len(p.subs) == 0 {
		return
	}
	events := diff(prev, snap)
	for s := range p.subs {
		s.push(snap, events)
	}
}

func (s *Subscription) push(snap *Snapshot, events []Event) {
	s.mu.Lock()
	s.snapshot = snap
	if len(s.pending)+len(events) > maxPendingEvents {
		s.pending, s.overflow = nil, true
	} else {
		s.pending = append(s.pending, events...)
	}
	s.mu.Unlock()
	select {
	case s.listed <- struct{}{}:
	default:
	}
	if len(events) == 0 {
		return // a relist that changed nothing wakes no reader of changes
	}
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Ready is signalled when events are waiting.
func (s *Subscription) Ready() <-chan struct{} { return s.ready }

// Listed is signalled after every relist, even one that changed nothing
// (then Ready is not): Next then returns the newest snapshot and no
// events. For readers that need to know how recent their picture is.
func (s *Subscription) Listed() <-chan struct{} { return s.listed }

// Next returns everything received since the previous call.
func (s *Subscription) Next() Batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := Batch{Snapshot: s.snapshot, Events: s.pending, Resync: s.overflow}
	s.pending, s.overflow = nil, false
	return b
}

// Close stops delivery to this subscription.
func (s *Subscription) Close() {
	s.poller.subsMu.Lock()
	delete(s.poller.subs, s)
	s.poller.subsMu.Unlock()
}
