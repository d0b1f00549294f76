package prober

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cri-prober/cri-prober/pkg/probe"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// A stall counts for a probe when it overlaps the probe's run and lost a
// quarter of its timeout (100 ms at least); older stalls age out.
func TestStallMonitorJudges(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	var s stallMonitor
	s.note(stall{at: t0.Add(500 * time.Millisecond), lateness: 300 * time.Millisecond})
	s.note(stall{at: t0.Add(5 * time.Second), lateness: 60 * time.Millisecond})

	worst, starved := s.starved(t0, t0.Add(time.Second), time.Second)
	assert.True(t, starved, "300 ms of a 1 s timeout")
	assert.Equal(t, 300*time.Millisecond, worst)
	_, starved = s.starved(t0, t0.Add(time.Second), 2*time.Second)
	assert.False(t, starved, "300 ms of a 2 s timeout: not a quarter")
	_, starved = s.starved(t0.Add(2*time.Second), t0.Add(3*time.Second), time.Second)
	assert.False(t, starved, "not during this run")
	_, starved = s.starved(t0.Add(4*time.Second), t0.Add(6*time.Second), 200*time.Millisecond)
	assert.False(t, starved, "60 ms: below the 100 ms floor")
	_, starved = s.starved(t0.Add(300*time.Millisecond), t0.Add(time.Second), time.Second)
	assert.True(t, starved, "a stall noticed after the run began covers the time before it was noticed")

	s.note(stall{at: t0.Add(stallWindow + 6*time.Second), lateness: minStall})
	assert.Len(t, s.stalls, 1, "stalls older than the window are forgotten")
	var none *stallMonitor
	_, starved = none.starved(t0, t0.Add(time.Second), time.Second)
	assert.False(t, starved, "no monitor: never judged")
}

// A network probe that times out while the agent ran late could not
// probe (thrown away, not retried, agent_overload), where it was the
// target's failure: the review's flood of API requests timed out 83
// probes of a healthy target. A timeout without a stall stays a failure.
func TestDispatchTimeoutWhileTheAgentStalled(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // past the probe's 1 s timeout
	}))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	p := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt(port)}}}
	spec.DefaultProbe(p)

	d := newDispatcher(nil, probe.NewDialer(), false)
	d.stalls = &stallMonitor{}
	o := d.probe(context.Background(), p, Target{Host: "127.0.0.1", Container: &spec.Container{}})
	require.NoError(t, o.err, "no stall: the target's timeout")
	assert.Equal(t, results.Failure, o.result)
	assert.Equal(t, ReasonTimeout, o.reason)

	stalled := make(chan struct{})
	go func() {
		defer close(stalled)
		<-time.After(200 * time.Millisecond)
		d.stalls.note(stall{at: time.Now(), lateness: 400 * time.Millisecond})
	}()
	start := time.Now()
	o = d.probe(context.Background(), p, Target{Host: "127.0.0.1", Container: &spec.Container{}})
	<-stalled
	require.Error(t, o.err, "the agent's stall: could not probe")
	assert.True(t, errors.Is(o.err, ErrAgentOverload), "%v", o.err)
	assert.Equal(t, ReasonAgentOverload, o.reason)
	assert.Equal(t, causeStarved, o.resourceCause)
	assert.Less(t, time.Since(start), 2*time.Second, "not retried")
}

// The monitor notices its own goroutine running late.
func TestStallMonitorNotices(t *testing.T) {
	var s stallMonitor
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.run(ctx) }()
	defer func() { cancel(); <-done }()
	// Hold every P busy for a while: the ticker's goroutine runs late.
	busyUntil := time.Now().Add(400 * time.Millisecond)
	finished := make(chan struct{})
	for range 64 {
		go func() {
			for time.Now().Before(busyUntil) {
			}
			finished <- struct{}{}
		}()
	}
	for range 64 {
		<-finished
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, starved := s.starved(busyUntil.Add(-time.Second), time.Now(), 0); starved || time.Now().After(deadline) {
			assert.True(t, starved, "a stall of the monitor's goroutine was noticed")
			return
		}
		<-time.After(10 * time.Millisecond)
	}
}
