package hooks

import (
	"context"
	"encoding/json"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// sender delivers one transition (body is its JSON); kv are key/values
// worth logging with a failure.
type sender func(ctx context.Context, t Transition, body []byte) (kv []any, err error)

// containerKey is what deliveries are ordered by.
type containerKey struct{ namespace, pod, container string }

func keyOf(t Transition) containerKey { return containerKey{t.Namespace, t.Pod, t.Container} }

// supersedes says whether newer makes the waiting older needless. A
// readiness result replaces an older one: the receiver (a load balancer)
// needs the container's latest state, not the flaps on the way. A restart
// replaces an older restart. The two kinds never replace each other: a
// readiness result does not say the container was replaced (alerting
// counts restarts; the new container's readiness starts over), and a
// restart does not say whether the new container is ready. One of each,
// in the order they came, ends the receiver where the container is.
func supersedes(newer, older Transition) bool {
	return (newer.Transition == Restarted) == (older.Transition == Restarted)
}

// lost counts the waiting transitions that will not be delivered.
type lost struct {
	coalesced int // superseded by a newer one of their container
	dropped   int // their pod was gone when too many containers waited
}

// queue is one hook's waiting transitions and their deliveries. Each
// container has at most one waiting transition of each kind (supersedes),
// oldest first; containers take turns in the order they began to wait, and
// one that still has a transition waiting after its turn goes to the back,
// so a flapping container delays no other. A worker takes the first
// transition of the first container in line with no delivery in flight.
type queue struct {
	hook   string
	send   sender
	exists func(namespace, pod string) bool // nil: every pod exists

	ok, failed, coalesced, dropped prometheus.Counter
	inFlight, waitingG             prometheus.Gauge

	mu      sync.Mutex
	cond    sync.Cond
	waiting map[containerKey][]Transition // oldest first, one of each kind at most
	turns   []containerKey                // the containers in waiting, next first
	count   int                           // transitions in waiting
	busy    map[containerKey]struct{}     // containers with a delivery in flight
	stopped bool
	// sweepAt is how many containers waiting make push drop those whose
	// pod is gone (dropGone).
	sweepAt  int
	unlogged lost // since the last log line
}

func (h *Hooks) newQueue(hook string, send sender) *queue {
	q := &queue{
		hook: hook, send: send, exists: h.podExists, sweepAt: maxWaiting,
		ok:        h.deliveries.WithLabelValues(hook, "ok"),
		failed:    h.deliveries.WithLabelValues(hook, "error"),
		coalesced: h.deliveries.WithLabelValues(hook, "coalesced"),
		dropped:   h.deliveries.WithLabelValues(hook, "dropped"),
		inFlight:  h.inFlight.WithLabelValues(hook),
		waitingG:  h.waiting.WithLabelValues(hook),
		waiting:   map[containerKey][]Transition{},
		busy:      map[containerKey]struct{}{},
	}
	q.cond.L = &q.mu
	return q
}

// push queues t behind its container's waiting transitions, in place of
// the one it supersedes. It never blocks for long: a delivery never holds
// the lock, and dropGone's lookups are amortised over the pushes.
func (q *queue) push(t Transition) {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := keyOf(t)
	w, queued := q.waiting[k]
	if !queued {
		if len(q.waiting) >= q.sweepAt {
			q.dropGone()
		}
		q.turns = append(q.turns, k)
	}
	if i := slices.IndexFunc(w, func(older Transition) bool { return supersedes(t, older) }); i >= 0 {
		w = slices.Delete(w, i, i+1)
		q.count--
		q.coalesced.Inc()
		q.unlogged.coalesced++
	}
	q.waiting[k] = append(w, t)
	q.count++
	q.waitingG.Set(float64(q.count))
	q.cond.Broadcast()
}

// dropGone drops the waiting transitions of the containers whose pod is
// gone: nothing will follow them, and without this a workload creating
// pods under new names while the hook is stuck would grow the queue
// without end. A container whose pod exists keeps its latest state, so
// what waits is bounded by the node's containers. The next sweep comes
// when twice as many containers wait as are left, so that many live ones
// waiting do not cost a lookup of each on every push.
func (q *queue) dropGone() {
	if q.exists != nil {
		q.turns = slices.DeleteFunc(q.turns, func(k containerKey) bool {
			if q.exists(k.namespace, k.pod) {
				return false
			}
			n := len(q.waiting[k])
			delete(q.waiting, k)
			q.count -= n
			q.dropped.Add(float64(n))
			q.unlogged.dropped += n
			return true
		})
	}
	q.sweepAt = max(maxWaiting, 2*len(q.waiting))
}

// next waits for a container in line with no delivery in flight and takes
// its oldest waiting transition, with how many were lost since the last
// call that said so; ok is false once the queue is stopped.
func (q *queue) next() (t Transition, since lost, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for !q.stopped {
		for i, k := range q.turns {
			if _, busy := q.busy[k]; busy {
				continue
			}
			w := q.waiting[k]
			t = w[0]
			q.turns = slices.Delete(q.turns, i, i+1)
			if w = slices.Delete(w, 0, 1); len(w) > 0 {
				q.waiting[k] = w
				q.turns = append(q.turns, k) // its next turn after the others'
			} else {
				delete(q.waiting, k)
			}
			q.count--
			q.busy[k] = struct{}{}
			q.waitingG.Set(float64(q.count))
			q.inFlight.Set(float64(len(q.busy)))
			since, q.unlogged = q.unlogged, lost{}
			return t, since, true
		}
		q.cond.Wait()
	}
	return Transition{}, lost{}, false
}

// done ends the delivery of t: the next transition of its container may go.
func (q *queue) done(t Transition) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.busy, keyOf(t))
	q.inFlight.Set(float64(len(q.busy)))
	q.cond.Broadcast()
}

// stop wakes the workers for good; what waits is not delivered.
func (q *queue) stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopped = true
	q.cond.Broadcast()
}

// work delivers transitions until the queue is stopped.
func (q *queue) work(ctx context.Context, logger klog.Logger) {
	for {
		t, since, ok := q.next()
		if !ok {
			return
		}
		// Coalescing is the queue doing its job under load; dropping is a
		// loss.
		if since.dropped > 0 {
			logger.Info("Transition hook fell behind; dropped the waiting transitions of gone pods", "hook", q.hook, "dropped", since.dropped, "coalesced", since.coalesced, "maxWaiting", maxWaiting)
		} else if since.coalesced > 0 {
			logger.V(2).Info("Transition hook fell behind; delivering each container's latest transitions only", "hook", q.hook, "coalesced", since.coalesced)
		}
		q.deliver(ctx, logger, t)
		q.done(t)
	}
}

func (q *queue) deliver(ctx context.Context, logger klog.Logger, t Transition) {
	kv := []any{"hook", q.hook, "transition", t.Transition, "pod", klog.KRef(t.Namespace, t.Pod), "containerName", t.Container}
	// Logged, then counted: whoever sees the count finds the log line.
	body, err := json.Marshal(t)
	if err != nil {
		logger.Error(err, "Cannot encode a transition", kv...)
		q.failed.Inc()
		return
	}
	more, err := q.send(ctx, t, body)
	if err != nil {
		logger.Error(err, "Transition hook failed", append(kv, more...)...)
		q.failed.Inc()
		return
	}
	logger.V(4).Info("Transition delivered", kv...)
	q.ok.Inc()
}
