package cri

import (
	"slices"
	"sync"

	"github.com/cri-prober/cri-prober/pkg/pubsub"
)

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

// Event is one change seen by a relist. Sandbox is the sandbox concerned (for
// container events, the container's sandbox); Container is nil for sandbox
// events. Removal events carry the last values seen.
type Event struct {
	Type      EventType
	Sandbox   *Sandbox
	Container *Container
}

// changedFrom reports whether s adds, removes or replaces (a value
// changed) a sandbox or container of prev (nil: nothing). The poller
// replaces what changed and keeps the rest, so this compares pointers.
func (s *Snapshot) changedFrom(prev *Snapshot) bool {
	if prev == nil {
		return len(s.pods)+len(s.containers) > 0
	}
	if s.sameContents(prev) {
		return false
	}
	return !slices.Equal(s.pods, prev.pods) || !slices.Equal(s.containers, prev.containers)
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

	for _, pod := range next.Sandboxes() {
		old, existed := prev.Sandbox(pod.ID)
		if !existed {
			added = append(added, Event{Type: SandboxAdded, Sandbox: pod})
		}
		if pod.State == SandboxNotReady && (!existed || old.State != SandboxNotReady) {
			stopped = append(stopped, Event{Type: SandboxStopped, Sandbox: pod})
		}
	}
	for _, ctr := range next.Containers() {
		pod, _ := next.Sandbox(ctr.SandboxID)
		emit := func(t EventType) { lifecycle = append(lifecycle, Event{Type: t, Sandbox: pod, Container: ctr}) }
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
			pod, ok := next.Sandbox(ctr.SandboxID)
			if !ok {
				pod, _ = prev.Sandbox(ctr.SandboxID)
			}
			removedContainers = append(removedContainers, Event{Type: ContainerRemoved, Sandbox: pod, Container: ctr})
		}
	}
	for _, pod := range prev.Sandboxes() {
		if _, ok := next.Sandbox(pod.ID); !ok {
			removedPods = append(removedPods, Event{Type: SandboxRemoved, Sandbox: pod})
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

// Batch is what a subscriber receives: the latest snapshot, whether the
// runtime's picture changed since its previous Next, and (for Subscribe's
// subscribers) every event since then.
type Batch struct {
	Snapshot *Snapshot
	// Changed is set when a sandbox or container was added, removed or
	// replaced (any of its values changed) since the previous Next.
	Changed bool
	Events  []Event
	// Resync is set when events were dropped because the subscriber fell too
	// far behind: reconcile against Snapshot instead.
	Resync bool
}

// Subscription receives the poller's relists. The poller never blocks on
// a subscriber: batches coalesce until the subscriber calls Next. Ready is
// signalled when news is waiting (events, or for Watch's subscribers a
// changed picture); Listed after every relist, even one that changed
// nothing: Next then returns the newest snapshot and no news. For readers
// that need to know how recent their picture is.
type Subscription = pubsub.Subscription[relisted, Batch]

// relisted is what the poller publishes per relist: the new snapshot, and
// what changed from the previous one. The lifecycle events are computed
// once, when a subscriber that reads them first asks.
type relisted struct {
	snapshot *Snapshot
	changed  bool
	events   func() []Event
}

func newRelisted(prev, next *Snapshot) relisted {
	r := relisted{snapshot: next, changed: next.changedFrom(prev)}
	if !r.changed {
		r.events = func() []Event { return nil }
	} else {
		r.events = sync.OnceValue(func() []Event { return diff(prev, next) })
	}
	return r
}

// replay is a late subscriber's first relist: everything present, as if
// it had just appeared.
func replay(last relisted) relisted { return newRelisted(nil, last.snapshot) }

// Subscribe returns a subscription to the lifecycle events (diff) of every
// relist, for readers that show or act on each change (`pods -w`). Its
// first batch (if the poller has a snapshot already) describes everything
// present as if it had just appeared.
func (p *Poller) Subscribe() *Subscription {
	return p.changes.Subscribe(&pendingEvents{}, replay)
}

// Watch returns a subscription to the snapshots, for readers that rebuild
// what they make of the runtime when it changed (Batch.Changed) and need
// no events. Its first batch (if the poller has a snapshot already) says
// changed if anything is present.
func (p *Poller) Watch() *Subscription {
	return p.changes.Subscribe(&pendingSnapshots{}, replay)
}

// publish swaps in the new snapshot and hands it to every subscriber.
func (p *Poller) publish(snap *Snapshot) {
	prev := p.snapshot.Swap(snap)
	p.changes.Publish(newRelisted(prev, snap))
}

// pendingSnapshots gathers the latest snapshot and whether any relist
// since the previous Next changed the picture.
type pendingSnapshots struct {
	snapshot *Snapshot
	changed  bool
}

func (s *pendingSnapshots) Add(r relisted) bool {
	s.snapshot = r.snapshot
	s.changed = s.changed || r.changed
	return r.changed
}

func (s *pendingSnapshots) Take() Batch {
	b := Batch{Snapshot: s.snapshot, Changed: s.changed}
	s.changed = false
	return b
}

// pendingEvents gathers the latest snapshot and the events since the
// previous Next, up to maxPendingEvents.
type pendingEvents struct {
	pendingSnapshots
	events   []Event
	overflow bool
}

func (s *pendingEvents) Add(r relisted) bool {
	s.pendingSnapshots.Add(r)
	events := r.events()
	if len(s.events)+len(events) > maxPendingEvents {
		s.events, s.overflow = nil, true
	} else {
		s.events = append(s.events, events...)
	}
	return len(events) > 0 // a relist that changed nothing wakes no reader of changes
}

func (s *pendingEvents) Take() Batch {
	b := s.pendingSnapshots.Take()
	b.Events, b.Resync = s.events, s.overflow
	s.events, s.overflow = nil, false
	return b
}
