package prober

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/results"
)

// A failure's event: kubelet's Unhealthy whatever the count by default;
// with --probe-failure-events=threshold, ProbeFailureIgnored (Normal) below
// the threshold and Unhealthy (Warning) once it is reached.
func TestFailureEvent(t *testing.T) {
	const out = "HTTP probe failed with statuscode: 500"
	tests := []struct {
		name             string
		mode             FailureEvents
		probeType        results.ProbeType
		count, threshold int
		want             events.Event
	}{
		{name: "kubelet: below the threshold", mode: FailureEventsKubelet, probeType: results.Liveness, count: 1, threshold: 3,
			want: events.Event{Type: events.Warning, Reason: ReasonUnhealthy, Count: 1, Threshold: 3, Message: "Liveness probe failed: " + out}},
		{name: "kubelet: at the threshold", mode: FailureEventsKubelet, probeType: results.Liveness, count: 3, threshold: 3,
			want: events.Event{Type: events.Warning, Reason: ReasonUnhealthy, Count: 3, Threshold: 3, Message: "Liveness probe failed: " + out}},
		{name: "unset mode is kubelet's", mode: "", probeType: results.Readiness, count: 1, threshold: 3,
			want: events.Event{Type: events.Warning, Reason: ReasonUnhealthy, Count: 1, Threshold: 3, Message: "Readiness probe failed: " + out}},
		{name: "threshold: first of three", mode: FailureEventsThreshold, probeType: results.Liveness, count: 1, threshold: 3,
			want: events.Event{Type: events.Normal, Reason: ReasonProbeFailureIgnored, Count: 1, Threshold: 3, Message: "Liveness probe failed (1/3, will be ignored): " + out}},
		{name: "threshold: one short", mode: FailureEventsThreshold, probeType: results.Startup, count: 2, threshold: 3,
			want: events.Event{Type: events.Normal, Reason: ReasonProbeFailureIgnored, Count: 2, Threshold: 3, Message: "Startup probe failed (2/3, will be ignored): " + out}},
		{name: "threshold: reached", mode: FailureEventsThreshold, probeType: results.Liveness, count: 3, threshold: 3,
			want: events.Event{Type: events.Warning, Reason: ReasonUnhealthy, Count: 3, Threshold: 3, Message: "Liveness probe failed: " + out}},
		{name: "threshold: past it (readiness keeps failing)", mode: FailureEventsThreshold, probeType: results.Readiness, count: 7, threshold: 3,
			want: events.Event{Type: events.Warning, Reason: ReasonUnhealthy, Count: 7, Threshold: 3, Message: "Readiness probe failed: " + out}},
		{name: "threshold: a threshold of one is reached at once", mode: FailureEventsThreshold, probeType: results.Readiness, count: 1, threshold: 1,
			want: events.Event{Type: events.Warning, Reason: ReasonUnhealthy, Count: 1, Threshold: 1, Message: "Readiness probe failed: " + out}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, failureEvent(tt.mode, tt.probeType, out, tt.count, tt.threshold))
		})
	}
}

func TestValidateFailureEvents(t *testing.T) {
	assert.NoError(t, ValidateFailureEvents("kubelet"))
	assert.NoError(t, ValidateFailureEvents("threshold"))
	err := ValidateFailureEvents("Threshold")
	if assert.Error(t, err) {
		assert.Contains(t, err.Error(), `"Threshold": want kubelet`)
	}
	_, err = NewManager(nil, results.NewStore(), Config{FailureEvents: "loud"})
	assert.ErrorContains(t, err, `probe failure events: "loud"`)
}

// The worker, tick by tick: two failures ignored, the third reaches the
// threshold, then the liveness probe holds (no more events) until a new
// container; a success in between starts the count over.
func TestWorkerFailureEventsThreshold(t *testing.T) {
	wt := newWorkerTest(t, liveness, func(p *corev1.Probe) { p.FailureThreshold = 3 })
	wt.w.failureEvents = FailureEventsThreshold
	wt.runner.answer(results.Failure)
	wt.step(t)
	wt.runner.answer(results.Success)
	wt.step(t)
	wt.runner.answer(results.Failure)
	for range 4 {
		wt.step(t)
	}
	var got []string
	for _, e := range wt.events.all() {
		if e.Count > 0 {
			got = append(got, fmt.Sprintf("%s %s %d/%d %s", e.Type, e.Reason, e.Count, e.Threshold, e.Message))
		}
	}
	assert.Equal(t, []string{
		"Normal ProbeFailureIgnored 1/3 Liveness probe failed (1/3, will be ignored): boom",
		"Normal ProbeFailureIgnored 1/3 Liveness probe failed (1/3, will be ignored): boom",
		"Normal ProbeFailureIgnored 2/3 Liveness probe failed (2/3, will be ignored): boom",
		"Warning Unhealthy 3/3 Liveness probe failed: boom",
	}, got, "the fourth failing tick holds: the container is to be replaced")
	wt.expect(t, testID, results.Failure)
}
