package results

import (
	"sync"

	"github.com/cri-prober/cri-prober/pkg/bounded"
)

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

// NewHistory returns a history with the default bounds. Its rings grow as
// runs come (most probes never fail: their failure ring stays empty).
func NewHistory() *History {
	return &History{recent: ring{size: HistoryRecent}, failures: ring{size: HistoryFailures}}
}

// Add records a run, its output and error cut to bounded.Message: a history
// holds up to 30 runs per probe, and what a workload prints must not be
// multiplied by that (the last run is kept whole in the Store).
func (h *History) Add(o Observation) {
	o.Output, o.Err = bounded.String(o.Output, bounded.Message), bounded.String(o.Err, bounded.Message)
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

// ring is a circular buffer of at most size observations, allocated as it
// fills.
type ring struct {
	size int
	buf  []Observation
	next int // where the next one goes, once buf is full
}

func (r *ring) add(o Observation) {
	if r.buf == nil {
		r.buf = make([]Observation, 0, r.size) // exactly: append would round up
	}
	if len(r.buf) < r.size {
		r.buf = append(r.buf, o)
		return
	}
	r.buf[r.next] = o
	r.next = (r.next + 1) % r.size
}

// list returns the observations, oldest first.
func (r *ring) list() []Observation {
	return append(append([]Observation(nil), r.buf[r.next:]...), r.buf[:r.next]...)
}
