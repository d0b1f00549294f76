// Package events is the vocabulary of what cri-prober tells people: kubelet-
// style events (type, reason, message about a pod's container), and a
// bounded ring of recent ones that can be listed and watched.
//
// It imports no other cri-prober package; the prober and the restarter
// record into it through their own one-method Recorder interfaces.
package events

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/bounded"
)

// Event types, as in Kubernetes.
const (
	Normal  = "Normal"
	Warning = "Warning"
)

// MaxMessage bounds an event's message: probe output is shown, never
// trusted to be small.
const MaxMessage = 4096

// Event is one thing worth telling a person about a container of a pod.
type Event struct {
	Time      time.Time `json:"time"`
	Type      string    `json:"type"`
	Reason    string    `json:"reason"`
	Namespace string    `json:"namespace"`
	Pod       string    `json:"pod"`
	Container string    `json:"container,omitempty"`
	Message   string    `json:"message"`
	// Count and Threshold: for a probe failure, how many failed in a row
	// (this one included) and how many change the probe's result.
	Count     int `json:"count,omitempty"`
	Threshold int `json:"threshold,omitempty"`
	// ReportingController and ReportingInstance say who reported it, as
	// events.k8s.io/v1 Events do (kubelet's: kubelet and its node's
	// name): ReportingController for cri-prober's, and the node's name
	// (run --node-name), so that the events of a fleet stay apart when
	// collected.
	ReportingController string `json:"reportingController,omitempty"`
	ReportingInstance   string `json:"reportingInstance,omitempty"`
	// Transition is set on the events that mark a change of a container's
	// state that hooks report (ready, not ready, restarted).
	Transition Transition `json:"-"`
}

// ReportingController is the reportingController of cri-prober's events.
const ReportingController = "cri-prober"

// Transition is a change of a container's state worth telling the outside
// world (transition hooks).
type Transition string

const (
	TransitionReady     Transition = "ready"
	TransitionNotReady  Transition = "not-ready"
	TransitionRestarted Transition = "restarted"
)

// Truncated returns e with its message cut to MaxMessage bytes.
func (e Event) Truncated() Event {
	e.Message = bounded.String(e.Message, MaxMessage)
	return e
}

// Ring keeps the most recent events and lets watchers follow new ones. A
// slow watcher never blocks Record: it misses events instead, and is told.
type Ring struct {
	mu       sync.Mutex
	buf      []Event
	next     int
	full     bool
	watchers map[*Watcher]struct{}
}

// NewRing keeps the last size events.
func NewRing(size int) *Ring {
	return &Ring{buf: make([]Event, size), watchers: map[*Watcher]struct{}{}}
}

// Record adds an event.
func (r *Ring) Record(e Event) {
	e = e.Truncated()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf[r.next] = e
	r.next = (r.next + 1) % len(r.buf)
	r.full = r.full || r.next == 0
	for w := range r.watchers {
		select {
		case w.c <- e:
		default:
			w.missed.Store(true)
		}
	}
}

// Since returns the kept events at or after t (all if t is zero), oldest
// first.
func (r *Ring) Since(t time.Time) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	add := func(events []Event) {
		for _, e := range events {
			if !e.Time.Before(t) {
				out = append(out, e)
			}
		}
	}
	if r.full {
		add(r.buf[r.next:])
	}
	add(r.buf[:r.next])
	return out
}

// Watcher receives events recorded after it was created.
type Watcher struct {
	c      chan Event
	missed atomic.Bool
	ring   *Ring
}

// Watch returns a watcher with room for buffer events; Close it when done.
func (r *Ring) Watch(buffer int) *Watcher {
	w := &Watcher{c: make(chan Event, buffer), ring: r}
	r.mu.Lock()
	r.watchers[w] = struct{}{}
	r.mu.Unlock()
	return w
}

// C delivers the events.
func (w *Watcher) C() <-chan Event { return w.c }

// Missed reports (and clears) whether events were dropped because the
// watcher did not keep up.
func (w *Watcher) Missed() bool { return w.missed.Swap(false) }

// Close stops delivery.
func (w *Watcher) Close() {
	w.ring.mu.Lock()
	delete(w.ring.watchers, w)
	w.ring.mu.Unlock()
}

// Log returns a recorder that logs each event as a structured klog line.
func Log(logger klog.Logger) LogRecorder { return LogRecorder{logger: logger} }

// LogRecorder logs events; Warning events as warnings, where the log sink
// has that severity (Warner).
type LogRecorder struct{ logger klog.Logger }

// Warner is a log sink with a warning severity (logr has only info and
// error): cri-prober's text format writes klog's W, its JSON format
// "level":"WARN".
type Warner interface {
	Warning(msg string, kv ...any)
}

// Record logs e.
func (l LogRecorder) Record(e Event) {
	e = e.Truncated()
	kv := []any{"type", e.Type, "reason", e.Reason, "pod", klog.KRef(e.Namespace, e.Pod), "containerName", e.Container, "message", e.Message}
	if e.Threshold > 0 {
		kv = append(kv, "count", e.Count, "threshold", e.Threshold)
	}
	if w, ok := l.logger.GetSink().(Warner); ok && e.Type == Warning {
		w.Warning("Event", kv...)
		return
	}
	l.logger.Info("Event", kv...)
}
