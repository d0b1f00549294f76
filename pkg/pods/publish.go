package pods

import "github.com/cri-prober/cri-prober/pkg/pubsub"

// Publisher hands views to subscribers without ever blocking the one that
// publishes: views coalesce (the latest wins, changed keys add up) until
// the subscriber reads. The resolver publishes the views of the runtime;
// the pod sync publishes the pods' status (kubelet's status manager),
// and both are read through the same Subscription. The zero Publisher is
// ready to use.
type Publisher struct {
	topic pubsub.Topic[published, Batch]
}

// published is one view and the keys of the pods it changed. A replay
// (a late subscriber's first view) is handed on even if it names no pod.
type published struct {
	view    *View
	changed []string
	replay  bool
}

// Publish hands v to every subscriber, naming the pods that changed since
// the previous view (none: nothing is handed on, but v is kept for new
// subscribers and signalled as listed).
func (p *Publisher) Publish(v *View, changed []string) {
	p.topic.Publish(published{view: v, changed: changed})
}

// Latest returns the last view published, whether or not it changed
// anything (nil before the first).
func (p *Publisher) Latest() *View {
	last, _ := p.topic.Latest()
	return last.view
}

// Subscribe returns a subscription whose first batch (if a view was
// published already) names every pod as changed.
func (p *Publisher) Subscribe() *Subscription {
	replay := func(last published) published {
		return published{view: last.view, changed: ChangedPods(nil, last.view), replay: true}
	}
	return &Subscription{p.topic.Subscribe(&pendingPods{changed: map[string]struct{}{}}, replay)}
}

// Batch is what a subscriber receives: the latest view and the keys of the
// pods that changed since its previous Next (gone ones included).
type Batch struct {
	View    *View
	Changed []string
}

// Subscription receives views; see Publisher. Ready is signalled when a
// view that changed some pod is waiting; Listed whenever a view is
// published, even one that changed nothing: for a reader waiting for a
// newer listing of the runtime, not for a change.
type Subscription struct {
	*pubsub.Subscription[published, Batch]
}

// Latest returns the last view published, even one that changed nothing
// and so was not handed on.
func (s *Subscription) Latest() *View {
	last, _ := s.Subscription.Latest()
	return last.view
}

// pendingPods gathers the latest view that changed a pod and the keys of
// the pods changed since the previous Next.
type pendingPods struct {
	view    *View
	changed map[string]struct{}
}

func (p *pendingPods) Add(v published) bool {
	if len(v.changed) == 0 && !v.replay {
		return false
	}
	p.view = v.view
	for _, k := range v.changed {
		p.changed[k] = struct{}{}
	}
	return true
}

func (p *pendingPods) Take() Batch {
	b := Batch{View: p.view, Changed: make([]string, 0, len(p.changed))}
	for k := range p.changed {
		b.Changed = append(b.Changed, k)
	}
	clear(p.changed)
	return b
}
