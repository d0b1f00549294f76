package results

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/cri-prober/cri-prober/pkg/bounded"
)

// A stream of successes never pushes the last failures out; both lists are
// bounded and oldest first.
func TestHistoryKeepsFailuresApart(t *testing.T) {
	h := NewHistory()
	at := time.Unix(0, 0)
	add := func(o Outcome, out string) {
		at = at.Add(time.Second)
		h.Add(Observation{Time: at, Outcome: o, Output: out})
	}
	for i := range 15 {
		add(OutcomeFailure, string(rune('a'+i)))
	}
	add(OutcomeUnknown, "error")
	for range 100 {
		add(OutcomeSuccess, "ok")
	}
	recent, failures := h.Snapshot()
	assert.Len(t, recent, HistoryRecent)
	for _, o := range recent {
		assert.Equal(t, OutcomeSuccess, o.Outcome)
	}
	assert.Len(t, failures, HistoryFailures)
	assert.Equal(t, "g", failures[0].Output, "the oldest kept failure")
	assert.Equal(t, "error", failures[len(failures)-1].Output, "errors are kept with failures")
	assert.True(t, failures[0].Time.Before(failures[1].Time), "oldest first")

	h = NewHistory()
	add(OutcomeSuccess, "only")
	recent, failures = h.Snapshot()
	assert.Len(t, recent, 1)
	assert.Empty(t, failures)
}

// A run is saved up to its threshold only: a probe in a steady state
// exports the same state run after run (nothing to write).
func TestExportCapsRunsAtTheThreshold(t *testing.T) {
	s := NewStore()
	k := Key{ContainerID: "c", Type: Readiness}
	s.Set(k, Success, "uid")
	s.Observe(k, Observation{Outcome: OutcomeSuccess, Consecutive: 7, Threshold: 1})
	first := s.Export()
	s.Observe(k, Observation{Outcome: OutcomeSuccess, Consecutive: 8, Threshold: 1})
	assert.Equal(t, first, s.Export())
	assert.Equal(t, Saved{Result: Success, LastOutcome: Success, Consecutive: 1}, first[k])
	s.Observe(k, Observation{Outcome: OutcomeFailure, Consecutive: 2, Threshold: 3})
	assert.Equal(t, Saved{Result: Success, LastOutcome: Failure, Consecutive: 2}, s.Export()[k])
}

// A workload's output is kept whole once (the Store's last observation),
// not 30 times: each history entry keeps bounded.Message of it.
func TestHistoryBoundsWhatItKeeps(t *testing.T) {
	h := NewHistory()
	huge := strings.Repeat("x", 10<<10)
	for range HistoryRecent + HistoryFailures {
		h.Add(Observation{Outcome: OutcomeFailure, Output: huge, Err: huge})
	}
	recent, failures := h.Snapshot()
	for _, o := range append(recent, failures...) {
		assert.Less(t, len(o.Output), bounded.Message+64)
		assert.Less(t, len(o.Err), bounded.Message+64)
		assert.True(t, strings.HasPrefix(o.Output, strings.Repeat("x", bounded.Message)))
	}
}
