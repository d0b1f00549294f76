package results

import "sync"

// History bounds, for the default History.
const (
	HistoryRecent   = 20 // the last runs, whatever their outcome
	HistoryFailures = 10 // the last failures and errors, kept apart
)

// History keeps a probe's recent observations: the last runs of any
// outcome, and apart from them the last failures (and runs that could not
// probe), so that a stream of successes never pushes the last failures out
// (as blackbox_exporter keeps its failed probes). Safe for concurrent use.
type History struct {
	mu       sync.Mutex
	recent   ring
	failures ring
}

// NewHistory returns a history with the default bounds.
func NewHistory() *History {
	return &History{recent: newRing(HistoryRecent), failures: newRing(HistoryFailures)}
}

// Add records a run.
func (h *History) Add(o Observation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recent.add(o)
	if o.Outcome == OutcomeFailure || o.Outcome == OutcomeUnknown {
		h.failures.add(o)
	}
}

// Snapshot returns copies of both lists, oldest first.
func (h *History) Snapshot() (recent, failures []Observation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.recent.list(), h.failures.list()
}

// ring is a fixed-size circular buffer of observations.
type ring struct {
	buf  []Observation
	next int
	full bool
}

func newRing(n int) ring { return ring{buf: make([]Observation, n)} }

func (r *ring) add(o Observation) {
	r.buf[r.next] = o
	r.next = (r.next + 1) % len(r.buf)
	r.full = r.full || r.next == 0
}

func (r *ring) list() []Observation {
	if !r.full {
		return append([]Observation(nil), r.buf[:r.next]...)
	}
	return append(append([]Observation(nil), r.buf[r.next:]...), r.buf[:r.next]...)
}
