package results

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSetEmitsOnlyChanges(t *testing.T) {
	s := NewStore()
	sub := s.Subscribe()
	defer sub.Close()
	k := Key{ContainerID: "c1", Type: Readiness}

	assert.True(t, s.Set(k, Failure, "pod"), "first value is a change")
	assert.False(t, s.Set(k, Failure, "pod"))
	assert.Equal(t, []Update{{Key: k, Result: Failure, PodKey: "pod"}}, sub.Next())
	assert.Empty(t, sub.Next())

	s.Set(k, Success, "pod")
	r, ok := s.Get(k)
	assert.True(t, ok)
	assert.Equal(t, Success, r)

	s.Remove(k)
	_, ok = s.Get(k)
	assert.False(t, ok)
	assert.Equal(t, []Update{{Key: k, Result: Success, PodKey: "pod"}}, sub.Next(), "removal is not an update")
}

func TestSubscriptionCoalescesPerKeyAndNeverBlocks(t *testing.T) {
	s := NewStore()
	sub := s.Subscribe()
	defer sub.Close()
	a := Key{ContainerID: "a", Type: Liveness}
	b := Key{ContainerID: "b", Type: Readiness}
	// Far more changes than any buffer, with nobody reading.
	for i := range 10000 {
		s.Set(a, Result(i%2), "p")
		s.Set(b, Result((i+1)%2), "p")
	}
	select {
	case <-sub.Ready():
	default:
		t.Fatal("not signalled")
	}
	assert.Equal(t, []Update{
		{Key: a, Result: Failure, PodKey: "p"},
		{Key: b, Result: Success, PodKey: "p"},
	}, sub.Next(), "latest value per key, keys in first-change order")

	sub.Close()
	s.Set(a, Success, "p")
	assert.Empty(t, sub.Next())
}

// A run observed is told to the subscribers of runs, even one that
// changes no stable result (a liveness probe's first success); a run of
// a probe without a result is not recorded, and not told.
func TestSubscribeRuns(t *testing.T) {
	s := NewStore()
	runs := s.SubscribeRuns()
	defer runs.Close()
	k := Key{ContainerID: "c", Type: Liveness}
	s.Observe(k, Observation{Outcome: OutcomeSuccess})
	select {
	case <-runs.Ready():
		t.Fatal("told of a run not recorded")
	default:
	}
	s.Set(k, Success, "p")
	s.Observe(k, Observation{Outcome: OutcomeSuccess})
	s.Observe(k, Observation{Outcome: OutcomeSuccess})
	select {
	case <-runs.Ready():
	default:
		t.Fatal("not signalled")
	}
	runs.Next()
	select {
	case <-runs.Ready():
		t.Fatal("two runs coalesce into one signal")
	default:
	}
}

func TestObservation(t *testing.T) {
	s := NewStore()
	k := Key{ContainerID: "c", Type: Liveness}
	s.Observe(k, Observation{Outcome: OutcomeFailure})
	_, ok := s.LastObservation(k)
	assert.False(t, ok, "no observation without a result: the worker writes the initial value first")

	s.Set(k, Success, "p")
	s.Observe(k, Observation{Outcome: OutcomeFailure, Output: "boom", Consecutive: 1, Threshold: 3})
	o, ok := s.LastObservation(k)
	assert.True(t, ok)
	assert.Equal(t, "boom", o.Output)
	s.Remove(k)
	_, ok = s.LastObservation(k)
	assert.False(t, ok)
}

// The table of kubelet's TestUpdatePodStatus, in our words.
func TestStartedAndReady(t *testing.T) {
	const id = "c"
	tests := []struct {
		name                     string
		running                  bool
		startup, readiness       *Result // cached results; nil: none cached
		hasStartup, hasReadiness bool
		wantStarted, wantReady   bool
	}{
		{name: "running, no probes", running: true, wantStarted: true, wantReady: true},
		{name: "readiness worker, no result yet", running: true, hasReadiness: true, wantStarted: true, wantReady: false},
		{name: "readiness cached success", running: true, hasReadiness: true, readiness: ptr(Success), wantStarted: true, wantReady: true},
		{name: "readiness cached failure", running: true, hasReadiness: true, readiness: ptr(Failure), wantStarted: true, wantReady: false},
		{name: "startup worker, no result", running: true, hasStartup: true, wantStarted: false, wantReady: false},
		{name: "startup unknown", running: true, hasStartup: true, startup: ptr(Unknown), wantStarted: false, wantReady: false},
		{name: "startup failure", running: true, hasStartup: true, startup: ptr(Failure), wantStarted: false, wantReady: false},
		{name: "startup success, no readiness probe", running: true, hasStartup: true, startup: ptr(Success), wantStarted: true, wantReady: true},
		{name: "startup success, readiness success", running: true, hasStartup: true, hasReadiness: true, startup: ptr(Success), readiness: ptr(Success), wantStarted: true, wantReady: true},
		{name: "not started gates a successful readiness", running: true, hasStartup: true, hasReadiness: true, startup: ptr(Unknown), readiness: ptr(Success), wantStarted: false, wantReady: false},
		{name: "terminated", running: false, readiness: ptr(Success), startup: ptr(Success), wantStarted: false, wantReady: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStore()
			if tt.startup != nil {
				s.Set(Key{ContainerID: id, Type: Startup}, *tt.startup, "p")
			}
			if tt.readiness != nil {
				s.Set(Key{ContainerID: id, Type: Readiness}, *tt.readiness, "p")
			}
			c := Container{ID: id, Running: tt.running, HasStartupProbe: tt.hasStartup, HasReadinessProbe: tt.hasReadiness}
			c.Started = s.Started(c)
			assert.Equal(t, tt.wantStarted, c.Started, "started")
			assert.Equal(t, tt.wantReady, s.Ready(c), "ready")
		})
	}
}

func ptr(r Result) *Result { return &r }

func TestStrings(t *testing.T) {
	assert.Equal(t, "Liveness", Liveness.String())
	assert.Equal(t, "Readiness", Readiness.String())
	assert.Equal(t, "Startup", Startup.String())
	assert.Equal(t, "UNKNOWN", Unknown.String())
	assert.Equal(t, "Success", Success.String())
	assert.Equal(t, "Failure", Failure.String())
}

// The last observation is kept in place; an output equal to the last one
// keeps the last one's string (the one the history holds too).
func TestObserveKeepsAnEqualOutputOnce(t *testing.T) {
	s := NewStore()
	k := Key{ContainerID: "c", Type: Readiness}
	s.Observe(k, Observation{Output: "before any result"})
	_, ok := s.LastObservation(k)
	assert.False(t, ok, "no result, nothing kept")
	s.Set(k, Success, "uid")
	first := strings.Clone("ok")
	s.Observe(k, Observation{Outcome: OutcomeSuccess, Output: first, Consecutive: 1})
	s.Observe(k, Observation{Outcome: OutcomeSuccess, Output: strings.Clone("ok"), Consecutive: 2})
	o, ok := s.LastObservation(k)
	require.True(t, ok)
	assert.Equal(t, 2, o.Consecutive)
	assert.Same(t, unsafe.StringData(first), unsafe.StringData(o.Output))
}
