package results

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// A probe that prints the same thing run after run keeps it once, however
// many runs print it: the first run's string, the later copies dropped.
func TestHistorySharesIdenticalOutputs(t *testing.T) {
	h := NewHistory()
	for i := range 100 {
		h.Add(Observation{Time: time.Unix(int64(i), 0), Outcome: OutcomeSuccess, Output: strings.Clone("ok\n"), ContainerID: strings.Clone("c1")})
	}
	recent, _ := h.Snapshot()
	require.Len(t, recent, HistoryRecent)
	for _, o := range recent {
		assert.Equal(t, "ok\n", o.Output)
		assert.Same(t, unsafe.StringData(recent[0].Output), unsafe.StringData(o.Output), "one string")
		assert.Same(t, unsafe.StringData(recent[0].ContainerID), unsafe.StringData(o.ContainerID), "one string")
	}
	assert.Equal(t, 2, h.strs.size(), "the output and the container ID")
	assert.Nil(t, h.failures, "no failure ring before the first failure")
}

// The rings wrap, oldest first, and the table lets go of what the runs
// pushed out refer to: it holds no more than the kept runs need.
func TestHistoryRingsWrap(t *testing.T) {
	h := NewHistory()
	for i := range 45 {
		o := Observation{Time: time.Unix(int64(i), 0), Outcome: OutcomeSuccess, Output: fmt.Sprint("run ", i), ContainerID: "c1"}
		if i%3 == 0 {
			o.Outcome, o.Err = OutcomeUnknown, fmt.Sprint("error ", i)
		}
		h.Add(o)
	}
	recent, failures := h.Snapshot()
	require.Len(t, recent, HistoryRecent)
	for i, o := range recent {
		assert.Equal(t, fmt.Sprint("run ", 25+i), o.Output)
		assert.Equal(t, time.Unix(int64(25+i), 0), o.Time)
	}
	require.Len(t, failures, HistoryFailures)
	for i, o := range failures {
		assert.Equal(t, fmt.Sprint("error ", 15+3*i), o.Err)
		assert.Equal(t, OutcomeUnknown, o.Outcome)
	}
	distinct := map[string]bool{}
	for _, o := range append(recent, failures...) {
		for _, s := range []string{o.Output, o.Err, o.ContainerID} {
			if s != "" {
				distinct[s] = true
			}
		}
	}
	assert.Equal(t, len(distinct), h.strs.size(), "only what the kept runs refer to")
}

// However the runs' strings differ, the table stays within what 30 runs
// can refer to (3 strings each), and its indices within a byte.
func TestHistoryMaxSizes(t *testing.T) {
	h := NewHistory()
	for i := range 1000 {
		o := Observation{Outcome: OutcomeFailure, Output: fmt.Sprint("out ", i), Err: fmt.Sprint("err ", i), ContainerID: fmt.Sprint("id ", i)}
		if i%4 == 0 {
			o.Outcome = OutcomeSuccess
		}
		h.Add(o)
		assert.LessOrEqual(t, len(h.strs.list), 1+3*(HistoryRecent+HistoryFailures)+3)
	}
	recent, failures := h.Snapshot()
	assert.Len(t, recent, HistoryRecent)
	assert.Len(t, failures, HistoryFailures)
	assert.Equal(t, "out 999", recent[HistoryRecent-1].Output)
	assert.Equal(t, "id 999", failures[HistoryFailures-1].ContainerID)
	assert.Equal(t, 3*HistoryRecent, h.strs.size(), "the failures kept are among the recent runs: they share their strings")
	assert.Equal(t, 24, int(unsafe.Sizeof(run{})), "a run's record")
}

// What Snapshot gives back marshals as what was added (the API's JSON):
// times from the clock (with their monotonic reading) or in UTC, the zero
// time, durations to the microsecond, every outcome, the changed mark.
func TestHistoryGivesBackWhatWasAdded(t *testing.T) {
	h := NewHistory()
	now := time.Now()
	in := []Observation{
		{Time: now, Duration: 1234 * time.Microsecond, Outcome: OutcomeSuccess, Output: "ok", Consecutive: 7, Threshold: 1, ContainerID: "c1"},
		{Time: now.Add(time.Second), Duration: time.Hour, Outcome: OutcomeWarning, Output: "warned", Consecutive: 1, Threshold: 1, ContainerID: "c1"},
		{Time: now.Add(2 * time.Second), Outcome: OutcomeFailure, Output: "503", Consecutive: 3, Threshold: 3, Changed: true, ContainerID: "c1"},
		{Time: now.Add(3 * time.Second), Outcome: OutcomeUnknown, Err: "timeout", Consecutive: 1, Threshold: 3, ContainerID: "c2"},
		{Outcome: OutcomeSuccess, Consecutive: 1 << 20},
	}
	for _, o := range in {
		h.Add(o)
	}
	recent, failures := h.Snapshot()
	want, err := json.Marshal(in)
	require.NoError(t, err)
	got, err := json.Marshal(recent)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(got))
	require.Len(t, failures, 2)
	assert.True(t, failures[0].Time.Equal(in[2].Time))
	assert.Equal(t, "timeout", failures[1].Err)
	assert.True(t, recent[4].Time.IsZero())

	utc := NewHistory()
	at := time.Date(2026, 11, 24, 10, 0, 0, 123456789, time.UTC)
	utc.Add(Observation{Time: at, Outcome: OutcomeSuccess})
	recent, _ = utc.Snapshot()
	assert.Equal(t, at, recent[0].Time, "in its location")

	big := NewHistory()
	big.Add(Observation{Outcome: OutcomeSuccess, Consecutive: 1 << 40, Duration: 100 * time.Hour})
	recent, _ = big.Snapshot()
	assert.Equal(t, math.MaxUint32, recent[0].Consecutive, "saturated")
	assert.Equal(t, time.Duration(math.MaxUint32)*time.Microsecond, recent[0].Duration, "saturated")
}
