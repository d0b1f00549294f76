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

// queue is one hook's waiting transitions and their deliveries: at most
// queueSize wait, oldest first; a worker takes the oldest one whose
// container has no delivery in flight.
type queue struct {
	hook string
	send sender

	ok, failed, dropped prometheus.Counter
	inFlight, waitingG  prometheus.Gauge

	mu        sync.Mutex
	cond      sync.Cond
	waiting   []Transition              // oldest first
	busy      map[containerKey]struct{} // containers with a delivery in flight
	stopped   bool
	unlogged  int // dropped since the last log line
	sizeLimit int
}

func (h *Hooks) newQueue(hook string, send sender) *queue {
	q := &queue{
		hook: hook, send: send, sizeLimit: queueSize,
		ok:       h.deliveries.WithLabelValues(hook, "ok"),
		failed:   h.deliveries.WithLabelValues(hook, "error"),
		dropped:  h.deliveries.WithLabelValues(hook, "dropped"),
		inFlight: h.inFlight.WithLabelValues(hook),
		waitingG: h.waiting.WithLabelValues(hook),
		busy:     map[containerKey]struct{}{},
	}
	q.cond.L = &q.mu
	return q
}

// push queues t, dropping the oldest waiting transition when full. It
// never blocks for long: a delivery never holds the lock.
func (q *queue) push(t Transition) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiting) >= q.sizeLimit {
		q.waiting = slices.Delete(q.waiting, 0, 1)
		q.dropped.Inc()
		q.unlogged++
	}
	q.waiting = append(q.waiting, t)
	q.waitingG.Set(float64(len(q.waiting)))
	q.cond.Broadcast()
}

// next waits for a transition whose container has no delivery in flight
// and takes it, with how many were dropped since the last call that said
// so; ok is false once the queue is stopped.
func (q *queue) next() (t Transition, dropped int, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for !q.stopped {
		for i, w := range q.waiting {
			if _, busy := q.busy[keyOf(w)]; busy {
				continue
			}
			q.waiting = slices.Delete(q.waiting, i, i+1)
			q.busy[keyOf(w)] = struct{}{}
			q.waitingG.Set(float64(len(q.waiting)))
			q.inFlight.Set(float64(len(q.busy)))
			dropped, q.unlogged = q.unlogged, 0
			return w, dropped, true
		}
		q.cond.Wait()
	}
	return Transition{}, 0, false
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
		t, dropped, ok := q.next()
		if !ok {
			return
		}
		if dropped > 0 {
			logger.Info("Transition hook fell behind; dropped the oldest waiting transitions", "hook", q.hook, "dropped", dropped, "queueSize", q.sizeLimit)
		}
		q.deliver(ctx, logger, t)
		q.done(t)
	}
}

func (q *queue) deliver(ctx context.Context, logger klog.Logger, t Transition) {
	kv := []any{"hook", q.hook, "transition", t.Transition, "pod", klog.KRef(t.Namespace, t.Pod), "container", t.Container}
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
