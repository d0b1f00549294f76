package pods

import "github.com/cri-prober/cri-prober/pkg/pubsub"

// Publisher hands views to subscribers without ever blocking the one that
// publishes: views coalesce (the latest wins, changed keys add up) until
// the subscriber reads. The resolver publishes the views of the runtime
// (Publish); the pod sync publishes the pods' status (PublishStatus,
// kubelet's status manager), and both are read through the same
// Subscription. The zero Publisher is ready to use.
type Publisher struct {
	topic pubsub.Topic[published, Batch]
}

// published is one status and the keys of the pods it changed. A replay
// (a late subscriber's first status) is handed on even if it names no pod.
type published struct {
	status  *Status
	changed []string
	replay  bool
}

// Publish hands v, with nothing added (NewStatus(v, nil, nil)), to every
// subscriber, naming the pods that changed since the previous view (none:
// nothing is handed on, but v is kept for new subscribers and signalled
// as listed).
func (p *Publisher) Publish(v *View, changed []string) {
	p.PublishStatus(NewStatus(v, nil, nil), changed)
}

// PublishStatus hands the pods' status s on, as Publish hands a view.
func (p *Publisher) PublishStatus(s *Status, changed []string) {
	p.topic.Publish(published{status: s, changed: changed})
}

// Latest returns the view of the last status published, whether or not it
// changed anything (nil before the first).
func (p *Publisher) Latest() *View { return p.LatestStatus().view() }

// LatestStatus returns the last status published (nil before the first).
func (p *Publisher) LatestStatus() *Status {
	last, _ := p.topic.Latest()
	return last.status
}

// Subscribe returns a subscription whose first batch (if a view was
// published already) names every pod as changed.
func (p *Publisher) Subscribe() *Subscription {
	replay := func(last published) published {
		return published{status: last.status, changed: ChangedPods(nil, last.status.view()), replay: true}
	}
	return &Subscription{p.topic.Subscribe(&pendingPods{changed: map[string]struct{}{}}, replay)}
}

// Batch is what a subscriber receives: the latest view and its status (the
// view with what the pod sync adds: Status.View is View), and the keys of
// the pods that changed since its previous Next (gone ones included).
type Batch struct {
	View    *View
	Status  *Status
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
	return last.status.view()
}

// view is s's view; nil for a nil status.
func (s *Status) view() *View {
	if s == nil {
		return nil
	}
	return s.View
}

// pendingPods gathers the latest status that changed a pod and the keys of
// the pods changed since the previous Next.
type pendingPods struct {
	status  *Status
	changed map[string]struct{}
}

func (p *pendingPods) Add(v published) bool {
	if len(v.changed) == 0 && !v.replay {
		return false
	}
	p.status = v.status
	for _, k := range v.changed {
		p.changed[k] = struct{}{}
	}
	return true
}

func (p *pendingPods) Take() Batch {
	b := Batch{View: p.status.view(), Status: p.status, Changed: make([]string, 0, len(p.changed))}
	for k := range p.changed {
		b.Changed = append(b.Changed, k)
	}
	clear(p.changed)
	return b
}
