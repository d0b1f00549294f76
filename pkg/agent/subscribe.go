package agent

import (
	"sync"

	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/results"
)

// Subscription tells its reader when what the agent reports (Report,
// ReportPod) may have changed, and when the pods' status was published
// after a listing of the runtime, news or not (Health may have changed):
// for play and wait, which show and judge the pods as they change rather
// than polling the agent.
type Subscription struct {
	status  *pods.Subscription // the pods' status (View)
	results *results.Subscription
	runs    *results.RunSubscription
	changed chan struct{}

	stop  chan struct{}
	done  chan struct{} // closed when the goroutine of Subscribe returns
	close sync.Once
}

// Subscribe returns a subscription to the agent's changes: a new status
// of the pods, a probe's stable result, or a probe's run (whose output
// and counts the report shows). Subscribe before the first read of the
// report: a change after Subscribe is never missed. Close it when done.
func (a *Agent) Subscribe() *Subscription {
	s := &Subscription{results: a.Store.Subscribe(), runs: a.Store.SubscribeRuns(),
		changed: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	// View's source: the pod sync's status, else the resolver's views.
	// Each publishes after every listing, and View shows it by then.
	if a.Restarter != nil {
		s.status = a.Restarter.Subscribe()
	} else {
		s.status = a.Resolver.Subscribe()
	}
	go s.run()
	return s
}

// run merges the news of the three sources into Changed, until Close.
func (s *Subscription) run() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case <-s.status.Ready():
			s.status.Next()
		case <-s.results.Ready():
			s.results.Next()
		case <-s.runs.Ready():
			s.runs.Next()
		}
		select {
		case s.changed <- struct{}{}:
		default: // the reader has not read the previous one: they coalesce
		}
	}
}

// Changed is signalled when what the agent reports may have changed.
func (s *Subscription) Changed() <-chan struct{} { return s.changed }

// Listed is signalled whenever the pods' status was published after a
// listing of the runtime, news or not: View shows that listing by then.
func (s *Subscription) Listed() <-chan struct{} { return s.status.Listed() }

// Close stops the subscription and waits for its goroutine. It is
// idempotent.
func (s *Subscription) Close() {
	s.close.Do(func() {
		close(s.stop)
		<-s.done
		s.status.Close()
		s.results.Close()
		s.runs.Close()
	})
}
