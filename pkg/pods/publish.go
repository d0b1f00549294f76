package pods

import "sync"

// Publisher hands views to subscribers without ever blocking the one that
// publishes: views coalesce (the latest wins, changed keys add up) until
// the subscriber reads. The resolver publishes the views of the runtime;
// the pod sync publishes the pods' status (kubelet's status manager),
// and both are read through the same Subscription.
type Publisher struct {
	mu   sync.Mutex
	last *View
	subs map[*Subscription]struct{}
}

// Publish hands v to every subscriber, naming the pods that changed since
// the previous view (none: nothing is handed on, but v is kept for new
// subscribers).
func (p *Publisher) Publish(v *View, changed []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = v
	for s := range p.subs {
		if len(changed) > 0 {
			s.push(v, changed)
		}
		select {
		case s.listed <- struct{}{}:
		default:
		}
	}
}

// Latest returns the last view published, whether or not it changed
// anything (nil before the first).
func (p *Publisher) Latest() *View {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// Subscribe returns a subscription whose first batch (if a view was
// published already) names every pod as changed.
func (p *Publisher) Subscribe() *Subscription {
	s := &Subscription{publisher: p, ready: make(chan struct{}, 1), listed: make(chan struct{}, 1), changed: map[string]struct{}{}}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.subs == nil {
		p.subs = map[*Subscription]struct{}{}
	}
	p.subs[s] = struct{}{}
	if p.last != nil {
		s.push(p.last, ChangedPods(nil, p.last))
	}
	return s
}

// Batch is what a subscriber receives: the latest view and the keys of the
// pods that changed since its previous Next (gone ones included).
type Batch struct {
	View    *View
	Changed []string
}

// Subscription receives views; see Publisher.
type Subscription struct {
	publisher *Publisher
	ready     chan struct{}
	listed    chan struct{}

	mu      sync.Mutex
	view    *View
	changed map[string]struct{}
}

func (s *Subscription) push(v *View, changed []string) {
	s.mu.Lock()
	s.view = v
	for _, k := range changed {
		s.changed[k] = struct{}{}
	}
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Ready is signalled when a new view is waiting.
func (s *Subscription) Ready() <-chan struct{} { return s.ready }

// Next returns the latest view and what changed since the previous call.
func (s *Subscription) Next() Batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := Batch{View: s.view, Changed: make([]string, 0, len(s.changed))}
	for k := range s.changed {
		b.Changed = append(b.Changed, k)
	}
	clear(s.changed)
	return b
}

// Listed is signalled whenever a view is published, even one that
// changed nothing (then Ready is not): for a reader waiting for a newer
// listing of the runtime, not for a change.
func (s *Subscription) Listed() <-chan struct{} { return s.listed }

// Latest returns the last view published, even one that changed nothing
// and so was not handed on.
func (s *Subscription) Latest() *View { return s.publisher.Latest() }

// Close stops delivery to this subscription.
func (s *Subscription) Close() {
	s.publisher.mu.Lock()
	delete(s.publisher.subs, s)
	s.publisher.mu.Unlock()
}
