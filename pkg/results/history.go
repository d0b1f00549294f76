package results

import (
	"math"
	"sync"
	"time"

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
//
// It is kept small, for it is kept for every probe (docs/performance.md):
// a run is a 24-byte record (run) in a fixed ring, the failure ring is made
// at a probe's first failure, and the strings of the runs (outputs, errors,
// container IDs) are each kept once in a table the records index, counted
// by reference: a probe that prints the same thing run after run keeps it
// once, and the table never holds a string no run refers to. What Snapshot
// gives back differs from what was added only where the API never looked:
// a duration to the microsecond (up to 71 minutes), a time without its
// monotonic reading and in the location of the last run added, counts
// beyond 2³²−1 saturated, and an Outcome other than the four named ones
// read as OutcomeUnknown.
type History struct {
	mu        sync.Mutex
	n, next   uint8 // runs in recent; where the next goes once it is full
	nf, nextF uint8 // the same for failures
	loc       *time.Location
	strs      stringTable
	recent    [HistoryRecent]run
	failures  *[HistoryFailures]run // nil until the first failure
}

// run is one observation as a History keeps it.
type run struct {
	at          int64  // unix nanoseconds; noTime for the zero time
	micros      uint32 // the duration in µs, saturated
	consecutive uint32 // saturated
	threshold   int32  // saturated
	flags       uint8  // outcome code | changedFlag
	// Indices in History.strs; 0 is "".
	output, err, id uint8
}

const (
	noTime      = math.MinInt64
	changedFlag = 1 << 7
	outcomeMask = changedFlag - 1
)

// outcomes are the Outcomes a run's code stands for.
var outcomes = [...]Outcome{"", OutcomeSuccess, OutcomeWarning, OutcomeFailure, OutcomeUnknown}

func outcomeCode(o Outcome) uint8 {
	for i, known := range outcomes {
		if o == known {
			return uint8(i)
		}
	}
	return 4 // OutcomeUnknown
}

// NewHistory returns a history with the default bounds.
func NewHistory() *History { return &History{} }

// Add records a run, its output and error cut to bounded.Message: a history
// holds up to 30 runs per probe, and what a workload prints must not be
// multiplied by that (the last run is kept whole in the Store).
func (h *History) Add(o Observation) {
	output, errText := bounded.String(o.Output, bounded.Message), bounded.String(o.Err, bounded.Message)
	failed := o.Outcome == OutcomeFailure || o.Outcome == OutcomeUnknown
	r := run{at: noTime, micros: uint32(min(max(o.Duration.Microseconds(), 0), math.MaxUint32)),
		consecutive: uint32(min(max(int64(o.Consecutive), 0), math.MaxUint32)),
		threshold:   int32(min(max(int64(o.Threshold), math.MinInt32), math.MaxInt32)),
		flags:       outcomeCode(o.Outcome)}
	if o.Changed {
		r.flags |= changedFlag
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !o.Time.IsZero() {
		r.at, h.loc = o.Time.UnixNano(), o.Time.Location()
	}
	// Interned before the runs it replaces are released: an output equal
	// to theirs is kept, not cleared and stored again.
	r.output, r.err, r.id = h.strs.intern(output), h.strs.intern(errText), h.strs.intern(o.ContainerID)
	h.push(h.recent[:], &h.n, &h.next, r)
	if !failed {
		return
	}
	h.strs.hold(&r)
	if h.failures == nil {
		h.failures = new([HistoryFailures]run)
	}
	h.push(h.failures[:], &h.nf, &h.nextF, r)
}

// push adds r to a ring of runs holding n, the oldest at next once full,
// where r replaces it (its strings released).
func (h *History) push(ring []run, n, next *uint8, r run) {
	if int(*n) < len(ring) {
		ring[*n] = r
		*n++
		return
	}
	h.strs.release(&ring[*next])
	ring[*next] = r
	*next = uint8((int(*next) + 1) % len(ring))
}

// Snapshot returns copies of both lists, oldest first.
func (h *History) Snapshot() (recent, failures []Observation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	recent = make([]Observation, 0, h.n)
	for i := range h.n {
		recent = append(recent, h.observation(&h.recent[(int(h.next)+int(i))%int(h.n)]))
	}
	if h.nf == 0 {
		return recent, nil
	}
	failures = make([]Observation, 0, h.nf)
	for i := range h.nf {
		failures = append(failures, h.observation(&h.failures[(int(h.nextF)+int(i))%int(h.nf)]))
	}
	return recent, failures
}

func (h *History) observation(r *run) Observation {
	o := Observation{Duration: time.Duration(r.micros) * time.Microsecond, Outcome: outcomes[r.flags&outcomeMask],
		Output: h.strs.get(r.output), Err: h.strs.get(r.err), Consecutive: int(r.consecutive), Threshold: int(r.threshold),
		Changed: r.flags&changedFlag != 0, ContainerID: h.strs.get(r.id)}
	if r.at != noTime {
		o.Time = time.Unix(0, r.at).In(h.loc)
	}
	return o
}

// stringTable is a history's string table: each string its runs hold, once,
// with how many references to it the runs make (a failure's run is in
// both rings: two). Index 0 is "", never counted; a slot whose count falls
// to 0 is cleared and used again. At most 3 strings for each of the 30
// runs: the indices fit a byte, the counts too.
type stringTable struct {
	list []string
	refs []uint8
}

// intern returns the index of s, counting a reference to it.
func (t *stringTable) intern(s string) uint8 {
	if s == "" {
		return 0
	}
	free := 0
	for i := len(t.list) - 1; i > 0; i-- {
		switch {
		case t.list[i] == s:
			t.refs[i]++
			return uint8(i)
		case t.refs[i] == 0:
			free = i
		}
	}
	if free == 0 {
		if t.list == nil {
			t.list, t.refs = make([]string, 1, 4), make([]uint8, 1, 4)
		}
		free = len(t.list)
		t.list, t.refs = append(t.list, ""), append(t.refs, 0)
	}
	t.list[free], t.refs[free] = s, 1
	return uint8(free)
}

func (t *stringTable) get(i uint8) string {
	if i == 0 {
		return ""
	}
	return t.list[i]
}

// hold counts another reference to r's strings.
func (t *stringTable) hold(r *run) {
	for _, i := range [...]uint8{r.output, r.err, r.id} {
		if i != 0 {
			t.refs[i]++
		}
	}
}

// release drops r's references, clearing the strings no run refers to any
// more.
func (t *stringTable) release(r *run) {
	for _, i := range [...]uint8{r.output, r.err, r.id} {
		if i == 0 {
			continue
		}
		if t.refs[i]--; t.refs[i] == 0 {
			t.list[i] = ""
		}
	}
}

// size is how many strings the table holds (for tests).
func (t *stringTable) size() int {
	n := 0
	for _, c := range t.refs {
		if c > 0 {
			n++
		}
	}
	return n
}
