package results

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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
