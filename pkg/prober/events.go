package prober

import (
	"fmt"

	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/results"
)

// Event reasons. Unhealthy and ProbeWarning are kubelet's, with kubelet's
// messages ("Liveness probe failed: …"); the others mark changes of a
// container's stable state, which kubelet shows only as status.
const (
	ReasonUnhealthy          = "Unhealthy"
	ReasonProbeWarning       = "ProbeWarning"
	ReasonContainerReady     = "ContainerReady"
	ReasonContainerNotReady  = "ContainerNotReady"
	ReasonStartupSucceeded   = "StartupProbeSucceeded"
	ReasonStartupFailed      = "StartupProbeFailed"
	ReasonLivenessFailed     = "LivenessProbeFailed"
	ReasonInvalidProbeConfig = "InvalidProbeConfig"
	// ReasonAgentResourceExhausted: a probe could not run because the agent
	// itself is out of resources (file descriptors, ports, socket memory).
	// kubelet would report its generic "errored" event; the cause is named
	// here so nobody looks for it in the container.
	ReasonAgentResourceExhausted = "AgentResourceExhausted"
	// ReasonExecProbeQueued: an exec probe waited for a slot of its pod
	// under --max-concurrent-exec-per-pod (kubelet has no such limit).
	ReasonExecProbeQueued = "ExecProbeQueued"
	// ReasonProbeFailureIgnored: a probe failure below its failureThreshold,
	// which changed nothing (--probe-failure-events=threshold), as the open
	// proposals for kubernetes#115823 name it (#138339, #141531).
	ReasonProbeFailureIgnored = "ProbeFailureIgnored"
)

// FailureEvents says which event a probe failure makes: kubelet's, or
// one that tells a failure below the threshold from one that reaches it.
type FailureEvents string

const (
	// FailureEventsKubelet: every failure is Unhealthy (Warning), as in
	// kubelet 1.36.
	FailureEventsKubelet FailureEvents = "kubelet"
	// FailureEventsThreshold: a failure below the failureThreshold is
	// ProbeFailureIgnored (Normal); one that reaches it, or comes after it
	// was reached, is Unhealthy (Warning), so that Unhealthy means "the
	// threshold was reached".
	FailureEventsThreshold FailureEvents = "threshold"
)

// ValidateFailureEvents checks a --probe-failure-events value.
func ValidateFailureEvents(s string) error {
	switch FailureEvents(s) {
	case FailureEventsKubelet, FailureEventsThreshold:
		return nil
	}
	return fmt.Errorf("%q: want %s (every probe failure Unhealthy, as kubelet) or %s (ProbeFailureIgnored below the failureThreshold, Unhealthy when it is reached)",
		s, FailureEventsKubelet, FailureEventsThreshold)
}

// failureEvent is the event of a probe failure, the count-th in a row of a
// probe whose failureThreshold is threshold. Unhealthy keeps kubelet's
// message; ProbeFailureIgnored's says where the failure stands, in the shape
// of kubernetes#140417 ("Liveness probe failed (1/3, will be ignored): …").
// The count and threshold ride beside the message either way.
func failureEvent(mode FailureEvents, t results.ProbeType, output string, count, threshold int) events.Event {
	e := events.Event{Type: events.Warning, Reason: ReasonUnhealthy, Count: count, Threshold: threshold,
		Message: fmt.Sprintf("%s probe failed: %s", t, output)}
	if mode == FailureEventsThreshold && count < threshold {
		e.Type, e.Reason = events.Normal, ReasonProbeFailureIgnored
		e.Message = fmt.Sprintf("%s probe failed (%d/%d, will be ignored): %s", t, count, threshold, output)
	}
	return e
}

// Recorder receives events. It must not block for long: workers call it.
type Recorder interface {
	Record(events.Event)
}

// RecorderFunc adapts a function to Recorder.
type RecorderFunc func(events.Event)

// Record calls f.
func (f RecorderFunc) Record(e events.Event) { f(e) }
